"""A contest's figures and verdicts on arrays: drift-adjusted figures, the best, the
comparison of each rival with it, and Holm over those comparisons. One implementation for
a sweep's contests (engine.analysis.compare.contests, whose undecided configurations the
sweep driver runs again) and for the seeded simulations of thousands of sweeps that check
its error rates.

Figures. Decided contenders stop running, so drift in later rounds moves only the cells
still running: A at 10.0/10.02/9.98 then 11.6/11.62/11.58 (the machine slowed 16 %) against
C at 10.04/10.05/10.03 (decided at round 3) gave geometric means of 10.77 and 10.04 ms and a
star on C while its sentence said A measured 1.004x faster. A row's log round medians are
therefore fitted as configuration + round (least squares over the cells measured: the
two-way model of engine/analysis/noise.py on the row's contenders and rounds), and each
contender's figure is its configuration effect plus the mean round effect over the rounds
every contender of the row ran. A contender that ran only those rounds shows exactly its
geometric mean; one that ran more shows its level with the drift the others saw taken out;
with every contender in every round each figure is its geometric mean. With two contenders
the ratio of the figures is exactly the sentence's paired speed-up (rounds only one ran
carry no information about the difference); with more, the fit also uses rounds a third
contender shares, so the two can differ where the design is unbalanced (tests/
test_verdicts.py measures by how much). Ranked by that figure: the best is the lowest. A
row whose rounds do not connect its contenders (no round shared) keeps geometric means.

Verdicts. Each rival is compared with the best over their common rounds (paired.py). A
contest of k contenders makes m = k - 1 such claims, and a tie of 4 named a false winner
in 7.1 % of contests (10.5 % of 6) with each comparison held to 5 %. The k - 1 comparisons
are one family under Holm's step-down: with j of them decided so far, every remaining one
is judged by its sequential interval at alpha / (m - j) (the plan's levels calibrated for
that alpha); those it decides join, j grows, and the next step is judged at the larger
share; the first step that decides nothing ends it, and what remains is undecided, shown
at the share the next decision would need. Judging all that pass at once is Holm's
shortcut of closed testing with Bonferroni local tests (a share only grows as j does), so
the order of the comparisons does not matter, and every shown interval agrees with its
decision. A decision is a winner or an equivalence: both are read off the same interval,
and a false "equivalent within 2 %" would send a budget to the wrong machine as surely
as a false winner, so both are in the family. With k = 2 the family is one comparison at
alpha: the rule as it was. The futility stop and the projection of an undecided comparison
use the share it was judged at.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.analysis.looks import FUTILITY_CONFIDENCE, FUTILITY_MIN_ROUNDS, VerdictRule
from engine.analysis.paired import (EQUIVALENT_CODE, NONE, SINGLE_CODE, UNDECIDED_CODE,
                                    WINNER_CODE, PairedStats, futile, interval, paired_stats)

__all__ = ["Judged", "fit_levels", "judge", "figures_of"]


def fit_levels(y) -> tuple[np.ndarray, np.ndarray]:
    """(figures, fitted): y holds log values (rows x contenders x rounds, NaN where not
    measured); each contender's drift-adjusted log figure (NaN without a round), and
    whether the row's design was connected (False: geometric means kept)."""
    y = np.asarray(y, dtype=float)
    meas = ~np.isnan(y)
    w = meas.astype(float)
    yz = np.where(meas, y, 0.0)
    per_config, per_round = w.sum(2), w.sum(1)
    inv = np.where(per_round > 0, 1 / np.maximum(per_round, 1), 0.0)
    # Round effects eliminated (rho_r = mean over the round's cells of y - mu), the normal
    # equations for the configuration effects: C mu = q, C singular along the constant.
    c = -np.einsum("skr,sjr,sr->skj", w, w, inv)
    c[:, np.arange(y.shape[1]), np.arange(y.shape[1])] += per_config
    col = yz.sum(1)
    q = yz.sum(2) - np.einsum("skr,sr->sk", w, col * inv)
    mu = np.einsum("skj,sj->sk", np.linalg.pinv(c, rcond=1e-10), q)
    rho = (col - np.einsum("skr,sk->sr", w, mu)) * inv
    used = per_config > 0
    # connected: the constant is the only direction C leaves free
    sv = np.linalg.svd(c, compute_uv=False)
    rank = (sv > 1e-10 * np.maximum(sv[:, :1], 1e-300)).sum(1)
    connected = rank == np.maximum(used.sum(1) - 1, 0)
    everyone = (meas | ~used[:, :, None]).all(1) & (per_round > 0)
    base_rounds = np.where(everyone.any(1)[:, None], everyone, per_round > 0)
    base = (rho * base_rounds).sum(1) / np.maximum(base_rounds.sum(1), 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        raw = yz.sum(2) / per_config
    level = np.where(connected[:, None], mu + base[:, None], raw)
    return np.where(used, level, np.nan), connected


@dataclass(frozen=True)
class Judged:
    """Rows x contenders: each contender's drift-adjusted log figure, the best per row
    (-1: fewer than two with a round), and each rival's comparison with the best (paired
    statistics, look, half-width, paired.py state code, the alpha it was judged at and its
    Holm step, futility), with `more`: the configurations another round could decide (the
    best and each rival neither decided nor futile) and `family`: comparisons per row."""

    figure: np.ndarray
    best: np.ndarray
    stats: PairedStats
    look: np.ndarray
    half: np.ndarray
    state: np.ndarray
    alpha: np.ndarray
    step: np.ndarray
    futile: np.ndarray
    more: np.ndarray
    family: np.ndarray


def judge(y, rounds, rule: VerdictRule) -> Judged:
    """y: log round medians (rows x contenders x rounds, NaN where not measured); rounds:
    the round number of each column (a comparison's look is its last common round)."""
    y = np.asarray(y, dtype=float)
    rows, k, _ = y.shape
    figure, _ = fit_levels(y)
    usable = ~np.isnan(figure)
    best = np.where(usable.sum(1) >= 2,
                    np.argmin(np.where(usable, figure, np.inf), axis=1), -1)
    anchor = y[np.arange(rows), np.maximum(best, 0)]
    d = y - anchor[:, None, :]
    d[best < 0] = np.nan
    d[np.arange(rows), np.maximum(best, 0)] = np.nan
    stats = paired_stats(d)
    look = np.where(~np.isnan(d), np.asarray(rounds)[None, None, :], -1).max(-1)
    plan = rule.plan
    eligible = stats.n >= 2
    family = eligible.sum(1)
    state = np.where(stats.n == 1, SINGLE_CODE, NONE)
    half = np.full((rows, k), np.nan)
    alpha = np.full((rows, k), plan.alpha)
    step = np.zeros((rows, k), dtype=int)
    decided = np.zeros((rows, k), dtype=bool)
    count = np.zeros(rows, dtype=int)
    while True:
        todo = eligible & ~decided
        if not todo.any():
            break
        share = np.broadcast_to((plan.alpha / np.maximum(family - count, 1))[:, None],
                                (rows, k))
        h, st = interval(stats, look, rule.band, plan.first, plan.last, share, plan.paths)
        half = np.where(todo, h, half)
        state = np.where(todo, st, state)
        alpha = np.where(todo, share, alpha)
        step = np.where(todo, (count + 1)[:, None], step)
        new = todo & ((st == WINNER_CODE) | (st == EQUIVALENT_CODE))
        if not new.any():
            break
        decided |= new
        count += new.sum(1)
    stop = futile(stats, state, rule.band, plan.first, plan.last, alpha,
                  FUTILITY_MIN_ROUNDS, FUTILITY_CONFIDENCE, plan.paths)
    rival_more = ((state == UNDECIDED_CODE) & ~stop) | (state == SINGLE_CODE)
    more = rival_more.copy()
    any_more = rival_more.any(1)
    more[np.flatnonzero(any_more), best[any_more]] = True
    return Judged(figure, best, stats, look, half, state, alpha, step, stop, more, family)


def figures_of(values: dict) -> dict:
    """contender -> {round: value} (positive) to contender -> drift-adjusted figure (the
    exponent of fit_levels' log figure; contenders without a value are left out)."""
    names = [c for c, v in values.items() if v]
    rounds = sorted({r for c in names for r in values[c]})
    y = np.full((1, len(names), len(rounds)), np.nan)
    for i, c in enumerate(names):
        for j, r in enumerate(rounds):
            if r in values[c]:
                y[0, i, j] = np.log(values[c][r])
    figure, _ = fit_levels(y)
    return {c: float(np.exp(figure[0, i])) for i, c in enumerate(names)}
