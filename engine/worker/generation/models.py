"""Build a language model from its configuration with seeded random weights, once, as a
Hugging Face folder every runtime loads or exports (engine/scenarios/generation/models.py
says why one folder and why the std).

The folder holds the weights (safetensors), config.json, generation_config.json with no
end-of-sequence token (every run generates exactly its output length, as every LLM
benchmark does) and a word-level tokenizer whose words are the ids ("t0".."tN"): some
exporters (ONNX Runtime GenAI's builder) refuse a folder without a tokenizer, and nothing
in the timed path ever tokenizes text. It is built in a temporary folder and renamed into
place, so a worker killed mid-build never leaves half a model for the next one.

Imports torch and transformers: worker side only.
"""

from __future__ import annotations

import os
from pathlib import Path

from engine.core.paths import PROJECT_ROOT
from engine.worker.generation.common import cached_export
from engine.scenarios.generation.models import (LanguageModel, config_digest, init_std,
                                                language_model)

__all__ = ["model_root", "model_folder", "build_model", "param_count"]

# What the folder's tokenizer calls its special tokens (ids 0-2); prompts draw from 3 up.
SPECIAL = {"pad_token": "t0", "bos_token": "t1", "unk_token": "t0"}


def model_root() -> Path:
    """Built models are cached here ($BENCH_MODEL_DIR, or the project's data folder)."""
    return Path(os.environ.get("BENCH_MODEL_DIR") or PROJECT_ROOT / "data" / "models")


def model_folder(name: str, seed: int, root: Path | None = None) -> Path:
    """The folder of `name` built with `seed`: built on first use, reused after (built in a
    temporary folder and renamed into place, like every export: common.cached_export)."""
    m = language_model(name)

    def build(tmp: Path) -> None:
        build_model(m, seed).save_pretrained(tmp)
        _save_tokenizer(m, tmp)

    path, _ = cached_export(root or model_root(), f"{name}-{config_digest(m, seed)}", build,
                            "config.json")
    return path


def build_model(m: LanguageModel, seed: int):
    """The torch model of row `m`, weights drawn from `seed` at init_std(width)."""
    import torch
    import transformers

    cfg_cls = getattr(transformers, m.hf_class.replace("LMHeadModel", "Config")
                      .replace("ForCausalLM", "Config"))
    config = cfg_cls(**dict(m.config), initializer_range=init_std(m.width),
                     bos_token_id=1, eos_token_id=None, pad_token_id=0)
    torch.manual_seed(seed)
    model = getattr(transformers, m.hf_class)(config).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def param_count(model) -> int:
    """Parameters as the configuration counts them: a tied embedding once."""
    return sum(p.numel() for p in model.parameters())


def _save_tokenizer(m: LanguageModel, folder: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(m.vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIAL["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIAL).save_pretrained(folder)
