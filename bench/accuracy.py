"""Our median vs torch.utils.benchmark.Timer.blocked_autorange, interleaved in one process.

Same model, batch, threads, weights and input (the torch backend's own step callable is
handed to both), alternating rounds so drift hits both alike. Prints per-round medians and
the ratio ours / Timer; target: median ratio within 0.97-1.03.

    .venv/bin/python bench/accuracy.py [--model efficientnet_b0] [--batch 1 8] [--threads 2]
"""

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="efficientnet_b0")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=2.0)
    args = ap.parse_args()
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)  # before torch is imported, as a worker does

    import torch.utils.benchmark as tb

    from engine.worker.backends import configure_threads
    from engine.worker.backends.torch_eager import Backend
    from engine.worker.measure import time_loop
    from engine.core import MeasurementPolicy
    from engine.scenarios.inference.spec import RunSpec

    policy = MeasurementPolicy(min_time_s=args.min_time)
    configure_threads("torch", args.threads, 1)
    backend = Backend()
    print(f"{args.model}, {args.threads} threads, {args.rounds} interleaved rounds, "
          f"min {args.min_time:g} s each; torch {backend.versions()['torch']}")
    for batch in args.batch:
        spec = RunSpec(args.model, "torch", batch, args.threads, policy=policy).validate()
        backend.load(spec)
        backend.prepare(spec)
        step = backend.make_step(spec)
        ratios = []
        with backend.context():
            step()
            timer = tb.Timer(stmt="step()", globals={"step": step}, num_threads=args.threads)
            for r in range(args.rounds):
                order = ("ours", "timer") if r % 2 == 0 else ("timer", "ours")
                got = {}
                for who in order:
                    if who == "ours":
                        res = time_loop(step, policy)
                        got[who] = statistics.median(res.samples_ns) / 1e6
                    else:
                        got[who] = timer.blocked_autorange(min_run_time=args.min_time).median * 1e3
                ratios.append(got["ours"] / got["timer"])
                print(f"  batch {batch:>3} round {r + 1}: ours {got['ours']:8.3f} ms   "
                      f"Timer {got['timer']:8.3f} ms   ratio {ratios[-1]:.4f}")
        backend.unload()
        med = statistics.median(ratios)
        verdict = "within" if 0.97 <= med <= 1.03 else "OUTSIDE"
        print(f"batch {batch}: median ratio ours/Timer = {med:.4f} "
              f"[{min(ratios):.4f}-{max(ratios):.4f}], {verdict} the 0.97-1.03 target")


if __name__ == "__main__":
    main()
