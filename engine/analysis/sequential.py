"""A sequential rule for rounds until decided: an error rate that holds over every look.

A sweep looks at each contest after every round from its minimum rounds to its max_rounds
and stops the contest once it is decided. Re-testing a fixed 95 % interval at each look
would name a winner for a true tie far more often than 5 % (optional stopping: about 13 %
over looks at rounds 3-6 in a seeded simulation). So every look uses a narrower nominal
level, chosen so that the chance of any false statement over all the looks the budget
allows is the stated alpha (5 %).

Method: a group-sequential design on the paired t statistic (Jennison & Turnbull's
repeated confidence intervals). The error is spent over the looks by the Lan-DeMets
Pocock-type function alpha * ln(1 + (e - 1) * n / N) (n paired rounds of at most N), which
gives an early look a fair share (about 62 % of alpha at 3 of 6 rounds) so that a clear
contest is decided at the minimum rounds. With unknown variance and 2-5 degrees of freedom
the normal-theory boundaries do not apply, so the nominal level of each look is calibrated
for the t statistic itself by a seeded simulation of null sweeps (exact for the first look,
which needs none). The interval at a look, mean +- t(1 - a_n / 2, n - 1) * s / sqrt(n) on
log ratios, then covers the true ratio at every look at once with 95 % probability: a
winner, an "equivalent within the margin" and a stop are all covered by that one number.

A decision needs the interval to clear the practical margin (a winner) or to lie inside it
(equivalent). A contest whose interval can do neither stops early, from its 4th round, when
even an optimistic spread (the lower 90 % confidence limit of the standard deviation of its
rounds but the one furthest from their median, so one wild round never stops it) would need
more rounds than the budget allows (a futility stop: it can only lower the error rate);
either way the sentence says how many rounds the current spread would need.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache

from engine.core.limits import DEFAULT_MAX_ROUNDS, DEFAULT_ROUNDS, DEFAULT_VERDICT_MARGIN

__all__ = ["LookPlan", "VerdictRule", "Comparison", "compare_rounds", "nominal_levels",
           "spent", "critical", "rounds_needed", "optimistic_sd", "WINNER", "EQUIVALENT",
           "UNDECIDED", "SINGLE", "FUTILITY_MIN_ROUNDS", "ALPHA", "CALIBRATION_PATHS", "CALIBRATION_SEED",
           "FUTILITY_CONFIDENCE", "MAX_PROJECTED_ROUNDS"]

# The chance of any false statement about a comparison (a contest's rival against its best;
# a contest of k contenders makes k - 1), over all its looks.
ALPHA = 0.05
# Null sweeps simulated to calibrate each look's nominal level: the calibrated error rate
# is within about +-0.001 of alpha (binomial standard error at this size).
CALIBRATION_PATHS = 200_000
CALIBRATION_SEED = 20261125
# The futility stop projects with the spread's lower confidence limit at this level: a
# contest stops only if it would stay undecided even were its noise this favourable.
FUTILITY_CONFIDENCE = 0.90
# Projections beyond this many rounds are reported as "more than" it.
MAX_PROJECTED_ROUNDS = 1000
# A futility stop needs this many paired rounds: one left out (the furthest from the
# median), at least 3 to judge the spread of the rest.
FUTILITY_MIN_ROUNDS = 4


def spent(n: int, last: int, alpha: float = ALPHA) -> float:
    """The error spent by the look at n of at most `last` paired rounds (Lan-DeMets,
    Pocock-type): alpha * ln(1 + (e - 1) * n / last)."""
    return alpha * math.log1p((math.e - 1) * min(n, last) / last)


@lru_cache(maxsize=256)
def nominal_levels(first: int, last: int, alpha: float = ALPHA) -> tuple[float, ...]:
    """The two-sided nominal level of the paired t-test at each look n = first..last, such
    that the chance of rejecting a true null at any look is spent(n) by look n and alpha
    by the last. Deterministic (a fixed seed); calibrated once per plan and cached."""
    import numpy as np
    from scipy.special import stdtr

    if not 2 <= first <= last:
        raise ValueError(f"looks need 2 <= first <= last, got {first}..{last}")
    levels = [spent(first, last, alpha)]  # the first look's t statistic is exactly t(n-1)
    if last == first:
        return tuple(levels)
    rng = np.random.default_rng(CALIBRATION_SEED)
    m = CALIBRATION_PATHS
    s1, s2 = np.zeros(m), np.zeros(m)
    for _ in range(first):
        x = rng.standard_normal(m)
        s1 += x
        s2 += x * x

    def pvalues(n, idx):
        mean = s1[idx] / n
        var = np.maximum((s2[idx] - n * mean * mean) / (n - 1), 1e-300)
        return 2 * stdtr(n - 1, -np.abs(mean / np.sqrt(var / n)))

    alive = np.flatnonzero(pvalues(first, slice(None)) >= levels[0])
    for n in range(first + 1, last + 1):
        x = rng.standard_normal(m)
        s1 += x
        s2 += x * x
        p_alive = pvalues(n, alive)
        p = np.sort(p_alive)
        # rejections this look may add: what the spending allows beyond those made so far
        new = int(round(spent(n, last, alpha) * m)) - (m - alive.size)
        if new <= 0:
            level = float(p[0]) * 0.5 if p.size else 0.0
        elif new >= p.size:
            level = 1.0
        else:
            level = float((p[new - 1] + p[new]) / 2)
        levels.append(level)
        alive = alive[p_alive >= level]
    return tuple(levels)


@dataclass(frozen=True)
class LookPlan:
    """Where a sweep looks at its contests: after `first` (its minimum rounds, at least 2)
    through `last` (its max_rounds) paired rounds, with `alpha` spent over them."""

    first: int = DEFAULT_ROUNDS
    last: int = DEFAULT_MAX_ROUNDS
    alpha: float = ALPHA

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
        levels = nominal_levels(self.first, self.last, self.alpha)
        return levels[min(max(look, self.first), self.last) - self.first]

    def describe(self) -> str:
        looks = (f"round {self.first}" if self.first == self.last
                 else f"rounds {self.first}-{self.last}")
        return (f"{100 * (1 - self.alpha):g} % sequential interval: the error rate holds over "
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


def rounds_needed(mean: float, sd: float, rule: VerdictRule) -> int | None:
    """Paired rounds at which an interval of this spread around this mean would clear the
    margin (or fit inside it, when the mean lies inside), at the last look's level; None
    beyond MAX_PROJECTED_ROUNDS (or when the mean sits on the margin itself)."""
    gap = abs(abs(mean) - rule.band)
    if gap == 0:
        return None
    if sd == 0:
        return 2
    def half(n):  # the interval's half-width at the last look with n paired rounds
        return critical(rule.plan, n, rule.plan.last) * sd / math.sqrt(n)

    lo, hi = 2, MAX_PROJECTED_ROUNDS
    if half(hi) >= gap:
        return None
    while lo < hi:  # the half-width shrinks with n: bisect for the first n that fits
        mid = (lo + hi) // 2
        if half(mid) < gap:
            hi = mid
        else:
            lo = mid + 1
    return lo


def optimistic_sd(sd: float, n: int) -> float:
    """The lower FUTILITY_CONFIDENCE confidence limit of a standard deviation estimated
    from n values."""
    from scipy.special import chdtri

    return sd * math.sqrt((n - 1) / chdtri(n - 1, 1 - FUTILITY_CONFIDENCE))


WINNER, EQUIVALENT, UNDECIDED, SINGLE = "winner", "equivalent", "undecided", "single round"


@dataclass(frozen=True)
class Comparison:
    """A paired comparison of two configurations over their common rounds, judged by a
    VerdictRule: a winner (the interval clears the margin), equivalent (it lies inside
    the margin), undecided, or a single round (no interval)."""

    speedup: float  # how many times faster A is than B (B's latency / A's)
    ci_low: float
    ci_high: float
    rounds: int  # paired rounds used
    state: str  # WINNER, EQUIVALENT, UNDECIDED or SINGLE
    rule: VerdictRule = VerdictRule()
    spread: float | None = None  # standard deviation of the paired log ratios, per round
    needed: int | None = None  # paired rounds this spread would need (None: > MAX or n/a)
    # even a favourable spread (its lower 90 % limit, without the wildest round) would not
    # decide it within the budget: no further round is spent on it
    futile: bool = False

    @property
    def decided(self) -> bool:
        """A winner or equivalent: a statement the rule stands behind."""
        return self.state in (WINNER, EQUIVALENT)

    @property
    def done(self) -> bool:
        """Decided, or further rounds within the budget would not decide it."""
        return self.decided or self.futile

    @property
    def significant(self) -> bool:
        """The interval excludes 1 (a difference, perhaps inside the margin)."""
        return self.rounds >= 2 and not self.ci_low <= 1.0 <= self.ci_high

    @property
    def noise_pct(self) -> float | None:
        """The paired spread per round, in percent of the ratio."""
        return None if self.spread is None else 100 * math.expm1(self.spread)

    def leaning(self, a: str, b: str):
        """(faster, slower, factor, low, high): the comparison read from the side it leans to."""
        # Name the side the measurement leans to, so "1.09x" is never read backwards.
        if self.speedup >= 1:
            return a, b, self.speedup, self.ci_low, self.ci_high
        return b, a, 1 / self.speedup, 1 / self.ci_high, 1 / self.ci_low

    def sentence(self, a: str, b: str) -> str:
        n = f"{self.rounds} rounds"
        fast, slow, x, lo, hi = self.leaning(a, b)
        if self.state == SINGLE:
            return (f"{a} vs {b}: {self.speedup:.2f}x from a single round; no interval "
                    "(run at least 2 rounds)")
        digits = 3 if self.state == EQUIVALENT else 2
        kind = "95 % sequential interval" if self.rule.plan.sequential else "95 % CI"
        interval = f"{kind} {lo:.{digits}f}-{hi:.{digits}f}"
        if self.state == WINNER:
            return f"{fast} is {x:.2f}x faster than {slow} ({interval}, {n})"
        margin = f"±{100 * self.rule.margin:g} %"
        if self.state == EQUIVALENT:
            return (f"{a} and {b} are equivalent within {margin} ({fast} measured {x:.3f}x "
                    f"faster; {interval}, {n})")
        why = []
        if self.significant:
            why.append(f"the interval excludes 1 but reaches inside the {margin} margin")
        if self.rounds == 2:  # Student-t with 1 degree of freedom: 12.7 x the error
            why.append("2 rounds give a very wide interval: 3 or more narrow it")
        why.append(self.projection())
        if self.futile:
            why.append(f"stopped early: even a favourable spread would not decide it within "
                       f"{self.rule.plan.last} rounds")
        return (f"no decision between {a} and {b}: {fast} measured {x:.2f}x faster than "
                f"{slow}, {interval} over {n}; " + "; ".join(why))

    def projection(self) -> str:
        """How many rounds the current spread would need, in words."""
        spread = f"±{self.noise_pct:.1f} % per round"
        if self.needed is None:
            return (f"at this spread ({spread}) more than {MAX_PROJECTED_ROUNDS} rounds would "
                    f"be needed: the difference sits on the ±{100 * self.rule.margin:g} % "
                    "margin or below what this machine's noise lets rounds resolve")
        more = max(self.needed - self.rounds, 1)
        return (f"at this spread ({spread}) about {more} more round{'s' if more > 1 else ''} "
                f"({self.rounds + more} in all) would decide it")


def compare_rounds(a: dict[int, float], b: dict[int, float],
                   rule: VerdictRule | None = None) -> Comparison | None:
    """a, b: round number -> median latency. Only rounds both have are paired: d_r =
    ln(b_r / a_r), and the interval is mean(d) +- t * sd(d) / sqrt(n) with the rule's
    sequential quantile for n paired rounds. rule None: a fixed 95 % interval at the rounds
    given and no margin (one look, nothing sequential)."""
    paired = sorted(set(a) & set(b))
    if not paired:
        return None
    d = [math.log(b[r] / a[r]) for r in paired]
    mean, n = statistics.fmean(d), len(d)
    if rule is None:
        rule = VerdictRule(0.0, LookPlan(max(n, 2), max(n, 2)))
    if n < 2:
        s = math.exp(mean)
        return Comparison(s, s, s, 1, SINGLE, rule)
    sd = statistics.stdev(d)
    # the look: the round after which the sweep judged these rounds (round numbers; other
    # keys, such as a regression's (sweep, round), are one look at n)
    look = max(paired) if all(isinstance(k, int) for k in paired) else n
    half = critical(rule.plan, n, look) * sd / math.sqrt(n)
    lo, hi = mean - half, mean + half
    band = rule.band
    if lo > band or hi < -band:
        state = WINNER
    elif -band < lo and hi < band:
        state = EQUIVALENT
    else:
        state = UNDECIDED
    needed = rounds_needed(mean, sd, rule)
    futile = False
    if state == UNDECIDED and n >= max(rule.plan.first, FUTILITY_MIN_ROUNDS):
        # Judged without the round furthest from the median: a single wild round widens the
        # interval, it never ends a contest.
        centre = statistics.median(d)
        kept = sorted(d, key=lambda x: abs(x - centre))[:-1]
        hopeful = rounds_needed(statistics.fmean(kept),
                                optimistic_sd(statistics.stdev(kept), len(kept)), rule)
        futile = hopeful is None or hopeful > rule.plan.last
    return Comparison(math.exp(mean), math.exp(lo), math.exp(hi), n, state, rule, sd,
                      needed, futile)
