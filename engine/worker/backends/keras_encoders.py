"""The catalog's transformer encoders in TensorFlow: keras-hub backbones built from the
same sizes as the torch side (engine/core/encoders.py), seeded random weights, nothing
downloaded. Imported by TensorFlow workers only (keras-hub under KERAS_BACKEND=tensorflow).

BertBackbone takes a dict of token_ids, segment_ids and padding_mask: it is fed the torch
side's ids and mask and all-zeros segment ids (what HF's BertModel uses when none is given),
as int32, the dtype keras-hub's inputs declare (a cast inside the timed call otherwise).
ViTBackbone takes N,H,W,C float32 images, the CNNs' draw.
"""

from __future__ import annotations

import os

import numpy as np

from engine.core.catalog import get_model
from engine.core.encoders import encoder
from engine.worker.backends.base import token_arrays

__all__ = ["is_encoder", "build", "inputs", "call", "versions"]

os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def is_encoder(model: str) -> bool:
    return encoder(model) is not None


def build(model: str, size: int):
    """The keras-hub backbone (keras.utils.set_random_seed is the caller's)."""
    import keras_hub

    e = encoder(model)
    kwargs = dict(e.keras)
    if e.patch:
        kwargs["image_shape"] = (size, size, 3)
    return getattr(keras_hub.models, e.keras_class)(**kwargs)


def inputs(model: str, batch: int, size: int, gen: np.random.Generator) -> list:
    """One batch's arrays in the order call() takes them."""
    e = encoder(model)
    if get_model(model).input_kind == "tokens":
        ids, mask = token_arrays(gen, int(e.hf["vocab_size"]), batch, size)
        return [ids.astype(np.int32), np.zeros_like(ids, dtype=np.int32),
                mask.astype(np.int32)]
    nchw = gen.standard_normal((batch, 3, size, size), dtype=np.float32)
    return [np.ascontiguousarray(nchw.transpose(0, 2, 3, 1))]


def call(model, name: str):
    """call(list of tensors) -> the backbone's output."""
    if get_model(name).input_kind == "tokens":
        return lambda xs: model({"token_ids": xs[0], "segment_ids": xs[1],
                                 "padding_mask": xs[2]}, training=False)
    return lambda xs: model(xs[0], training=False)


def versions() -> dict:
    import keras_hub

    return {"keras_hub": keras_hub.__version__}
