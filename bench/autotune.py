"""The autotuner against an exhaustive search (issue 27's measure), on real runs:

    .venv/bin/python bench/autotune.py [--model mobilenet_v3_small] [--image-size 64]
        [--bound-ms 50] [--runtimes eager channels_last torchscript onnxruntime]
        [--batches 1 2 4 8] [--splits 1x1 2x1 1x2] [--test-s 2] [--probe-s 1]

The space is runtime x max batch x (threads x replicas) of one catalog model: 4 x 4 x 3 =
48 candidates by default on a 2-core machine. Both searches use the same measurements: a
closed-loop probe per candidate (an inference run), then the max-QPS search (LoadGen Server
tests, doubling then bisection to 5 %) from that figure.

- the autotuner: engine.run.search.autotune as `python -m engine tune` runs it (prune beyond 2x,
  confirm the top 3, go on while the last 2 confirmations gained 5 %);
- the exhaustive search: the same code with nothing pruned on the figure and every
  candidate confirmed (top_n = every candidate, prune factor infinite). A candidate whose
  closed-loop p99 at its batch is already over the bound, or whose probe failed, is left
  unconfirmed by both: a Server test queues on top of that latency, so it cannot meet it.

They run A B A: the tuner, the exhaustive search, the tuner again, each into a database of
its own (no search reads another's figures), so drift over the hour falls on both tuner
runs alike. Printed: each run's wall time (worker start-ups, closed loops and LoadGen tests
all counted) and the seconds its LoadGen tests and closed loops measured; the exhaustive
search's max QPS of each tuner pick against the exhaustive best (target: >= 95 %), and the
tuner's wall time against the exhaustive search's (target: <= 30 %).

Nothing is timed in tests. Run it alone on the machine: it is a benchmark.
"""

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.core.policy import MeasurementPolicy  # noqa: E402
from engine.core.limits import logical_cores  # noqa: E402
from engine.run.search.autotune import Candidate  # noqa: E402
from engine.run.search.autotune_runs import stored_autotune  # noqa: E402
from engine.run.jobs.requests import local_runner  # noqa: E402
from engine.run.jobs.serve_request import SERVE_TIMEOUT_MARGIN_S  # noqa: E402
from store.db import open_db  # noqa: E402


def search(kind: str, cands, default, args, folder: Path):
    """One search into a database of its own: (Tuning, wall s, measured s, runs)."""
    db = folder / f"{kind}.duckdb"
    runner = local_runner(timeout_s=args.test_s + SERVE_TIMEOUT_MARGIN_S,
                          memory_cap_bytes=None, db=db)
    policy = MeasurementPolicy(min_time_s=args.probe_s, max_time_s=max(10 * args.probe_s, 5),
                               warmup_max_s=min(1.0, args.probe_s))
    exhaustive = kind.startswith("exhaustive")
    extra = {"top_n": len(cands) + 1, "prune_factor": math.inf} if exhaustive else {}
    t0 = time.perf_counter()
    _, t = stored_autotune(
        cands, default=default, model=args.model, image_size=args.image_size,
        bound_ms=args.bound_ms, objective="qps", margin=0.05, db=db, runner=runner,
        command=f"bench/autotune.py {kind}", probe_policy=policy, serve={
            "min_duration_s": args.test_s, "min_query_count": 459, "samples": 64,
            "seed": 0}, price=lambda c, f, rate: None, max_probes=16, precision=0.05,
        on_stored=lambda rec: print(".", end="", flush=True), **extra)
    wall = time.perf_counter() - t0
    with open_db(db, read_only=True) as con:
        measured, runs = con.execute("SELECT sum(measured_s), count(*) FROM runs").fetchone()
    print()
    return t, wall, measured or 0.0, runs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mobilenet_v3_small")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--bound-ms", type=float, default=50.0)
    ap.add_argument("--runtimes", nargs="+",
                    default=["eager", "channels_last", "torchscript", "onnxruntime"])
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 2, 4, 8])
    ap.add_argument("--splits", nargs="+", default=["1x1", f"{logical_cores()}x1",
                                                     f"1x{logical_cores()}"])
    ap.add_argument("--test-s", type=float, default=2.0)
    ap.add_argument("--probe-s", type=float, default=1.0)
    args = ap.parse_args()
    splits = list(dict.fromkeys(tuple(int(x) for x in s.split("x")) for s in args.splits))
    cands = [Candidate("torch", rt, "fp32", b, t, 0.0, r) for rt in args.runtimes
             for t, r in splits for b in args.batches]
    default = Candidate("torch", "eager", "fp32", 1, logical_cores())
    print(f"{len(cands)} candidates: {args.model} {args.image_size}px, runtimes "
          f"{' '.join(args.runtimes)} x max batch {' '.join(map(str, args.batches))} x threads "
          f"x replicas {' '.join(args.splits)}; p99 bound {args.bound_ms:g} ms; "
          f"{args.test_s:g} s Server tests, {args.probe_s:g} s closed loops")
    folder = Path(tempfile.mkdtemp(prefix="bench-autotune-"))
    out = {}
    for kind in ("tuner-1", "exhaustive", "tuner-2"):
        print(f"{kind}: ", end="", flush=True)
        out[kind] = search(kind, cands, default, args, folder)
        t = out[kind][0]
        print(f"  {kind}: {out[kind][1]:,.0f} s wall, {out[kind][2]:,.0f} s measured, "
              f"{out[kind][3]} runs, {len(t.confirmed)} confirmed; winner "
              f"{t.winner.candidate.label() if t.winner else 'none'}"
              + (f" at {t.winner.qps:,.1f} QPS" if t.winner else ""))
    exh = out["exhaustive"][0]
    by = {x.candidate: x.qps for x in exh.confirmed}
    best = max((q for q in by.values() if q), default=None)
    print(f"\nexhaustive best: {exh.winner.candidate.label() if exh.winner else 'none'} "
          f"at {best or 0:,.1f} QPS under {args.bound_ms:g} ms")
    ratios, times = [], []
    for kind in ("tuner-1", "tuner-2"):
        t, wall, measured, _ = out[kind]
        pick = t.winner.candidate if t.winner else None
        q = by.get(pick) if pick else None
        ratio = q / best if q and best else None
        ratios.append(ratio)
        times.append(wall / out["exhaustive"][1])
        print(f"{kind}: picked {pick.label() if pick else 'none'}: the exhaustive search "
              f"measured it at {q or 0:,.1f} QPS = "
              f"{ratio:.1%} of the best" if ratio is not None else
              f"{kind}: its pick has no exhaustive figure")
        print(f"  its own figure {t.winner.qps if t.winner else 0:,.1f} QPS "
              f"({(t.winner.qps / best) if t.winner and best else 0:.1%} of the exhaustive "
              f"best); wall {wall:,.0f} s = {wall / out['exhaustive'][1]:.1%} of the "
              f"exhaustive search's {out['exhaustive'][1]:,.0f} s; measured "
              f"{measured / out['exhaustive'][2]:.1%} of its")
    ok = [r for r in ratios if r is not None]
    print(f"\nquality: {', '.join(f'{r:.1%}' for r in ok)} of the exhaustive best "
          f"(target >= 95 %); time: {', '.join(f'{x:.1%}' for x in times)} of the exhaustive "
          f"search's wall time (target <= 30 %); median time ratio "
          f"{statistics.median(times):.1%}")


if __name__ == "__main__":
    main()
