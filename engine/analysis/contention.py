"""Shared versus dedicated, measured: what a neighbour on one of the run's cores costs each
contender, whether it changes a verdict, and what torch's OpenMP wait policy does about it.

A sweep with contention (engine.scenarios.inference.expand.with_contention) measures every
configuration in every round quietly and beside a controlled neighbour (steady, on/off), each a setting of
its own. The slowdown of a contender is paired by round: its round median beside the
neighbour over its quiet round median in the same round (a 95 % interval over the rounds).
A verdict changes when the contest's decided winner beside the neighbour is not the quiet
one. Pure Python, for the page, the table and the report.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.analysis.compare import ConfigResult, contests
from engine.analysis.sequential import Comparison, VerdictRule, compare_rounds

__all__ = ["Slowdown", "VerdictChange", "slowdowns", "verdict_changes", "wait_policy_effects"]

PASSIVE = " OMP passive"  # how contender_name marks torch with OMP_WAIT_POLICY=PASSIVE


@dataclass(frozen=True)
class Slowdown:
    row: tuple  # (model, image size, batch, threads): the contest, whatever its neighbour
    contender: str
    condition: str  # "steady" or "onoff"
    quiet_ms: float
    busy_ms: float
    paired: Comparison  # speedup = beside the neighbour / quiet: the slowdown factor


@dataclass(frozen=True)
class VerdictChange:
    row: tuple
    condition: str
    quiet: str | None  # the decided winner on a dedicated machine, or None
    busy: str | None  # beside the neighbour

    @property
    def changed(self) -> bool:
        return self.quiet is not None and self.busy is not None and self.quiet != self.busy


def _by_condition(results) -> dict:
    """(contest without its neighbour, contender without its wait policy, neighbour, wait
    policy) -> result. The policy is the field, never read from the name, which may carry
    a machine or a model file after it."""
    return {(r.row[:4], r.contender.replace(PASSIVE, "", 1) if r.wait_policy else r.contender,
             r.contention, r.wait_policy): r for r in results}


def slowdowns(results: list[ConfigResult]) -> list[Slowdown]:
    """Every contender measured both quietly and beside a neighbour, per condition."""
    cells = _by_condition(results)
    out = []
    for (row, contender, condition, policy), busy in cells.items():
        quiet = cells.get((row, contender, "none", policy))
        if condition == "none" or quiet is None or not quiet.summary or not busy.summary:
            continue
        paired = compare_rounds(quiet.round_medians, busy.round_medians)
        if paired is not None:
            out.append(Slowdown(row, busy.contender, condition, quiet.summary.center,
                                busy.summary.center, paired))
    return sorted(out, key=lambda s: (str(s.row), s.contender, s.condition))


def verdict_changes(results: list[ConfigResult], rule: VerdictRule | None = None
                    ) -> list[VerdictChange]:
    """Per contest and neighbour: the decided winner quietly and beside it. Contenders that
    exist in one condition only (torch's passive wait policy, measured for its effect) are
    left out, so both conditions hold the same contest."""
    plain = [r for r in results if not r.wait_policy]
    rows = {c.row: c for c in contests(plain, rule)[1]}
    out = []
    for row, contest in rows.items():
        if row[4] == "none":
            continue
        quiet = rows.get((*row[:4], "none"))
        if quiet is not None and contest.comparisons and quiet.comparisons:
            out.append(VerdictChange(row[:4], row[4], quiet.winner, contest.winner))
    return out


def wait_policy_effects(results: list[ConfigResult]) -> list[tuple]:
    """(row, contender, condition, default ms, passive ms, paired Comparison: default over
    passive) for every torch contender measured with both wait policies."""
    cells = _by_condition(results)
    out = []
    for (row, contender, condition, policy), passive in cells.items():
        default = cells.get((row, contender, condition, ""))
        if policy != "passive" or default is None or not default.summary \
                or not passive.summary:
            continue
        paired = compare_rounds(passive.round_medians, default.round_medians)
        if paired is not None:
            out.append((row, default.contender, condition, default.summary.center,
                        passive.summary.center, paired))
    return sorted(out, key=lambda e: (str(e[0]), e[1], e[2]))
