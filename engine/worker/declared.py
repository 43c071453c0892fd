"""What a user's model file declares about its inputs (issue 26 part 8), worker side: read
as data (JSON or protobuf; nothing unpickled, no code run) from a .keras file's config.json,
a .pt2 archive's serialized program, an .onnx graph's inputs. A dimension the file leaves
open (a dynamic batch) is None; a dtype it does not say is None. TorchScript, SavedModel and
factories declare nothing read here. The worker checks the inputs given against it before
anything is prepared or timed (engine/worker/inference/body.py), and a worker started only to
read it (Assign mode "declared", engine/worker/main.py) replies with DeclaredInputs, so the
parent can fill or check the inputs before it launches anything (engine.run.process.runner.
read_declared)."""

from __future__ import annotations

import os

from engine.core.errors import plain_text
from engine.core.model_source import DeclaredInput as Declared
from engine.core.model_source import ModelSource, source_from_dict
from engine.core.protocol import DeclaredInputs

__all__ = ["Declared", "declared_inputs", "declared_mismatch", "reply_declared"]


# torch's serialized ScalarType and ONNX's TensorProto element types, for the DTYPES we feed
_PT2_DTYPES = {1: "uint8", 2: "int8", 4: "int32", 5: "int64", 6: "float16", 7: "float32",
               12: "bool", 13: "bfloat16"}
_ONNX_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 6: "int32", 7: "int64", 9: "bool",
                10: "float16", 16: "bfloat16"}


def _keras_declared(path: str) -> tuple[Declared, ...] | None:
    import json
    import zipfile

    with zipfile.ZipFile(path) as z:
        config = json.loads(z.read("config.json"))
    inner = config.get("config") or {}
    layers = inner.get("layers") or []
    inputs = {la.get("name") or (la.get("config") or {}).get("name"): la.get("config") or {}
              for la in layers if la.get("class_name") == "InputLayer"}
    order = [e[0] if isinstance(e, list) else e for e in inner.get("input_layers") or []]
    if order and all(isinstance(n, str) and n in inputs for n in order):
        chosen = [(n, inputs[n]) for n in order]
    else:  # a Sequential: its first layer, if it is one
        chosen = list(inputs.items())[:1]
    if chosen:
        return tuple(Declared(n, tuple(c.get("batch_shape") or ()), c.get("dtype")
                              if isinstance(c.get("dtype"), str) else None)
                     for n, c in chosen)
    shape = (config.get("build_config") or {}).get("input_shape")
    if isinstance(shape, list) and shape and not isinstance(shape[0], list):
        return (Declared("input", tuple(shape), None),)  # built, never given an Input
    return None


def _pt2_declared(path: str) -> tuple[Declared, ...] | None:
    import json
    import zipfile

    with zipfile.ZipFile(path) as z:
        names = [n for n in z.namelist() if n.endswith("/models/model.json")]
        if not names:
            return None
        program = json.loads(z.read(names[0]))["graph_module"]
    values = program["graph"]["tensor_values"]
    out = []
    for spec in program["signature"]["input_specs"]:
        arg = (spec.get("user_input") or {}).get("arg") or {}
        if "as_tensor" not in arg:
            if "user_input" in spec:
                return None  # a non-tensor input: nothing we could feed is declared
            continue
        name = arg["as_tensor"]["name"]
        meta = values[name]
        dims = tuple(d.get("as_int") for d in meta["sizes"])  # a symbol (as_expr): open
        out.append(Declared(name, dims, _PT2_DTYPES.get(meta.get("dtype"))))
    return tuple(out)


def _onnx_declared(path: str) -> tuple[Declared, ...] | None:
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    init = {t.name for t in graph.initializer}
    out = []
    for value in graph.input:
        if value.name in init:
            continue
        t = value.type.tensor_type
        dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
        out.append(Declared(value.name, dims, _ONNX_DTYPES.get(t.elem_type)))
    return tuple(out)


_READERS = {"keras": _keras_declared, "pt2": _pt2_declared, "onnx": _onnx_declared}


def _read(source: ModelSource) -> tuple[tuple[Declared, ...] | None, str | None]:
    """(the inputs the file declares or None, why None)."""
    reader = _READERS.get(source.format)
    if reader is None:
        return None, f"a {source.format} model declares no inputs read here"
    try:
        got = reader(source.path)
    except Exception as exc:  # noqa: BLE001 - a file the loader will refuse with its own reason
        return None, plain_text(f"{type(exc).__name__}: {exc}")[:500]
    return got, None if got is not None else "the file names no input"


def declared_inputs(source: ModelSource) -> tuple[Declared, ...] | None:
    """The inputs the file declares, or None when its format declares none we read, or its
    description cannot be read (the framework's own load then says what is wrong)."""
    return _read(source)[0]


def reply_declared(runs, emit) -> None:
    """Assign mode "declared": one DeclaredInputs per run order, read from its spec's user
    model; no framework is imported and nothing of the file is run."""
    for order in runs:
        inputs, why = _read(source_from_dict(order.spec.get("user_model")))
        emit(DeclaredInputs(order.run_id, inputs, why))


def declared_mismatch(source: ModelSource, batch: int,
                      declared: tuple[Declared, ...] | None) -> str | None:
    """Why the inputs given for a file do not fit the ones it declares (declared_inputs:
    count, rank, a fixed dimension, dtype), with the value to give instead; None when they
    fit or it declares nothing. The batch axis is checked against the run's batch size."""
    if not declared:
        return None
    given = source.inputs
    problems = []
    if len(declared) != len(given):
        problems.append(f"{len(declared)} input(s) declared, {len(given)} given")
    for d, g in zip(declared, given):
        shape = g.shape(batch)
        if len(d.dims) != len(shape):
            problems.append(f"{g.name} has {len(shape)} dimensions, {d.name} {len(d.dims)}")
            continue
        for axis, (want, got) in enumerate(zip(d.dims, shape)):
            if want is not None and want != got:
                where = "the batch axis" if axis == 0 else f"dimension {axis}"
                problems.append(f"{where} of {g.name} is {got}, {d.name} takes {want}")
        if d.dtype is not None and d.dtype != g.dtype:
            problems.append(f"{g.name} is {g.dtype}, {d.name} takes {d.dtype}")
    if not problems:
        return None
    name = os.path.basename(source.path)
    shown = " ".join(Declared(g.name, g.shape(batch), g.dtype).text() for g in given)
    text = (f"input: {name} declares {' '.join(d.text() for d in declared)}; given {shown} "
            f"at batch {batch} ({'; '.join(problems)})")
    if all(None not in d.dims[1:] and d.dtype for d in declared):
        suggestion = " ".join(
            f"--input {d.name}:{'x'.join(map(str, (1, *d.dims[1:])))}:{d.dtype}"
            for d in declared)
        text += f"; allowed: {suggestion}"
    return text
