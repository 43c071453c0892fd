"""The model folder and the reference tokens every generation run is checked against, made
once, by a torch process of their own.

`python -m engine.worker.generation.prepare --model M --seed S --shape BxPxN ...` builds the
seeded folder (engine/worker/generation/models.py) and, per shape, the reference: PyTorch
eager, fp32, greedy, on session.prompts(seed, B, P, vocab), its first min(N, AGREE_TOKENS)
tokens (greedy decoding with the end-of-sequence token ignored makes the first K tokens
of an N-token call those of a K-token call, so one file serves every N >= K), saved as
.npy beside the folder. Each file is written under a temporary name and renamed, so a
process killed mid-way never leaves half of one.

A worker calls `ensure` before opening a session: what is missing is made through that
subprocess, so a TensorFlow worker, which must never import torch, gets both too. The paths
are computed here without torch.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from engine.scenarios.generation.agreement import AGREE_TOKENS
from engine.scenarios.generation.models import config_digest, language_model
from engine.worker.generation.models import model_root

__all__ = ["folder_path", "reference_path", "ensure", "main", "PREPARE_TIMEOUT_S"]

# Building the 1 B model's 5 GB folder and its first references takes minutes
PREPARE_TIMEOUT_S = 1800.0


def folder_path(name: str, seed: int, root: Path | None = None) -> Path:
    """Where models.model_folder puts (or found) the folder of `name` built with `seed`."""
    return (root or model_root()) / f"{name}-{config_digest(language_model(name), seed)}"


def reference_path(folder: Path, seed: int, batch: int, prompt_len: int,
                   output_len: int) -> Path:
    k = min(output_len, AGREE_TOKENS)
    return folder.parent / f"{folder.name}.ref-s{seed}-b{batch}-p{prompt_len}-n{k}.npy"


def ensure(name: str, seed: int, shapes, *, root: Path | None = None,
           timeout_s: float = PREPARE_TIMEOUT_S) -> tuple[Path, dict]:
    """(folder, {(B, P, N): reference path}) for these shapes, made by the prepare
    subprocess where missing; RuntimeError with its stderr's tail when it fails."""
    folder = folder_path(name, seed, root)
    refs = {s: reference_path(folder, seed, *s) for s in shapes}
    missing = [s for s, p in refs.items() if not p.exists()]
    if missing or not (folder / "config.json").exists():
        argv = [sys.executable, "-m", "engine.worker.generation.prepare", "--model", name,
                "--seed", str(seed), *(["--root", str(root)] if root else []),
                "--shape", *("x".join(map(str, s)) for s in (missing or list(refs)))]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                              env=env, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            tail = " ".join(done.stderr.strip().splitlines()[-3:])[-600:]
            raise RuntimeError(f"preparing {name} (seed {seed}) failed with exit "
                               f"{done.returncode}: {tail}")
    return folder, refs


def _shape(text: str) -> tuple[int, int, int]:
    b, p, n = (int(x) for x in text.split("x"))
    return b, p, n


def _save(path: Path, array) -> None:
    import numpy as np

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".npy", dir=path.parent)
    os.close(fd)
    try:
        np.save(tmp, array)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.worker.generation.prepare")
    ap.add_argument("--model", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--root", default=None)
    ap.add_argument("--shape", nargs="*", default=[], metavar="BxPxN")
    args = ap.parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM

    from engine.worker.generation.models import model_folder
    from engine.worker.generation.session import prompts

    root = Path(args.root) if args.root else None
    folder = model_folder(args.model, args.seed, root)
    m = language_model(args.model)
    model = None
    for b, p, n in map(_shape, args.shape):
        path = reference_path(folder, args.seed, b, p, n)
        if path.exists():
            continue
        if model is None:
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
            model.generation_config.eos_token_id = None
        ids = torch.from_numpy(prompts(args.seed, b, p, m.vocab_size))
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=min(n, AGREE_TOKENS), pad_token_id=0)
        _save(path, out[:, p:].numpy())
    print(json.dumps({"folder": str(folder)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
