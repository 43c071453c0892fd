"""Do the stopping rules move the figures (issue 39, part 3)? The default sweep's
configurations (efficientnet_b0, torch and TensorFlow, batch 1 and 8, 2 threads) timed under
today's fixed policy (10 warm-up calls or 1 s, then 2 s and 30 calls) and under the rules
(warm-up until settled, timing past the minimums until the median's 95 % interval is within
1 %, engine/core/settle.py), one worker per framework and policy, alternated A B A B (B A in
odd pairs). Per configuration: each policy's per-process medians, the ratio of their centres
and the process noise it is to be read against (the sd of the log medians), a Mann-Whitney
test of equal location, and what each policy spent warming up and timing, with why its runs
stopped.

    .venv/bin/python bench/settle.py [--pairs 6] [--model efficientnet_b0] [--fork]

Nothing is stored; nothing is timed in tests.
"""

import argparse
import collections
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.core import MeasurementPolicy  # noqa: E402
from engine.run.process.executors import LocalProcesses  # noqa: E402
from engine.run.process.runner import Runner  # noqa: E402
from engine.scenarios.inference.expand import expand_sweep  # noqa: E402

POLICIES = {"fixed": MeasurementPolicy(settle_warmup=False, median_tol=0.0),
            "rules": MeasurementPolicy()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="efficientnet_b0")
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--fork", action="store_true", help="fork workers from fork servers")
    args = ap.parse_args()
    forked = {"torch", "tensorflow"} if args.fork else ()
    runner = Runner(timeout_s=900, executor=LocalProcesses(forked=forked))
    got = collections.defaultdict(lambda: collections.defaultdict(list))
    spent = collections.defaultdict(lambda: [0.0, 0.0, 0.0])  # warm-up, timing, wall
    reasons = collections.defaultdict(collections.Counter)
    try:
        for pair in range(args.pairs):
            for name in (("fixed", "rules") if pair % 2 == 0 else ("rules", "fixed")):
                specs = expand_sweep([args.model], ["torch", "tensorflow"], [1, 8], [2],
                                     policy=POLICIES[name])
                for fw in ("torch", "tensorflow"):  # one worker each: not interleaved
                    t = time.monotonic()
                    recs = runner.run([s for s in specs if s.framework == fw],
                                      on_record=lambda r: None)
                    spent[name][2] += time.monotonic() - t
                    for r in recs:
                        if r.status != "ok":
                            raise SystemExit(f"{name} {fw} b{r.batch_size}: {r.status}: "
                                             f"{r.reason}")
                        key = f"{fw} b{r.batch_size}"
                        got[key][name].append(r.median_ms)
                        spent[name][0] += r.warmup_s or 0
                        spent[name][1] += r.measured_s or 0
                        reasons[name][(r.extra.get("warmup_stop", "?"), r.stop_reason)] += 1
                        print(f"  {pair:2} {name:5} {key:14} median {r.median_ms:8.3f} ms  "
                              f"warm-up {len(r.warmup_ns):2} calls {r.warmup_s:4.2f} s "
                              f"({r.extra.get('warmup_stop')})  timed {r.iterations:4} "
                              f"{r.measured_s:5.2f} s ({r.stop_reason})", flush=True)
    finally:
        runner.close()
    from scipy import stats

    print()
    for key, v in got.items():
        a, b = v["fixed"], v["rules"]
        la, lb = [math.log(x) for x in a], [math.log(x) for x in b]
        noise = statistics.stdev(la + lb)
        ratio = statistics.median(b) / statistics.median(a)
        mw = stats.mannwhitneyu(a, b, alternative="two-sided")
        print(f"{key:14}: fixed {', '.join(f'{x:.2f}' for x in sorted(a))} ms")
        print(f"{'':14}  rules {', '.join(f'{x:.2f}' for x in sorted(b))} ms")
        print(f"{'':14}  centre rules / fixed {ratio:.4f} ({100 * math.log(ratio):+.2f} % "
              f"in log) against process noise sd(log) {100 * noise:.2f} %; Mann-Whitney "
              f"p {mw.pvalue:.3f}")
    for name, (warm, timed, wall) in spent.items():
        print(f"{name}: warm-up {warm:6.1f} s, timing {timed:6.1f} s, wall {wall:6.1f} s; "
              + "; ".join(f"{w} / {s}: {n}" for (w, s), n in sorted(reasons[name].items())))


if __name__ == "__main__":
    main()
