"""torch.compile generation: the model's forward compiled by inductor (mode "default",
static shapes) and a static KV cache of prompt + output positions, driven by the same
transformers generate and the same per-token streamer as eager (gen_torch_eager.py).

transformers compiles a static-cache forward by itself only on CUDA/XPU; on the CPU we
compile model.forward explicitly and pass disable_compile=True so generate adds nothing of
its own. "default", not CompileConfig's "reduce-overhead": that mode's gain is CUDA graphs.
Static shapes: a new (B, P, N) compiles three graphs over its first two calls (measured:
the prefill on a fresh cache, the decode step, then the prefill again once the cache's
`is_initialized` guard has flipped; 7.4 s and 2.5 s for the tiny model with a warm
inductor cache, then 0.02 s a call), so a new shape's first call runs generate twice and
adds both to build_s, kept apart from every timed figure. Inductor's cache is
TORCHINDUCTOR_CACHE_DIR (the runner sets it), so a later worker reuses the kernels.

One static cache per (batch, prompt + output), reset before each call outside the timed
span: a fresh one would put its allocation in every call's TTFT.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from transformers import StaticCache

from engine.worker.generation.gen_torch_eager import EagerSession
from engine.worker.generation.session import Timed

__all__ = ["open_session", "CompiledSession"]


class CompiledSession(EagerSession):
    def __init__(self, folder: Path, spec):
        super().__init__(folder, spec)
        t = time.perf_counter()
        self.model.forward = torch.compile(self.model.forward, mode="default", dynamic=False)
        self.build_s += time.perf_counter() - t
        self.caches: dict = {}  # (batch, max_cache_len) -> StaticCache
        self.compiled: set = set()  # (batch, prompt_len, new tokens) compiled by a first call

    def _kwargs(self, batch: int, prompt_len: int, new_tokens: int) -> dict:
        key = (batch, prompt_len + new_tokens)
        cache = self.caches.get(key)
        if cache is None:
            cache = self.caches[key] = StaticCache(config=self.model.config,
                                                   max_cache_len=prompt_len + new_tokens)
        else:
            cache.reset()
        return {"past_key_values": cache, "disable_compile": True}

    def generate(self, prompt: np.ndarray, new_tokens: int) -> Timed:
        shape = (*prompt.shape, new_tokens)
        if shape in self.compiled:
            return super().generate(prompt, new_tokens)
        for _ in range(2):  # both calls compile (module docstring)
            timed = super().generate(prompt, new_tokens)
            self.build_s += (timed.end_ns - timed.start_ns) / 1e9
        self.compiled.add(shape)
        return timed


def open_session(folder: Path, spec, workdir: Path) -> CompiledSession:
    return CompiledSession(folder, spec)
