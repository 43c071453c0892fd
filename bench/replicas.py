"""Thread/replica splits of this machine's cores, measured side by side in one sweep:
for each model, 1 worker x all cores' threads against all cores' replicas x 1 thread (on
the 2-core development machine: 1x2 against 2x1), the same batch, in alternating rounds.
Prints each split's throughput (the sum over its replicas) and p99 per round, the ratio of
the replica split to the one-process split with its paired 95 % interval, and which split
is the machine's best: what Cost is to use for a machine of this core count (issue #15).
Results go to a temporary database; nothing touches ./data.

    .venv/bin/python bench/replicas.py [--model resnet18 mobilenet_v3_small] [--batch 1]
        [--image-size 64] [--rounds 4] [--min-time 2]
"""

import argparse
import math
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.analysis.compare import t975  # noqa: E402
from engine.run.process.runner import Runner  # noqa: E402
from engine.run.jobs.sweep import run_sweep  # noqa: E402
from engine.core import MeasurementPolicy  # noqa: E402
from engine.scenarios.inference.expand import expand_sweep
from engine.core.limits import logical_cores  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", nargs="+", default=["resnet18", "mobilenet_v3_small"])
    p.add_argument("--framework", default="torch")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--min-time", type=float, default=2.0)
    args = p.parse_args()
    cores = logical_cores()
    policy = MeasurementPolicy(min_time_s=args.min_time, min_iters=20, warmup_iters=10)
    specs = expand_sweep(args.model, [args.framework], [args.batch], [cores, 1],
                         replicas=[1, cores], image_size=args.image_size, policy=policy)
    specs = [s for s in specs if s.intra_threads * s.replicas == cores]
    with tempfile.TemporaryDirectory() as tmp:
        records = run_sweep(specs, db=Path(tmp) / "replicas.duckdb", rounds=args.rounds,
                            seed=7, runner=Runner(timeout_s=900), command="bench/replicas.py")
    print(f"{cores} cores: 1 worker x {cores} threads against {cores} replicas x 1 thread, "
          f"batch {args.batch}, {args.image_size} px, {args.rounds} rounds\n")
    for model in args.model:
        by = {}
        for r in records:
            if r.model == model and r.status == "ok":
                by.setdefault((r.intra_threads, r.replicas), {})[r.round_no] = r
        one, many = by.get((cores, 1), {}), by.get((1, cores), {})
        for label, runs in ((f"1x{cores}", one), (f"{cores}x1", many)):
            tput = [f"{runs[k].throughput:,.1f}" for k in sorted(runs)]
            p99 = [f"{runs[k].p99_ms:.2f}" for k in sorted(runs)]
            print(f"{model:20} {label}: samples/s per round {', '.join(tput)}; "
                  f"p99 ms {', '.join(p99)}")
        paired = [math.log(many[k].throughput / one[k].throughput)
                  for k in sorted(set(one) & set(many))]
        if len(paired) >= 2:
            mean, sd = statistics.fmean(paired), statistics.stdev(paired)
            half = t975(len(paired) - 1) * sd / math.sqrt(len(paired))
            lo, hi = math.exp(mean - half), math.exp(mean + half)
            best = (f"{cores}x1 (replicas)" if lo > 1 else f"1x{cores} (one process)"
                    if hi < 1 else "no decision within the noise")
            print(f"{model:20} {cores}x1 / 1x{cores} throughput: {math.exp(mean):.2f}x "
                  f"(95 % CI {lo:.2f}-{hi:.2f}, {len(paired)} rounds); best split: {best}\n")
        else:
            print(f"{model:20} too few paired rounds for a ratio\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
