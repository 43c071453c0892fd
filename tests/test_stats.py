import math

import pytest

from engine.analysis.stats import (NOISY_IQR_RATIO, P99_MIN_SAMPLES, TAIL_MEAN_RATIO,
                                   TAIL_P99_RATIO, p99_confident, percentile, summarize,
                                   verdict)


def test_summary_of_fixed_samples_is_exact():
    st = summarize([10, 20, 30, 40, 50, 60, 70, 80, 90, 100])
    assert st.count == 10
    assert st.mean == 55.0
    assert st.median == 55.0
    assert st.q1 == 32.5 and st.q3 == 77.5 and st.iqr == 45.0
    assert st.p90 == pytest.approx(91.0)
    assert st.p95 == pytest.approx(95.5)
    assert st.p99 == pytest.approx(99.1)
    assert (st.min, st.max) == (10.0, 100.0)
    assert st.std == pytest.approx(math.sqrt(8250 / 9))  # sample std, n - 1
    assert st.cv == pytest.approx(st.std / 55.0)


def test_percentile_matches_type7_definition_and_order_does_not_matter():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([7], 99) == 7
    assert summarize([3, 1, 2]).median == 2
    with pytest.raises(ValueError):
        summarize([])


def test_single_sample_has_zero_spread():
    st = summarize([5])
    assert (st.std, st.iqr, st.cv) == (0.0, 0.0, 0.0)


def _with_ratio(ratio):
    # 4 samples around 100: q1 = 100 - 1.5h, q3 = 100 + 1.5h, so IQR/median = 3h/100 = ratio
    h = ratio * 100 / 3
    return summarize([100 - 3 * h, 100 - h, 100 + h, 100 + 3 * h])


def test_verdict_thresholds():
    ok = dict(iterations=30, measured_s=2.5, min_iters=30, min_time_s=2.0)
    st = _with_ratio(0.05)
    assert st.iqr / st.median == pytest.approx(0.05)
    assert verdict(st, **ok) == ("valid", "")
    v, why = verdict(_with_ratio(0.15), **ok)
    assert v == "noisy" and why == "IQR/median 15.0% above 10%"
    # Dispersion never invalidates: a run with half its samples far off is kept, flagged.
    v, why = verdict(_with_ratio(0.40), **ok)
    assert v == "noisy" and why == "IQR/median 40.0% above 10%"
    assert NOISY_IQR_RATIO == 0.10


def test_stalls_in_the_tail_flag_a_run_whose_quartiles_look_clean():
    ok = dict(iterations=30, measured_s=2.5, min_iters=30, min_time_s=2.0)
    # 27 x 10 ms and 3 x 30 ms: the quartiles are all 10 ms, the mean 12 ms.
    st = summarize([10_000_000] * 27 + [30_000_000] * 3)
    assert st.iqr == 0 and st.mean / st.median == pytest.approx(1.2)
    v, why = verdict(st, **ok)
    assert v == "noisy" and why.startswith("tail: mean 20.0% above the median")
    # One stall in 200: the mean barely moves, but p99 is 4x the median.
    st = summarize([10] * 197 + [40] * 3)
    assert st.mean / st.median < TAIL_MEAN_RATIO and st.p99 / st.median > TAIL_P99_RATIO
    assert verdict(st, **ok)[0] == "noisy"


def test_p99_needs_a_hundred_samples_to_be_trusted():
    assert P99_MIN_SAMPLES == 100
    assert [p99_confident(n) for n in (None, 30, 99, 100)] == [False, False, False, True]


def test_verdict_policy_not_met_is_invalid_with_reasons():
    st = _with_ratio(0.0)
    v, why = verdict(st, iterations=12, measured_s=60.0, min_iters=30, min_time_s=2.0)
    assert v == "invalid"
    assert why == "only 12 of the required 30 iterations ran before max_time"
    v, why = verdict(st, iterations=40, measured_s=0.5, min_iters=30, min_time_s=2.0)
    assert why == "measured 0.500 s, under the required 2 s"
    # A run stopped by max_iters has all the samples it may keep: not held against it.
    assert verdict(st, iterations=40, measured_s=0.5, min_iters=30, min_time_s=2.0,
                   hit_max_iters=True) == ("valid", "")
