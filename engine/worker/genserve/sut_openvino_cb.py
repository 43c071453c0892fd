"""OpenVINO GenAI's ContinuousBatchingPipeline on the CPU: requests join and leave the batch
at every step, the KV cache held in fixed 32-token blocks read by the CPU plugin's
paged-attention kernel (the pipeline turns the stateful IR into a paged one with
SDPAToPagedAttention).

The model is the IR the `openvino_genai` generation runtime exports and caches
(gen_openvino_genai._ir: the same fp32 export and NNCF int8/int4 compressions, the same
cache entries), compiled with the same pinned plugin properties: INFERENCE_NUM_THREADS = the
spec's intra threads, INFERENCE_PRECISION_HINT and KV_CACHE_PRECISION (the plugin would pick
bf16 and a u8 or f16 KV cache on its own).

Scheduler (SchedulerConfig, every field read back into `settings`):
- max_num_seqs: the spec's, the most sequences in one step.
- num_kv_blocks: the spec's, or, where the spec leaves it 0, enough for max_num_seqs
  requests of prompt_len + output_len tokens each, rounded up to whole 32-token blocks.
  A cache is always fixed: with num_kv_blocks and cache_size both 0 the pipeline grows it
  mid-run (reallocate and copy: a latency spike no setting names).
- max_num_batched_tokens: the spec's, or the pipeline's default (256) where 0.
- dynamic_split_fuse on (a long prompt's prefill is split across steps, decodes scheduled
  first); prefix caching off: the prompts are random ids, nothing is shared, and a cache hit
  would time less work than a real prompt costs.

Requests: greedy, exactly new_tokens tokens (ignore_eos; the pad id named as EOS, which the
pipeline requires to be a valid id, through set_eos_token_id: add_request refuses a config
whose stop ids lack it, measured). After each step() every live handle is drained
(can_read() before read(): read() blocks), so a request's count is what that step made
visible. A request the scheduler drops (GenerationStatus.IGNORED: it did not fit the KV
cache; measured: a waiting request that did fit can be dropped with it) is emitted done with
the tokens it had and counted in stats()["ignored"].

step() does not release the GIL (the binding has no gil_scoped_release): the engine's
thread holds it for the whole model step (measured on smollm2_135m, 1 inference thread: a
Python thread counting ran 0.21 M increments/s across 18 steps, against 5.8 M/s through a
sleep as long and 5.7 M/s through torch forwards), which is why the engine runs in a
process of its own. Imports OpenVINO and, through the export, torch: worker side.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from engine.scenarios.generation.models import language_model
from engine.worker.generation.common import bf16_refusal, versions
from engine.worker.generation.gen_openvino_genai import (_HINT, _KV, PACKAGES, PRECISIONS,
                                                         WEIGHT_METHOD, _ir)
from engine.worker.generation.session import Refused

__all__ = ["open_engine", "OpenVinoCBEngine", "BLOCK_TOKENS", "ATTENTION"]

BLOCK_TOKENS = 32  # the CPU plugin's KV block (OVG kv_cache_manager.hpp); read back in stats
ATTENTION = ("paged attention: the OpenVINO CPU plugin's PagedAttention kernel over "
             f"{BLOCK_TOKENS}-token KV blocks (SDPAToPagedAttention over the stateful IR)")
_PREFIX = ("off: the prompts are random ids, nothing is shared, and a hit would time less "
           "work than a real prompt costs")


def open_engine(folder: Path, spec, workdir: Path) -> "OpenVinoCBEngine":
    return OpenVinoCBEngine(Path(folder), spec, Path(workdir))


def kv_blocks_for(spec) -> tuple[int, str]:
    """(num_kv_blocks, how it was chosen): the spec's, or max_num_seqs whole requests."""
    if spec.kv_blocks:
        return int(spec.kv_blocks), "the spec's"
    per = math.ceil((spec.prompt_len + spec.output_len) / BLOCK_TOKENS)
    return (spec.max_num_seqs * per,
            f"computed: max_num_seqs {spec.max_num_seqs} x ceil((prompt {spec.prompt_len} + "
            f"output {spec.output_len}) / {BLOCK_TOKENS}) = {spec.max_num_seqs} x {per}")


class _Live:
    __slots__ = ("handle", "new_tokens", "ids")

    def __init__(self, handle, new_tokens: int):
        self.handle, self.new_tokens, self.ids = handle, new_tokens, []


class OpenVinoCBEngine:
    def __init__(self, folder: Path, spec, workdir: Path):
        precision = spec.precision
        if precision not in PRECISIONS:
            raise Refused(f"OpenVINO GenAI runs {', '.join(PRECISIONS)} here, not {precision}")
        if precision == "bf16" and bf16_refusal():
            raise Refused(bf16_refusal())
        t0 = time.perf_counter()
        self.versions = versions(*PACKAGES)
        path, self.exported = _ir(folder, precision, workdir, self.versions)
        import openvino as ov
        import openvino_genai as og

        self._ov, self._og = ov, og
        blocks, blocks_how = kv_blocks_for(spec)
        sc = og.SchedulerConfig()
        sc.max_num_seqs = int(spec.max_num_seqs)
        sc.num_kv_blocks = blocks
        sc.cache_size = 0  # GB; num_kv_blocks sizes the cache
        if spec.max_batched_tokens:
            sc.max_num_batched_tokens = int(spec.max_batched_tokens)
        sc.dynamic_split_fuse = True
        sc.enable_prefix_caching = False
        sc.use_cache_eviction = False
        props = {"INFERENCE_NUM_THREADS": int(spec.intra_threads),
                 "INFERENCE_PRECISION_HINT": _HINT[precision],
                 "KV_CACHE_PRECISION": _KV[precision]}
        try:
            self._pipe = og.ContinuousBatchingPipeline(str(path), sc, "CPU", props)
        except RuntimeError as exc:  # the pipeline's own check of the scheduler's limits
            raise Refused("OpenVINO GenAI's ContinuousBatchingPipeline refused the scheduler "
                          f"settings: {str(exc).strip().splitlines()[-1][:300]}") from exc
        self._pad = int(json.loads((folder / "config.json").read_text())["pad_token_id"])
        self._kv_bytes_token = language_model(spec.model).kv_bytes_per_token(
            2 if _KV[precision] == "bf16" else 4)
        self.build_s = time.perf_counter() - t0
        self.settings = {
            "engine": "OpenVINO GenAI ContinuousBatchingPipeline, CPU",
            "attention": ATTENTION,
            "max_num_seqs": int(sc.max_num_seqs), "num_kv_blocks": int(sc.num_kv_blocks),
            "num_kv_blocks_source": blocks_how, "kv_block_tokens": BLOCK_TOKENS,
            "kv_cache": f"fixed: {int(sc.num_kv_blocks)} blocks x {BLOCK_TOKENS} tokens = "
                        f"{int(sc.num_kv_blocks) * BLOCK_TOKENS} tokens",
            "max_num_batched_tokens": int(sc.max_num_batched_tokens),
            "max_num_batched_tokens_source": "the spec's" if spec.max_batched_tokens
            else "the pipeline's default",
            "dynamic_split_fuse": bool(sc.dynamic_split_fuse),
            "enable_prefix_caching": bool(sc.enable_prefix_caching), "prefix_caching": _PREFIX,
            "use_cache_eviction": bool(sc.use_cache_eviction), "cache_size_gb": sc.cache_size,
            "inference_num_threads": props["INFERENCE_NUM_THREADS"],
            "inference_precision_hint": props["INFERENCE_PRECISION_HINT"],
            "kv_cache_precision": props["KV_CACHE_PRECISION"],
            "decoding": "greedy, ignore_eos, exactly new_tokens tokens",
            "weights": WEIGHT_METHOD.get(precision, precision), "ir": str(path)}
        self._live: dict[int, _Live] = {}
        self._done: dict[int, list[int]] = {}
        self._steps, self._step_ns, self._ignored = 0, 0, 0

    def _config(self, new_tokens: int):
        cfg = self._og.GenerationConfig()
        cfg.max_new_tokens = int(new_tokens)
        cfg.ignore_eos = True
        cfg.set_eos_token_id(self._pad)  # module docstring: a valid id the run ignores
        cfg.do_sample = False
        return cfg

    def add(self, rid: int, prompt: np.ndarray, new_tokens: int) -> None:
        if rid in self._live or rid in self._done:
            raise ValueError(f"request id {rid} was added already")
        ids = np.ascontiguousarray(np.asarray(prompt, dtype=np.int64).reshape(1, -1))
        handle = self._pipe.add_request(int(rid), self._ov.Tensor(ids),
                                        self._config(new_tokens))
        self._live[rid] = _Live(handle, int(new_tokens))

    def step(self, emit) -> None:
        t = time.perf_counter_ns()
        self._pipe.step()
        self._step_ns += time.perf_counter_ns() - t
        self._steps += 1
        status = self._og.GenerationStatus
        for rid, r in list(self._live.items()):
            state = r.handle.get_status()  # before draining: nothing arrives after it
            before = len(r.ids)
            while r.handle.can_read():
                for out in r.handle.read().values():
                    r.ids.extend(int(x) for x in out.generated_ids)
            done = state != status.RUNNING
            if done:
                if state == status.IGNORED:
                    self._ignored += 1
                elif len(r.ids) != r.new_tokens:
                    raise RuntimeError(f"request {rid} ended {state.name} with "
                                       f"{len(r.ids)} of {r.new_tokens} tokens")
                self._done[rid] = r.ids
                del self._live[rid]
            if done or len(r.ids) > before:
                emit(rid, len(r.ids), done)

    def busy(self) -> bool:
        return bool(self._live)

    def tokens(self, rid: int) -> list[int]:
        return list(self._done[rid])

    def stats(self) -> dict:
        m = self._pipe.get_metrics()
        kv = int(m.kv_cache_size_in_bytes)
        blocks = self.settings["num_kv_blocks"]
        return {"steps": self._steps, "step_s": self._step_ns / 1e9, "ignored": self._ignored,
                "max_cache_usage_pct": float(m.max_cache_usage),
                "avg_cache_usage_pct": float(m.avg_cache_usage),
                "cache_size_bytes": int(m.cache_size_in_bytes), "kv_cache_bytes": kv,
                # the block size read back from the allocated cache (0 before the first step)
                "kv_block_tokens_read_back": kv / (blocks * self._kv_bytes_token) if kv else 0,
                "requests": int(m.requests), "scheduled_requests": int(m.scheduled_requests)}

    def close(self) -> None:
        self._live.clear()
        self._pipe = None
