"""The catalog's transformer encoders in torch: Hugging Face `transformers` models built
from their configuration (engine/core/encoders.py) with seeded random weights, nothing
downloaded. Imported by torch workers only.

Every torch runtime starts from this module's model, so they all run the same weights:
BertModel(input_ids, attention_mask) -> (last hidden state, pooled output); ViT behind
`FirstOutput`, which returns its one output as a tensor (ViTModel without a pooler returns a
1-tuple), so the LibTorch C++ runner, which takes one-tensor models, runs it too.
"""

from __future__ import annotations

import numpy as np
import torch
import transformers

from engine.core.catalog import get_model
from engine.core.encoders import encoder
from engine.worker.backends.base import token_arrays

__all__ = ["is_encoder", "build", "inputs", "FirstOutput", "versions"]


class FirstOutput(torch.nn.Module):
    """A model's first output alone, as a tensor."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)[0]


def is_encoder(model: str) -> bool:
    return encoder(model) is not None


def build(model: str, size: int) -> torch.nn.Module:
    """The seeded encoder (torch.manual_seed is the caller's) in eval mode; a ViT for
    `size` px images (its position embeddings follow the number of patches)."""
    e = encoder(model)
    cfg_cls = getattr(transformers, e.hf_class.replace("Model", "Config"))
    fields = dict(e.hf)
    if e.patch:
        fields["image_size"] = size
    # sdpa: torch's fused attention, what transformers picks by default on torch >= 2.1;
    # named so a later default cannot change what is timed
    config = cfg_cls(**fields, return_dict=False, attn_implementation="sdpa")
    if e.patch:
        return FirstOutput(getattr(transformers, e.hf_class)(config, add_pooling_layer=False)
                           ).eval()
    return getattr(transformers, e.hf_class)(config).eval()


def inputs(model: str, batch: int, size: int, gen: np.random.Generator) -> list:
    """One batch's inputs as NumPy arrays: token ids and mask, or N,C,H,W float32 images
    (the CNNs' draw)."""
    e = encoder(model)
    if get_model(model).input_kind == "tokens":
        return token_arrays(gen, int(e.hf["vocab_size"]), batch, size)
    return [gen.standard_normal((batch, 3, size, size), dtype=np.float32)]


def versions() -> dict:
    return {"transformers": transformers.__version__}
