"""Opening a user's model file, in the worker only (issue #14; not wired into the backends
yet). Each loader is the safe one for its format:

- torch.export program (.pt2): torch.export.load, run as its module (`.module()`);
- TorchScript (.pt/.pth): torch.jit.load. A .pt/.pth that is not TorchScript is a
  `torch.save` pickle: read only through torch.load(weights_only=True), which refuses any
  object whose unpickling would run code, and which yields weights, never a model (refused
  with what to save instead);
- ONNX: an ONNX Runtime session on the CPU execution provider with no custom-op library;
- Keras (.keras): keras.saving.load_model(safe_mode=True): a Lambda layer's code is refused;
- SavedModel folder: tf.saved_model.load, called through its serving signature;
- a factory (module:function): the user's own code, imported and called here, in the worker,
  never in the dashboard; what it returns must be a torch.nn.Module or a Keras model.

The file's SHA-256 and size are taken here too, so a stored result names exactly which model
it measured.
"""

from __future__ import annotations

import hashlib
import os

from engine.spec.model_source import InputSpec, ModelSource

__all__ = ["ModelFileError", "file_digest", "load_torch", "onnx_session", "torch_inputs",
           "load_keras", "load_savedmodel", "load_factory"]


class ModelFileError(Exception):
    """A user's model that cannot be run, with a one-line reason for the failure row."""


def file_digest(path: str) -> tuple[str, int]:
    """(SHA-256 hex, size in bytes) of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
            size += len(block)
    return h.hexdigest(), size


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def load_torch(source: ModelSource):
    """The torch.nn.Module (or ScriptModule) a .pt2 or TorchScript file holds."""
    import torch

    path = source.path
    if source.format == "pt2":
        try:
            return torch.export.load(path).module()
        except Exception as exc:  # noqa: BLE001 - the reason goes to the failure row
            raise ModelFileError(f"model_file: {os.path.basename(path)} is not a torch.export "
                                 f"program ({_one_line(exc)})") from None
    if source.format != "torchscript":
        raise ModelFileError(f"model_file: format {source.format} is not a torch module file")
    try:
        return torch.jit.load(path, map_location="cpu")
    except Exception as jit_exc:  # noqa: BLE001 - maybe a torch.save pickle: see below
        jit_reason = _one_line(jit_exc)
    try:
        # weights_only: the unpickler accepts tensors and plain containers only; anything
        # whose unpickling would call code is refused before it runs.
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001
        raise ModelFileError(
            f"model_file: {os.path.basename(path)} was refused: it is not TorchScript "
            f"({jit_reason}) and torch.load(weights_only=True) would not read it "
            f"({_one_line(exc)}); a pickle that needs code to load is never opened. Save "
            "the model with torch.export.save (.pt2) or torch.jit.save (.pt)") from None
    raise ModelFileError(
        f"model_file: {os.path.basename(path)} holds {type(obj).__name__} (weights), not a "
        "model: a state dict needs the model's code. Save the model with torch.export.save "
        "(.pt2) or torch.jit.save (.pt), or pass --model-factory module:function")


def onnx_session(source: ModelSource, intra_threads: int, inter_threads: int = 1):
    """An ONNX Runtime session for an .onnx file: CPU provider, no custom-op libraries."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = intra_threads
    opts.inter_op_num_threads = inter_threads
    try:
        return ort.InferenceSession(source.path, sess_options=opts,
                                    providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001
        raise ModelFileError(f"model_file: {os.path.basename(source.path)} is not a "
                             f"runnable ONNX model ({_one_line(exc)})") from None


_TORCH_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16",
                 "int64": "int64", "int32": "int32", "int8": "int8", "uint8": "uint8",
                 "bool": "bool"}


def torch_inputs(inputs: tuple[InputSpec, ...], batch: int, seed: int = 0) -> list:
    """Generated inputs for one batch: normal floats; integers in 0..99 (token ids small
    enough for any vocabulary); booleans at random."""
    import torch

    g = torch.Generator().manual_seed(seed)
    out = []
    for spec in inputs:
        dtype = getattr(torch, _TORCH_DTYPES[spec.dtype])
        shape = spec.shape(batch)
        if dtype.is_floating_point:
            out.append(torch.randn(shape, generator=g).to(dtype))
        elif dtype == torch.bool:
            out.append(torch.randint(0, 2, shape, generator=g).bool())
        else:
            out.append(torch.randint(0, 100, shape, generator=g).to(dtype))
    return out


def load_keras(source: ModelSource):
    """A .keras file with safe_mode on: a Lambda layer (arbitrary code) is refused."""
    import keras

    try:
        return keras.saving.load_model(source.path, compile=False, safe_mode=True)
    except Exception as exc:  # noqa: BLE001
        why = _one_line(exc)
        hint = (" (safe_mode refuses Lambda layers: they run code from the file; rebuild the "
                "model without them or use --model-factory)" if "safe_mode" in why
                or "Lambda" in why else "")
        raise ModelFileError(f"model_file: {os.path.basename(source.path)} was not loaded: "
                             f"{why}{hint}") from None


def load_savedmodel(source: ModelSource):
    """A TensorFlow SavedModel folder's serving signature (a concrete function)."""
    import tensorflow as tf

    try:
        loaded = tf.saved_model.load(source.path)
        return loaded.signatures["serving_default"]
    except Exception as exc:  # noqa: BLE001
        raise ModelFileError(f"model_file: {os.path.basename(source.path)} is not a SavedModel "
                             f"with a serving_default signature ({_one_line(exc)})") from None


def load_factory(source: ModelSource, cwd: str | None = None):
    """(framework, model) from the user's module:function; the module is looked up on the
    user's path (their working folder first)."""
    import importlib
    import sys

    module_name, fn_name = source.factory.split(":")
    folder = cwd or os.getcwd()
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        fn = getattr(importlib.import_module(module_name), fn_name)
    except Exception as exc:  # noqa: BLE001 - ImportError, AttributeError, or the module's own
        raise ModelFileError(f"model_factory: {source.factory} could not be imported "
                             f"({_one_line(exc)})") from None
    try:
        model = fn()
    except Exception as exc:  # noqa: BLE001
        raise ModelFileError(f"model_factory: {source.factory} raised {_one_line(exc)}") from None
    if "torch" in sys.modules and _is_torch_module(model):
        return "torch", model
    if "keras" in sys.modules and _is_keras_model(model):
        return "tensorflow", model
    raise ModelFileError(f"model_factory: {source.factory} returned {type(model).__name__}, "
                         "not a torch.nn.Module or a Keras model")


def _is_torch_module(obj) -> bool:
    import torch
    return isinstance(obj, torch.nn.Module)


def _is_keras_model(obj) -> bool:
    import keras
    return isinstance(obj, keras.Model)
