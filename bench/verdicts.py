"""A benchmark of the verdicts themselves: the same comparison as N independent sweeps.

Two contests, each run as N sweeps with the defaults a user gets (3 rounds minimum, up to 6
while the contest is undecided, fresh worker processes every round):

- clear: efficientnet_b0, torch eager vs tensorflow tf_function, batch 8, 2 threads;
- tie: efficientnet_b0 torch eager, batch 1, 2 threads, against itself under a second name
  (RunSpec.replica: the same configuration in a worker process of its own, "#2"), so the
  true answer is a tie.

For each sweep it records the final verdict (a winner with an interval excluding 1, or "no
decision within the noise"), what the same sweep said after its 3 minimum rounds, and what a
one-process-per-contender measurement concludes (round 1 alone: one `Timer` or
pytorch-benchmark call per contender, the lower median wins). Then, per contest, how many
sweeps agree with the majority winner, say "no decision", or name the opposite winner, and
the wall time of each sweep over the wall time of its first 3 rounds (today's 3-round sweep,
measured inside the same sweep).

Targets on the 2-core development machine: the clear contest decided for the right winner
in >= 9 of 10 sweeps and never flipped; the tie "no decision" in >= 9 of 10; the clear
contest's sweeps at most 1.5x the wall time of a 3-round sweep. Results go to a temporary
database; nothing touches ./data. Takes about 30 minutes with the defaults.

    .venv/bin/python bench/verdicts.py [--sweeps 10] [--contest clear tie] [--min-time 2]
"""

import argparse
from dataclasses import replace
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.analysis.compare import aggregate, contests  # noqa: E402
from engine.run.runner import Runner  # noqa: E402
from engine.run.sweep import run_sweep  # noqa: E402
from engine.spec import MeasurementPolicy, expand_sweep  # noqa: E402
from engine.spec.budget import RoundBudget  # noqa: E402
from engine.spec.limits import DEFAULT_MAX_ROUNDS, DEFAULT_ROUNDS  # noqa: E402


def contest_specs(name: str, policy: MeasurementPolicy) -> list:
    if name == "clear":
        return expand_sweep(["efficientnet_b0"], ["torch", "tensorflow"], [8], [2],
                            policy=policy)
    [one] = expand_sweep(["efficientnet_b0"], ["torch"], [1], [2], policy=policy)
    return [one, replace(one, replica=1)]


def verdict(records) -> tuple[str | None, str]:
    """(winner or None, the sentence) of the sweep's single contest from these records."""
    [contest] = contests(aggregate(vars(r) for r in records))[1]
    [cmp] = contest.comparisons.values() or [None]
    if cmp is None:
        return None, "no comparison"
    return (contest.best if cmp.decided else None), contest.sentences[0]


def baseline(records) -> str:
    """One process per contender (round 1 alone): the lower median wins, always."""
    first = [r for r in records if r.round_no == 1 and r.status == "ok"]
    [contest] = contests(aggregate(vars(r) for r in first))[1]
    return contest.best


def one_sweep(specs, db: Path, seed: int) -> dict:
    marks: dict = {}
    t0 = time.monotonic()

    def on_plan(step):
        if step.round_no == DEFAULT_ROUNDS + 1:
            marks["three"] = time.monotonic() - t0

    records = run_sweep(specs, db=db, rounds=RoundBudget(DEFAULT_ROUNDS, DEFAULT_MAX_ROUNDS),
                        seed=seed, runner=Runner(), command="bench/verdicts.py",
                        on_plan=on_plan)
    wall = time.monotonic() - t0
    winner, sentence = verdict(records)
    three, _ = verdict([r for r in records if r.round_no <= DEFAULT_ROUNDS])
    return {"winner": winner, "sentence": sentence, "after_3": three,
            "baseline": baseline(records), "rounds": max(r.round_no for r in records),
            "wall": wall, "wall_3": marks.get("three", wall),
            "not_ok": sum(r.status != "ok" for r in records),
            "noisy": sum(r.validity == "noisy" for r in records)}


def report(name: str, rows: list[dict]) -> None:
    n = len(rows)
    named = [r["winner"] for r in rows if r["winner"]]
    majority = statistics.mode(named) if named else None
    agree = sum(r["winner"] == majority for r in rows if majority)
    none = sum(r["winner"] is None for r in rows)
    flipped = n - agree - none
    base = [r["baseline"] for r in rows]
    base_major = statistics.mode(base)
    three = sum(r["after_3"] is not None for r in rows)
    ratios = [r["wall"] / r["wall_3"] for r in rows]
    print(f"\n== {name}: {n} sweeps ==")
    print(f"  sweeps agreeing with the majority winner ({majority}): {agree}/{n}")
    print(f"  'no decision within the noise': {none}/{n}")
    print(f"  naming the opposite winner: {flipped}/{n}")
    print(f"  decided already after the {DEFAULT_ROUNDS} minimum rounds: {three}/{n}")
    print(f"  rounds run: {sorted(r['rounds'] for r in rows)}")
    print(f"  wall time vs the sweep's first {DEFAULT_ROUNDS} rounds: median "
          f"{statistics.median(ratios):.2f}x, max {max(ratios):.2f}x; mean sweep "
          f"{statistics.fmean(r['wall'] for r in rows):.0f} s")
    print(f"  baseline (one process per contender): names a winner {n}/{n} times; "
          f"{base.count(base_major)}/{n} say {base_major}, "
          f"{n - base.count(base_major)}/{n} the other")
    print(f"  noisy rounds kept: {sum(r['noisy'] for r in rows)}; runs not ok: "
          f"{sum(r['not_ok'] for r in rows)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sweeps", type=int, default=10)
    ap.add_argument("--contest", nargs="+", choices=["clear", "tie"], default=["clear", "tie"])
    ap.add_argument("--min-time", type=float, default=MeasurementPolicy().min_time_s)
    args = ap.parse_args()
    policy = MeasurementPolicy(min_time_s=args.min_time)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "verdicts.duckdb"
        results = {}
        for name in args.contest:
            specs = contest_specs(name, policy)
            rows = results[name] = []
            for i in range(args.sweeps):
                row = one_sweep(specs, db, seed=1000 + i)
                rows.append(row)
                print(f"{name} sweep {i + 1}/{args.sweeps}: {row['rounds']} rounds, "
                      f"{row['wall']:.0f} s ({row['wall'] / row['wall_3']:.2f}x the first "
                      f"{DEFAULT_ROUNDS}); baseline says {row['baseline']}; {row['sentence']}",
                      flush=True)
        for name, rows in results.items():
            report(name, rows)


if __name__ == "__main__":
    main()
