"""LoadGen's early stopping for a Server test (engine/core/early_stopping.py): the overs it
allows at N queries on fixed numbers (the issue's 0 up to 661, 2 at 1,000, 33 at 5,000),
the same thresholds pinned against the real LoadGen (a SUT that holds back chosen queries
until LoadGen flushes, so exactly that many go over the bound, with no sleep), and a seeded
simulation of what a fixed duration did to a search's probes and a tuning's candidates."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

from engine.core.early_stopping import (allowed_overs, bound_claim, fewest_queries,
                                        held_percentile, held_text, probe_counts, strictness)
from engine.core.limits import SEARCH_QUERIES_RANGE
from engine.scenarios.serving.loadgen import detail_value, parse_summary
from engine.scenarios.serving.spec import EARLY_STOPPING_MIN_QUERIES
from engine.run.search.max_qps import DEFAULT_SEARCH_QUERIES, EARLY_STOPPING_MIN_QUERIES as SEARCH_MIN


@pytest.mark.parametrize("n, overs", [
    (1, None), (458, None),  # too few: LoadGen passes no test, even with none over
    (459, 0), (661, 0),  # none over: the bound is a max
    (662, 1), (999, 2), (1000, 2), (2000, 9), (5000, 33), (10_000, 77),
    (100_000, 927), (1_000_000, 9768),  # log space: 0.99^n underflows past ~70,000
])
def test_the_overs_early_stopping_allows_at_n_queries(n, overs):
    assert allowed_overs(n) == overs


def test_the_thresholds_and_the_percentile_each_count_holds_the_bound_to():
    assert fewest_queries() == 459 == EARLY_STOPPING_MIN_QUERIES["server"] == SEARCH_MIN
    assert SEARCH_QUERIES_RANGE[0] == fewest_queries()  # fewer is INVALID at any rate
    # the first count allowing k over, for k = 1, 2, 33
    first = {k: next(n for n in range(459, 6000) if allowed_overs(n) >= k) for k in (1, 2, 33)}
    assert first == {1: 662, 2: 838, 33: 4894}
    assert held_percentile(459) == held_percentile(661) == 100.0
    assert round(held_percentile(1000), 2) == 99.8
    assert round(held_percentile(5000), 2) == 99.34
    assert held_percentile(458) is None
    assert [held_text(n) for n in (None, 458, 500, 1000, 5000)] == [
        "", "none passes", "max", "p99.8", "p99.34"]
    assert DEFAULT_SEARCH_QUERIES == 1000 and allowed_overs(DEFAULT_SEARCH_QUERIES) == 2


def test_the_words_a_reader_sees():
    assert strictness(400) == "400 queries: too few, early stopping passes none under 459"
    assert strictness(500) == "500 queries, none over the bound: a max, not a p99"
    assert strictness(1000) == "1,000 queries, up to 2 over the bound: p99.8"
    assert strictness(5000) == "5,000 queries, up to 33 over the bound: p99.34"
    assert bound_claim(15, 1000) == ("p99 ≤ 15 ms at 99 % confidence (LoadGen early stopping, "
                                     "1,000 queries per probe, up to 2 over allowed)")
    assert bound_claim(15, 500) == ("p99 ≤ 15 ms at 99 % confidence (LoadGen early stopping, "
                                    "500 queries per probe, none over allowed: the bound is "
                                    "a max)")
    assert bound_claim(2.5, None) == ("p99 ≤ 2.5 ms at 99 % confidence (LoadGen early "
                                      "stopping; probes of varying query counts)")
    assert probe_counts({"query_count": 1000, "overlatency_count": 3}) == (1000, 3, 2)
    assert probe_counts({"query_count": 1000}) == (1000, None, 2)  # stored before the count
    assert probe_counts(None) == (None, None, None)


# -- the real LoadGen decides as the rule says ---------------------------------------------

QPS = 2500.0  # 1,000 queries are scheduled over 0.4 s
BOUND_NS = 60_000_000  # 60 ms


def _loadgen_server(n: int, held: int) -> tuple[dict, int, int]:
    """A real LoadGen Server test of exactly n queries (min_query_count n, no minimum
    duration) whose SUT answers at once but for the first `held` queries, which it answers
    only when LoadGen flushes after issuing the last: their latency from the schedule is
    the test's length (at least 183 ms here), three times the bound, while an answer at
    once takes well under a millisecond. Returns (the parsed summary, LoadGen's query
    count, LoadGen's over count)."""
    import mlperf_loadgen as lg

    kept: list = []

    def issue(qs):
        for q in qs:
            response = lg.QuerySampleResponse(q.id, 0, 0)
            if len(kept) < held:
                kept.append(response)
            else:
                lg.QuerySamplesComplete([response])

    def flush():
        lg.QuerySamplesComplete(kept)

    sut = lg.ConstructSUT(issue, flush)
    qsl = lg.ConstructQSL(64, 64, lambda s: None, lambda s: None)
    ts = lg.TestSettings()
    ts.scenario, ts.mode = lg.TestScenario.Server, lg.TestMode.PerformanceOnly
    ts.server_target_qps, ts.server_target_latency_ns = QPS, BOUND_NS
    ts.min_duration_ms, ts.min_query_count = 0, n  # as engine/worker/serving/body.py sets them
    with tempfile.TemporaryDirectory() as out:
        log = lg.LogSettings()
        log.log_output.outdir = out
        log.log_output.copy_summary_to_stdout = False
        try:
            lg.StartTestWithLogSettings(sut, qsl, ts, log)
        finally:
            lg.DestroyQSL(qsl)
            lg.DestroySUT(sut)
        with open(os.path.join(out, "mlperf_log_summary.txt")) as f:
            summary = parse_summary(f.read())
        with open(os.path.join(out, "mlperf_log_detail.txt")) as f:
            detail = f.read()
    return (summary, detail_value(detail, "result_query_count"),
            detail_value(detail, "result_overlatency_query_count"))


@pytest.mark.parametrize("n, held", [(661, 1), (662, 1), (1000, 2), (1000, 3)])
@pytest.mark.alone  # a LoadGen bound or a contention verdict: measured time
def test_the_real_loadgen_passes_exactly_the_overs_the_rule_allows(n, held):
    summary, queries, over = _loadgen_server(n, held)
    assert (queries, over) == (n, held)  # exactly n issued, LoadGen counted `held` over
    assert summary["rules"]["Performance constraints"]  # the p99 point itself is under
    passes = held <= allowed_overs(n)
    assert summary["rules"]["Early stopping"] is passes
    assert summary["result"] == ("VALID" if passes else "INVALID")


# -- a seeded simulation: what a fixed duration did to a search and a tuning ---------------

TRIALS = 4000


def _pass_rate(n: int, over_rate: float, seed: int) -> float:
    """How often a test of n queries passes early stopping when each query goes over the
    bound with probability over_rate (a tail the same at every rate), in TRIALS seeded
    draws."""
    overs = np.random.default_rng(seed).binomial(n, over_rate, size=TRIALS)
    return float(np.mean(overs <= allowed_overs(n)))


def _fixed_duration(qps: float, seconds: float) -> int:
    """The queries of a probe under the old rule: LoadGen's minimum duration at the rate
    (queries scheduled within it), and never under early stopping's 459."""
    return max(459, round(qps * seconds))


def test_a_fixed_duration_held_fast_candidates_to_a_looser_percentile_and_a_fixed_count_does_not():
    """Two candidates with the same tail (0.5 % of queries over the bound: their true p99
    meets it), one serving 100 QPS and one 2,500. Under the tuner's old 2 s tests the slow
    one ran 459 queries (none over allowed) and the fast one 5,000 (33 allowed): the fast
    one passed nine times as often. With every test at 1,000 queries both pass alike."""
    slow, fast = _fixed_duration(100, 2.0), _fixed_duration(2500, 2.0)
    assert (slow, fast) == (459, 5000)
    before = (_pass_rate(slow, 0.005, 1), _pass_rate(fast, 0.005, 2))
    assert before == (0.101, 0.95025)  # exact: 0.995^459 = 0.100; P(<= 33 of 5,000) = 0.95
    after = (_pass_rate(1000, 0.005, 1), _pass_rate(1000, 0.005, 2))
    assert after == (0.12675, 0.1225)  # one test (exact 0.124): the seeds' draws differ
    assert abs(after[0] - after[1]) < 0.01 < before[1] - before[0]


def test_a_search_with_ten_second_probes_held_each_probe_to_its_own_percentile():
    """The dashboard search's old probes (LoadGen's 10 s at each target) of one search as
    the seeded Deploy tests store it: each probe's count, overs allowed and percentile."""
    targets = [100.0, 200.0, 150.0, 175.0, 162.5, 168.75]
    counts = [_fixed_duration(q, 10.0) for q in targets]
    assert counts == [1000, 2000, 1500, 1750, 1625, 1688]
    assert [held_text(n) for n in counts] == ["p99.8", "p99.55", "p99.6", "p99.54",
                                              "p99.57", "p99.59"]
    assert {held_text(DEFAULT_SEARCH_QUERIES)} == {"p99.8"}  # now: every probe the same


def test_a_server_tests_row_shows_its_overs_beside_what_early_stopping_allowed():
    """A plain Server test (outside a search) keeps its behaviour; its row now shows
    LoadGen's over count and the overs allowed at its query count, and an early-stopping
    failure says them."""
    from types import SimpleNamespace

    from engine.present.serving_text import failed_rule_reasons, headline

    s = {"figures": {"target_latency_ns": 15e6, "completed_samples_per_s": 99.5,
                     "target_qps": 100.0},
         "percentiles_ns": {"99": 14_000_000}, "failed_rules": ["Early stopping"],
         "query_count": 1000, "overlatency_count": 3, "samples_per_query": 1}
    row = SimpleNamespace(scenario="server", summary=s, bound_ms=15.0, min_duration_s=10.0,
                          min_query_count=459)
    assert headline(row)[-1] == (
        "over the bound", "3 of 1,000", "LoadGen's count (latency from each query's scheduled "
        "issue); its early stopping allows 2 of 1,000 (p99.8)")
    assert failed_rule_reasons(row) == [
        "**Early stopping** not satisfied: too few queries within the bound for LoadGen to "
        "claim the percentile with confidence: 3 of 1,000 over the bound, 2 allowed."]
    old = SimpleNamespace(**{**vars(row), "summary": {**s, "overlatency_count": None}})
    assert headline(old)[-1][0] == "queries"  # stored before the count was kept: no row
