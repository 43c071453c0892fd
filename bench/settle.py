"""Do the stopping rules move the figures (issue 39, part 3)? The default sweep's
configurations (efficientnet_b0, torch and TensorFlow, batch 1 and 8, 2 threads) timed under
today's fixed policy (10 warm-up calls or 1 s, then 2 s and 30 calls) and under the rules
(warm-up until settled, timing past the minimums until the median's 95 % interval is within
the policy's tolerance, 5 %, engine/core/settle.py), one worker per framework and policy,
alternated A B A B (B A in odd pairs). Per configuration: each policy's per-process
medians, the ratio of their centres and the process noise it is to be read against (the sd
of the log medians), a Mann-Whitney test of equal location, and what each policy spent
warming up and timing, with why its runs stopped.

    .venv/bin/python bench/settle.py [--pairs 6] [--model efficientnet_b0] [--fork]
    .venv/bin/python bench/settle.py --replay DB [DB ...] [--tolerances 0,0.01,0.03,0.05]

--replay: what another tolerance would have given, from sweeps already stored (each run's
raw samples, timed at 1 %, the default before 2026-11-29, so a cut can only shorten them):
every run's timing cut where the rule at that tolerance would have stopped it (the
minimums, then a check every block's worth of calls, engine/run/process/together.BLOCK_S,
up to the cap the run reached), its median taken there, and each sweep's paired residual
(configuration + round, engine/analysis/noise.py) refitted; per tolerance, the residual's
root mean square over the sweeps, the timing spent, the precision a second of it buys, and
how far a run's median moved from the stored run's. Tolerance 0 is the minimums alone.

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
    ap.add_argument("--replay", nargs="+", metavar="DB", help="stored sweeps to replay")
    ap.add_argument("--tolerances", default="0,0.01,0.02,0.03,0.05,0.08")
    ap.add_argument("--rest", type=float, default=42.0,
                    help="--replay: a sweep's wall seconds outside timing (the default "
                         "sweep's here: the CLI's split line, wall minus measuring)")
    args = ap.parse_args()
    if args.replay:
        return replay(args.replay, [float(t) for t in args.tolerances.split(",")], args.rest)
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



def _stop_at(samples, tol: float, policy: MeasurementPolicy, step_s: float) -> int:
    """How many of a run's timed calls the rule at `tol` would have kept: the minimums
    first, then a check every `step_s` of calls until the median is precise or the calls
    stored (the run's own stop) run out."""
    from engine.core.settle import median_precise

    total, n = 0.0, 0
    while n < len(samples) and (total < policy.min_time_s * 1e9 or n < policy.min_iters):
        total += samples[n]
        n += 1
    while n < len(samples) and tol > 0 and not median_precise(samples[:n], tol):
        target = total + step_s * 1e9
        while n < len(samples) and total < target:
            total += samples[n]
            n += 1
    return n


def replay(paths: list[str], tolerances: list[float], rest_s: float) -> None:
    from engine.analysis.noise import fit_two_way
    from engine.core.settle import _median
    from engine.run.process.together import BLOCK_S
    from store.db import open_db
    from store.runs import list_sweeps, run_samples, sweep_rounds

    policy = MeasurementPolicy()
    residuals = collections.defaultdict(list)
    moved = collections.defaultdict(list)
    timing, ended, runs = collections.Counter(), collections.Counter(), collections.Counter()
    sweeps = 0
    for path in paths:
        with open_db(path, read_only=True) as con:
            for sweep_id in list_sweeps(con, with_runs_only=True)["sweep_id"]:
                rows = [r for r in sweep_rounds(con, sweep_id) if r["status"] == "ok"]
                cells = {t: collections.defaultdict(dict) for t in tolerances}
                for r in rows:
                    df = run_samples(con, r["run_id"])
                    samples = [float(x) for x in df[df.phase == "measure"].latency_ns]
                    if not samples:
                        continue
                    key = (r["framework"], r["runtime"], r["batch_size"], r["intra_threads"])
                    stored = math.log(_median(samples))  # the run as it was timed, at 1 %
                    for t in tolerances:
                        n = _stop_at(samples, t, policy, BLOCK_S)
                        cells[t][key][r["round_no"]] = math.log(_median(samples[:n]))
                        moved[t].append(abs(cells[t][key][r["round_no"]] - stored))
                        timing[t] += sum(samples[:n]) / 1e9
                        ended[t] += n < len(samples)
                        runs[t] += 1
                fits = {t: fit_two_way(dict(cells[t])) for t in tolerances}
                if any(f is None for f in fits.values()):
                    continue  # one round or one configuration: no residual to compare
                sweeps += 1
                for t, f in fits.items():
                    residuals[t].append(f.residual)
                print(f"{Path(path).name} {sweep_id[:8]}: {len(rows)} runs, residual "
                      + ", ".join(f"{t:g}: {fits[t].residual:.4f}" for t in tolerances),
                      flush=True)
    if not sweeps:
        raise SystemExit("--replay: no stored sweep with 2 rounds and 2 configurations")
    print(f"\n{sweeps} sweeps; per tolerance: rms of the paired residual over the sweeps, "
          f"timing per sweep, and precision (1 / residual variance) per second of timing "
          f"and per second of wall time ({rest_s:g} s a sweep outside timing), against the "
          f"minimums':")
    base = None
    for t in tolerances:
        rms = math.sqrt(statistics.fmean(x * x for x in residuals[t]))
        per = timing[t] / sweeps
        value = (1 / (rms * rms * per), 1 / (rms * rms * (per + rest_s)))
        base = base or value
        print(f"  {t:5.3f}: residual {rms:.4f} ({100 * math.expm1(rms):.1f} %), timing "
              f"{per:5.1f} s per sweep, wall {per + rest_s:5.1f} s; precision per timing "
              f"second {value[0] / base[0]:.2f}x, per wall second {value[1] / base[1]:.2f}x; "
              f"a run's median against the stored run's: median {100 * statistics.median(moved[t]):.2f} "
              f"%, largest {100 * max(moved[t]):.2f} %; ended before the stored run's end "
              f"{ended[t]} of {runs[t]}")


if __name__ == "__main__":
    main()
