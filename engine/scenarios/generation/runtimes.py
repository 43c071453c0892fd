"""The runtimes a generation run can use: one row each, kept with the kind (inference's
rows, engine.core.runtimes, describe a forward call; these describe a decoding loop).

A row names its framework (which worker runs it: torch or tensorflow), its label, the module
under engine.worker.generation that opens a session (imported by path, in a worker only),
whether it is the reference every other runtime's tokens are checked against, the
precisions it runs and the measured reason for each it does not, whether bf16 needs the
CPU's bf16 instructions, and where its per-token readings come from.

Framework-free: the CLI, the dashboard and the spec's validation read these rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from engine.core.runtimes import (RuntimeOption, RuntimeOptions, checked_options,
                                  precision_refusal)

__all__ = ["GenRuntime", "GEN_ROWS", "GEN_PRECISIONS", "GEN_MODULES", "gen_row",
           "runtime_names", "REFERENCE"]

GEN_PRECISIONS = ("fp32", "bf16", "int8", "int4")
GEN_MODULES = "engine.worker.generation."  # a row's module lives under it


@dataclass(frozen=True)
class GenRuntime:
    framework: str
    name: str
    label: str
    module: str  # engine.worker.generation.<module>: open_session(folder, spec, workdir)
    timing: str  # where its per-token readings come from, as a stored run says it
    reference: bool = False  # its fp32 greedy tokens are what every runtime is checked on
    precisions: tuple[str, ...] = ("fp32",)
    refusals: Mapping[str, str] = field(default_factory=dict, hash=False)
    # bf16 only where the CPU has bf16 instructions (engine.core.precision.BF16_FLAGS):
    # elsewhere every runtime here emulates it in fp32 instructions, slower than fp32
    bf16_needs_flags: bool = True
    options: tuple[RuntimeOption, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "refusals", MappingProxyType(dict(self.refusals)))

    @property
    def path(self) -> str:
        return GEN_MODULES + self.module

    def refusal(self, precision: str) -> str:
        """Why it does not run this precision at all ("" when it does)."""
        return precision_refusal(self, precision)

    def check_options(self, given: Mapping) -> RuntimeOptions:
        """Its options, defaults filled in; UserError naming one it does not have (and
        which generation runtime has it) or a value its option does not allow."""
        return checked_options(self, given, GEN_ROWS)


_STREAMER = ("a transformers BaseStreamer's put(), called synchronously as each step's "
             "tokens are chosen (the prompt's own call skipped)")
_TORCH_WEIGHT_ONLY = ("Hugging Face generate in torch has no weight-only int8/int4 path in "
                      "this project (torchao is not installed)")

# Both of OpenVINO GenAI's pipelines take a stateful model: SDPA (the stateful LLM pipeline,
# one KV cache per request) and PA (paged attention, the continuous-batching pipeline its
# serving uses); which is faster depends on the shape, so it is the user's choice, stored.
_OV_ATTENTION = RuntimeOption(
    "attention_backend", "OpenVINO GenAI attention", ("SDPA", "PA"), "SDPA",
    "OpenVINO GenAI's attention backend (SDPA: stateful pipeline; PA: paged attention)",
    "the backend and the KV-cache precision it was pinned to are stored with each run")

GEN_ROWS: tuple[GenRuntime, ...] = (
    GenRuntime("torch", "eager", "PyTorch eager: transformers generate with its dynamic KV "
               "cache (the reference)", "gen_torch_eager", _STREAMER, reference=True,
               precisions=("fp32", "bf16"),
               refusals={"int8": _TORCH_WEIGHT_ONLY, "int4": _TORCH_WEIGHT_ONLY}),
    GenRuntime("torch", "compile", "torch.compile of the model's forward (inductor, static "
               "shapes) with a static KV cache; compile time kept apart as build time",
               "gen_torch_compile", _STREAMER, precisions=("fp32", "bf16"),
               refusals={"int8": _TORCH_WEIGHT_ONLY, "int4": _TORCH_WEIGHT_ONLY}),
    GenRuntime("tensorflow", "keras_hub", "keras-hub's compiled generate (one XLA-compiled "
               "loop) on the same weights, quantized weight-only by Keras' quantize() for "
               "int8/int4", "gen_keras_hub",
               "none per token: the whole loop is one compiled call; TTFT is a separate "
               "generate of one token on the same prompt",
               precisions=("fp32", "bf16", "int8", "int4")),
    GenRuntime("torch", "openvino_genai", "OpenVINO GenAI's LLMPipeline on the model "
               "exported by optimum-intel (stateful IR), weights compressed by NNCF for "
               "int8/int4", "gen_openvino_genai",
               "an OpenVINO GenAI streamer's call per step",
               precisions=("fp32", "bf16", "int8", "int4"), options=(_OV_ATTENTION,)),
    GenRuntime("torch", "onnxruntime_genai", "ONNX Runtime GenAI's generator loop on the "
               "model its builder exported (MatMulNBits for int4/int8)",
               "gen_onnxruntime_genai", "the return of each generate_next_token() call",
               precisions=("fp32", "int8", "int4"),
               # measured with the pinned versions: the builder writes a bf16 model for the
               # CPU (-p bf16 -e cpu), which the CPU provider cannot load, whatever the flags
               refusals={"bf16": "ONNX Runtime 1.31's CPU execution provider has no bfloat16 "
                                 "kernel for the model builder's bf16 model (measured: \"Could "
                                 "not find an implementation for Where(16) node with name "
                                 "'/model/attn_mask_reformat/input_ids_subgraph/Where_2'\")"}),
)

_BY_KEY = {(r.framework, r.name): r for r in GEN_ROWS}
_BY_NAME = {r.name: r for r in GEN_ROWS}
assert len(_BY_NAME) == len(GEN_ROWS), "a runtime name names one row"
REFERENCE = next(r for r in GEN_ROWS if r.reference)


def gen_row(name: str, framework: str | None = None) -> GenRuntime | None:
    """The row of a runtime name (and framework, when given), or None."""
    r = _BY_NAME.get(name)
    return r if r is not None and framework in (None, r.framework) else None


def runtime_names() -> tuple[str, ...]:
    return tuple(_BY_NAME)
