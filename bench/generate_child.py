"""The child process of bench/generate.py: one runtime's session, opened through the
product's own module (engine/worker/generation/gen_<runtime>.py, as body.py opens it, with
body.workdir() so exports and compiles are cached where the product caches them), serving
one JSON command a line on stdin with one REPLY line on stdout:

- open {spec, folder}: open_session, or the runtime's refusal;
- gen {batch, prompt, new, warmup, reps, untimed?, interleave?, put_cost?}: the calls'
  readings (start, E2E, per-token ns since the start, a one-call runtime's TTFT, the first
  row's first tokens, OpenVINO GenAI's last_metrics). `untimed`: PyTorch eager's generate
  without its streamer (the same call as EagerSession.generate otherwise); `interleave`:
  timed and untimed calls alternated in this one process; `put_cost`: the streamer's put()
  timed in a loop;
- quit.

Started by bench/generate.py with the worker's thread environment; the thread pools are
set by engine.worker.backends.configure_threads before any op, as in a worker.

    python bench/generate_child.py FRAMEWORK INTRA INTER
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

__all__ = ["REPLY", "AGREE", "main"]

REPLY = "@@generate-bench "  # a reply line; anything else on stdout is a library's
AGREE = 32  # tokens kept per call for the agreement check (agreement.AGREE_TOKENS' count)


def main(framework: str, intra: int, inter: int) -> None:
    from engine.worker.backends import configure_threads

    configure_threads(framework, intra, inter)
    state: dict = {}
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            out = _serve(cmd, state)
        except Exception as exc:  # a failure is data: the parent prints it as the row
            out = {"error": f"{type(exc).__name__}: {exc}"[:600]}
        print(REPLY + json.dumps(out), flush=True)
        if cmd["op"] == "quit":
            return


def _serve(cmd: dict, state: dict) -> dict:
    from engine.scenarios.generation.models import language_model
    from engine.scenarios.generation.runtimes import gen_row
    from engine.scenarios.generation.spec import GenSpec
    from engine.worker.generation.body import workdir
    from engine.worker.generation.session import Refused, prompts

    if cmd["op"] == "quit":
        return {}
    if cmd["op"] == "open":
        spec = GenSpec.from_dict(cmd["spec"])
        t = time.perf_counter()
        try:
            module = importlib.import_module(gen_row(spec.runtime).path)
            s = module.open_session(Path(cmd["folder"]), spec, workdir())
        except Refused as exc:
            return {"refused": str(exc)}
        state["s"], state["spec"] = s, spec
        return {"open_s": time.perf_counter() - t, "build_s": s.build_s}
    s, spec = state["s"], state["spec"]
    n = cmd["new"]
    prompt = prompts(spec.seed, cmd["batch"], cmd["prompt"],
                     language_model(spec.model).vocab_size)

    def timed():
        return s.generate(prompt, n)

    def untimed():
        return _untimed(s, prompt, n)

    legs = ([timed, untimed] if cmd.get("interleave") else
            [untimed] if cmd.get("untimed") else [timed])
    t = time.perf_counter()
    for _ in range(cmd["warmup"]):
        for gen in legs:
            gen()
    warm_s = time.perf_counter() - t
    calls: list = [[] for _ in legs]
    for _ in range(cmd["reps"]):
        for i, gen in enumerate(legs):
            calls[i].append(_reading(gen(), s))
    out = {"warm_s": warm_s, "build_s": s.build_s, "calls": calls[0]}
    if cmd.get("interleave"):
        out["untimed_calls"] = calls[1]
    if cmd.get("put_cost"):
        out["put_ns"] = _put_cost()
    return out


def _reading(r, session) -> dict:
    return {"start": r.start_ns, "e2e_ns": r.end_ns - r.start_ns,
            "token_ns": [x - r.start_ns for x in r.token_ns], "ttft_ns": r.ttft_ns,
            "tokens": r.tokens[0, :AGREE].tolist(),
            "metrics": dict(getattr(session, "last_metrics", {}) or {})}


def _untimed(session, prompt, n):
    """EagerSession.generate (gen_torch_eager.py) without its streamer: the same call."""
    import numpy as np
    import torch

    from engine.worker.generation.session import Timed

    ids = torch.from_numpy(np.ascontiguousarray(prompt))
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        kwargs = session._kwargs(*ids.shape, n)
        start = time.perf_counter_ns()
        out = session.model.generate(ids, attention_mask=mask, do_sample=False,
                                     max_new_tokens=n, pad_token_id=0, **kwargs)
        end = time.perf_counter_ns()
    return Timed(out[:, ids.shape[1]:].numpy(), start, end, (), no_steps="untimed leg")


def _put_cost(n: int = 200_000) -> float:
    """ns per Stamps.put() on a step's token tensor (what the streamer adds per step)."""
    import torch

    from engine.worker.generation.gen_torch_eager import Stamps

    st, x = Stamps(), torch.zeros(1, dtype=torch.long)
    st.put(x)
    t = time.perf_counter_ns()
    for _ in range(n):  # generate hands it `next_tokens.cpu()`: that call counted too
        st.put(x.cpu())
    return (time.perf_counter_ns() - t) / n


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
