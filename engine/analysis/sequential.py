"""A sequential rule for rounds until decided: an error rate that holds over every look.

A sweep looks at each contest after every round from its minimum rounds to its max_rounds
and stops the contest once it is decided. Re-testing a fixed 95 % interval at each look
would name a winner for a true tie far more often than 5 % (optional stopping: about 13 %
over looks at rounds 3-6 in a seeded simulation). So every look uses a narrower nominal
level, chosen so that the chance of any false statement over all the looks the budget
allows is the stated alpha (5 %).

Method: a group-sequential design on the paired t statistic (Jennison & Turnbull's
repeated confidence intervals), with Lan-DeMets Pocock-type error spending whose nominal
levels are calibrated for the t statistic by a seeded simulation (engine/analysis/looks.py).
The interval at a look, mean +- t(1 - a_n / 2, n - 1) * s / sqrt(n) on log ratios, then
covers the true ratio at every look at once with probability 1 - alpha: a winner, an
"equivalent within the margin" and a stop are all covered by that one number. A contest of
k contenders judges its k - 1 comparisons as one family (Holm, engine/analysis/verdicts.py):
a comparison is then judged at alpha / j for a j from k - 1 down to 1, and its interval is
shown at the confidence it was judged at.

A decision needs the interval to clear the practical margin (a winner) or to lie inside it
(equivalent). A contest whose interval can do neither stops early, from its 4th round, when
even an optimistic spread (the lower 90 % confidence limit of the standard deviation of its
rounds but the one furthest from their median, so one wild round never stops it) would need
more rounds than the budget allows (a futility stop: it can only lower the error rate).
Either way the sentence says what max rounds would decide it with 80 % probability
(engine/analysis/projection.py). The arithmetic runs on arrays (engine/analysis/paired.py),
one implementation for a single comparison, a sweep's contests and the seeded simulations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from engine.analysis.looks import (ALPHA, CALIBRATION_PATHS, CALIBRATION_SEED,
                                   FUTILITY_CONFIDENCE, FUTILITY_MIN_ROUNDS, LookPlan,
                                   VerdictRule, confidence_text, critical, nominal_levels,
                                   spent)
from engine.analysis.paired import (EQUIVALENT_CODE, SINGLE_CODE, WINNER_CODE, futile,
                                    interval, paired_stats)
from engine.analysis.projection import (MAX_PROJECTED_ROUNDS, PROBABILITY, Projection,
                                        project)

__all__ = ["LookPlan", "VerdictRule", "Comparison", "compare_rounds", "comparison_of",
           "nominal_levels", "spent", "critical", "rounds_needed", "optimistic_sd", "WINNER",
           "EQUIVALENT", "UNDECIDED", "SINGLE", "STATES", "FUTILITY_MIN_ROUNDS", "ALPHA",
           "CALIBRATION_PATHS", "CALIBRATION_SEED", "FUTILITY_CONFIDENCE",
           "MAX_PROJECTED_ROUNDS", "PROBABILITY"]

# rounds_needed's plug-in figure: beyond this many rounds it says None.
_NEEDED_CAP = 1000


def rounds_needed(mean: float, sd: float, rule: VerdictRule) -> int | None:
    """Paired rounds at which an interval of exactly this spread around exactly this mean
    would clear the margin (or fit inside it, when the mean lies inside), at the last
    look's level; None beyond 1000 (or when the mean sits on the margin itself). A plug-in
    figure: right about half the time, so sentences use the projection instead; the
    futility stop asks it of an optimistic spread (engine/analysis/paired.py's futile is
    the same test on arrays)."""
    gap = abs(abs(mean) - rule.band)
    if gap == 0:
        return None
    if sd == 0:
        return 2

    def half(n):  # the interval's half-width at the last look with n paired rounds
        return critical(rule.plan, n, rule.plan.last) * sd / math.sqrt(n)

    lo, hi = 2, _NEEDED_CAP
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
# paired.py's state codes, in words
STATES = {WINNER_CODE: WINNER, EQUIVALENT_CODE: EQUIVALENT, SINGLE_CODE: SINGLE, 0: UNDECIDED}


@dataclass(frozen=True)
class Comparison:
    """A paired comparison of two configurations over their common rounds, judged by a
    VerdictRule: a winner (the interval clears the margin), equivalent (it lies inside
    the margin), undecided, or a single round (no interval). rule.plan.alpha is the alpha
    it was judged at: the rule's own, or a contest's Holm share of it."""

    speedup: float  # how many times faster A is than B (B's latency / A's)
    ci_low: float
    ci_high: float
    rounds: int  # paired rounds used
    state: str  # WINNER, EQUIVALENT, UNDECIDED or SINGLE
    rule: VerdictRule = VerdictRule()
    spread: float | None = None  # standard deviation of the paired log ratios, per round
    # even a favourable spread (its lower 90 % limit, without the wildest round) would not
    # decide it within the budget: no further round is spent on it
    futile: bool = False
    # Holm: the comparison's place in its contest's family ((step, of); (1, 1) alone)
    family: tuple[int, int] = (1, 1)

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

    @cached_property
    def projected(self) -> Projection | None:
        """The max rounds a sweep would need to decide it with PROBABILITY (80 %), at the
        alpha it was judged at (None: decided, or a single round)."""
        if self.decided or self.spread is None:
            return None
        plan = self.rule.plan
        return project(self.rounds, math.log(self.speedup), self.spread, self.rule.band,
                       plan.first, plan.alpha)

    @property
    def needed(self) -> int | None:
        """The projected max rounds (None: beyond MAX_PROJECTED_ROUNDS, or not projected)."""
        return self.projected.rounds if self.projected else None

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
        level = confidence_text(self.rule.plan.alpha)
        kind = f"{level} sequential interval" if self.rule.plan.sequential else f"{level} CI"
        interval_text = f"{kind} {lo:.{digits}f}-{hi:.{digits}f}"
        if self.state == WINNER:
            return f"{fast} is {x:.2f}x faster than {slow} ({interval_text}, {n})"
        margin = f"±{100 * self.rule.margin:g} %"
        if self.state == EQUIVALENT:
            return (f"{a} and {b} are equivalent within {margin} ({fast} measured {x:.3f}x "
                    f"faster; {interval_text}, {n})")
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
                f"{slow}, {interval_text} over {n}; " + "; ".join(why))

    def projection(self) -> str:
        """What max rounds would decide it, with what probability, in words."""
        spread = f"±{self.noise_pct:.1f} % per round"
        chance = f"{100 * PROBABILITY:.0f} %"
        if self.needed is None:
            at_cap = self.projected.probability if self.projected else 0.0
            return (f"at this spread ({spread}) even {MAX_PROJECTED_ROUNDS} rounds, the most "
                    f"a sweep runs, would decide it with only {100 * at_cap:.0f} % "
                    f"probability: the difference may sit on the ±{100 * self.rule.margin:g} "
                    "% margin or below what this machine's noise lets rounds resolve")
        return (f"at this spread ({spread}) a sweep of up to {self.needed} rounds would "
                f"decide it with {chance} probability (--max-rounds {self.needed}; the Run "
                "page's Max rounds)")


def comparison_of(stats, half, code, rule: VerdictRule, alpha: float, futile_: bool,
                  family: tuple[int, int] = (1, 1)) -> Comparison:
    """The Comparison of one element of paired.py's arrays (stats: a PairedStats of
    scalars), judged at `alpha`."""
    n, mean = int(stats.n), float(stats.mean)
    judged = VerdictRule(rule.margin, LookPlan(rule.plan.first, rule.plan.last, alpha,
                                               rule.plan.paths))
    if n < 2:
        s = math.exp(mean)
        return Comparison(s, s, s, 1, SINGLE, judged, family=family)
    return Comparison(math.exp(mean), math.exp(mean - half), math.exp(mean + half), n,
                      STATES[int(code)], judged, float(stats.sd), bool(futile_), family)


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
    n = len(d)
    if rule is None:
        rule = VerdictRule(0.0, LookPlan(max(n, 2), max(n, 2)))
    # the look: the round after which the sweep judged these rounds (round numbers; other
    # keys, such as a regression's (sweep, round), are one look at n)
    look = max(paired) if all(isinstance(k, int) for k in paired) else n
    stats = paired_stats([d])
    plan = rule.plan
    half, code = interval(stats, [look], rule.band, plan.first, plan.last, plan.alpha,
                          plan.paths)
    stop = futile(stats, code, rule.band, plan.first, plan.last, plan.alpha,
                  FUTILITY_MIN_ROUNDS, FUTILITY_CONFIDENCE, plan.paths)
    one = type(stats)(*(x[0] for x in (stats.n, stats.mean, stats.sd, stats.kept_mean,
                                       stats.kept_sd)))
    return comparison_of(one, float(half[0]), code[0], rule, plan.alpha, bool(stop[0]))
