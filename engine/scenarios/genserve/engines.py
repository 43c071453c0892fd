"""The engines a language model is served with (the systems under test), one row each, and
the generation runtimes that cannot serve, each with its reason.

Chosen: OpenVINO GenAI's ContinuousBatchingPipeline, a real scheduler in C++ with a paged
KV cache and a CPU paged-attention kernel, whose limits are vLLM's (max concurrent
sequences, KV-cache blocks, tokens batched a step), over the same cached IR and NNCF
weights the `openvino_genai` generation runtime measures; transformers' own continuous
batching (its scheduler and block cache; on the CPU its attention is dense masked SDPA over
the packed batch, which its row says); and PyTorch eager `generate`, one request at a time
in arrival order: the default, and the baseline a continuous-batching engine must beat.
Measured on smollm2_135m (8 requests queued at once, 1 thread, a loaded 2-core machine):
OpenVINO CB 0.72 requests/s, transformers CB 0.28, eager one at a time 0.126; every
engine's tokens equal eager's batch-1 greedy tokens.

Framework-free: the CLI, the pages and the spec's validation read these rows; a row's
module (under engine.worker.genserve.) is imported by path in an engine process only.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ServeEngine", "ENGINES", "ENGINE_NAMES", "REFUSED", "engine_row", "DEFAULT_ENGINE",
           "ENGINE_MODULES", "KV_BLOCK_TOKENS"]

ENGINE_MODULES = "engine.worker.genserve."
# OpenVINO's CPU plugin keeps the paged KV cache in blocks of 32 tokens
# (continuous_batching/cache/kv_cache_manager.hpp in openvino.genai 2026.4)
KV_BLOCK_TOKENS = 32


@dataclass(frozen=True)
class ServeEngine:
    name: str
    label: str
    module: str  # engine.worker.genserve.<module>: open_engine(folder, spec, workdir)
    continuous: bool  # requests join and leave a running batch at every step
    precisions: tuple[str, ...]
    knobs: tuple[str, ...]  # the spec fields it takes (max_num_seqs, kv_blocks, ...)
    attention: str  # what its attention is, as a stored run says it

    @property
    def path(self) -> str:
        return ENGINE_MODULES + self.module


ENGINES: tuple[ServeEngine, ...] = (
    ServeEngine("eager", "PyTorch eager, one request at a time", "sut_torch_eager",
                continuous=False, precisions=("fp32", "bf16"), knobs=(),
                attention="transformers generate, its dynamic KV cache, batch 1"),
    ServeEngine("openvino_genai_cb", "OpenVINO GenAI continuous batching",
                "sut_openvino_cb", continuous=True,
                precisions=("fp32", "bf16", "int8", "int4"),
                knobs=("max_num_seqs", "kv_blocks", "max_batched_tokens"),
                attention="OpenVINO's paged attention (CPU kernel), blocks of 32 tokens"),
    ServeEngine("transformers_cb", "transformers continuous batching",
                "sut_transformers_cb", continuous=True, precisions=("fp32", "bf16"),
                knobs=("max_num_seqs", "kv_blocks", "max_batched_tokens"),
                attention="transformers' paged|sdpa: keys and values gathered from a block "
                          "cache of 32-token blocks, then one dense masked SDPA over the "
                          "packed batch (not a paged kernel: its cost grows with the batch "
                          "squared)"),
)
ENGINE_NAMES = tuple(e.name for e in ENGINES)
DEFAULT_ENGINE = "eager"

# The generation runtimes that do not serve here, and why (measured or read in their code)
REFUSED = {
    "compile": "compiles a forward with a static KV cache of one fixed batch: a request "
               "cannot join or leave a running batch, and every new batch size recompiles",
    "keras_hub": "generates in one XLA-compiled call: no moment at which a first token can "
                 "be reported to LoadGen, and no continuous batching",
    "onnxruntime_genai": "its Engine's dynamic batching needs a model with a paged KV "
                         "cache, which its builder does not export for the CPU",
    "openvino_genai": "LLMPipeline.generate() is synchronous and refuses a call while "
                      "another runs, so requests cannot arrive while it generates; its "
                      "continuous-batching pipeline is the engine openvino_genai_cb",
}


def engine_row(name: str) -> ServeEngine | None:
    return next((e for e in ENGINES if e.name == name), None)
