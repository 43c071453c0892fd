"""PyTorch eager generation: transformers' generate with its dynamic KV cache, greedy, the
end-of-sequence token ignored (the folder's generation config has none), under
inference_mode. The reference runtime: its fp32 tokens are what every runtime is checked on
(engine/worker/generation/prepare.py makes them with the same call).

Per-token readings: a BaseStreamer whose put() takes time.perf_counter_ns(). generate
calls put() first with the whole prompt (skipped), then once per step with that step's
tokens for every row, synchronously on the CPU, after the token is chosen: the time the
token became visible, which is what TTFT means (optimum-benchmark's LogitsProcessor fires
before the choice).
"""

from __future__ import annotations

import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM
from transformers.generation.streamers import BaseStreamer

from engine.worker.generation.session import Timed

__all__ = ["open_session", "EagerSession", "Stamps"]

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


class Stamps(BaseStreamer):
    """A reading per generated step (the prompt's put skipped)."""

    def __init__(self):
        self.calls = 0
        self.ns: list[int] = []

    def put(self, value):
        if self.calls:
            self.ns.append(time.perf_counter_ns())
        self.calls += 1

    def end(self):
        pass


class EagerSession:
    """A model loaded from the folder at the spec's precision; generate() as the contract
    says (engine/worker/generation/session.py)."""

    def __init__(self, folder: Path, spec):
        t = time.perf_counter()
        self.model = AutoModelForCausalLM.from_pretrained(
            folder, dtype=DTYPES[spec.precision]).eval()
        self.model.generation_config.eos_token_id = None
        self.build_s = time.perf_counter() - t
        self.versions = {"torch": torch.__version__, "transformers": version("transformers")}

    def _kwargs(self, batch: int, prompt_len: int, new_tokens: int) -> dict:
        return {}

    def generate(self, prompt: np.ndarray, new_tokens: int) -> Timed:
        ids = torch.from_numpy(np.ascontiguousarray(prompt))
        mask = torch.ones_like(ids)
        stamps = Stamps()
        with torch.inference_mode():
            # before the start: a static cache's reset (gen_torch_compile.py) is not the call's
            kwargs = self._kwargs(*ids.shape, new_tokens)
            start = time.perf_counter_ns()
            out = self.model.generate(ids, attention_mask=mask, do_sample=False,
                                      max_new_tokens=new_tokens, pad_token_id=0,
                                      streamer=stamps, **kwargs)
            end = time.perf_counter_ns()
        return Timed(out[:, ids.shape[1]:].numpy(), start, end, tuple(stamps.ns))


def open_session(folder: Path, spec, workdir: Path) -> EagerSession:
    return EagerSession(folder, spec)
