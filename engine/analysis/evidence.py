"""The evidence for one configuration's change between two result sets: the log ratio of
its latency, its standard error and degrees of freedom, paired round by round inside one
sweep or between sweep means against the sweep-to-sweep spread of a build.

The unit that repeats from one build to the next is the sweep: rounds inside it share that
day's machine. The spread of a configuration's sweep means has two parts: the day, which
moves every configuration of a sweep alike and so has one degree of freedom per sweep
however many configurations share it, and the rest, pooled over configurations (a
configuration + sweep model on sweep means, engine.analysis.noise); Welch-Satterthwaite
gives the degrees of freedom of their sum, and the day's share of it is the correlation the
configurations' statistics carry (engine.analysis.multiplicity).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from engine.analysis.compare import ConfigResult, t975
from engine.analysis.noise import fit_two_way
from engine.analysis.sequential import compare_rounds

__all__ = ["Evidence", "Side", "sweep_spread", "evidence", "PAIRED", "SWEEPS", "ONE_SWEEP"]

PAIRED, SWEEPS = "paired rounds", "between sweeps"
ONE_SWEEP = ("undecided: one baseline sweep cannot tell a slower day from a slower build "
             "(select 2 or more sweeps of a side, e.g. commit:<prefix> or SWEEP,SWEEP)")


@dataclass(frozen=True)
class Evidence:
    """One configuration's change before the multiplicity adjustment: the log ratio, its
    standard error and degrees of freedom (None: no interval, with the reason)."""

    log_ratio: float
    se: float | None
    df: float | None
    method: str  # PAIRED or SWEEPS
    why_not: str = ""

    @property
    def ratio(self) -> float:
        return math.exp(self.log_ratio)

    def interval(self) -> tuple[float, float] | tuple[None, None]:
        if self.se is None:
            return None, None
        if self.se == 0:
            return self.ratio, self.ratio
        half = t975(self.df) * self.se
        return math.exp(self.log_ratio - half), math.exp(self.log_ratio + half)

    def t_beyond(self, bound: float) -> float:
        """The one-sided t statistic that the ratio exceeds `bound` (bound > 1: slower) or
        falls below it (bound < 1: faster); +-inf without spread."""
        gap = self.log_ratio - math.log(bound)
        if bound < 1:
            gap = -gap
        if self.se == 0:
            return math.inf if gap > 0 else -math.inf
        return gap / self.se


@dataclass(frozen=True)
class Side:
    """One configuration on one machine under one policy in one set: its aggregate and
    each sweep's round medians."""

    result: ConfigResult
    sweeps: dict  # sweep id -> {round: median}

    def sweep_means(self) -> list[float]:
        """Each sweep's mean log round median."""
        return [statistics.fmean(math.log(v) for v in rounds.values())
                for rounds in self.sweeps.values() if rounds]


def _day_and_rest(sides) -> tuple[float, int, float, int]:
    """One set's sweeps as configuration + sweep (the day) + residual, on sweep means:
    (day variance, its degrees of freedom, residual variance, its degrees of freedom). The
    day is shared by every configuration of a sweep, so its variance has one degree of
    freedom per sweep, however many configurations there are."""
    cells = {i: dict(zip(side.sweeps, side.sweep_means()))
             for i, side in enumerate(sides) if len(side.sweeps) >= 2}
    model = fit_two_way(cells)
    if model is None:  # one configuration: its sweeps' spread is all there is
        ss, df = 0.0, 0
        for c in cells.values():
            means = list(c.values())
            ss += sum((m - statistics.fmean(means)) ** 2 for m in means)
            df += len(means) - 1
        return (ss / df if df else 0.0), df, 0.0, 0
    days = list(model.round_effects.values())
    rest = model.residual ** 2
    # a day's estimate carries the residual over the configurations that measured it
    day = max(0.0, statistics.variance(days) - rest / model.configurations)
    return day, len(days) - 1, rest, model.df


def sweep_spread(sets) -> tuple[float | None, float, float]:
    """(standard deviation of one configuration's sweep mean from one sweep of a build to
    the next, its degrees of freedom, the day's share of its variance) from the sets'
    repeated sweeps: the day's variance (pooled over the sets, a degree of freedom per
    sweep) plus the residual's, combined by Welch-Satterthwaite. (None, 0, 0) when no set
    has two sweeps of a configuration."""
    parts = [_day_and_rest([s for s in sides if s.result.summary is not None])
             for sides in sets]
    day_df = sum(p[1] for p in parts)
    rest_df = sum(p[3] for p in parts)
    if not day_df and not rest_df:
        return None, 0, 0.0
    day = sum(p[0] * p[1] for p in parts) / day_df if day_df else 0.0
    rest = sum(p[2] * p[3] for p in parts) / rest_df if rest_df else 0.0
    terms = [(v, d) for v, d in ((day, day_df), (rest, rest_df)) if d and v > 0]
    if not terms:
        return 0.0, day_df + rest_df, 0.0
    total = sum(v for v, _ in terms)
    return (math.sqrt(total), total ** 2 / sum(v ** 2 / d for v, d in terms),
            day / total if rest_df else 1.0)


def evidence(b: Side, c: Side, spread: tuple) -> Evidence:
    """The change from b to c: paired when both are the very same rounds of one sweep,
    else between sweep means with the pooled sweep-to-sweep spread."""
    bm, cm = b.result.round_medians, c.result.round_medians
    if set(bm) == set(cm) and len(b.sweeps) == 1:
        cmp = compare_rounds(bm, cm)
        if cmp.rounds < 2:
            return Evidence(math.log(cmp.speedup), None, None, PAIRED,
                            "undecided: a single paired round has no interval")
        se = cmp.spread / math.sqrt(cmp.rounds)
        return Evidence(math.log(cmp.speedup), se, cmp.rounds - 1, PAIRED)
    mb, mc = b.sweep_means(), c.sweep_means()
    diff = statistics.fmean(mc) - statistics.fmean(mb)
    sd, df, _ = spread
    if sd is None:
        return Evidence(diff, None, None, SWEEPS, ONE_SWEEP)
    return Evidence(diff, sd * math.sqrt(1 / len(mb) + 1 / len(mc)), df, SWEEPS)
