"""One row per runtime: everything the project knows of each (framework, runtime) pair.

A `Runtime` row holds its label; the devices it runs on, and why not cuda where it cannot;
the precisions it runs beside fp32, the reason for each it refuses, and whether bf16 needs
the CPU's bf16 instructions; the formats of a user's model file it reads, and the precisions
it applies to one; whether it answers LoadGen's queries and whether the profilers see it;
whose threads its arithmetic runs on; the worker module that runs it (and the trainer, where
it trains); and its own options (`RuntimeOption`: typed, validated here, carried by
`RunSpec.options`, never a column of the spec). Every table the rest of the project reads
about runtimes is derived from `ROWS` where it always was (catalog.RUNTIMES, precision's
supported and refused, model_source.FORMAT_RUNTIMES, serving.UNSERVED_RUNTIMES,
training.TRAIN_RUNTIMES, the worker's backend modules and numerics notes, ...), and
tests/test_runtimes.py fails when one disagrees with the rows.

Framework-free, both sides: a row names its worker module by path and nothing here imports
it. Adding a runtime is its row here plus its backend file (docs/ARCHITECTURE.md, "Adding a
runtime").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from engine.core.errors import UserError

__all__ = ["Runtime", "RuntimeOption", "RuntimeOptions", "NO_OPTIONS", "ROWS", "row",
           "rows_of", "OPTIONS", "owners", "check_sweep_options", "DEVICES", "BACKENDS",
           "precision_refusal", "checked_options"]

DEVICES = ("cpu", "cuda")
BACKENDS = "engine.worker.backends."  # a row's module and trainer live under it


class RuntimeOptions(dict):
    """A spec's runtime options, name -> value: a frozen, hashable mapping that JSON writes
    as an object (a dict subclass, so the protocol's spec dict carries it as it is)."""

    __slots__ = ()

    def __hash__(self):
        return hash(tuple(sorted(self.items())))

    def _frozen(self, *_args, **_kwargs):
        raise TypeError("RuntimeOptions is frozen: build a new one")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _frozen
    __ior__ = _frozen

    def __reduce__(self):  # copy and deepcopy (dataclasses.asdict) rebuild, never mutate
        return (RuntimeOptions, (dict(self),))

    def __repr__(self) -> str:
        return f"RuntimeOptions({dict.__repr__(self)})"


NO_OPTIONS = RuntimeOptions()


@dataclass(frozen=True)
class RuntimeOption:
    """A setting of one runtime's own. `name` is its key everywhere: in RunSpec.options, in
    a stored run's extra, as the Run form's widget key and as the CLI's flag (--name, dashes
    for underscores)."""

    name: str
    label: str  # the Run form's box
    choices: tuple[str, ...]
    default: str
    what: str  # "OpenVINO's performance hint": the CLI's and the form's help start with it
    stored: str = ""  # what a run stores of it, for the form's help

    def __post_init__(self):
        # the name is also a JSON path in stored queries (store/precision.py): an identifier
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name) or self.default not in self.choices:
            raise ValueError(f"runtime option {self.name!r}: not an identifier, or its "
                             "default is not among its choices")

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def check(self, value) -> str:
        if value not in self.choices:
            raise UserError(f"{self.name}: {value!r} is not supported; allowed: "
                            f"{', '.join(self.choices)}", field=self.name)
        return value


@dataclass(frozen=True)
class Runtime:
    framework: str
    name: str
    label: str  # what it is, as `python -m engine runtimes` and the forms say it
    module: str  # its backend, engine.worker.backends.<module> (imported by a worker only)
    reference: bool = False  # the framework's reference: every other output is checked on it
    default: bool = False  # the framework's runtime when none is named
    cpu_only: str = ""  # why it does not run on cuda here; "": it runs on cpu and cuda
    precisions: tuple[str, ...] = ("fp32",)  # what it runs, fp32 first
    # precision -> why it is refused, where the reason is this runtime's own (measured here
    # with the pinned versions); any other refused precision gets the generic sentence
    refusals: Mapping[str, str] = field(default_factory=dict, hash=False)
    # bf16 only where the CPU has bf16 instructions (engine.core.precision.BF16_FLAGS):
    # elsewhere it would be emulated in fp32 instructions, slower than fp32
    bf16_needs_flags: bool = False
    formats: tuple[str, ...] = ()  # a user's model file formats it reads
    # what it applies to a user's file: the precision the file was saved in (fp32), unless
    # the precision is a setting of the runtime itself (OpenVINO's inference precision)
    file_precisions: tuple[str, ...] = ("fp32",)
    unserved: str = ""  # why it cannot answer LoadGen's queries; "": it serves
    profiled: bool = False  # torch.profiler / TensorFlow's profiler see its ops
    # whose threads its arithmetic runs on, where they are not the framework's (the
    # worker's denormal flag, set in the framework's threads, does not reach them); "": the
    # framework's, which the flag reaches (measured for aoti and openvino: a denormal
    # product came back 0.0 in threads they started after the flag was set)
    own_threads: str = ""
    cpp_runner: bool = False  # measured by the LibTorch C++ runner, a process of its own
    trainer: str = ""  # its training backend's module, where it trains
    options: tuple[RuntimeOption, ...] = ()
    offered: bool = True  # False: a diagnostic that fails on purpose, not offered on a form

    def __post_init__(self):
        object.__setattr__(self, "refusals", MappingProxyType(dict(self.refusals)))

    @property
    def devices(self) -> tuple[str, ...]:
        return ("cpu",) if self.cpu_only else DEVICES

    @property
    def backend(self) -> str:
        return BACKENDS + self.module

    def refusal(self, precision: str) -> str:
        """Why it does not run this precision at all ("" when it does)."""
        return precision_refusal(self, precision)

    def check_options(self, given: Mapping) -> RuntimeOptions:
        """Its options from the given ones, defaults filled in; UserError naming an option
        it does not have (and the allowed ones) or a value its option does not allow."""
        return checked_options(self, given, ROWS)


def precision_refusal(row, precision: str) -> str:
    """Why a runtime row (an inference Runtime, a generation GenRuntime: anything with
    framework, name, precisions and refusals) does not run this precision ("" when it
    does): its own measured reason, or the generic sentence."""
    if precision in row.precisions:
        return ""
    return row.refusals.get(precision, f"{row.framework} {row.name} has no "
                                       f"{precision} path in this project")


def checked_options(row, given: Mapping, rows=()) -> RuntimeOptions:
    """A row's options from the given ones, defaults filled in; UserError naming an option
    it does not have (and which of `rows` has it, and the allowed ones) or a value its
    option does not allow."""
    names = [o.name for o in row.options]
    for name in given:
        if name not in names:
            owners = [f"{r.framework} {r.name}" for r in rows
                      if name in (o.name for o in r.options)]
            whose = f" (it is {' and '.join(owners)}'s)" if owners else ""
            raise UserError(f"{name}: {row.framework} {row.name} has no option "
                            f"{name}{whose}; allowed: {', '.join(names) or 'none'}",
                            field=name)
    return RuntimeOptions({o.name: o.check(given.get(o.name, o.default))
                           for o in row.options})


_TORCH_INT8 = "torch's dynamic quantization (quantize_dynamic) covers Linear layers in eager " \
              "mode only"
_CPP = "the C++ runner is built against libtorch_cpu"
_CPP_UNSERVED = ("times its own loop in C++ (engine/worker/cpp) and cannot answer LoadGen's "
                 "queries one call at a time")
_CPP_THREADS = ("the C++ runner is a process of its own: torch's flag in this worker does not "
                "reach it")
_TF_CPU = "the project installs tensorflow-cpu"
_OV_HINT = RuntimeOption(
    "ov_hint", "OpenVINO hint", ("latency", "throughput"), "latency",
    "OpenVINO's performance hint", "the streams it chose are stored with each run")

# The reference of each framework comes first; a table derived from the rows keeps this order.
ROWS: tuple[Runtime, ...] = (
    Runtime("torch", "eager", "PyTorch eager under inference_mode (the reference)",
            "torch_eager", reference=True, default=True, precisions=("fp32", "bf16", "int8"),
            formats=("pt2",), profiled=True, trainer="train_torch"),
    Runtime("torch", "channels_last", "eager, model and input in channels_last memory format",
            "torch_channels_last", precisions=("fp32", "bf16"),
            refusals={"int8": _TORCH_INT8}, profiled=True),
    Runtime("torch", "torchscript", "torch.jit.trace, then torch.jit.freeze", "torch_script",
            precisions=("fp32", "bf16"), refusals={"int8": _TORCH_INT8},
            formats=("torchscript",), profiled=True),
    Runtime("torch", "compile",
            "torch.compile (inductor, weights frozen); compile time kept apart",
            "torch_compile", precisions=("fp32", "bf16"), refusals={"int8": _TORCH_INT8},
            formats=("pt2",), profiled=True),
    Runtime("torch", "onnxruntime",
            "exported to ONNX (opset 17), run by ONNX Runtime on the CPU", "onnx_runtime",
            cpu_only="the project installs ONNX Runtime's CPU execution provider",
            precisions=("fp32", "int8"),
            refusals={"bf16": "ONNX Runtime 1.31's CPU execution provider has no bfloat16 "
                              "kernel for Conv, MatMul, Relu or Add (NOT_IMPLEMENTED when a "
                              "session is made)"},
            formats=("pt2", "onnx"),
            own_threads="ONNX Runtime's own thread pool: its kernels are not under torch's "
                        "flag"),
    Runtime("torch", "libtorch",
            "the frozen TorchScript model measured by the LibTorch C++ runner",
            "torch_libtorch", cpu_only=_CPP,
            refusals={"bf16": "the C++ runner feeds fp32 inputs",
                      "int8": "the C++ runner loads the frozen fp32 TorchScript model"},
            formats=("torchscript",), unserved=_CPP_UNSERVED, own_threads=_CPP_THREADS,
            cpp_runner=True, trainer="train_libtorch"),
    Runtime("torch", "aoti",
            "torch.export (dynamic batch), AOTInductor-compiled .pt2 package run from Python "
            "(aoti_load_package); compile time kept apart", "torch_aoti",
            # a CUDA package needs the run's GPU at compile time; no GPU was here to check one
            cpu_only="AOTInductor packages are compiled and checked for the CPU here",
            refusals={"int8": "torch's dynamic quantization covers eager mode only",
                      "bf16": "its package is exported and compiled from the fp32 model only "
                              "(a bf16 package was not checked here)"},
            formats=("pt2",)),
    Runtime("torch", "libtorch_aoti",
            "the same AOTInductor .pt2 package measured by the LibTorch C++ runner "
            "(AOTIModelPackageLoader)", "torch_libtorch_aoti", cpu_only=_CPP,
            refusals={"bf16": "the C++ runner feeds fp32 inputs",
                      "int8": "the C++ runner loads the fp32 AOTInductor package"},
            formats=("pt2",), unserved=_CPP_UNSERVED, own_threads=_CPP_THREADS,
            cpp_runner=True),
    Runtime("torch", "openvino",
            "converted by OpenVINO (convert_model), compiled for its CPU plugin with a "
            "performance hint (latency or throughput); precision pinned, read back",
            "openvino_rt", cpu_only="the project runs OpenVINO's CPU plugin",
            precisions=("fp32", "bf16"), bf16_needs_flags=True,
            refusals={"int8": "OpenVINO's int8 needs weights quantized by NNCF, which is not "
                              "installed; the CPU plugin's own "
                              "DYNAMIC_QUANTIZATION_GROUP_SIZE quantizes activations only of "
                              "fully-connected layers whose weights are already compressed"},
            # convert_model reads an ONNX file and a torch.export program natively; its
            # inference precision is a plugin setting, so bf16 applies to a file too
            formats=("pt2", "onnx"), file_precisions=("fp32", "bf16"), options=(_OV_HINT,)),
    *(Runtime("tensorflow", name, label, module, reference=name == "keras",
              default=name == "tf_function", cpu_only=_TF_CPU, precisions=("fp32", "bf16"),
              bf16_needs_flags=True, formats=("keras", "savedmodel"), profiled=True,
              trainer="train_tf" if name == "tf_function" else "")
      for name, label, module in (
          ("keras", "the Keras model called eagerly, model(x, training=False) (the "
                    "reference)", "tf_keras"),
          ("tf_function", "a compiled tf.function, the result materialised", "tf_function"),
          ("xla", "tf.function(jit_compile=True): XLA-compiled", "tf_xla"))),
    # "selftest" is a diagnostic framework (pure NumPy/Python) that exercises the harness
    # itself: an identity model for the overhead benchmark and models that fail on purpose,
    # so the failure paths (error, timeout, oom, killed, invalid) can be checked anywhere.
    Runtime("selftest", "python", "plain Python/NumPy (the reference)", "selftest",
            reference=True, default=True,
            refusals={"bf16": "diagnostic runtime", "int8": "diagnostic runtime"}),
    Runtime("selftest", "mismatch", "returns a different output: exercises the output check",
            "selftest", refusals={"bf16": "diagnostic runtime", "int8": "diagnostic runtime"},
            offered=False),
)

_BY_KEY = {(r.framework, r.name): r for r in ROWS}
# Every option some runtime declares, once, in the rows' order: what a sweep may name.
OPTIONS: tuple[RuntimeOption, ...] = tuple(
    {o.name: o for r in ROWS for o in r.options}.values())


def row(framework: str, runtime: str | None) -> Runtime | None:
    """The row of (framework, runtime), or None where there is none."""
    return _BY_KEY.get((framework, runtime))


def rows_of(framework: str) -> tuple[Runtime, ...]:
    return tuple(r for r in ROWS if r.framework == framework)


def owners(option: RuntimeOption) -> str:
    """The runtimes that have an option, as help text says it: 'the runtime openvino'."""
    names = [r.name for r in ROWS if option in r.options]
    return f"the runtime{'s' if len(names) > 1 else ''} {', '.join(names)}"


def check_sweep_options(given: Mapping) -> RuntimeOptions:
    """A sweep's options, before they are handed to the runtimes that have them: each must
    be some runtime's option with a value it allows (a runtime without it ignores it)."""
    known = {o.name: o for o in OPTIONS}
    for name, value in given.items():
        if name not in known:
            raise UserError(f"{name}: no runtime has an option {name}; allowed: "
                            f"{', '.join(known) or 'none'}", field=name)
        known[name].check(value)
    return RuntimeOptions(given)
