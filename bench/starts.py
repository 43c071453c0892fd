"""Does a forked worker keep what a fresh process is for (issue 39)? The same configuration
run in N spawned workers and N workers forked from a fork server that imported the
framework (engine/run/process/forkserver.py), alternated A B A B (B A in odd pairs), one
process each. Prints each process's median, the spread of the per-process medians under
each start (sd of their logs, range over median), a Brown-Forsythe test of equal spread on
the log medians and a permutation test of the sd ratio, and the wall time each start took
from its request to its record.

    .venv/bin/python bench/starts.py [--framework torch] [--model resnet18] [--batch 1]
        [--threads 2] [--processes 10] [--min-time 2]
    .venv/bin/python bench/starts.py ... --forks-per-server K   (a fresh fork server after
        every K forks, and the forked medians' spread split into within and between
        servers: a sweep forks all its rounds from one server)
    .venv/bin/python bench/starts.py ... --weights   (both spawned; A: each worker
        calibrates the catalog model's BatchNorm itself, B: it reads the weights an earlier
        worker of its runner wrote, as a sweep's later rounds do: engine/worker/weights.py)
    .venv/bin/python bench/starts.py --pool LOG [LOG ...]   (the same tests over the
        per-process lines of earlier runs' printed logs of one configuration, pooled)

Nothing is stored; nothing is timed in tests.
"""

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.core import MeasurementPolicy  # noqa: E402
from engine.run.process.executors import LocalProcesses  # noqa: E402
from engine.run.process.runner import Runner  # noqa: E402
from engine.scenarios.inference.spec import RunSpec  # noqa: E402


def sd_ratio_permutation(a, b, draws=20000, seed=0):
    """(sd(b) / sd(a), two-sided permutation p of |log ratio| at least as far from 0)."""
    obs = statistics.stdev(b) / statistics.stdev(a)
    rng, pool, hits = random.Random(seed), list(a) + list(b), 0
    for _ in range(draws):
        rng.shuffle(pool)
        r = statistics.stdev(pool[len(a):]) / statistics.stdev(pool[:len(a)])
        hits += abs(math.log(r)) >= abs(math.log(obs)) - 1e-12
    return obs, hits / draws


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", default="torch")
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--processes", type=int, default=10)
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--forks-per-server", type=int, default=0,
                    help="a fresh fork server after this many forks (0: one for all)")
    ap.add_argument("--weights", action="store_true",
                    help="calibrated in each worker against read from the runner's file")
    ap.add_argument("--pool", nargs="+", metavar="LOG", help="earlier runs' printed logs")
    args = ap.parse_args()
    if args.pool:
        return report(pooled(args.pool))
    spec = RunSpec(args.model, args.framework, args.batch, args.threads,
                   policy=MeasurementPolicy(min_time_s=args.min_time)).validate()
    a, b = ("calibrated", "file") if args.weights else ("spawn", "fork")
    runners = {a: Runner(timeout_s=600, executor=LocalProcesses(forked=())),
               b: Runner(timeout_s=600, executor=LocalProcesses(
                   forked=() if args.weights else {args.framework}))}
    got: dict[str, list] = {a: [], b: []}
    print(f"{args.framework} {args.model} b{args.batch} t{args.threads}, "
          f"{args.processes} processes per {'weights source' if args.weights else 'start'}, "
          f"alternated", flush=True)
    if args.weights:  # the file B's workers read, written by a worker of B's runner
        [rec] = runners[b].run([spec], on_record=lambda r: None)
        print(f"   wrote the weights: {rec.extra.get('weights_from')}, "
              f"calibrating {rec.extra.get('calibrate_s') or 0:.2f} s", flush=True)
    try:
        for i in range(args.processes):
            for how in ((a, b) if i % 2 == 0 else (b, a)):
                t = time.monotonic()
                [rec] = runners[how].run([spec], on_record=lambda r: None)
                if how == a and args.weights:
                    runners[a].close()  # its folder goes: the next worker calibrates again
                started = rec.extra.get("weights_from" if args.weights else "worker_start",
                                        "spawn")
                if args.weights and started != how:
                    raise SystemExit(f"asked for weights {how}, the worker's were {started}")
                if not args.weights and started != how:
                    srv = list(runners[how].executor.forks._servers.values())
                    raise SystemExit(f"asked to {how}, the worker was a {started}: " + (
                        f"why not {srv[0].why_not}, server exit {srv[0].proc.poll()}, "
                        f"its stderr {srv[0]._tail()[-600:]!r}" if srv else "no server"))
                wall = time.monotonic() - t
                if rec.status != "ok":
                    raise SystemExit(f"{how} process {i}: {rec.status}: {rec.reason}")
                got[how].append((rec.median_ms, wall, rec.import_s or 0.0))
                print(f"  {i:2} {how:10} median {rec.median_ms:8.3f} ms  import "
                      f"{rec.import_s or 0:5.2f} s  request to record {wall:5.2f} s",
                      flush=True)
                k = args.forks_per_server
                if how == "fork" and k and len(got["fork"]) % k == 0:
                    runners["fork"].close()  # the next fork comes from a new server
    finally:
        for r in runners.values():
            r.close()
    report(got)
    if args.forks_per_server:
        servers(got["fork"], args.forks_per_server)


def servers(forked: list, k: int) -> None:
    """The forked log medians' variance split into within and between fork servers (one-way
    random effects, k forks per server): a sweep forks every round from one server, so a
    between-server part is what its rounds would not sample."""
    logs = [math.log(m) for m, _, _ in forked]
    groups = [logs[j:j + k] for j in range(0, len(logs) - len(logs) % k, k)]
    if len(groups) < 2:
        return
    grand = statistics.fmean(x for g in groups for x in g)
    msb = k * sum((statistics.fmean(g) - grand) ** 2 for g in groups) / (len(groups) - 1)
    msw = statistics.fmean(statistics.variance(g) for g in groups)
    between = max(0.0, (msb - msw) / k)
    from scipy import stats

    p = stats.f.sf(msb / msw, len(groups) - 1, len(groups) * (k - 1)) if msw > 0 else 0.0
    print(f"fork servers: {len(groups)} of {k} forks each; centres "
          f"{', '.join(f'{math.exp(statistics.fmean(g)):.2f}' for g in groups)} ms; sd(log) "
          f"within {math.sqrt(msw):.4f}, between {math.sqrt(between):.4f} (F test of no "
          f"between-server part: p {p:.3f})")


def pooled(paths) -> dict[str, list]:
    """The per-process lines of earlier runs' logs: (median ms, request to record s,
    import s) per start, in the order printed. Logs of one configuration only: the header
    lines must agree."""
    got: dict[str, list] = {}
    headers = set()
    for path in paths:
        lines = Path(path).read_text().splitlines()
        headers.add(lines[0])
        for line in lines[1:]:
            f = line.split()
            if len(f) == 13 and f[2] == "median":
                got.setdefault(f[1], []).append((float(f[3]), float(f[11]), float(f[6])))
    if len(headers) != 1 or len(got) != 2:
        raise SystemExit(f"--pool: the logs are of different configurations or starts: "
                         f"{headers}, {sorted(got)}")
    print(f"{headers.pop()}; pooled over {len(paths)} logs, "
          + " and ".join(f"{len(v)} {k}" for k, v in got.items()) + " processes")
    return got


def report(got: dict[str, list]) -> None:
    logs = {h: [math.log(m) for m, _, _ in v] for h, v in got.items()}
    print()
    for how, v in got.items():
        meds = sorted(m for m, _, _ in v)
        mid = statistics.median(meds)
        print(f"{how:10}: medians {', '.join(f'{m:.2f}' for m in meds)} ms; sd(log) "
              f"{statistics.stdev(logs[how]):.4f}; range/median "
              f"{(meds[-1] - meds[0]) / mid:.3f}; mean request-to-record "
              f"{statistics.fmean(w for _, w, _ in v):.2f} s")
    from scipy import stats

    a, b = got  # the two starts (or weights sources), in the order they were asked for
    bf = stats.levene(logs[a], logs[b], center="median")
    ratio, p = sd_ratio_permutation(logs[a], logs[b])
    print(f"equal spread? Brown-Forsythe W {bf.statistic:.3f}, p {bf.pvalue:.3f}; "
          f"sd ratio {b}/{a} {ratio:.3f}, permutation p {p:.3f}")
    mw = stats.mannwhitneyu(logs[a], logs[b])
    print(f"medians' centre: {a} {statistics.median(m for m, _, _ in got[a]):.3f} ms, "
          f"{b} {statistics.median(m for m, _, _ in got[b]):.3f} ms (Mann-Whitney p "
          f"{mw.pvalue:.3f})")


if __name__ == "__main__":
    main()
