"""Transformer encoders of the inference catalog: each row's configuration in both
frameworks, its FLOPs and the runtimes that cannot run it, with the reason measured here.

An encoder is built from its configuration with seeded random weights (no download): in
torch as a Hugging Face `transformers` model (`hf` fields, `return_dict=False` so every
runtime gets a plain tuple), in TensorFlow as a keras-hub backbone (`keras` arguments). Both
take the same sizes, so the parameter counts are equal (tests/test_encoders.py builds
them); where the two libraries' defaults would do different arithmetic, the Hugging Face
side is set to keras-hub's (BERT's tanh-approximate GELU, ViT's LayerNorm epsilon) and the
row's note says so.

Inputs: a token model takes random token ids (0..vocab-1) and an all-ones attention mask,
no tokenizer; its catalog size is the sequence length. ViT takes images like the CNNs.

FLOPs are counted from the configuration, not by a framework's counter:
torch.utils.flop_counter does not see scaled_dot_product_attention's CPU kernel (measured:
bert_base at 128 tokens counted 21.74 GFLOPs, exactly the Linear layers; the two attention
matmuls' 0.60 GFLOPs were missing), and TensorFlow's profiler counts einsum by its own
rules. One analytic count serves both frameworks, so a roofline compares like with like.

Framework-free: the dashboard, the CLI and RunSpec read it; only workers build models.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

__all__ = ["Encoder", "ENCODERS", "encoder", "encoder_flops", "FLOPS_METHOD",
           "TOKEN_REFUSALS"]

FLOPS_METHOD = ("analytic, from the configuration: 2 x Linear weights x tokens (the pooler "
                "on one token) + 4 x layers x tokens^2 x width for attention's two matmuls "
                "(+ the patch projection for ViT); embedding lookups, softmax, LayerNorm and "
                "GELU not counted")


@dataclass(frozen=True)
class Encoder:
    name: str
    hf_class: str  # transformers.<class>, built from transformers.<config class>
    hf: Mapping = field(hash=False)  # the Hugging Face configuration's fields
    keras_class: str  # keras_hub.models.<class>
    keras: Mapping = field(hash=False)  # its constructor's arguments (image_shape added)
    pooler: bool = False  # BERT's pooler (one Linear on the first token)

    def __post_init__(self):
        object.__setattr__(self, "hf", MappingProxyType(dict(self.hf)))
        object.__setattr__(self, "keras", MappingProxyType(dict(self.keras)))

    @property
    def width(self) -> int:
        return int(self.hf["hidden_size"])

    @property
    def layers(self) -> int:
        return int(self.hf["num_hidden_layers"])

    @property
    def patch(self) -> int | None:
        return self.hf.get("patch_size")


def _bert(name: str, vocab: int, width: int, layers: int, heads: int, ff: int) -> Encoder:
    # hidden_act: keras-hub's BertBackbone uses the tanh approximation of GELU
    # (keras_hub.src.utils.keras_utils.gelu_approximate); HF's "gelu_pytorch_tanh" is the
    # same formula in one torch kernel, where HF BERT's default "gelu" is the exact erf form
    return Encoder(name, "BertModel",
                   {"vocab_size": vocab, "hidden_size": width, "num_hidden_layers": layers,
                    "num_attention_heads": heads, "intermediate_size": ff,
                    "max_position_embeddings": 512, "type_vocab_size": 2,
                    "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-12},
                   "BertBackbone",
                   {"vocabulary_size": vocab, "num_layers": layers, "num_heads": heads,
                    "hidden_dim": width, "intermediate_dim": ff, "dropout": 0.0,
                    "max_sequence_length": 512, "num_segments": 2}, pooler=True)


def _vit(name: str, patch: int, width: int, layers: int, heads: int, mlp: int) -> Encoder:
    # layer_norm_eps: keras-hub's ViTBackbone default (1e-6) where HF's is 1e-12; both MLPs
    # use exact GELU; no pooler on either side (ViTModel(add_pooling_layer=False))
    return Encoder(name, "ViTModel",
                   {"patch_size": patch, "hidden_size": width, "num_hidden_layers": layers,
                    "num_attention_heads": heads, "intermediate_size": mlp,
                    "hidden_act": "gelu", "layer_norm_eps": 1e-6, "num_channels": 3},
                   "ViTBackbone",
                   {"patch_size": patch, "num_layers": layers, "num_heads": heads,
                    "hidden_dim": width, "mlp_dim": mlp, "layer_norm_epsilon": 1e-6})


ENCODERS: dict[str, Encoder] = {e.name: e for e in (
    # bert-base-uncased's published sizes
    _bert("bert_base", 30522, 768, 12, 12, 3072),
    _vit("vit_b16", 16, 768, 12, 12, 3072),
    _bert("tiny_bert", 512, 64, 2, 4, 128),
    _vit("tiny_vit", 8, 64, 2, 4, 128),
)}


def encoder(name: str) -> Encoder | None:
    return ENCODERS.get(name)


def encoder_flops(name: str, size: int) -> int:
    """FLOPs of one sample's forward at `size` (tokens, or pixels a side), FLOPS_METHOD."""
    e = ENCODERS[name]
    d, n = e.width, e.layers
    ff = int(e.hf["intermediate_size"])
    per_layer = 4 * d * d + 2 * d * ff  # Q, K, V, output projection; the MLP's two Linears
    if e.patch:
        patches = (size // e.patch) ** 2
        tokens = patches + 1  # the class token
        stem = 2 * 3 * e.patch * e.patch * d * patches
    else:
        tokens, stem = size, 0
    pooler = 2 * d * d if e.pooler else 0
    return 2 * n * per_layer * tokens + 4 * n * tokens * tokens * d + pooler + stem


# Runtimes a token model does not run, with the reason (measured with the pinned versions:
# torch 2.14, transformers 5.5.4). ViT takes one float32 image and runs on every runtime.
_TRACE = ("torch.jit.trace fails inside transformers 5.5.4's attention-mask builder "
          "(masking_utils.sdpa_mask takes the traced sequence length for the deprecated "
          "cache_position tensor: IndexError)")
TOKEN_REFUSALS: Mapping[str, str] = MappingProxyType({
    "channels_last": "channels_last is a memory format of 4-D N,C,H,W tensors; a token "
                     "model's inputs are 2-D token ids and a mask and its weights 2-D Linear "
                     "matrices: there is nothing to lay out",
    "torchscript": _TRACE,
    "libtorch": "the C++ runner feeds one float32 N,C,H,W input; a token model takes int64 "
                "token ids and a mask (and " + _TRACE + ")",
    "libtorch_aoti": "the C++ runner feeds one float32 N,C,H,W input; a token model takes "
                     "int64 token ids and a mask",
})
