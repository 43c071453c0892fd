"""Opening a user's model file, in the worker only (issue #14): the torch backends call
`torch_model`, the TensorFlow ones `tf_model`, every backend feeds `arrays`. Three formats
load without running code from the file:

- torch.export program (.pt2): torch.export.load, run as its module (`.module()`), with
  every unpickling inside it held to torch.load(weights_only=True) and the archive reader's
  pickle.loads refused (load_program; the private hook it patches is checked, and a torch
  without it refuses every .pt2 rather than load one unguarded);
- ONNX: an ONNX Runtime session on the CPU execution provider with no custom-op library;
- Keras (.keras): keras.saving.load_model(safe_mode=True): a Lambda layer's code is refused.

Two are programs, and loading them runs code the file carries; they load only when the
source says the user trusts it (ModelSource.trust_code, from --trust-model-code or the Run
page's "runs code from this file"; RunSpec.validate refuses before this, and this refuses
again for a spec that came another way):

- TorchScript (.pt/.pth): torch.jit.load (and the LibTorch C++ runner, given the file as
  it is). A .pt/.pth that is not TorchScript is a `torch.save` pickle: read only through
  torch.load(weights_only=True), which refuses any object whose unpickling would run code,
  and which yields weights, never a model (refused with what to save instead);
- SavedModel folder: tf.saved_model.load, called through its serving signature;
- a factory (module:function): the user's own code, imported and called here, in the worker,
  never in the dashboard; what it returns must be a torch.nn.Module or a Keras model.

The file's SHA-256 and size are taken here too, so a stored result names exactly which model
it measured.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle

from engine.core.errors import plain_text
from engine.core.model_source import CODE_FORMATS, InputSpec, ModelSource

__all__ = ["ModelFileError", "file_digest", "source_digest", "load_torch", "load_program",
           "onnx_session",
           "arrays", "load_keras", "load_savedmodel", "load_factory", "torch_model",
           "tf_model", "onnx_stats", "require_trust", "PT2_HOOK"]


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
    text = " ".join(plain_text(str(exc)).split())
    return f"{type(exc).__name__}: {text[:300]}"


def require_trust(source: ModelSource) -> None:
    """Refuse a format whose loading runs code unless the user said this file may."""
    if source.format in CODE_FORMATS and not source.trust_code:
        raise ModelFileError(f"trust_model_code: {os.path.basename(source.path or '')} is "
                             f"{CODE_FORMATS[source.format]}: loading it runs code from the "
                             "file, and it was not marked trusted; allowed: --trust-model-code "
                             "(on the Run page: \"runs code from this file\")")


def load_torch(source: ModelSource):
    """The torch.nn.Module (or ScriptModule) a .pt2 or (trusted) TorchScript file holds."""
    import torch

    path = source.path
    if source.format == "pt2":
        return load_program(source).module()
    if source.format != "torchscript":
        raise ModelFileError(f"model_file: format {source.format} is not a torch module file")
    require_trust(source)
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


# The private module whose pickle the guard replaces, and what it must call for the guard to
# hold (torch.load through the torch module, pickle.loads through its own global): checked on
# every load, so a torch that moved or renamed them refuses .pt2 files instead of loading one
# unguarded (tests/test_user_models.py checks the pinned torch still has them).
PT2_HOOK = ("torch.export.pt2_archive._package", ("torch.load(", "pickle.loads("))


def pt2_hook():
    """The archive reader module the .pt2 guard patches; ModelFileError if it is not there
    or no longer reads pickles the way the guard intercepts."""
    import importlib
    import inspect

    name, calls = PT2_HOOK
    try:
        module = importlib.import_module(name)
        text = inspect.getsource(module)
    except (ImportError, OSError, TypeError) as exc:
        raise ModelFileError(f"the .pt2 guard's hook {name} is missing in this torch "
                             f"({_one_line(exc)}); no .pt2 file is opened unguarded") from None
    missing = [f"no call to {c.rstrip('(')}" for c in calls if c not in text]
    if getattr(module, "pickle", None) is not pickle or missing:
        raise ModelFileError(f"the .pt2 guard's hook {name} changed in this torch ("
                             f"{', '.join(missing) or 'no pickle global'}); no .pt2 file is "
                             "opened unguarded")
    return module


@contextlib.contextmanager
def _no_code_from_pickles():
    """While a .pt2 archive is read: torch.export.load unpickles pickled weights and
    constants and its sample inputs with torch.load(weights_only=False), falls back to it
    when weights_only=True fails, and reads "opaque" constants with pickle.loads, any of
    which runs code a crafted file carries. Here every torch.load is weights_only=True
    (tensors and plain containers only) and pickle.loads in the archive reader refuses."""
    import torch

    _package = pt2_hook()
    real_load = torch.load

    def weights_only_load(*args, **kwargs):
        kwargs["weights_only"] = True
        return real_load(*args, **kwargs)

    class _RefusingPickle:
        def __getattr__(self, name):
            return getattr(pickle, name)

        @staticmethod
        def loads(*_args, **_kwargs):
            raise ModelFileError("the archive holds a pickled object, which would run code "
                                 "when read; it is never opened")

    torch.load, _package.pickle = weights_only_load, _RefusingPickle()
    try:
        yield
    finally:
        torch.load, _package.pickle = real_load, pickle


def load_program(source: ModelSource):
    """The ExportedProgram a .pt2 file holds, read with no pickle able to run code."""
    import torch

    try:
        with _no_code_from_pickles():
            return torch.export.load(source.path)
    except ModelFileError as exc:
        raise ModelFileError(f"model_file: {os.path.basename(source.path)} was refused: "
                             f"{exc}") from None
    except pickle.UnpicklingError:  # torch.load(weights_only=True) refused an object
        raise ModelFileError(f"model_file: {os.path.basename(source.path)} was refused: it "
                             "holds a pickled object that only code could rebuild; "
                             "torch.load(weights_only=True) reads tensors only, and the "
                             "object is never opened") from None
    except Exception as exc:  # noqa: BLE001 - the reason goes to the failure row
        raise ModelFileError(f"model_file: {os.path.basename(source.path)} is not a safe "
                             f"torch.export program ({_one_line(exc)}); a pickle that needs "
                             "code to load is never opened") from None


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


def arrays(inputs: tuple[InputSpec, ...], batch: int, seed: int = 0) -> list:
    """Generated inputs for one batch, as NumPy arrays every runtime can take: normal floats;
    integers in 0..99 (token ids small enough for any vocabulary); booleans at random."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for spec in inputs:
        shape = spec.shape(batch)
        if spec.dtype in ("float32", "float16", "bfloat16"):
            # bfloat16 has no NumPy dtype: fed as float32 and cast by the framework
            a = rng.standard_normal(shape, dtype=np.float32)
            out.append(a.astype(np.float16) if spec.dtype == "float16" else a)
        elif spec.dtype == "bool":
            out.append(rng.integers(0, 2, shape).astype(bool))
        else:
            out.append(rng.integers(0, 100, shape).astype(spec.dtype))
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

    require_trust(source)
    try:
        loaded = tf.saved_model.load(source.path)
        return _Signature(loaded, loaded.signatures["serving_default"])
    except Exception as exc:  # noqa: BLE001
        raise ModelFileError(f"model_file: {os.path.basename(source.path)} is not a SavedModel "
                             f"with a serving_default signature ({_one_line(exc)})") from None


class _Signature:
    """A SavedModel's serving signature that keeps its loaded object alive: the signature
    alone references variables the object owns, which go when it is collected."""

    def __init__(self, loaded, fn):
        self.loaded, self.fn = loaded, fn
        self.structured_input_signature = fn.structured_input_signature
        self.variables, self.trainable_variables = fn.variables, fn.trainable_variables

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def load_factory(source: ModelSource, cwd: str | None = None):
    """(framework, model) from the user's module:function; the module is looked up on the
    user's path: the folder the command ran in (source.path) first."""
    import importlib
    import sys

    module_name, fn_name = source.factory.split(":")
    folder = cwd or source.path or os.getcwd()
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


def source_digest(source: ModelSource) -> tuple[str | None, int | None]:
    """SHA-256 and size of what a run loaded: the file; a SavedModel folder's files (names
    and bytes, in sorted order); a factory's module source file (after load_factory)."""
    import sys

    if source.format == "factory":
        module = sys.modules.get(source.factory.split(":")[0])
        path = getattr(module, "__file__", None)
        return file_digest(path) if path and os.path.isfile(path) else (None, None)
    if os.path.isdir(source.path):
        h, size = hashlib.sha256(), 0
        for root, dirs, files in os.walk(source.path):
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(root, name)
                sha, n = file_digest(full)
                h.update(f"{os.path.relpath(full, source.path)}\0{sha}\0".encode())
                size += n
        return h.hexdigest(), size
    return file_digest(source.path)


def _factory_model(source: ModelSource, framework: str):
    """The factory's model, which must belong to the framework the run asked for."""
    got, model = load_factory(source)
    if got != framework:
        what = "a Keras model" if got == "tensorflow" else "a torch module"
        raise ModelFileError(f"model_factory: {source.factory} returned {what}; run it with "
                             f"--framework {got}")
    return model


def torch_model(source: ModelSource):
    """The torch module a user's source gives: a .pt2 or TorchScript file, or a factory
    that must return a torch.nn.Module."""
    if source.format == "factory":
        return _factory_model(source, "torch")
    return load_torch(source)


def tf_model(source: ModelSource):
    """A Keras model (a .keras file or a factory's) or a SavedModel's serving signature."""
    if source.format == "keras":
        return load_keras(source)
    if source.format == "savedmodel":
        return load_savedmodel(source)
    if source.format == "factory":
        return _factory_model(source, "tensorflow")
    raise ModelFileError(f"model_file: a {source.format} model does not run in TensorFlow")


# ONNX ops whose work the count includes: what torch's FlopCounterMode counts (convolutions
# and matrix products, 2 FLOPs per multiply-add), so a file's count reads like a module's.
_ONNX_FLOPS_METHOD = ("ONNX graph: Conv, ConvTranspose, Gemm and MatMul from inferred shapes "
                      "at batch 1 (2 FLOPs per MAC)")


def onnx_stats(source: ModelSource, inputs: tuple[InputSpec, ...]):
    """Params (initializer elements) and FLOPs of an .onnx file, read as protobuf (no code
    runs) and shape-inferred at batch 1."""
    import math

    import onnx
    from onnx import shape_inference

    from engine.worker.backends.base import ModelStats

    model = onnx.load(source.path)
    graph = model.graph
    params = sum(math.prod(t.dims) for t in graph.initializer)
    init_names = {t.name for t in graph.initializer}
    feeds = [i for i in graph.input if i.name not in init_names]
    for value, spec in zip(feeds, inputs):  # concrete dims at batch 1
        dims = value.type.tensor_type.shape.dim
        for d, n in zip(dims, spec.shape(1)):
            d.ClearField("dim_param")
            d.dim_value = n
    try:
        inferred = shape_inference.infer_shapes(model)
    except Exception as exc:  # noqa: BLE001
        return ModelStats(params, None, None, f"not counted: ONNX shape inference failed "
                                              f"({type(exc).__name__})")
    shapes = {}
    for v in (*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output):
        dims = [d.dim_value if d.HasField("dim_value") else None
                for d in v.type.tensor_type.shape.dim]
        shapes[v.name] = dims
    for t in graph.initializer:
        shapes[t.name] = list(t.dims)
    flops, unknown = 0, 0
    for node in graph.node:
        if node.op_type not in ("Conv", "ConvTranspose", "Gemm", "MatMul"):
            continue
        a = shapes.get(node.input[0])
        w = shapes.get(node.input[1])
        out = shapes.get(node.output[0])
        if not a or not w or not out or None in (*a, *w, *out):
            unknown += 1
            continue
        if node.op_type == "Conv":
            flops += 2 * math.prod(out) * math.prod(w[1:])
        elif node.op_type == "ConvTranspose":
            flops += 2 * math.prod(a) * math.prod(w[1:])
        elif node.op_type == "Gemm":
            trans_a = any(at.name == "transA" and at.i for at in node.attribute)
            k = a[0] if trans_a else a[-1]
            flops += 2 * math.prod(out) * k
        else:
            flops += 2 * math.prod(out) * a[-1]
    method = _ONNX_FLOPS_METHOD + (f"; {unknown} op(s) of unknown shape not counted"
                                   if unknown else "")
    return ModelStats(int(params), None, int(flops), method)

