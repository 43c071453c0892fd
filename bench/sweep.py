"""Where a sweep's wall time goes: measuring vs importing, building and spawning.

Runs efficientnet_b0 x {torch, tensorflow} x batch {1, 8, 32} x threads {1, 2} twice, one
after the other: grouped (one worker per framework/threads group, the default) and one
process per run. "Measuring" is the timed iterations (measured_s); warm-up, first forward,
load, FLOPs counting, imports and spawning are the rest. Target: >= 75 % grouped.
Results go to a temporary database; nothing touches ./data.

    .venv/bin/python bench/sweep.py [--model efficientnet_b0] [--min-time 2]
    .venv/bin/python bench/sweep.py --starts [--pairs 2] [--rounds 3] [--fork torch,tensorflow]
        (issue 39: every worker spawned against the named frameworks' forked, on the
        default sweep, A B A B)
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.run.process.runner import Runner  # noqa: E402
from engine.core import MeasurementPolicy  # noqa: E402
from engine.scenarios.inference.expand import expand_sweep
from engine.run.jobs.sweep import run_sweep  # noqa: E402


def run(specs, db, process_per_run):
    def show(rec):
        print(f"    {rec.framework:10} b{rec.batch_size:<3} t{rec.intra_threads}: {rec.status:7} "
              f"p50 {rec.median_ms or 0:9.2f} ms  measured {rec.measured_s or 0:5.1f} s  "
              f"warm-up {rec.warmup_s or 0:4.1f} s  load {rec.load_s or 0:4.1f} s", flush=True)

    t = time.monotonic()
    records = run_sweep(specs, db=db, rounds=1, seed=0, command="bench/sweep.py",
                        runner=Runner(process_per_run=process_per_run), on_stored=show)
    wall = time.monotonic() - t
    measured = sum(r.measured_s or 0 for r in records)
    warm = sum((r.warmup_s or 0) + (r.first_forward_s or 0) for r in records)
    return wall, measured, warm, records


def starts(args) -> None:
    """Issue 39: the default sweep (efficientnet_b0, torch against TensorFlow, batch 1 and
    8, 2 threads, default policy) with every worker spawned against the `--fork`
    frameworks' forked from a fork server each, `--pairs` pairs A B A B (B A in odd pairs), each sweep `--rounds` fixed
    rounds so both do the same work; per sweep its wall time, the share of it timing
    iterations and the imports its runs paid."""
    from engine.run.process.executors import LocalProcesses

    specs = expand_sweep([args.model], ["torch", "tensorflow"], [1, 8], [2])
    got: dict[str, list] = {"spawn": [], "fork": []}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "sweep.duckdb"
        for pair in range(args.pairs):
            for how in (("spawn", "fork") if pair % 2 == 0 else ("fork", "spawn")):
                runner = Runner(executor=LocalProcesses(
                    forked=() if how == "spawn" else set(args.fork.split(","))))
                t = time.monotonic()
                records = run_sweep(specs, db=db, rounds=args.rounds, seed=pair,
                                    command="bench/sweep.py --starts", runner=runner)
                wall = time.monotonic() - t
                runner.close()  # its fork server, after the sweep's wall time is read
                measured = sum(r.measured_s or 0 for r in records)
                imports = sum(r.import_s or 0 for r in records)
                ok = sum(r.status == "ok" for r in records)
                got[how].append((wall, measured))
                print(f"pair {pair + 1} {how:5}: wall {wall:6.1f} s, measuring {measured:6.1f}"
                      f" s ({measured / wall:5.1%}), imports in runs {imports:5.1f} s, "
                      f"{ok}/{len(records)} ok", flush=True)
    for how, v in got.items():
        w = [x for x, _ in v]
        print(f"{how:5}: wall {', '.join(f'{x:.1f}' for x in w)} s; measuring share "
              f"{sum(m for _, m in v) / sum(w):.1%}")
    ratios = [f[0] / s[0] for s, f in zip(got["spawn"], got["fork"])]
    print(f"wall fork / spawn per pair: {', '.join(f'{r:.2f}' for r in ratios)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="efficientnet_b0")
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--starts", action="store_true",
                    help="spawned against forked workers on the default sweep (issue 39)")
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fork", default="torch,tensorflow",
                    help="--starts: the frameworks forked in its B sweeps")
    args = ap.parse_args()
    if args.starts:
        starts(args)
        return
    specs = expand_sweep([args.model], ["torch", "tensorflow"], [1, 8, 32], [1, 2],
                         policy=MeasurementPolicy(min_time_s=args.min_time))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "sweep.duckdb"
        for label, per_run in (("grouped (default)", False), ("process per run", True)):
            print(f"{label}: {len(specs)} runs")
            results[label] = run(specs, db, per_run)
    print()
    for label, (wall, measured, warm, records) in results.items():
        ok = sum(r.status == "ok" for r in records)
        print(f"{label:18}: wall {wall:6.1f} s, measuring {measured:6.1f} s "
              f"({measured / wall:5.1%}), warm-up + first forward {warm:5.1f} s "
              f"({warm / wall:5.1%}), other (imports, builds, FLOPs, spawning) "
              f"{wall - measured - warm:5.1f} s; {ok}/{len(records)} ok")
    g, p = results["grouped (default)"], results["process per run"]
    print(f"measuring share grouped {g[1] / g[0]:.1%} (target >= 75 %); process per run "
          f"{p[1] / p[0]:.1%}; grouped wall / per-run wall = {g[0] / p[0]:.2f}")


if __name__ == "__main__":
    main()
