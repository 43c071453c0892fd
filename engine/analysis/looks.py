"""Where a sweep looks at a comparison, and the nominal level of each look: the part of the
sequential rule (engine/analysis/sequential.py) that depends on the plan alone.

A sweep looks at each contest after every round from its minimum rounds to its max_rounds.
The error is spent over the looks by the Lan-DeMets Pocock-type function alpha * ln(1 +
(e - 1) * n / N) (n paired rounds of at most N), which gives an early look a fair share
(about 62 % of alpha at 3 of 6 rounds) so that a clear contest is decided at the minimum
rounds. With unknown variance and 2-5 degrees of freedom the normal-theory boundaries do not
apply, so the nominal level of each look is calibrated for the t statistic itself by a
seeded simulation of null sweeps (exact for the first look, which needs none).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from engine.core.limits import DEFAULT_MAX_ROUNDS, DEFAULT_ROUNDS, DEFAULT_VERDICT_MARGIN

__all__ = ["LookPlan", "VerdictRule", "nominal_levels", "spent", "critical", "ALPHA",
           "CALIBRATION_PATHS", "CALIBRATION_SEED", "confidence_text", "FUTILITY_CONFIDENCE",
           "FUTILITY_MIN_ROUNDS"]

# The chance of any false statement about a contest (Holm over its comparisons of a rival
# with the best, engine/analysis/verdicts.py), or about one comparison, over all its looks.
ALPHA = 0.05
# Null sweeps simulated to calibrate each look's nominal level: the calibrated error rate
# is within about +-0.001 of alpha (binomial standard error at this size).
CALIBRATION_PATHS = 200_000
CALIBRATION_SEED = 20261125
# The futility stop projects with the spread's lower confidence limit at this level: a
# contest stops only if it would stay undecided even were its noise this favourable.
FUTILITY_CONFIDENCE = 0.90
# A futility stop needs this many paired rounds: one left out (the furthest from the
# median), at least 3 to judge the spread of the rest.
FUTILITY_MIN_ROUNDS = 4


def confidence_text(alpha: float) -> str:
    """An interval's confidence in words: "95 %", "97.5 %", "98.3 %"."""
    return f"{round(100 * (1 - alpha), 1):g} %"


def spent(n: int, last: int, alpha: float = ALPHA) -> float:
    """The error spent by the look at n of at most `last` paired rounds (Lan-DeMets,
    Pocock-type): alpha * ln(1 + (e - 1) * n / last)."""
    return alpha * math.log1p((math.e - 1) * min(n, last) / last)


@lru_cache(maxsize=1024)
def nominal_levels(first: int, last: int, alpha: float = ALPHA,
                   paths: int = CALIBRATION_PATHS) -> tuple[float, ...]:
    """The two-sided nominal level of the paired t-test at each look n = first..last, such
    that the chance of rejecting a true null at any look is spent(n) by look n and alpha
    by the last. Deterministic (a fixed seed); calibrated once per plan and cached. `paths`:
    null sweeps simulated (fewer for the hypothetical plans a projection tries)."""
    import numpy as np
    from scipy.special import stdtr, stdtrit

    if not 2 <= first <= last:
        raise ValueError(f"looks need 2 <= first <= last, got {first}..{last}")
    levels = [spent(first, last, alpha)]  # the first look's t statistic is exactly t(n-1)
    if last == first:
        return tuple(levels)
    rng = np.random.default_rng(CALIBRATION_SEED)
    m = paths
    s1, s2 = np.zeros(m), np.zeros(m)
    for _ in range(first):
        x = rng.standard_normal(m)
        s1 += x
        s2 += x * x

    def t_abs(n, idx):
        mean = s1[idx] / n
        var = np.maximum((s2[idx] - n * mean * mean) / (n - 1), 1e-300)
        return np.abs(mean / np.sqrt(var / n))

    def p_of(n, t):
        return 2 * stdtr(n - 1, -t)

    # A p-value is monotone in |t| at one look: thresholds and order statistics are taken
    # on |t| (a partition, not a sort; the t distribution only at the two paths that set
    # the level), which gives the same levels as p-values of every path at a tenth of the
    # cost.
    alive = np.flatnonzero(t_abs(first, slice(None)) <= stdtrit(first - 1, 1 - levels[0] / 2))
    for n in range(first + 1, last + 1):
        x = rng.standard_normal(m)
        s1 += x
        s2 += x * x
        t = t_abs(n, alive)
        # rejections this look may add: what the spending allows beyond those made so far
        new = int(round(spent(n, last, alpha) * m)) - (m - alive.size)
        if new <= 0:
            level = float(p_of(n, t.max())) * 0.5 if t.size else 0.0
        elif new >= t.size:
            level = 1.0
        else:  # between the new-th and (new + 1)-th largest |t|
            top = -np.partition(-t, (new - 1, new))
            level = float((p_of(n, top[new - 1]) + p_of(n, top[new])) / 2)
        levels.append(level)
        if level >= 1.0:
            alive = alive[:0]
        elif level > 0.0:
            alive = alive[t <= stdtrit(n - 1, 1 - level / 2)]
    return tuple(levels)


@dataclass(frozen=True)
class LookPlan:
    """Where a sweep looks at its contests: after `first` (its minimum rounds, at least 2)
    through `last` (its max_rounds) paired rounds, with `alpha` spent over them."""

    first: int = DEFAULT_ROUNDS
    last: int = DEFAULT_MAX_ROUNDS
    alpha: float = ALPHA
    # null sweeps its levels are calibrated with (a projection's hypothetical plans: fewer)
    paths: int = CALIBRATION_PATHS

    @classmethod
    def of(cls, rounds: int, max_rounds: int, alpha: float = ALPHA) -> "LookPlan":
        """The looks a budget of rounds..max_rounds allows (a single round has no interval:
        its first look is at 2)."""
        first = max(2, rounds)
        return cls(first, max(first, max_rounds), alpha)

    @property
    def sequential(self) -> bool:
        """More than one look: the interval is a sequential one."""
        return self.last > self.first

    def level(self, look: int) -> float:
        """The nominal two-sided level at a look (the sweep's round it was taken after). A
        look before `first` uses the first's, after `last` the last's."""
        levels = nominal_levels(self.first, self.last, self.alpha, self.paths)
        return levels[min(max(look, self.first), self.last) - self.first]

    def describe(self) -> str:
        looks = (f"round {self.first}" if self.first == self.last
                 else f"rounds {self.first}-{self.last}")
        return (f"{confidence_text(self.alpha)} sequential interval: the error rate holds over "
                f"the looks at {looks} (Lan-DeMets Pocock-type spending, calibrated for the "
                "paired t statistic)")


def critical(plan: LookPlan, n: int, look: int | None = None) -> float:
    """The t quantile that bounds the interval of n paired rounds at a look (default: the
    n-th round; fewer paired rounds than the look's number when a round failed, which
    widens the interval rather than spending another look's error)."""
    from scipy.special import stdtrit

    return float(stdtrit(n - 1, 1 - plan.level(n if look is None else look) / 2))


@dataclass(frozen=True)
class VerdictRule:
    """How a contest is decided: the practical margin (a fraction: 0.02 is +-2 %) its
    interval must clear to name a winner, or lie inside to call it equivalent; and the looks
    the sweep's budget allows."""

    margin: float = DEFAULT_VERDICT_MARGIN
    plan: LookPlan = LookPlan()

    @classmethod
    def of(cls, rounds: int, max_rounds: int, margin: float, alpha: float = ALPHA):
        return cls(margin, LookPlan.of(rounds, max_rounds, alpha))

    @property
    def band(self) -> float:
        """The margin on the log scale."""
        return math.log1p(self.margin)
