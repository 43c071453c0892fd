"""LoadGen's early stopping for a Server test: how many of N queries may go over the latency
bound, and so which percentile the bound really held for.

LoadGen (loadgen/results.cc, PerformanceSummary::EarlyStopping, and early_stopping.cc)
counts t, the queries whose latency from their scheduled issue exceeds the bound, and
finds h, the fewest queries under the bound for which the chance of at most t overs in
h + t queries, were each over with probability 1 - p (p = 0.99, the Server percentile), is
below 1 - c (c = 0.99, its confidence): the binomial CDF, which it computes as the
regularised incomplete beta I_p(h, t + 1). The test passes when N >= h + t. That CDF falls
as the number of queries grows, so N passes with t overs exactly when
P(Binomial(N, 1 - p) <= t) < 1 - c, and the overs allowed at N are the largest such t.

A pass says "p99 <= bound at 99 % confidence" at any N, but how strict the test is depends
on N: under 459 queries no count passes; from 459 to 661 none may be over (the bound is a
max, not a p99); 2 of 1,000 (the bound held for 99.8 % of them), 33 of 5,000 (99.34 %). Two
probes of different query counts are held to different percentiles, so a search holds N
fixed (engine/run/search/max_qps.py).

Pure arithmetic, in log space (0.99^N underflows past about 70,000 queries).
"""

from __future__ import annotations

import math

__all__ = ["PERCENTILE", "CONFIDENCE", "allowed_overs", "held_percentile", "strictness",
           "bound_claim", "bound_short", "fewest_queries", "probe_counts", "held_text"]

PERCENTILE = 0.99  # LoadGen's Server target_latency_percentile
CONFIDENCE = 0.99  # LoadGen's early-stopping confidence (results.cc)


def allowed_overs(n: int, percentile: float = PERCENTILE,
                  confidence: float = CONFIDENCE) -> int | None:
    """The most of n queries that may exceed the bound and the test still pass LoadGen's
    early stopping; None when n is too few for any count to pass (under 459 at p99)."""
    if n < 1:
        return None
    q, limit = 1.0 - percentile, 1.0 - confidence
    log_pmf = n * math.log1p(-q)  # P(no query over)
    step = math.log(q) - math.log1p(-q)
    cdf = 0.0
    for t in range(n):  # P(Binomial(n, q) <= t), term by term
        cdf += math.exp(log_pmf)
        if not cdf < limit:
            return t - 1 if t else None
        log_pmf += math.log(n - t) - math.log(t + 1) + step
    return n - 1  # not reached for a percentile under 1: the CDF nears 1 long before


def fewest_queries(percentile: float = PERCENTILE, confidence: float = CONFIDENCE) -> int:
    """The fewest queries early stopping judges on (459 at p99): none over then passes."""
    return math.ceil(math.log(1.0 - confidence) / math.log(percentile))


def held_percentile(n: int) -> float | None:
    """The share of n queries (in %) that must be under the bound: 100 - 100 k / n for the k
    allowed over (99.8 at 1,000); None when no count passes."""
    k = allowed_overs(n)
    return None if k is None else 100.0 * (1.0 - k / n)


def strictness(n: int) -> str:
    """What early stopping holds n queries to: '1,000 queries, up to 2 over the bound:
    p99.8'; '500 queries, none over the bound: a max, not a p99'; '400 queries: too few,
    early stopping passes none under 459'."""
    k = allowed_overs(n)
    if k is None:
        return f"{n:,} queries: too few, early stopping passes none under {fewest_queries():,}"
    if k == 0:
        return f"{n:,} queries, none over the bound: a max, not a p99"
    return f"{n:,} queries, up to {k:,} over the bound: p{held_percentile(n):.4g}"


def bound_short(bound_ms: float) -> str:
    """'p99 ≤ 15 ms at 99 % confidence': what a VALID Server test says of its bound."""
    return f"p99 ≤ {bound_ms:g} ms at {CONFIDENCE * 100:g} % confidence"


def bound_claim(bound_ms: float, query_count: int | None) -> str:
    """A max QPS's bound as LoadGen judged it: 'p99 <= 15 ms at 99 % confidence (LoadGen
    early stopping, 1,000 queries per probe, up to 2 over allowed)'. query_count None: a
    search whose probes ran varying counts (stored before the count was fixed)."""
    head = bound_short(bound_ms)
    if query_count is None:
        return f"{head} (LoadGen early stopping; probes of varying query counts)"
    k = allowed_overs(query_count)
    allowed = ("none can pass" if k is None else "none over allowed: the bound is a max"
               if k == 0 else f"up to {k:,} over allowed")
    return f"{head} (LoadGen early stopping, {query_count:,} queries per probe, {allowed})"


def held_text(n: int | None) -> str:
    """'p99.8', 'max' (none over allowed), 'none passes' (too few), '' (n unknown)."""
    if not n:
        return ""
    held = held_percentile(n)
    return "none passes" if held is None else "max" if held == 100.0 else f"p{held:.4g}"


def probe_counts(summary: dict | None) -> tuple[int | None, int | None, int | None]:
    """A Server test's (queries LoadGen ran, queries over the bound as LoadGen counted them,
    the most its early stopping allowed over) from its stored summary (engine/scenarios/
    serving.py's result_columns); None where the summary has no such figure (the over count
    was not kept before this module's issue)."""
    s = summary or {}
    n, over = s.get("query_count"), s.get("overlatency_count")
    return n, over, (allowed_overs(n) if n else None)
