"""Break-even between two choices (throughput per machine, USD per hour): which is cheaper
at each request rate, as steps the Cost page's text and chart both read.

Whole machines make a fleet's cost piecewise constant in the rate: a choice serving t
samples/s a machine needs k machines for any rate in ((k-1)t, kt] (machines_needed, the one
rule every bill uses), so its cost changes only at multiples of t. Between two consecutive
breakpoints of either choice both costs are constant; each such interval is judged once,
at its midpoint, never by nudging a breakpoint by an absolute amount (an absolute nudge is
lost in the tolerance machines_needed forgives at large rates and reports every change a
step late). A change "at r -> A" means A is cheaper for rates just above r: at r itself the
previous choice's fleet still serves it.

Two breakpoints closer than _SAME_RATE of the rate are one breakpoint: machines_needed
forgives a billionth of a machine of float noise, so a gap narrower than that is noise (3 x
0.1 against 0.3), and a midpoint of any wider gap lies clear of that forgiveness. No
framework import here.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.analysis.cost import machines_needed
from engine.core.errors import UserError

__all__ = ["Step", "break_even_steps", "break_even_rates", "cost_vertices", "MAX_STEPS"]

# Breakpoints of both choices together a comparison may have: a comparison of 100,000 small
# machines says nothing a few thousand do not, and the chart would carry every one.
MAX_STEPS = 50_000
_SAME_RATE = 4e-9  # relative: 4x machines_needed's forgiveness, so midpoints clear it
_SAME_COST = 1e-9  # relative: two fleets' costs this close are equal (3 x 0.448 vs 1.344)


@dataclass(frozen=True)
class Step:
    """Request rates in (start, end] (samples/s) over which both fleets stay the same size."""
    start: float
    end: float
    machines: tuple[int, int]  # A's and B's whole machines for any rate in the interval
    usd_per_hour: tuple[float, float]  # each fleet's hourly price

    @property
    def cheaper(self) -> str:
        """'A', 'B' or 'equal' (costs within a billionth of each other)."""
        a, b = self.usd_per_hour
        if abs(a - b) <= _SAME_COST * max(a, b):
            return "equal"
        return "A" if a < b else "B"


def _check(a: tuple[float, float], b: tuple[float, float], max_rate: float) -> None:
    for name, (thr, usd) in (("A", a), ("B", b)):
        if not thr > 0 or not usd >= 0:
            raise UserError(f"throughput: {name}'s {thr!r} samples/s at ${usd!r}/h cannot be "
                            "compared; allowed: throughput > 0, price >= 0", field="throughput")
    if not max_rate > 0:
        raise UserError(f"max_rate: {max_rate!r} samples/s; allowed: > 0", field="max_rate")
    steps = max_rate / a[0] + max_rate / b[0]
    if steps > MAX_STEPS:
        most = MAX_STEPS / (1 / a[0] + 1 / b[0])
        raise UserError(f"max_rate: {max_rate:,.9g} samples/s takes {steps:,.0f} steps (one "
                        f"a machine) for these throughputs; allowed: up to {most:,.9g} "
                        f"samples/s ({MAX_STEPS:,} steps)", field="max_rate")


def _breakpoints(a: float, b: float, max_rate: float) -> list[float]:
    """Multiples of either throughput below max_rate, ascending, near-equal ones merged."""
    raw = sorted({k * t for t in (a, b) for k in range(1, int(max_rate / t) + 2)
                  if k * t < max_rate})
    out: list[float] = []
    for p in raw:
        if out and p - out[-1] <= _SAME_RATE * p:
            continue
        out.append(p)
    if out and max_rate - out[-1] <= _SAME_RATE * max_rate:
        out.pop()  # max_rate itself a multiple: its own interval ends there
    return out


def break_even_steps(a: tuple[float, float], b: tuple[float, float],
                     max_rate: float) -> list[Step]:
    """a, b: (throughput per machine [samples/s], USD per hour). The intervals from 0 to
    max_rate over which neither fleet changes size, each with both fleets' sizes and prices
    (machines_needed at the interval's midpoint)."""
    _check(a, b, max_rate)
    edges = [0.0, *_breakpoints(a[0], b[0], max_rate), float(max_rate)]
    steps = []
    for lo, hi in zip(edges, edges[1:]):
        mid = (lo + hi) / 2
        n = (machines_needed(mid, a[0]), machines_needed(mid, b[0]))
        steps.append(Step(lo, hi, n, (n[0] * a[1], n[1] * b[1])))
    return steps


def break_even_rates(a: tuple[float, float], b: tuple[float, float],
                     max_rate: float) -> list[tuple[float, str]]:
    """The request rates up to max_rate at which the cheaper choice changes, each with the
    choice cheaper just above it ('A', 'B' or 'equal'); which is cheaper from 0 is
    break_even_steps(...)[0].cheaper."""
    steps = break_even_steps(a, b, max_rate)
    return [(s.start, s.cheaper) for prev, s in zip(steps, steps[1:])
            if s.cheaper != prev.cheaper]


def cost_vertices(steps: list[Step], which: int,
                  hours: float) -> tuple[list[float], list[float]]:
    """One choice's monthly cost as a step line's vertices (x: rate, y: USD a month), drawn
    horizontal-then-vertical: (0, one machine's cost), then at each rate where that fleet
    grows its new cost, and max_rate last; which: 0 for A, 1 for B."""
    xs, ys = [], []
    for s in steps:
        cost = s.usd_per_hour[which] * hours
        if not ys or cost != ys[-1]:
            xs.append(s.start)
            ys.append(cost)
    xs.append(steps[-1].end)
    ys.append(ys[-1])
    return xs, ys
