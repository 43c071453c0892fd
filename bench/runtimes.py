"""Every runtime and precision that runs here, as ratios to torch eager fp32, in one run
(issue 28): the models (default efficientnet_b0 and resnet18) at each batch size, through
the real runner and workers, each round all configurations; the ratio per round is eager's
p50 over the configuration's p50 (above 1: faster than eager), and the table gives the
median over rounds with the reduced-precision runs' error against fp32.

The runtimes come from the catalog (engine.core.catalog.RUNTIMES); precisions from
engine.core.precision, each refusal printed with its reason. Runtimes named with --runtime
that this checkout's catalog lacks (aoti, libtorch_aoti before they are merged) are skipped
with a line saying so.

    .venv/bin/python bench/runtimes.py [--model efficientnet_b0 resnet18] [--batch 1 8]
        [--threads 2] [--rounds 3] [--min-time 2] [--image-size N] [--framework torch tensorflow]
"""

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WANTED = ("aoti", "libtorch_aoti")  # issue 28's other runtimes, measured once registered


def configurations(frameworks, wanted, flags=None):
    """(framework, runtime, precision) for every catalog runtime and precision that runs
    here, and a line per one left out, with its reason."""
    from engine.core.catalog import RUNTIMES
    from engine.core.precision import PRECISIONS, precision_refusal

    runs, skipped = [], []
    for name in wanted:
        if not any(name in RUNTIMES.get(f, {}) for f in frameworks):
            skipped.append(f"{name}: not registered in this checkout's catalog")
    for fw in frameworks:
        for rt in RUNTIMES[fw]:
            for p in PRECISIONS:
                why = precision_refusal(fw, rt, p, "cpu", flags)
                if why and p != "fp32":
                    skipped.append(f"{fw} {rt} {p}: {why}")
                elif not why:
                    runs.append((fw, rt, p))
    return runs, skipped


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", nargs="+", default=["efficientnet_b0", "resnet18"])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--image-size", type=int, default=None)
    ap.add_argument("--framework", nargs="+", default=["torch", "tensorflow"])
    args = ap.parse_args()
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)

    from engine.core import MeasurementPolicy
    from engine.scenarios.inference.spec import RunSpec
    from engine.run.process.runner import Runner

    runs, skipped = configurations(args.framework, WANTED)
    for line in skipped:
        print(f"skipped: {line}")
    policy = MeasurementPolicy(warmup_iters=3, min_time_s=args.min_time, min_iters=5)
    specs = [RunSpec(m, fw, b, args.threads, runtime=rt, precision=p, policy=policy,
                     image_size=args.image_size).validate()
             for m in args.model for fw, rt, p in runs for b in args.batch]
    # a configuration's p50 per round, and its error figures
    p50: dict[tuple, list[float]] = {}
    last: dict[tuple, object] = {}
    for rnd in range(args.rounds):
        for rec in Runner(timeout_s=1800).run(specs, on_record=lambda r: None):
            key = (rec.model, rec.batch_size, rec.framework, rec.runtime, rec.precision)
            last[key] = rec
            if rec.status == "ok":
                p50.setdefault(key, [None] * args.rounds)[rnd] = rec.median_ms
        print(f"round {rnd + 1} of {args.rounds} done", flush=True)
    print(f"\n{args.threads} threads, {args.rounds} rounds, min {args.min_time:g} s a run; "
          "x eager: eager fp32 p50 / this p50 per round, median [min-max] (above 1: faster)")
    print(f"{'model':<16}{'b':>3}  {'runtime':<28}{'p50 ms':>9}  {'x eager':<22}"
          f"{'max rel err':>12}{'top-1 agree':>12}")
    for key, rec in last.items():
        model, b, fw, rt, p = key
        name = f"{fw} {rt} {p}"
        if rec.status != "ok":
            print(f"{model:<16}{b:>3}  {name:<28}{rec.status:>9}  {rec.reason[:90]}")
            continue
        base = p50.get((model, b, "torch", "eager", "fp32"), [])
        ratios = [e / x for e, x in zip(base, p50[key]) if e and x]
        ratio = (f"{statistics.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]"
                 if ratios else "n/a")
        err = f"{rec.output_max_rel:.2e}" if rec.output_max_rel is not None else "-"
        top1 = (f"{rec.top1_agreement:.1%} of {rec.top1_inputs}"
                if rec.top1_agreement is not None else "-")
        print(f"{model:<16}{b:>3}  {name:<28}{statistics.median(x for x in p50[key] if x):>9.2f}"
              f"  {ratio:<22}{err:>12}{top1:>12}")


if __name__ == "__main__":
    main()
