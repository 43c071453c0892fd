"""The language models a generation run times: one row per model, its Hugging Face
configuration (the architecture and sizes, as published) and the counts that follow from it.

No weights are downloaded: a worker builds each model from its configuration with seeded
random weights (engine/worker/generation/models.py), saves it once as a Hugging Face folder
(safetensors, a word-level tokenizer over the ids, a generation config), and every runtime
loads or exports that one folder, so all of them hold the same weights.

Random weights drawn at the usual std (0.02) make a decoder repeat one token forever: the
greedy path never branches, and a check that two runtimes agree on it would pass for any
runtime that returns that token. We draw them at std 2/sqrt(width) instead, which gives
logits of std about 2 and greedy paths that branch (measured on the tiny rows: 26-31
distinct tokens in 32 for llama, 18-23 for GPT-2, against 1-4 at 0.02). The time a forward
takes does not depend on the values of the weights.

Framework-free: the dashboard and the CLI read names, sizes and notes here.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

__all__ = ["LanguageModel", "LANGUAGE_MODELS", "OFFERED", "language_model", "init_std",
           "config_digest"]


@dataclass(frozen=True)
class LanguageModel:
    name: str
    family: str  # "GPT-2", "Llama"
    hf_class: str  # the transformers class that builds it from its configuration
    keras_class: str  # keras_hub.models.<class> that loads the same folder
    config: Mapping = field(hash=False)  # the Hugging Face configuration's fields
    params: int  # parameters, embeddings tied (counted once), from the configuration
    note: str
    offered: bool = True  # False: a tiny model for tests, not on a form

    def __post_init__(self):
        object.__setattr__(self, "config", MappingProxyType(dict(self.config)))

    @property
    def width(self) -> int:
        return int(self.config.get("hidden_size") or self.config["n_embd"])

    @property
    def vocab_size(self) -> int:
        return int(self.config["vocab_size"])

    @property
    def max_positions(self) -> int:
        return int(self.config.get("max_position_embeddings") or self.config["n_positions"])

    @property
    def layers(self) -> int:
        return int(self.config.get("num_hidden_layers") or self.config["n_layer"])

    def kv_bytes_per_token(self, bytes_per_value: int = 4) -> int:
        """The KV cache one token adds: keys and values, every layer, every KV head."""
        c = self.config
        heads = int(c.get("num_attention_heads") or c["n_head"])
        kv_heads = int(c.get("num_key_value_heads") or heads)
        head_dim = self.width // heads
        return 2 * self.layers * kv_heads * head_dim * bytes_per_value


def init_std(width: int) -> float:
    """The std the weights are drawn at (module docstring): logits of std about 2."""
    return 2.0 / math.sqrt(width)


def config_digest(m: LanguageModel, seed: int) -> str:
    """What names a built folder: the configuration, the std and the seed."""
    blob = json.dumps({"class": m.hf_class, "config": dict(m.config), "seed": seed,
                       "std": init_std(m.width)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


_ROPE = {"rope_type": "default", "rope_theta": 100000.0}
_TIED = "Embeddings are tied (the output layer reuses the input embedding), counted once."
_GPT2 = {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12,
         "n_head": 12, "activation_function": "gelu_new"}
# SmolLM2-135M's published configuration (HuggingFaceTB/SmolLM2-135M, config.json)
_SMOL = {"vocab_size": 49152, "hidden_size": 576, "num_hidden_layers": 30,
         "num_attention_heads": 9, "num_key_value_heads": 3, "intermediate_size": 1536,
         "tie_word_embeddings": True, "rms_norm_eps": 1e-5, "max_position_embeddings": 8192,
         "rope_parameters": _ROPE, "hidden_act": "silu"}
# Llama-3.2-1B's published configuration (meta-llama/Llama-3.2-1B), its llama3 RoPE scaling
_LLAMA1B = {"vocab_size": 128256, "hidden_size": 2048, "num_hidden_layers": 16,
            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192,
            "tie_word_embeddings": True, "rms_norm_eps": 1e-5,
            "max_position_embeddings": 131072, "hidden_act": "silu",
            "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
                                "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 8192}}
_TINY_LLAMA = {"vocab_size": 512, "hidden_size": 64, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
               "tie_word_embeddings": True, "rms_norm_eps": 1e-5,
               "max_position_embeddings": 512, "rope_parameters": _ROPE, "hidden_act": "silu"}
_TINY_GPT2 = {"vocab_size": 512, "n_positions": 256, "n_embd": 64, "n_layer": 2, "n_head": 4,
              "activation_function": "gelu_new"}

LANGUAGE_MODELS: dict[str, LanguageModel] = {m.name: m for m in (
    LanguageModel("gpt2", "GPT-2", "GPT2LMHeadModel", "GPT2CausalLM", _GPT2, 124_439_808,
                  "GPT-2 small (124 M). " + _TIED),
    LanguageModel("smollm2_135m", "Llama", "LlamaForCausalLM", "LlamaCausalLM", _SMOL,
                  134_515_008, "SmolLM2-135M's configuration: Llama architecture, grouped "
                  "KV heads (9 query, 3 KV). " + _TIED),
    LanguageModel("llama32_1b", "Llama", "LlamaForCausalLM", "LlamaCausalLM", _LLAMA1B,
                  1_235_814_400, "Llama-3.2-1B's configuration (1.24 B), llama3 RoPE "
                  "scaling. " + _TIED + " About 5 GB of fp32 weights."),
    LanguageModel("tiny_llama", "Llama", "LlamaForCausalLM", "LlamaCausalLM", _TINY_LLAMA,
                  106_816, "2 layers, width 64: for tests.", offered=False),
    LanguageModel("tiny_gpt2", "GPT-2", "GPT2LMHeadModel", "GPT2CausalLM", _TINY_GPT2,
                  149_248, "2 layers, width 64: for tests.", offered=False),
)}
OFFERED = tuple(n for n, m in LANGUAGE_MODELS.items() if m.offered)


def language_model(name: str) -> LanguageModel:
    return LANGUAGE_MODELS[name]
