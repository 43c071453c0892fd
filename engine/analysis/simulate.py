"""Seeded sweeps through the rule itself, thousands at once: what the tests and
bench/verdict_rates.py measure the verdicts' error rates, power and projections with.

A simulated sweep is a contest of k contenders whose log round medians are a true level
per contender + the machine's drift that round (shared by every contender of the round,
normal with sd `drift`) + each process's own noise (normal with sd `noise`). It runs as
engine/run/jobs/sweep.py runs one: every contender for the plan's first rounds, then after each
round only the configurations engine/analysis/verdicts.judge says another round could
decide (the best and each rival neither decided nor futile), until none is left or the
plan's last round. Each look judges every simulated contest still running in one call of
the same judge that engine.analysis.compare.contests calls for a stored sweep, and the
final state is judged again from all the rounds run, as a page would show it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.analysis.looks import VerdictRule
from engine.analysis.verdicts import Judged, judge

__all__ = ["Sweeps", "simulate"]


@dataclass(frozen=True)
class Sweeps:
    """y: log round medians (sweeps x contenders x rounds, NaN where not run); final: the
    judgement of every sweep at its end; rounds: rounds each sweep ran."""

    y: np.ndarray
    final: Judged
    rounds: np.ndarray


def simulate(levels, noise: float, drift: float, rule: VerdictRule, sweeps: int,
             seed: int) -> Sweeps:
    """`sweeps` seeded sweeps of contenders at true log `levels` (k, or sweeps x k)."""
    rng = np.random.default_rng(seed)
    last, first = rule.plan.last, rule.plan.first
    levels = np.broadcast_to(np.asarray(levels, dtype=float), (sweeps, np.shape(levels)[-1]))
    k = levels.shape[1]
    day = rng.normal(0.0, drift, (sweeps, last))
    own = rng.normal(0.0, noise, (sweeps, k, last))
    y = np.full((sweeps, k, last), np.nan)
    numbers = np.arange(1, last + 1)
    running = np.ones((sweeps, k), dtype=bool)
    ran = np.zeros(sweeps, dtype=int)
    for r in range(last):
        live = np.flatnonzero(running.any(1))
        if not live.size:
            break
        y[live, :, r] = np.where(running[live], levels[live] + day[live, r:r + 1]
                                 + own[live, :, r], np.nan)
        ran[live] = r + 1
        if r + 1 < first:
            continue
        got = judge(y[live, :, :r + 1], numbers[:r + 1], rule)
        running[live] = got.more
    return Sweeps(y, judge(y, numbers, rule), ran)
