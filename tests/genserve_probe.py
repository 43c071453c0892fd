"""Runs the serving engines (engine/worker/genserve/sut_*.py) for real in a subprocess of
its own and prints what they gave as one JSON line, so the test process imports no framework.

    python -m tests.genserve_probe FOLDER WORKDIR

Three requests of different prompts and lengths are added at once to each engine, which is
then stepped until idle, every emit kept in order; the reference is PyTorch eager fp32
greedy at batch 1 on each prompt (engine/worker/generation/gen_torch_eager.py, the call
every generation runtime is checked on). A second pass with a one-block cache (32 tokens)
gives each continuous-batching engine a request that fits and one that never can.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Spec", "REQUESTS", "TIGHT", "ENGINES"]

ENGINES = ("sut_torch_eager", "sut_openvino_cb", "sut_transformers_cb")
# (rid, prompt length, new tokens): the prompts are rows of one seeded draw, cut
REQUESTS = ((11, 16, 8), (12, 9, 5), (13, 23, 12))
TIGHT = ((21, 16, 8), (22, 40, 8))  # 24 tokens fit one 32-token block; 48 never do


@dataclass(frozen=True)
class Spec:
    """The fields an engine reads of the genserve spec."""
    model: str = "tiny_llama"
    precision: str = "fp32"
    intra_threads: int = 1
    seed: int = 0
    prompt_len: int = 23
    output_len: int = 12
    max_num_seqs: int = 4
    kv_blocks: int = 0
    max_batched_tokens: int = 0


def _prompts(vocab: int) -> dict[int, np.ndarray]:
    from engine.worker.generation.session import prompts

    rows = prompts(0, 5, 40, vocab)
    return {rid: rows[i, :p] for i, (rid, p, _) in enumerate(REQUESTS + TIGHT)}


def _drive(engine, requests, ids) -> dict:
    emits = []
    for rid, _, n in requests:
        engine.add(rid, ids[rid], n)
    while engine.busy():
        engine.step(lambda rid, k, done: emits.append([rid, k, done]))
    tokens = {str(rid): engine.tokens(rid) for rid, _, _ in requests
              if any(e[0] == rid and e[2] for e in emits)}
    return {"emits": emits, "tokens": tokens, "stats": engine.stats()}


def main(folder: Path, workdir: Path) -> dict:
    import torch

    from engine.scenarios.generation.models import language_model
    from engine.worker.generation.gen_torch_eager import EagerSession

    torch.set_num_threads(1)
    ids = _prompts(language_model("tiny_llama").vocab_size)
    ref = EagerSession(folder, Spec())
    out = {"reference": {str(rid): ref.generate(ids[rid][None, :], n).tokens[0].tolist()
                         for rid, _, n in REQUESTS + TIGHT[:1]}}
    for name in ENGINES:
        mod = importlib.import_module(f"engine.worker.genserve.{name}")
        engine = mod.open_engine(folder, Spec(), workdir)
        got = _drive(engine, REQUESTS, ids)
        engine.close()
        got["settings"] = engine.settings
        if name != "sut_torch_eager":
            tight = mod.open_engine(folder, Spec(kv_blocks=1), workdir)
            got["tight"] = _drive(tight, TIGHT, ids)
            tight.close()
        out[name] = got
    return out


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print("PROBE " + json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2])), default=str))
