"""How many queries every probe of a max-QPS search runs, and so which targets it may try.

A search holds its query count N fixed (early stopping lets more queries over the bound the
more a test runs: engine/core/early_stopping.py), and a probe of N queries at q QPS runs
N / q seconds. Two limits follow from N and the bound: a probe runs at most MAX_PROBE_S
(so the search goes no lower than N / MAX_PROBE_S QPS), and its queries span at least
SPAN_BOUNDS bounds (so it goes no higher than N / (SPAN_BOUNDS x bound)). A fixed N of
1,000 at a 50 ms bound stops every search at 1,000 QPS, and a configuration that serves
11,000 reports "max >= 1,000": a rule that cannot decide.

So unless the user names N, it is chosen once per search, before its first Server probe,
from the search's estimate E (the first target given, this machine's closed loop x
replicas, the Offline run's samples/s; a tuning: its fastest surviving candidate's closed
loop) so that the ceiling is HEADROOM x E:

    N = max(1,000, SPAN_BOUNDS x bound x HEADROOM x E), two significant digits, rounded up

HEADROOM is 8: a max found needs a missed target above it within the targets, and an
estimate can be under the max (a closed loop measured on a busier day or at a smaller
batch, a first target guessed low); 8 lets the doubling go three steps past E, so any max
under 8 E is bracketed. Raising N raises the floor as much, so N is held (two significant
digits, rounded down) to what keeps ROOM_BELOW (8) halvings under the lowest estimate: a
probe at 1/8 of it runs within MAX_PROBE_S (an Offline or closed-loop figure is over the
Server max, far over for a model of microseconds; a tuning's slowest candidate and its
default run the same N). That binds over a bound of MAX_PROBE_S / (SPAN_BOUNDS x HEADROOM
x ROOM_BELOW) = 234 ms (one estimate), and a million queries (SEARCH_QUERIES_RANGE) at
most; the choice then says the search reaches less than 8 E, and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.core.limits import SEARCH_QUERIES_RANGE, SERVE_QPS_RANGE

__all__ = ["DEFAULT_SEARCH_QUERIES", "MAX_PROBE_S", "SPAN_BOUNDS", "HEADROOM", "ROOM_BELOW",
           "probe_qps_range", "QueryChoice", "choose_query_count", "readable"]

# The fewest queries an automatic choice runs, and what a search ran before the count was
# chosen: 1,000 is where early stopping first lets more than one query of a probe go over
# the bound (2: the bound holds for 99.8 % of them), so one stray slow query (a page fault,
# a collector pause) does not fail a rate a p99 meets, as it does at 459-661 queries, where
# the bound is a max.
DEFAULT_SEARCH_QUERIES = 1_000
# The longest a probe's queries are scheduled over (N / q seconds at q QPS): 5 minutes, so a
# search of a slow model is not hours of probes; the search goes no lower than N / 300 QPS
# (3.33 QPS at 1,000 queries) and says so, and fewer queries a probe reach lower rates.
MAX_PROBE_S = 300.0
# The shortest a probe's queries are scheduled over, in bounds: at a rate 5 % over what the
# system sustains its backlog, and so each new query's wait, grows by 5 % of the time
# elapsed, so within 20 bounds the last queries are over the bound, more than early
# stopping allows; a shorter probe passes that rate. Seen here: the identity model VALID at
# 64,000 QPS over 1,000 queries (15.6 ms under a 20 ms bound) while it completed 30,453
# samples/s. So the search goes no higher than N / (20 x bound), and says so; more queries
# a probe reach higher rates. It bounds how far a max can overstate a sustained rate (5 %,
# the default precision), and caps a search's bound at MAX_PROBE_S / 20 (15 s).
SPAN_BOUNDS = 20
# An automatic count's ceiling over the estimate, and its room under the lowest estimate
# (the module's docstring says why 8).
HEADROOM = 8
ROOM_BELOW = 8


def probe_qps_range(query_count: int | None,
                    bound_ms: float | None = None) -> tuple[float, float]:
    """The targets a search of query_count queries a probe may try under bound_ms: no lower
    than what runs them in MAX_PROBE_S, no higher than what spans them over SPAN_BOUNDS
    bounds (None: a search stored before the count was fixed, the whole range)."""
    lo, hi = SERVE_QPS_RANGE
    if not query_count:
        return lo, hi
    if bound_ms:
        hi = min(hi, query_count / (SPAN_BOUNDS * bound_ms / 1000))
    return max(lo, query_count / MAX_PROBE_S), hi


def readable(x: float, up: bool = True) -> int:
    """x to two significant digits, rounded up (or down): 145,048 -> 150,000; 1,875 ->
    1,900 (down: 1,800)."""
    if not x >= 1:  # under one query: no digits to keep (a count is at least 1,000)
        return 1 if up and x > 0 else 0
    step = 10 ** max(0, math.floor(math.log10(x)) - 1)
    units = x / step
    units = math.ceil(units - 1e-9) if up else math.floor(units + 1e-9)
    return int(units * step)


def _qps(q: float) -> str:
    return f"{q:,.1f}" if q < 100 else f"{q:,.0f}"


@dataclass(frozen=True)
class QueryChoice:
    """A search's query count and where it came from: given by the user (estimate_qps
    None), or chosen from an estimate (choose_query_count)."""
    query_count: int
    bound_ms: float | None = None
    estimate_qps: float | None = None  # None: the user named the count
    source: str = ""  # where the estimate came from, in words
    lowest_qps: float | None = None  # a tuning's slowest estimate, when under estimate_qps
    binds: str = ""  # "": the ceiling is HEADROOM x the estimate; "duration", "range"

    @property
    def ceiling(self) -> float:
        return probe_qps_range(self.query_count, self.bound_ms)[1]

    def text(self) -> str:
        """'150,000 queries per probe (chosen from the estimate 18,132 QPS, the Offline
        run's samples/s, so the search can reach 150,000 QPS)'; a given count: '5,000
        queries per probe (given)'."""
        head = f"{self.query_count:,} queries per probe"
        if self.estimate_qps is None:
            return f"{head} (given)"
        source = f", {self.source}," if self.source else ""
        why = ""
        if self.binds:
            times = self.ceiling / self.estimate_qps
            low = (f"the slowest candidate's {_qps(self.lowest_qps)} QPS" if self.lowest_qps
                   and self.lowest_qps < self.estimate_qps else "the estimate")
            why = (f", {times:,.2g}x the estimate, not {HEADROOM}x: " + (
                f"{SEARCH_QUERIES_RANGE[1]:,} queries is the most a probe runs"
                if self.binds == "range" else
                f"more queries would run a probe at 1/{ROOM_BELOW} of {low} past "
                f"{MAX_PROBE_S:g} s"))
        return (f"{head} (chosen from the estimate {_qps(self.estimate_qps)} QPS{source} so "
                f"the search can reach {_qps(self.ceiling)} QPS{why})")

    def fields(self) -> dict:
        """What a search's stored request records of it (from_fields reads it back)."""
        if self.estimate_qps is None:
            return {"search_queries": self.query_count}
        return {"search_queries": self.query_count, "queries_from": {
            "estimate_qps": self.estimate_qps, "source": self.source,
            "lowest_qps": self.lowest_qps, "binds": self.binds}}

    @classmethod
    def from_fields(cls, fields: dict) -> "QueryChoice | None":
        """A stored request's choice; None when it recorded no count (stored before a search
        fixed one, or before its count was chosen)."""
        n = fields.get("search_queries")
        if not isinstance(n, int) or isinstance(n, bool):
            return None
        bound = fields.get("bound_ms")
        how = fields.get("queries_from")
        if not isinstance(how, dict) or not how.get("estimate_qps"):
            return cls(n, bound)
        return cls(n, bound, float(how["estimate_qps"]), str(how.get("source") or ""),
                   how.get("lowest_qps"), str(how.get("binds") or ""))


def choose_query_count(estimate_qps: float, bound_ms: float, *, source: str = "",
                       lowest_qps: float | None = None) -> QueryChoice:
    """The automatic count for a search from estimate_qps (a tuning: its fastest candidate's)
    under bound_ms, keeping ROOM_BELOW halvings under lowest_qps (a tuning's slowest
    estimate; None: the estimate's own). Pure; the module's docstring states the rule."""
    lowest = min(lowest_qps or estimate_qps, estimate_qps)
    want = SPAN_BOUNDS * bound_ms / 1000 * HEADROOM * estimate_qps
    n, most = readable(want), SEARCH_QUERIES_RANGE[1]
    budget = MAX_PROBE_S * lowest / ROOM_BELOW  # a probe at lowest / ROOM_BELOW in time
    binds = ""
    if n > budget:
        n, binds = readable(budget, up=False), "duration"
    if n > most:
        n, binds = most, "range"
    n = max(n, DEFAULT_SEARCH_QUERIES)
    choice = QueryChoice(n, bound_ms, estimate_qps, source,
                         lowest if lowest < estimate_qps else None, binds)
    if binds == "duration" and choice.ceiling >= HEADROOM * estimate_qps:
        choice = QueryChoice(n, bound_ms, estimate_qps, source, choice.lowest_qps)
    return choice
