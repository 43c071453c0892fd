"""A user's own model (issue #14): where it comes from, what it takes as input, and which
runtimes can run it. Framework-free, both sides of the process boundary.

This module decides everything that can be decided without opening the model: the format
from the path (a stat, never a read: only a worker opens a user's model file), the inputs
from their description, and the runtimes the format allows, with the reason for every
refusal. Loading, hashing (SHA-256, in the worker) and the safety rules of each loader
(torch.export.load with no pickle able to run code, Keras safe_mode, ONNX Runtime without
custom-op libraries) belong to the worker side.

Code in the file (issue 26): a TorchScript file and a SavedModel are programs, and loading
one runs code the file carries (PyTorch's security policy: treat TorchScript as code from
an unknown source). They run only when the local user says so: `trust_code` on the source,
set by `--trust-model-code` on the CLI or the Run page's "runs code from this file" (a
session on this machine that may write; never from a link). It is part of the spec, so a
result records it and nothing else can turn it on. Uploads take only the formats that load
without running code (UPLOAD_EXTENSIONS).

Inputs: a .keras, .pt2 or .onnx file declares its own (DECLARING_FORMATS; a worker reads
them as data, engine/worker/declared.py): when none is given they are taken from the file,
and a given one is checked against them before anything runs (fill_inputs). Otherwise
`--input-shape C,H,W` is one float32 image input; `--input NAME:DIMS:DTYPE` (e.g.
`input_ids:1x128:int64`) names one input of any model, repeatable. DIMS start with the batch
axis, which the sweep's `--batch` replaces (write 1 there): the same description then serves
every batch size.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from engine.core.errors import UserError
from engine.core.runtimes import ROWS

__all__ = ["InputSpec", "ModelSource", "FORMATS", "FORMAT_RUNTIMES", "DTYPES", "detect_format",
           "parse_input", "parse_input_shape", "parse_factory", "check_runtime",
           "MAX_ELEMENTS", "MAX_DIMS", "check_model_name", "default_runtime", "describe_inputs",
           "source_from_dict", "format_for_name", "CODE_FORMATS", "check_trust",
           "UPLOAD_EXTENSIONS", "upload_format_for_name", "DECLARING_FORMATS",
           "DeclaredInput", "declared_text", "fill_inputs"]

# Why a runtime that does not read a format cannot run it: the format's own nature (which
# runtimes read it is each runtime's row, engine.core.runtimes). The files' formats, in order.
_WHY_NOT = {
    "pt2": "a torch.export program is read as its module or its graph, not as TorchScript "
           "(TorchScript and LibTorch need a TorchScript file)",
    "torchscript": "a TorchScript file is a program for TorchScript's interpreter; its Python "
                   "module is not in the file",
    "onnx": "an ONNX file is a graph, read only by the runtimes that read ONNX; it holds no "
            "torch module",
    "keras": "a Keras model runs in TensorFlow's runtimes",
    "savedmodel": "a SavedModel runs in TensorFlow's runtimes",
}
# format -> (framework, runtimes it can run on, in the rows' order: the first is its default
# where the framework's is not among them), derived from the rows. A factory is the user's
# own code: every runtime of the framework its model belongs to (decided in the worker, by
# what it returns).
FORMAT_RUNTIMES: dict[str, tuple[str, tuple[str, ...]]] = {
    fmt: (next(r.framework for r in ROWS if fmt in r.formats),
          tuple(r.name for r in ROWS if fmt in r.formats)) for fmt in _WHY_NOT}
FORMATS = tuple(FORMAT_RUNTIMES) + ("factory",)
_EXTENSIONS = {".pt2": "pt2", ".pt": "torchscript", ".pth": "torchscript", ".onnx": "onnx",
               ".keras": "keras"}
# Formats that bypass Keras' safe_mode (arbitrary code in Lambda layers, pickled objects).
_REFUSED_EXTENSIONS = {
    ".h5": "legacy HDF5 Keras files bypass safe_mode (Lambda layers run code); save with "
           "model.save('name.keras')",
    ".hdf5": "legacy HDF5 Keras files bypass safe_mode; save with model.save('name.keras')",
    ".pkl": "a pickle runs code when it is read; save a torch.export program (.pt2), "
            "TorchScript (.pt), ONNX or .keras instead",
    ".pickle": "a pickle runs code when it is read; save .pt2, .pt, .onnx or .keras instead",
}
# Formats whose loading runs code the file carries: a TorchScript program (torch.jit.load and
# the LibTorch runner execute it) and a SavedModel (tf.saved_model.load restores its graph
# functions). What they are, for a refusal.
CODE_FORMATS = {"torchscript": "TorchScript, a program", "savedmodel": "a SavedModel, a program"}
# What an upload may be: the formats that load without running code (a .pt2 program through
# the guarded loader, ONNX without custom ops, .keras with safe_mode).
UPLOAD_EXTENSIONS = {ext: fmt for ext, fmt in _EXTENSIONS.items() if fmt not in CODE_FORMATS}
DTYPES = ("float32", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool")
MAX_DIMS = 8
MAX_ELEMENTS = 2**28  # per batch: 1 GiB of float32, past what a CPU benchmark should feed
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$")
_FACTORY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
                      r":[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class InputSpec:
    name: str
    dims: tuple[int, ...]  # the batch axis first; the sweep's batch size replaces dims[0]
    dtype: str = "float32"

    def shape(self, batch: int) -> tuple[int, ...]:
        return (batch, *self.dims[1:])


@dataclass(frozen=True)
class ModelSource:
    """A user's model: a file (or SavedModel folder) or a factory, and its inputs."""

    name: str  # what pages and tables call it (the user's choice; display text only)
    format: str  # one of FORMATS
    inputs: tuple[InputSpec, ...]
    path: str | None = None  # a file or folder, for every format but factory
    factory: str | None = None  # "package.module:function", for format factory
    # The local user said this file's code may run (--trust-model-code, or "runs code from
    # this file" on the Run page): needed by the CODE_FORMATS, recorded with every result.
    trust_code: bool = False

    @property
    def framework(self) -> str | None:
        """The framework a file format implies (a factory's is known once it has run)."""
        return FORMAT_RUNTIMES[self.format][0] if self.format in FORMAT_RUNTIMES else None


def detect_format(path: str | Path) -> str:
    """The format a path names, from its extension (a SavedModel is a folder holding
    saved_model.pb). UserError (field model_file) when it is missing or not supported."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"model_file: {p} does not exist; allowed: an existing .pt2, .pt, "
                        ".pth, .onnx or .keras file, or a SavedModel folder", field="model_file")
    if p.is_dir():
        if (p / "saved_model.pb").is_file():
            return "savedmodel"
        raise UserError(f"model_file: {p} is a folder without saved_model.pb; allowed: a "
                        "TensorFlow SavedModel folder, or a model file", field="model_file")
    ext = p.suffix.lower()
    if ext in _REFUSED_EXTENSIONS:
        raise UserError(f"model_file: {p.name} is refused: {_REFUSED_EXTENSIONS[ext]}",
                        field="model_file")
    if ext not in _EXTENSIONS:
        raise UserError(f"model_file: {p.name} has an unknown extension {ext or '(none)'!r}; "
                        f"allowed: {', '.join(_EXTENSIONS)} or a SavedModel folder",
                        field="model_file")
    return _EXTENSIONS[ext]


def _dims(text: str, field: str) -> tuple[int, ...]:
    parts = re.split(r"[x,]", text.strip())
    if any(not t.strip() for t in parts):  # "3,,16" or "3,x,16": a dimension is missing
        raise UserError(f"{field}: {text!r} has an empty dimension; allowed: 1 to {MAX_DIMS} "
                        "positive integers separated by , or x, e.g. 3,224,224", field=field)
    if len(parts) > MAX_DIMS:
        raise UserError(f"{field}: {text!r} has {len(parts)} dimensions; allowed: 1 to "
                        f"{MAX_DIMS} positive integers, e.g. 3,224,224", field=field)
    dims = []
    for t in parts:
        try:
            d = int(t)
        except ValueError:
            raise UserError(f"{field}: {t.strip()!r} in {text!r} is not an integer; allowed: "
                            "positive integers", field=field) from None
        if d < 1:
            raise UserError(f"{field}: dimension {d} in {text!r} is not positive; allowed: "
                            "integers >= 1", field=field)
        dims.append(d)
    if math.prod(dims) > MAX_ELEMENTS:
        raise UserError(f"{field}: {text!r} is {math.prod(dims):,} elements; allowed: at most "
                        f"{MAX_ELEMENTS:,} per batch", field=field)
    return tuple(dims)


def parse_input_shape(text: str) -> InputSpec:
    """--input-shape C,H,W (no batch axis): one float32 input named "input"."""
    dims = _dims(text, "input_shape")
    return InputSpec("input", (1, *dims), "float32")


def parse_input(text: str) -> InputSpec:
    """--input NAME:DIMS:DTYPE, DIMS with the batch axis first (e.g. input_ids:1x128:int64);
    DTYPE defaults to float32."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise UserError(f"input: {text!r} is not NAME:DIMS[:DTYPE]; allowed: e.g. "
                        "input_ids:1x128:int64 or image:1x3x224x224", field="input")
    name, dims_text = parts[0].strip(), parts[1]
    dtype = parts[2].strip() if len(parts) == 3 else "float32"
    if not _NAME.match(name):
        raise UserError(f"input: name {name!r} is not allowed; allowed: a letter or _ then "
                        "up to 63 letters, digits, _ . : -", field="input")
    if dtype not in DTYPES:
        raise UserError(f"input: dtype {dtype!r} is not supported; allowed: "
                        f"{', '.join(DTYPES)}", field="input")
    return InputSpec(name, _dims(dims_text, "input"), dtype)


def parse_factory(text: str) -> str:
    """module:function on the user's path: checked for form here, imported in the worker."""
    if not _FACTORY.match(text.strip()):
        raise UserError(f"model_factory: {text!r} is not module:function; allowed: e.g. "
                        "mypkg.models:build", field="model_factory")
    return text.strip()


def check_runtime(fmt: str, framework: str, runtime: str) -> None:
    """Refuse, before anything runs, a runtime the format cannot run on, with the reason."""
    if fmt == "factory":
        return  # every runtime of the factory's framework; checked once its model exists
    fw, runtimes = FORMAT_RUNTIMES[fmt]
    if framework != fw or runtime not in runtimes:
        raise UserError(f"runtime: {framework} {runtime} cannot run a {fmt} model: "
                        f"{_WHY_NOT[fmt]}; allowed: {fw} {', '.join(runtimes)}",
                        field="runtime")


_MODEL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def check_model_name(name: str) -> str:
    """The display name a user gives their model: shown on every page, so it must not pass
    for a catalog model (the catalog's names are taken) and must be plain text."""
    from engine.core.catalog import CATALOG, DIAGNOSTIC_MODELS

    name = (name or "").strip()
    if not _MODEL_NAME.match(name):
        raise UserError(f"model_name: {name!r} is not allowed; allowed: 1 to 64 letters, "
                        "digits, _ . -", field="model_name")
    if name in CATALOG or name in DIAGNOSTIC_MODELS:
        raise UserError(f"model_name: {name!r} is a catalog model's name; allowed: a name of "
                        f"your own (e.g. my_{name})", field="model_name")
    return name


def default_runtime(fmt: str, framework: str) -> str:
    """The runtime a user model gets when none is named: the framework's default where the
    format runs on it, else the format's first."""
    from engine.core.catalog import FRAMEWORKS

    if fmt == "factory" or FRAMEWORKS[framework] in FORMAT_RUNTIMES[fmt][1]:
        return FRAMEWORKS[framework]
    return FORMAT_RUNTIMES[fmt][1][0]


def describe_inputs(inputs: tuple[InputSpec, ...]) -> str:
    """The inputs as --input would take them: 'input:1x3x16x16:float32 ids:1x128:int64'."""
    return " ".join(f"{i.name}:{'x'.join(map(str, i.dims))}:{i.dtype}" for i in inputs)


def source_from_dict(d: dict | None) -> ModelSource | None:
    """A ModelSource back from its JSON form (lists where the dataclass holds tuples)."""
    if not d:
        return None
    inputs = tuple(InputSpec(i["name"], tuple(i["dims"]), i.get("dtype", "float32"))
                   for i in d["inputs"])
    return ModelSource(d["name"], d["format"], inputs, d.get("path"), d.get("factory"),
                       trust_code=d.get("trust_code") is True)


def format_for_name(name: str) -> str:
    """The format a file name's extension stands for, before any byte is written (an
    upload's name): detect_format's extension rules without the stat. UserError (field
    model_file) for a refused extension, with the reason, or an unknown one."""
    ext = Path(name).suffix.lower()
    if ext in _REFUSED_EXTENSIONS:
        raise UserError(f"model_file: {ext} files are refused: {_REFUSED_EXTENSIONS[ext]}",
                        field="model_file")
    if ext not in _EXTENSIONS:
        raise UserError(f"model_file: extension {ext or '(none)'!r} is not supported; "
                        f"allowed: {', '.join(_EXTENSIONS)}", field="model_file")
    return _EXTENSIONS[ext]



def check_trust(src: ModelSource) -> None:
    """Refuse, before anything runs, a model whose loading runs code from its file unless
    the local user said so. UserError (field trust_model_code) naming the flag."""
    if src.format in CODE_FORMATS and not src.trust_code:
        name = Path(src.path or "").name or src.name
        raise UserError(f"trust_model_code: {name} is {CODE_FORMATS[src.format]}: loading "
                        "it runs code from the file; allowed: --trust-model-code (on the Run "
                        "page: \"runs code from this file\") when you trust this file, or a "
                        "format that loads without running code "
                        f"({', '.join(UPLOAD_EXTENSIONS)})", field="trust_model_code")


def upload_format_for_name(name: str) -> str:
    """The format of an upload by its name, before any byte is written: format_for_name's
    rules, and only the formats that load without running code (UserError, field
    model_file, naming the formats allowed)."""
    ext = Path(name).suffix.lower()
    if ext not in _EXTENSIONS and ext not in _REFUSED_EXTENSIONS:
        raise UserError(f"model_file: extension {ext or '(none)'!r} is not supported; "
                        f"allowed: {', '.join(UPLOAD_EXTENSIONS)}", field="model_file")
    fmt = format_for_name(name)
    if fmt in CODE_FORMATS:
        raise UserError(f"model_file: {ext} files ({CODE_FORMATS[fmt]}) "
                        "are not taken as uploads: loading one runs code from the file; "
                        f"allowed: {', '.join(UPLOAD_EXTENSIONS)} (they load without running "
                        "code). A TorchScript file you trust: copy it into the models folder "
                        "and tick \"runs code from this file\"", field="model_file")
    return fmt


# Formats whose files declare their inputs, read as data in a worker (engine/worker/declared.py)
DECLARING_FORMATS = ("pt2", "onnx", "keras")
_FORMAT_WORDS = {"pt2": "a torch.export program", "onnx": "an ONNX file",
                 "keras": "a Keras file", "torchscript": "a TorchScript file",
                 "savedmodel": "a SavedModel", "factory": "a factory's model"}


@dataclass(frozen=True)
class DeclaredInput:
    """One input a model file declares: dims with the batch axis first, None where the file
    leaves a dimension open (a dynamic batch); dtype None where the file does not say."""

    name: str
    dims: tuple
    dtype: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "dims", tuple(self.dims))  # a list, decoded from JSON

    def text(self) -> str:
        """name:DIMSxDIMS:dtype, '?' where open."""
        dims = "x".join("?" if d is None else str(d) for d in self.dims)
        return f"{self.name}:{dims}:{self.dtype or '?'}"


def _layout(dims: tuple) -> str:
    """NCHW or NHWC for an image-like 4-dimensional input, by where its few channels sit."""
    if len(dims) != 4 or None in dims[1:]:
        return ""
    first, last = dims[1] in (1, 3, 4), dims[3] in (1, 3, 4)
    return " (NHWC)" if last and not first else " (NCHW)" if first and not last else ""


def declared_text(declared: tuple[DeclaredInput, ...]) -> str:
    """What a file declares, as the user reads it: '1x64x64x3 float32 (NHWC)' (an open
    batch axis written 1, as --input takes it; another open dimension '?'); several inputs
    each by name."""
    def one(d: DeclaredInput) -> str:
        dims = "x".join("1" if i == 0 and v is None else "?" if v is None else str(v)
                        for i, v in enumerate(d.dims))
        return f"{dims} {d.dtype or 'float32'}{_layout(d.dims)}"
    if len(declared) == 1:
        return one(declared[0])
    return ", ".join(f"{d.name} {one(d)}" for d in declared)


def _as_given(d: DeclaredInput) -> str:
    """The flag that gives this declared input."""
    if d.name == "input" and (d.dtype or "float32") == "float32":
        return f"--input-shape {','.join(map(str, d.dims[1:]))}"
    return f"--input {d.name}:{'x'.join(map(str, (1, *d.dims[1:])))}:{d.dtype or 'float32'}"


def fill_inputs(src: ModelSource, declared: tuple[DeclaredInput, ...] | None,
                batch_sizes, given: str | None = None, *,
                allowed_batch=lambda fixed: f"--batch {fixed}") -> ModelSource:
    """The source with its inputs: the ones given, checked against what the file declares
    (count, rank, every fixed dimension after the batch axis, dtype), or, none given, the
    declared ones (the batch axis written 1: each batch size replaces it). A batch axis the
    file fixes must be every batch size. declared: what a worker read (None: the format
    declares nothing read, or it could not be read). given: the user's text, for messages.
    UserError (field input or batch_size) naming what the file declares and what is allowed
    (allowed_batch(fixed): the batch sizes that may run, as the caller's options say them)."""
    what = (src.factory if src.format == "factory" else Path(src.path or "").name) or src.name
    if not declared:
        if src.inputs:
            return src
        why = (f"{_FORMAT_WORDS.get(src.format, src.format)}, which declares no inputs we read"
               if src.format not in DECLARING_FORMATS else
               f"{_FORMAT_WORDS[src.format]} whose declared inputs could not be read")
        raise UserError(f"input: required for {what}, {why}; allowed: --input-shape C,H,W "
                        "or one or more --input NAME:DIMS[:DTYPE] (on the Run page: the "
                        "Input box)", field="input")
    shown = declared_text(declared)
    if src.inputs:
        problems = []
        if len(declared) != len(src.inputs):
            problems.append(f"{len(src.inputs)} input(s) given, {len(declared)} declared")
        for d, g in zip(declared, src.inputs):
            if len(d.dims) != len(g.dims):
                problems.append(f"{g.name} has {len(g.dims)} dimensions with the batch "
                                f"axis, the file's {d.name} {len(d.dims)}")
                continue
            for axis, (want, got) in enumerate(zip(d.dims, g.dims)):
                if axis and want is not None and want != got:
                    problems.append(f"dimension {axis} of {g.name} is {got}, the file's {want}")
            if d.dtype is not None and d.dtype != g.dtype:
                problems.append(f"{g.name} is {g.dtype}, the file's {d.dtype}")
        if problems:
            fits = all(d.dims and None not in d.dims[1:] for d in declared)
            allowed = "leave the input out (the file's is used)" + (
                " or " + " ".join(_as_given(d) for d in declared) if fits else "")
            raise UserError(f"input: the file declares {shown}; given "
                            f"{given or describe_inputs(src.inputs)} ({'; '.join(problems)}); "
                            f"allowed: {allowed}", field="input")
        inputs = src.inputs
    else:
        for d in declared:
            if not d.dims or None in d.dims[1:] or not _NAME.match(d.name):
                why = ("a scalar" if not d.dims else "its dimensions after the batch axis "
                       "left open" if None in d.dims[1:] else "a name we do not take")
                raise UserError(f"input: {what} declares {d.text()} ({why}); allowed: give "
                                "every input with --input NAME:DIMS[:DTYPE]", field="input")
            if d.dtype is not None and d.dtype not in DTYPES:
                raise UserError(f"input: {what} declares {d.name} as {d.dtype}; allowed: "
                                f"inputs of {', '.join(DTYPES)}, given with --input",
                                field="input")
        inputs = tuple(InputSpec(d.name, (1, *d.dims[1:]), d.dtype or "float32")
                       for d in declared)
    for d in declared:
        fixed = d.dims[0] if d.dims else None
        other = [b for b in dict.fromkeys(batch_sizes) if b != fixed]
        if fixed is not None and other:
            raise UserError(f"batch_size: the file fixes the batch dimension of {d.name} at "
                            f"{fixed} (it declares {shown}), so batch "
                            f"{', '.join(map(str, other))} cannot run; allowed: "
                            f"{allowed_batch(fixed)}", field="batch_size")
    return src if inputs == src.inputs else ModelSource(
        src.name, src.format, inputs, src.path, src.factory, trust_code=src.trust_code)
