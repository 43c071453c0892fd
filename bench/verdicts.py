"""A benchmark of the verdicts themselves: N sweeps on a quiet machine and N beside a noisy
neighbour, each holding three contests, with the defaults a user gets (3 rounds minimum, up
to 6 while a contest is undecided, fresh worker processes every round):

- clear: efficientnet_b0, torch eager vs tensorflow tf_function, batch 8, 2 threads
  (TensorFlow about 2x faster here on a quiet machine);
- moderate: mobilenet_v3_large, torch eager vs torch channels_last, batch 1, 2 threads
  (channels_last 1.24x faster, established on a quiet machine: 4 rounds, paired SD 0.7 %);
- tie: efficientnet_b0 torch eager, batch 1, 2 threads, against itself in a worker of its
  own (RunSpec.replica: "#2"), so the true answer is a tie (no winner; "equivalent" and
  "no decision" are both right).

The neighbour (engine.run.process.neighbour) is another process's busy thread on one core, busy for
3-8 s then idle for 4-12 s (seeded per sweep), started before a noisy sweep and stopped
after it. Per contest and condition the table says how many sweeps named the right winner,
said equivalent or no decision, or named the wrong one; the rounds its configurations ran;
and each sweep's wall time over the wall time of its first 3 rounds (a 3-round sweep,
measured inside the same sweep), for the whole sweep and for the clear and moderate
contests' runs alone (what a sweep without a tie would take).

It uses only what the sweep driver offered before issue 24 as well (run_sweep, Runner,
aggregate, contests), so the same script measures an older checkout: put it and
engine/run/process/neighbour.py there and run it with --label. Results go to a temporary database.

    .venv/bin/python bench/verdicts.py [--sweeps 10] [--conditions quiet noisy]
        [--min-time 2] [--label new] [--json out.json] [--no-interleave]

It also prints each contest's paired spread (the standard deviation of its per-round log
ratios, median over sweeps): run it with and without --no-interleave to see what timing
contenders alternately does to the noise a verdict must beat.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.analysis.compare import aggregate, contests  # noqa: E402
from engine.run.process.neighbour import Neighbour  # noqa: E402
from engine.run.process.runner import Runner  # noqa: E402
from engine.run.jobs.sweep import run_sweep  # noqa: E402
from engine.core import MeasurementPolicy  # noqa: E402
from engine.scenarios.inference.expand import expand_sweep
from engine.core.budget import RoundBudget  # noqa: E402
from engine.core.limits import DEFAULT_MAX_ROUNDS, DEFAULT_ROUNDS  # noqa: E402

# contest -> (model, batch, the contender that should win; None: a tie)
CONTESTS = {"clear": ("efficientnet_b0", 8, "tensorflow (tf_function)"),
            "moderate": ("mobilenet_v3_large", 1, "torch (channels_last)"),
            "tie": ("efficientnet_b0", 1, None)}


def sweep_specs(policy: MeasurementPolicy) -> list:
    clear = expand_sweep(["efficientnet_b0"], ["torch", "tensorflow"], [8], [2],
                         policy=policy)
    moderate = expand_sweep(["mobilenet_v3_large"], ["torch"], [1], [2], policy=policy,
                            runtimes=["eager", "channels_last"])
    [one] = expand_sweep(["efficientnet_b0"], ["torch"], [1], [2], policy=policy)
    return clear + moderate + [one, replace(one, replica=1)]


def state_of(cmp) -> str:
    """winner, equivalent or undecided, for this checkout's Comparison or an older one."""
    state = getattr(cmp, "state", None)
    if state is not None:
        return state
    return "winner" if cmp.decided else "undecided"


def outcomes(records) -> dict:
    """contest -> (outcome: right / none / wrong, the winner named, its sentence)."""
    out = {}
    rows = {(c.row[0], c.row[2]): c for c in contests(aggregate(vars(r) for r in records))[1]}
    for name, (model, batch, want) in CONTESTS.items():
        contest = rows.get((model, batch))
        if contest is None or not contest.comparisons:
            out[name] = ("none", None, "no comparison")
            continue
        [(rival, cmp)] = contest.comparisons.items()
        state = state_of(cmp)
        winner = contest.best if state == "winner" else None
        if winner is None:
            verdict = "none"
        else:
            verdict = "right" if winner == want else "wrong"
        out[name] = (verdict, winner, contest.sentences[0])
    return out


def rounds_of(records) -> dict:
    out = {}
    for name, (model, batch, _) in CONTESTS.items():
        out[name] = max((r.round_no for r in records
                         if r.model == model and r.batch_size == batch), default=0)
    return out


def run_s(records, names, upto=None) -> float:
    """Wall seconds of the runs of these contests (their started to ended), in rounds up to
    `upto`."""
    total = 0.0
    for r in records:
        if upto is not None and r.round_no > upto:
            continue
        if any(r.model == CONTESTS[n][0] and r.batch_size == CONTESTS[n][1] for n in names):
            if r.started_at and r.ended_at:
                total += (r.ended_at - r.started_at).total_seconds()
    return total


def round_ratios(records) -> dict:
    """contest -> the per-round log ratio of its two contenders' medians (what pairing
    leaves: its spread is the noise a verdict must beat)."""
    import math

    out = {}
    for name, (model, batch, _) in CONTESTS.items():
        meds: dict = {}
        for r in records:
            if r.model == model and r.batch_size == batch and r.median_ms:
                key = (r.framework, r.runtime, (r.extra or {}).get("replica", 0))
                meds.setdefault(key, {})[r.round_no] = r.median_ms
        if len(meds) == 2:
            a, b = meds.values()
            out[name] = [math.log(b[k] / a[k]) for k in sorted(set(a) & set(b))]
    return out


def one_sweep(specs, db: Path, seed: int, interleave: bool = True) -> dict:
    marks: dict = {}
    t0 = time.monotonic()

    def on_plan(step):
        if step.round_no == DEFAULT_ROUNDS + 1:
            marks["three"] = time.monotonic() - t0

    records = run_sweep(specs, db=db, rounds=RoundBudget(DEFAULT_ROUNDS, DEFAULT_MAX_ROUNDS),
                        seed=seed, runner=Runner(**({} if interleave else
                                                    {"interleave": False})),
                        command="bench/verdicts.py", on_plan=on_plan)
    wall = time.monotonic() - t0
    decided = ("clear", "moderate")
    return {"outcomes": outcomes(records), "rounds": rounds_of(records), "wall": wall,
            "ratios": round_ratios(records),
            "wall_3": marks.get("three", wall),
            "decided_ratio": (run_s(records, decided) / run_s(records, decided, DEFAULT_ROUNDS)
                              if run_s(records, decided, DEFAULT_ROUNDS) else None),
            "not_ok": sum(r.status != "ok" for r in records),
            "interleaved": sum(bool((r.extra or {}).get("interleaved")) for r in records),
            "runs": len(records)}


def table(label: str, results: dict) -> str:
    lines = [f"{label}: contest x condition (sweeps: right / equivalent or no decision / "
             "wrong; rounds its configurations ran; wall time over the sweep's first 3 rounds)",
             f"{'contest':10} {'condition':9} {'right':>5} {'none':>5} {'wrong':>5}  "
             f"{'rounds':22} wall x3 (median, max)"]
    for cond, rows in results.items():
        if not rows:
            continue
        walls = [r["wall"] / r["wall_3"] for r in rows]
        dec = [r["decided_ratio"] for r in rows if r["decided_ratio"]]
        for name in CONTESTS:
            got = [r["outcomes"][name][0] for r in rows]
            rounds = sorted(r["rounds"][name] for r in rows)
            wall = (f"sweep {statistics.median(walls):.2f}, {max(walls):.2f}; clear+moderate "
                    f"runs {statistics.median(dec):.2f}, {max(dec):.2f}"
                    if name == "clear" and dec else "")
            lines.append(f"{name:10} {cond:9} {got.count('right'):>5} {got.count('none'):>5} "
                         f"{got.count('wrong'):>5}  {str(rounds):22} {wall}")
        for name in CONTESTS:  # the paired spread: the SD of round log ratios, per sweep
            sds = [statistics.stdev(r["ratios"][name]) for r in rows
                   if len(r.get("ratios", {}).get(name, [])) > 1]
            if sds:
                lines.append(f"{'':10} {cond:9} {name}: paired spread per round, median over "
                             f"sweeps {100 * statistics.median(sds):.1f} % "
                             f"[{100 * min(sds):.1f}-{100 * max(sds):.1f}]")
        lines.append(f"{'':10} {cond:9} mean sweep {statistics.fmean(r['wall'] for r in rows):.0f}"
                     f" s; runs not ok {sum(r['not_ok'] for r in rows)}; interleaved runs "
                     f"{sum(r['interleaved'] for r in rows)} of {sum(r['runs'] for r in rows)}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sweeps", type=int, default=10)
    ap.add_argument("--conditions", nargs="+", choices=["quiet", "noisy"],
                    default=["quiet", "noisy"])
    ap.add_argument("--min-time", type=float, default=MeasurementPolicy().min_time_s)
    ap.add_argument("--label", default="this checkout")
    ap.add_argument("--json", metavar="PATH", help="also write every sweep's row here")
    ap.add_argument("--core", type=int, default=1, help="the neighbour's core (default 1)")
    ap.add_argument("--no-interleave", action="store_true",
                    help="time a round's contenders one after another (the design before "
                         "engine/run/process/together.py), to measure what interleaving changes")
    args = ap.parse_args()
    specs = sweep_specs(MeasurementPolicy(min_time_s=args.min_time))
    results: dict = {c: [] for c in args.conditions}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "verdicts.duckdb"
        for i in range(args.sweeps):  # conditions alternate, so drift of the day is shared
            for cond in args.conditions:
                if cond == "noisy":
                    with Neighbour(args.core, "onoff", seed=1000 + i):
                        row = one_sweep(specs, db, 1000 + i, not args.no_interleave)
                else:
                    row = one_sweep(specs, db, 1000 + i, not args.no_interleave)
                results[cond].append(row)
                said = "; ".join(f"{n}: {o[0]} ({o[1]})" for n, o in row["outcomes"].items())
                print(f"{cond} sweep {i + 1}/{args.sweeps}: rounds {row['rounds']}, "
                      f"{row['wall']:.0f} s ({row['wall'] / row['wall_3']:.2f}x the first "
                      f"{DEFAULT_ROUNDS}); {said}", flush=True)
                for n, o in row["outcomes"].items():
                    print(f"    {n}: {o[2]}", flush=True)
                if args.json:
                    Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    print()
    print(table(args.label, results))


if __name__ == "__main__":
    main()
