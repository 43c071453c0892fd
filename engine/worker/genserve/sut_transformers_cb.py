"""transformers' continuous batching on the CPU (`model.init_continuous_batching`), stepped
by the engine loop's own thread.

The manager transformers builds switches the model's attention to `paged|sdpa`, which is
not a paged kernel: each step gathers the batch's keys and values from the block cache
through an index, then runs one dense scaled_dot_product_attention over the packed batch
with an explicit mask of max_batch_tokens x (cache tokens + max_batch_tokens), so its cost
grows with the batch squared (transformers' integrations/sdpa_paged.py). `settings` says so.

Stepping: the manager's public loop runs in a thread of its own and hands outputs over a
queue; here the same steps run synchronously instead, as its loop body does
(batch_processor.prepare_next_batch, the manager's _generation_step, update_batch), so one
step() is one scheduling step and its emits follow it at once, on the loop's thread, like
the OpenVINO engine's. These are transformers internals (5.5.4): the genserve tests run
this engine on the pinned version.

Limits, every one set explicitly (left None, transformers sizes the cache from the
machine's total RAM, capped at 4096 x 256 tokens):
- block_size 32 tokens, the OpenVINO CPU engine's block, so the two caches compare;
- num_blocks: the spec's kv_blocks, or max_num_seqs whole requests of prompt_len +
  output_len tokens in whole blocks, over 0.8: the FIFO scheduler admits no new prefill
  while under 20 % of the blocks are free (its safety margin), so with exactly enough
  blocks the last of 8 requests waited for the others to finish (measured on smollm2_135m,
  128 + 64 tokens: 128 steps instead of 64); said in settings;
- max_batch_tokens: the spec's max_batched_tokens, or 256 (OpenVINO's default);
- max_num_seqs: transformers has no such limit (its batch is bounded by the token budget
  and the free blocks only), so this engine holds requests past max_num_seqs in its own
  arrival-order queue and hands one over when a running one finishes;
- allow_block_sharing off (prompts are random ids: a shared prefix would time less work),
  the FIFO scheduler (decodes first, new prefills held while under 20 % of blocks are free).
A request that can never fit the cache (prompt + new tokens over num_blocks blocks) is not
handed over: it is emitted done with no tokens at the next step and counted "ignored", as
OpenVINO drops one. When a decode needs a block none is free for, transformers re-queues a
running request with its tokens as a longer prompt (recomputed later): stats()["preempted"]
counts those.

Greedy, EOS disabled (-1: the folder has none), exactly new_tokens tokens. Imports torch and
transformers: worker side.
"""

from __future__ import annotations

import math
import queue
import time
from collections import deque
from pathlib import Path

import numpy as np
import torch

from engine.worker.generation.common import bf16_refusal
from engine.worker.generation.gen_torch_eager import DTYPES, EagerSession
from engine.worker.generation.session import Refused

__all__ = ["open_engine", "TransformersCBEngine", "BLOCK_TOKENS", "ATTENTION",
           "DEFAULT_BATCH_TOKENS"]

BLOCK_TOKENS = 32
DEFAULT_BATCH_TOKENS = 256
SAFETY_MARGIN = 0.2  # FIFOScheduler's default, checked against the built scheduler
ATTENTION = ("paged|sdpa: keys and values gathered from 32-token blocks, then one dense "
             "masked scaled_dot_product_attention over the packed batch (not a paged kernel: "
             "cost grows with the batch squared)")
# Steps in a row that schedule nothing while requests wait: only a cache that can hold none
# of them does that, which add() refuses beforehand; past this the engine stops, saying so
_IDLE_STEPS = 1000


def open_engine(folder: Path, spec, workdir: Path) -> "TransformersCBEngine":
    return TransformersCBEngine(Path(folder), spec)


def blocks_for(spec) -> tuple[int, str]:
    """(num_blocks, how it was chosen): the spec's, or max_num_seqs whole requests with the
    scheduler's safety margin free on top (module docstring)."""
    if spec.kv_blocks:
        return int(spec.kv_blocks), "the spec's"
    per = math.ceil((spec.prompt_len + spec.output_len) / BLOCK_TOKENS)
    whole = spec.max_num_seqs * per
    blocks = math.ceil(whole / (1 - SAFETY_MARGIN))
    return (blocks,
            f"computed: max_num_seqs {spec.max_num_seqs} x ceil((prompt {spec.prompt_len} + "
            f"output {spec.output_len}) / {BLOCK_TOKENS}) = {whole}, / (1 - the FIFO "
            f"scheduler's {SAFETY_MARGIN:g} safety margin) = {blocks}")


class TransformersCBEngine:
    def __init__(self, folder: Path, spec):
        if spec.precision not in DTYPES:
            raise Refused(f"transformers runs {', '.join(DTYPES)} here, not {spec.precision}")
        if spec.precision == "bf16" and bf16_refusal():
            raise Refused(bf16_refusal())
        from transformers.generation.configuration_utils import ContinuousBatchingConfig

        if torch.get_num_threads() != int(spec.intra_threads):
            torch.set_num_threads(int(spec.intra_threads))
        t0 = time.perf_counter()
        session = EagerSession(folder, spec)
        model = session.model
        blocks, blocks_how = blocks_for(spec)
        cfg = ContinuousBatchingConfig(
            block_size=BLOCK_TOKENS, num_blocks=blocks,
            max_batch_tokens=int(spec.max_batched_tokens or DEFAULT_BATCH_TOKENS),
            allow_block_sharing=False, use_async_batching=False, use_cuda_graph=False,
            scheduler_type="fifo")
        gen = model.generation_config
        gen.eos_token_id = -1  # what the manager sets itself when none is given (disabled)
        gen.do_sample = False
        self._mgr = model.init_continuous_batching(generation_config=gen,
                                                   continuous_batching_config=cfg)
        self._bp = self._mgr._create_batch_processor()
        self._mgr.batch_processor = self._bp
        if getattr(self._bp.scheduler, "safety_margin", None) != SAFETY_MARGIN:
            raise RuntimeError("transformers' FIFO scheduler no longer has a safety margin of "
                               f"{SAFETY_MARGIN}: the computed num_blocks assume it")
        self._preempted = 0
        reset = self._bp.soft_reset_one_request

        def counted_reset():
            self._preempted += 1
            reset()

        self._bp.soft_reset_one_request = counted_reset
        self.build_s = time.perf_counter() - t0
        self.versions = dict(session.versions)
        cache = self._bp.cache
        self._kv_bytes = sum(t.numel() * t.element_size()
                             for t in (*cache.key_cache, *cache.value_cache))
        self._num_blocks, self._block = int(cache.num_blocks), int(cache.block_size)
        self._max_seqs = int(spec.max_num_seqs)
        self.settings = {
            "engine": "transformers continuous batching (init_continuous_batching), CPU, "
                      "stepped synchronously",
            "attention": f"{model.config._attn_implementation}: " + ATTENTION.split(": ", 1)[1],
            "max_num_seqs": self._max_seqs,
            "max_num_seqs_how": "held by this engine: transformers has no such limit",
            "num_kv_blocks": self._num_blocks, "num_kv_blocks_source": blocks_how,
            "kv_block_tokens": self._block,
            "kv_cache": f"fixed: {self._num_blocks} blocks x {self._block} tokens = "
                        f"{self._num_blocks * self._block} tokens",
            "max_num_batched_tokens": int(cache.max_batch_tokens),
            "max_num_batched_tokens_source": "the spec's" if spec.max_batched_tokens
            else f"this engine's default ({DEFAULT_BATCH_TOKENS}, OpenVINO's)",
            "allow_block_sharing": bool(cache.allow_block_sharing),
            "prefix_caching": "off: the prompts are random ids, nothing is shared",
            "scheduler": cfg.scheduler_type,
            "scheduler_safety_margin": float(self._bp.scheduler.safety_margin),
            "use_cuda_graph": bool(self._mgr.use_cuda_graph),
            "use_async_batching": bool(self._mgr.use_async_batching),
            "dtype": str(DTYPES[spec.precision]).replace("torch.", ""),
            "torch_intra_op": torch.get_num_threads(),
            "torch_inter_op": torch.get_num_interop_threads(),
            "decoding": "greedy, EOS disabled (-1), exactly new_tokens tokens"}
        self._waiting: deque = deque()  # (rid, ids, n) held past max_num_seqs
        self._running: dict[str, tuple[int, int]] = {}  # manager id -> (rid, new_tokens)
        self._counts: dict[int, int] = {}
        self._refused: list[int] = []  # never fit the cache: emitted done at the next step
        self._done: dict[int, list[int]] = {}
        self._steps, self._step_ns, self._ignored, self._idle = 0, 0, 0, 0
        self._used_max, self._used_sum = 0, 0  # blocks in use after each step
        from transformers.generation.continuous_batching.requests import RequestStatus

        self._status = RequestStatus

    def add(self, rid: int, prompt: np.ndarray, new_tokens: int) -> None:
        if rid in self._counts:
            raise ValueError(f"request id {rid} was added already")
        ids = [int(x) for x in np.asarray(prompt, dtype=np.int64).reshape(-1)]
        self._counts[rid] = 0
        if math.ceil((len(ids) + new_tokens) / self._block) > self._num_blocks:
            self._refused.append(rid)
            return
        self._waiting.append((rid, ids, int(new_tokens)))
        self._hand_over()

    def _hand_over(self) -> None:
        while self._waiting and len(self._running) < self._max_seqs:
            rid, ids, n = self._waiting.popleft()
            key = f"r{rid}"
            self._mgr.add_request(ids, request_id=key, max_new_tokens=n, streaming=True,
                                  eos_token_id=-1)
            self._running[key] = (rid, n)

    def step(self, emit) -> None:
        for rid in self._refused:
            self._ignored += 1
            self._done[rid] = []
            emit(rid, 0, True)
        self._refused.clear()
        if not self._running:
            return
        t = time.perf_counter_ns()
        with torch.inference_mode():
            ran = self._bp.prepare_next_batch()
            if ran:
                self._mgr._generation_step()
                self._bp.update_batch()
        self._step_ns += time.perf_counter_ns() - t
        self._steps += 1
        used = self._num_blocks - self._bp.cache.get_num_free_blocks()
        self._used_max, self._used_sum = max(self._used_max, used), self._used_sum + used
        self._idle = 0 if ran else self._idle + 1
        if self._idle > _IDLE_STEPS:
            raise RuntimeError(f"transformers scheduled nothing for {_IDLE_STEPS} steps with "
                               f"{len(self._running)} requests running")
        self._deliver(emit)
        self._hand_over()

    def _deliver(self, emit) -> None:
        status = self._status
        out = self._mgr.output_router.output_queue
        while True:
            try:
                res = out.get_nowait()
            except queue.Empty:
                return
            rid, n = self._running[res.request_id]
            tokens = [int(x) for x in res.generated_tokens]
            if res.status == status.FAILED:
                raise RuntimeError(f"transformers failed request {rid}: {res.error}")
            done = res.status == status.FINISHED
            if done:
                if len(tokens) != n:
                    raise RuntimeError(f"request {rid} finished with {len(tokens)} of {n} "
                                       "tokens")
                self._done[rid] = tokens
                del self._running[res.request_id]
            if done or len(tokens) > self._counts[rid]:
                self._counts[rid] = len(tokens)
                emit(rid, len(tokens), done)

    def busy(self) -> bool:
        return bool(self._running or self._waiting or self._refused)

    def tokens(self, rid: int) -> list[int]:
        return list(self._done[rid])

    def stats(self) -> dict:
        pct = 100.0 / self._num_blocks
        return {"steps": self._steps, "step_s": self._step_ns / 1e9, "ignored": self._ignored,
                "preempted": self._preempted, "kv_cache_bytes": self._kv_bytes,
                "max_cache_usage_pct": self._used_max * pct,
                "avg_cache_usage_pct": self._used_sum * pct / self._steps if self._steps else 0.0,
                "waiting": len(self._waiting), "running": len(self._running)}

    def close(self) -> None:
        self._waiting.clear()
        self._running.clear()
        self._bp = self._mgr = None
