"""Round aggregation, noise floor and significance on fixed numbers."""

import pytest

from engine.analysis.compare import aggregate, compare_rounds, noise_floor, summarize_rounds
from engine.present.tables import compare_table, ms_text
from engine.run.rounds import order_name, plan_rounds
from engine.spec import expand_sweep


def test_round_aggregation_is_exact():
    s = summarize_rounds([10.0, 10.4, 10.2])
    assert (s.rounds, s.median, s.spread_min, s.spread_max) == (3, 10.2, 10.0, 10.4)
    assert s.spread_ratio == pytest.approx(0.4 / 10.2)
    assert (s.flag, s.reason) == ("valid", "")
    s = summarize_rounds([10.0, 12.0, 11.0])
    assert s.median == 11.0 and s.spread_ratio == pytest.approx(2 / 11)
    assert s.flag == "noisy"
    assert s.reason == ("rounds disagree: round medians span 18.2% of their median "
                        "(threshold 10%)")
    assert summarize_rounds([5.0]).flag == "valid"  # one round cannot disagree


def test_known_significant_pair():
    c = compare_rounds({1: 10, 2: 11, 3: 10.5}, {1: 20, 2: 21.5, 3: 20.8})
    assert c.rounds == 3 and c.significant
    assert (round(c.speedup, 4), round(c.ci_low, 4), round(c.ci_high, 4)) == \
        (1.9784, 1.9225, 2.036)
    assert c.sentence("A", "B") == "A is 1.98x faster than B (95 % CI 1.92-2.04)"
    # the same pair seen from the other side
    r = compare_rounds({1: 20, 2: 21.5, 3: 20.8}, {1: 10, 2: 11, 3: 10.5})
    assert r.sentence("B", "A") == "A is 1.98x faster than B (95 % CI 1.92-2.04)"


def test_known_insignificant_pair():
    c = compare_rounds({1: 10, 2: 12, 3: 9}, {1: 11, 2: 10, 3: 10.5})
    assert not c.significant
    assert (round(c.speedup, 4), round(c.ci_low, 4), round(c.ci_high, 4)) == \
        (1.0226, 0.6544, 1.598)  # t(0.975, 2) = 4.30265, not the rounded 4.303
    assert c.sentence("A", "B") == ("no significant difference between A and B "
                                    "(ratio 1.02x, 95 % CI 0.65-1.60)")


def test_pairs_only_rounds_both_have_and_one_round_gives_no_interval():
    c = compare_rounds({1: 10, 3: 10}, {1: 20, 2: 20})
    assert c.rounds == 1 and not c.significant and c.speedup == 2.0
    assert c.sentence("A", "B") == ("A vs B: 2.00x from a single round; no interval "
                                    "(run at least 2 rounds)")
    assert compare_rounds({1: 1.0}, {2: 1.0}) is None


def test_noise_floor_over_configurations():
    sums = [summarize_rounds([10, 11]), summarize_rounds([20, 20.5, 21]),
            summarize_rounds([7])]
    med, worst, n = noise_floor(sums)
    assert n == 2
    assert worst == pytest.approx(1 / 10.5)
    assert med == pytest.approx((1 / 10.5 + 1 / 20.5) / 2)
    assert noise_floor([summarize_rounds([7])]) is None


def test_orders_alternate_between_rounds_and_keep_groups_together():
    specs = expand_sweep(["mobilenet_v3_small"], ["torch", "tensorflow"], [1, 2], [1], cores=2)
    plan = plan_rounds(specs, 4, seed=7)
    label = lambda rs: [(s.framework, s.batch_size) for s in rs]  # noqa: E731
    assert label(plan[0]) == [("torch", 1), ("torch", 2), ("tensorflow", 1), ("tensorflow", 2)]
    assert label(plan[1]) == [("tensorflow", 2), ("tensorflow", 1), ("torch", 2), ("torch", 1)]
    assert sorted(label(plan[2])) == sorted(label(plan[0]))
    assert plan_rounds(specs, 4, seed=7) == plan  # the recorded seed reproduces the order
    for rs in plan:  # each framework's runs stay contiguous: one import per round
        fws = [s.framework for s in rs]
        assert fws == sorted(fws, key=fws.index)
    assert [order_name(r) for r in (1, 2, 3)] == ["forward", "reversed", "shuffled"]


def _run(fw, rt, batch, rnd, med, status="ok", validity="valid"):
    return dict(model="m", image_size=64, batch_size=batch, intra_threads=2, framework=fw,
                runtime=rt, round_no=rnd, status=status, validity=validity, median_ms=med,
                iqr_ms=0.1)


def test_table_uses_round_aggregates_and_marks_insignificant_cells():
    runs = [_run("torch", "eager", 1, r, m) for r, m in ((1, 10.0), (2, 11.0), (3, 10.5))]
    runs += [_run("tensorflow", "tf_function", 1, r, m) for r, m in ((1, 20), (2, 21.5), (3, 20.8))]
    runs += [_run("torch", "eager", 8, r, m) for r, m in ((1, 10), (2, 12), (3, 9))]
    runs += [_run("tensorflow", "tf_function", 8, r, m) for r, m in ((1, 11), (2, 10), (3, 10.5))]
    runs += [_run("tensorflow", "tf_function", 8, 4, None, status="timeout")]
    text = compare_table(aggregate(runs))
    lines = text.splitlines()
    assert lines[0] == ("median latency per batch [ms], lower is better (median of 3 rounds "
                        "[min-max of round medians])")
    row1 = next(l for l in lines[2:5] if l.startswith("m 64px      1"))
    assert "*10.50 [10.00-11.00]" in row1 and "20.80 [20.00-21.50]" in row1
    row8 = next(l for l in lines[2:5] if l.startswith("m 64px      8"))
    assert "*10.00 [9.00-12.00] ?" in row8  # torch: rounds span 30 %: noisy
    assert "~10.50 [10.00-11.00] (1 timeout)" in row8  # tf: not significantly slower
    assert "  m 64px b1 t2: torch (eager) is 1.98x faster than tensorflow (tf_function) " \
           "(95 % CI 1.92-2.04)" in lines
    assert any(l.startswith("  m 64px b8 t2: no significant difference") for l in lines)
    assert any(l.startswith("noise floor: rounds of the same configuration landed") for l in lines)


def test_latency_text_keeps_four_significant_figures_to_fit_a_metric():
    assert [ms_text(v) for v in (0.12345, 9.0271, 10.511, 123.45, 1234.5)] == [
        "0.1235 ms", "9.027 ms", "10.51 ms", "123.5 ms", "1,234.5 ms"]


def test_t_quantiles_come_from_the_t_distribution_at_every_degree_of_freedom():
    from engine.analysis.compare import t975
    # 1 and 2 degrees of freedom (2 and 3 rounds), and 31, where a table ending at 30 fell
    # back to the normal quantile 1.960 and understated every interval.
    assert [round(t975(df), 3) for df in (1, 2, 30, 31, 120)] == [
        12.706, 4.303, 2.042, 2.040, 1.980]
