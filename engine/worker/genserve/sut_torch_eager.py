"""The baseline a serving tuner has to beat: PyTorch eager, one request at a time.

Requests wait in arrival order; each step() runs the whole of the oldest one's transformers
generate (the generation runtime's model load, gen_torch_eager.EagerSession: dynamic KV
cache, greedy, EOS ignored, inference_mode), so a request that arrives meanwhile waits for
every token of the one before it. A streamer emits each token as generate makes it visible:
generate calls put() first with the prompt (skipped), then once per step with the chosen
token, synchronously, so emit's time is the token's.

Threads: torch's intra-op pool set to the spec's intra threads where the process left it
otherwise, and read back into `settings` (the inter-op pool is the process's, read back).
Imports torch and transformers: worker side.
"""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path

import numpy as np
import torch
from transformers.generation.streamers import BaseStreamer

from engine.worker.generation.common import bf16_refusal
from engine.worker.generation.gen_torch_eager import DTYPES, EagerSession
from engine.worker.generation.session import Refused

__all__ = ["open_engine", "EagerEngine", "Emitter"]


class Emitter(BaseStreamer):
    """emit(rid, count, count == new_tokens) per generated step (the prompt's put skipped);
    the ids kept, and stored in `done` before the last emit, so a caller may read them in
    it."""

    def __init__(self, rid: int, new_tokens: int, emit, done: dict):
        self.rid, self.new_tokens, self.emit, self.done = rid, new_tokens, emit, done
        self.calls = 0
        self.ids: list[int] = []

    def put(self, value):
        if self.calls:
            self.ids.extend(int(x) for x in value.reshape(-1).tolist())
            last = len(self.ids) == self.new_tokens
            if last:
                self.done[self.rid] = list(self.ids)
            self.emit(self.rid, len(self.ids), last)
        self.calls += 1

    def end(self):
        pass


def open_engine(folder: Path, spec, workdir: Path) -> "EagerEngine":
    return EagerEngine(Path(folder), spec)


class EagerEngine:
    def __init__(self, folder: Path, spec):
        if spec.precision not in DTYPES:
            raise Refused(f"PyTorch eager runs {', '.join(DTYPES)} here, not {spec.precision}")
        if spec.precision == "bf16" and bf16_refusal():
            raise Refused(bf16_refusal())
        if torch.get_num_threads() != int(spec.intra_threads):
            torch.set_num_threads(int(spec.intra_threads))
        session = EagerSession(folder, spec)
        self._model = session.model
        self.build_s = session.build_s
        self.versions = dict(session.versions)
        self.settings = {
            "engine": "PyTorch eager, transformers generate, one request at a time (FIFO)",
            "attention": f"{self._model.config._attn_implementation} (transformers' "
                         "attention function over the one request's dynamic cache)",
            "kv_cache": "transformers' dynamic cache, one request's",
            "max_num_seqs": 1, "dtype": str(DTYPES[spec.precision]).replace("torch.", ""),
            "torch_intra_op": torch.get_num_threads(),
            "torch_inter_op": torch.get_num_interop_threads(),
            "decoding": "greedy, EOS ignored, exactly new_tokens tokens"}
        self._queue: deque = deque()
        self._done: dict[int, list[int]] = {}
        self._steps, self._step_ns = 0, 0

    def add(self, rid: int, prompt: np.ndarray, new_tokens: int) -> None:
        if rid in self._done or any(q[0] == rid for q in self._queue):
            raise ValueError(f"request id {rid} was added already")
        ids = np.ascontiguousarray(np.asarray(prompt, dtype=np.int64).reshape(1, -1))
        self._queue.append((rid, ids, int(new_tokens)))

    def step(self, emit) -> None:
        if not self._queue:
            return
        rid, ids, n = self._queue.popleft()
        x = torch.from_numpy(ids)
        streamer = Emitter(rid, n, emit, self._done)
        t = time.perf_counter_ns()
        with torch.inference_mode():
            out = self._model.generate(x, attention_mask=torch.ones_like(x), do_sample=False,
                                       max_new_tokens=n, pad_token_id=0, streamer=streamer)
        self._step_ns += time.perf_counter_ns() - t
        self._steps += 1
        got = out[0, x.shape[1]:].tolist()
        if got != streamer.ids or len(got) != n:
            raise RuntimeError(f"generate gave {len(got)} tokens and streamed "
                               f"{len(streamer.ids)} for request {rid}, asked for {n}")

    def busy(self) -> bool:
        return bool(self._queue)

    def tokens(self, rid: int) -> list[int]:
        return list(self._done[rid])

    def stats(self) -> dict:
        return {"steps": self._steps, "step_s": self._step_ns / 1e9, "ignored": 0,
                "queued": len(self._queue)}

    def close(self) -> None:
        self._queue.clear()
        self._model = None
