"""Round aggregation, noise floor and significance on fixed numbers."""

import pytest

from engine.analysis.compare import (ConfigResult, aggregate, compare_rounds, contender_name,
                                     contests, likely_cause, noise_floor, summarize_rounds,
                                     undecided)
from engine.present.tables import compare_table, ms_text
from engine.run.rounds import order_name, plan_rounds
from engine.spec import expand_sweep


def test_round_aggregation_is_exact():
    s = summarize_rounds([10.0, 10.4, 10.2])
    g = (10.0 * 10.4 * 10.2) ** (1 / 3)
    assert (s.rounds, s.spread_min, s.spread_max) == (3, 10.0, 10.4)
    assert s.center == pytest.approx(g) and s.spread_ratio == pytest.approx(0.4 / g)
    assert (s.flag, s.reason) == ("valid", "")
    s = summarize_rounds([10.0, 12.0, 11.0])
    assert s.center == pytest.approx(1320 ** (1 / 3))
    assert s.spread_ratio == pytest.approx(2 / 1320 ** (1 / 3))
    assert s.flag == "noisy"
    assert s.reason == ("rounds disagree: round medians span 18.2% of their geometric mean "
                        "(threshold 10%)")
    assert summarize_rounds([5.0]).flag == "valid"  # one round cannot disagree


def test_known_significant_pair():
    c = compare_rounds({1: 10, 2: 11, 3: 10.5}, {1: 20, 2: 21.5, 3: 20.8})
    assert c.rounds == 3 and c.significant
    assert (round(c.speedup, 4), round(c.ci_low, 4), round(c.ci_high, 4)) == \
        (1.9784, 1.9225, 2.036)
    assert c.decided
    assert c.sentence("A", "B") == "A is 1.98x faster than B (95 % CI 1.92-2.04, 3 rounds)"
    # the same pair seen from the other side
    r = compare_rounds({1: 20, 2: 21.5, 3: 20.8}, {1: 10, 2: 11, 3: 10.5})
    assert r.sentence("B", "A") == "A is 1.98x faster than B (95 % CI 1.92-2.04, 3 rounds)"


def test_known_insignificant_pair():
    c = compare_rounds({1: 10, 2: 12, 3: 9}, {1: 11, 2: 10, 3: 10.5})
    assert not c.significant and not c.decided
    assert (round(c.speedup, 4), round(c.ci_low, 4), round(c.ci_high, 4)) == \
        (1.0226, 0.6544, 1.598)  # t(0.975, 2) = 4.30265, not the rounded 4.303
    assert round(c.noise_pct, 1) == 59.8
    assert c.sentence("A", "B") == ("no decision within the noise (±60 %) between A and B: "
                                    "A measured 1.02x faster than B, 95 % CI 0.65-1.60 over "
                                    "3 rounds")
    # Leaning the other way, the sentence names B and inverts the interval.
    r = compare_rounds({1: 11, 2: 10, 3: 10.5}, {1: 10, 2: 12, 3: 9})
    assert r.sentence("A", "B") == ("no decision within the noise (±60 %) between A and B: "
                                    "B measured 1.02x faster than A, 95 % CI 0.65-1.60 over "
                                    "3 rounds")
    two = compare_rounds({1: 10, 2: 12}, {1: 11, 2: 10})
    assert two.sentence("A", "B").endswith("over 2 rounds; 2 rounds give a very wide "
                                           "interval: 3 or more narrow it")


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
    g1, g2 = (10 * 11) ** 0.5, (20 * 20.5 * 21) ** (1 / 3)
    assert worst == pytest.approx(1 / g1)
    assert med == pytest.approx((1 / g1 + 1 / g2) / 2)
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


def _run(fw, rt, batch, rnd, med, status="ok", validity="valid", **kw):
    return dict(model="m", image_size=64, batch_size=batch, intra_threads=2, framework=fw,
                runtime=rt, round_no=rnd, status=status, validity=validity, median_ms=med,
                iqr_ms=0.1, **kw)


def test_table_uses_round_aggregates_and_marks_insignificant_cells():
    runs = [_run("torch", "eager", 1, r, m) for r, m in ((1, 10.0), (2, 11.0), (3, 10.5))]
    runs += [_run("tensorflow", "tf_function", 1, r, m) for r, m in ((1, 20), (2, 21.5), (3, 20.8))]
    runs += [_run("torch", "eager", 8, r, m) for r, m in ((1, 10), (2, 12), (3, 9))]
    runs += [_run("tensorflow", "tf_function", 8, r, m) for r, m in ((1, 11), (2, 10), (3, 10.5))]
    runs += [_run("tensorflow", "tf_function", 8, 4, None, status="timeout")]
    text = compare_table(aggregate(runs))
    lines = text.splitlines()
    assert lines[0] == ("median latency per batch [ms], lower is better (geometric mean of "
                        "up to 3 rounds [min-max over rounds])")
    row1 = next(l for l in lines[2:5] if l.startswith("m 64px      1"))
    assert "*10.49 [10.00-11.00]" in row1 and "20.76 [20.00-21.50]" in row1
    row8 = next(l for l in lines[2:5] if l.startswith("m 64px      8"))
    assert "*10.26 [9.00-12.00] ?" in row8  # torch: rounds span 29 %: noisy
    assert "~10.49 [10.00-11.00] (1 timeout)" in row8  # tf: no decision against torch
    assert "  m 64px b1 t2: torch (eager) is 1.98x faster than tensorflow (tf_function) " \
           "(95 % CI 1.92-2.04, 3 rounds)" in lines
    assert any(l.startswith("  m 64px b8 t2: no decision within the noise (±") for l in lines)
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


def test_the_star_and_the_sentence_use_one_statistic():
    # Rounds {10, 10, 20} against {12, 12, 12}: the median of round medians (10 vs 12) would
    # star the first while the paired log ratio says the second is faster (0.95x).
    runs = [_run("a", "x", 1, r, m) for r, m in ((1, 10.0), (2, 10.0), (3, 20.0))]
    runs += [_run("b", "x", 1, r, 12.0) for r in (1, 2, 3)]
    [contest] = contests(aggregate(runs))[1]
    assert contest.best == "b (x)"
    cmp = contest.comparisons["a (x)"]
    centers = {c: r.summary.center for c, r in contest.cells.items()}
    # every round paired: the speed-up is exactly the ratio of the cells' geometric means
    assert cmp.speedup == pytest.approx(centers["a (x)"] / centers["b (x)"])
    assert round(cmp.speedup, 4) == 1.0499 and not cmp.decided


def test_a_round_pointing_the_other_way_beyond_the_noise_floor_leaves_a_contest_open():
    a, b = {1: 10.0, 2: 10.0, 3: 10.0, 4: 10.0}, {1: 13.0, 2: 13.0, 3: 13.0, 4: 8.5}
    assert compare_rounds(a, b).significant is False  # the interval already straddles 1
    a5, b5 = {**a, 5: 10.0, 6: 10.0}, {**b, 5: 13.0, 6: 13.0}
    cmp = compare_rounds(a5, b5)
    assert cmp.significant and cmp.decided  # no floor given: the interval alone decides
    # round 4 favours b by 15 %, beyond a 5 % floor: undecided, whatever the interval says
    floored = compare_rounds(a5, b5, floor=0.05)
    assert floored.significant and floored.disagree and not floored.decided
    assert floored.sentence("a", "b").endswith("a round disagrees beyond the noise floor")
    assert compare_rounds(a5, b5, floor=0.20).decided  # within a 20 % floor: decided


def test_a_speedup_no_larger_than_the_noise_floor_is_no_decision():
    # Six rounds, b consistently 8-12 % slower: the interval (1.085-1.115) excludes 1.
    a = {r: 10.0 for r in range(1, 7)}
    b = dict(zip(range(1, 7), (10.8, 11.2, 11.0, 10.9, 11.1, 11.0)))
    cmp = compare_rounds(a, b, floor=0.05)
    assert (round(cmp.speedup, 3), round(cmp.ci_low, 3), round(cmp.ci_high, 3)) == \
        (1.1, 1.085, 1.115)
    assert cmp.decided and not cmp.within_floor  # 10 % beyond a 5 % floor: decided
    # The same rounds on a machine whose processes land 15 % apart: the difference is
    # smaller than the noise, so no winner is named however narrow the interval.
    noisy = compare_rounds(a, b, floor=0.15)
    assert noisy.significant and noisy.within_floor and not noisy.decided
    # the same rule either way round: b faster than a by the same margin
    assert compare_rounds(b, a, floor=0.15).within_floor
    assert not compare_rounds(b, a, floor=0.05).within_floor
    assert round(noisy.noise_pct) == 15
    assert noisy.sentence("a", "b").startswith("no decision within the noise (±15 %)")
    assert noisy.sentence("a", "b").endswith("within the noise floor (15 %)")


def test_only_configurations_of_undecided_contests_need_more_rounds():
    runs = [_run("torch", "eager", 1, r, m) for r, m in ((1, 10.0), (2, 10.1), (3, 10.2))]
    runs += [_run("tf", "fn", 1, r, m) for r, m in ((1, 20.0), (2, 20.2), (3, 20.1))]
    runs += [_run("torch", "eager", 8, r, m) for r, m in ((1, 50.0), (2, 52.0), (3, 49.0))]
    runs += [_run("tf", "fn", 8, r, m) for r, m in ((1, 51.0), (2, 50.0), (3, 50.5))]
    assert undecided(aggregate(runs)) == {("m", 64, 8, 2, "torch (eager)"),
                                          ("m", 64, 8, 2, "tf (fn)")}
    # a single round decides nothing
    assert len(undecided(aggregate([r for r in runs if r["round_no"] == 1]))) == 4


def test_dispersion_keeps_rounds_in_the_aggregate_and_the_noise_floor():
    # the reported case: the kept round was the slow one; now all three count
    runs = [_run("torch", "eager", 1, r, m, validity=v)
            for r, m, v in ((1, 23.8, "noisy"), (2, 25.1, "noisy"), (3, 31.1, "valid"))]
    runs += [_run("tf", "fn", 1, r, m) for r, m in ((1, 40.0), (2, 41.0), (3, 40.5))]
    results = aggregate(runs)
    torch = next(r for r in results if r.contender == "torch (eager)")
    assert torch.summary.rounds == 3 and torch.noisy_rounds == 2 and not torch.failed
    assert torch.summary.spread_min == 23.8 and torch.summary.spread_max == 31.1
    med, worst, n = noise_floor([r.summary for r in results])
    # the floor is at least the spread the stored rounds show
    assert worst == pytest.approx((31.1 - 23.8) / torch.summary.center) and n == 2


def test_a_noisy_verdict_names_its_likely_cause():
    def cr(steal, others):
        return ConfigResult("m", 64, 1, 2, "x", {}, (), None, steal=steal, others=others)
    assert likely_cause([cr(0.12, 0.01), cr(0.0, 0.0)]) == "likely cause: steal took 12% of a run"
    assert likely_cause([cr(0.0, 0.30)]) == \
        "likely cause: other processes took 30% of a run's cores"
    assert likely_cause([cr(None, None)]) == "no interference was recorded for these runs"
    assert likely_cause([cr(0.0, 0.01)]).startswith("no steal or other-process load above")
    runs = [_run("a", "x", 1, r, m, interference={"steal_frac": 0.12, "others_cpu_frac": 0.0})
            for r, m in ((1, 10.0), (2, 12.0), (3, 10.0))]
    runs += [_run("b", "x", 1, r, m) for r, m in ((1, 11.0), (2, 10.0), (3, 11.5))]
    [contest] = contests(aggregate(runs))[1]
    assert contest.sentences[0].endswith("(likely cause: steal took 12% of a run)")


def test_configurations_differing_in_precision_device_or_inter_threads_never_share_a_column():
    base = _run("torch", "eager", 1, 1, 10.0)
    names = [contender_name({**base, **kw}) for kw in (
        {}, {"precision": "bf16"}, {"device": "cuda"}, {"inter_threads": 2},
        {"precision": "fp32", "device": "cpu", "inter_threads": 1})]
    assert names == ["torch (eager)", "torch (eager) bf16", "torch (eager) cuda",
                     "torch (eager) inter 2", "torch (eager)"]
    # the same configuration from two machines: two contenders, never one averaged figure
    runs = [_run("torch", "eager", 1, 1, 10.0, system_id="a1b2c3d4e5"),
            _run("torch", "eager", 1, 1, 20.0, system_id="f6e5d4c3b2")]
    assert sorted(r.contender for r in aggregate(runs)) == ["torch (eager) @a1b2c3d4",
                                                            "torch (eager) @f6e5d4c3"]
    # a user's model file replaced between rounds: each file's runs apart, by digest; one
    # file throughout keeps the plain name
    runs = [_run("torch", "eager", 1, 1, 10.0, model_sha256="aa" * 32),
            _run("torch", "eager", 1, 2, 20.0, model_sha256="bb" * 32),
            _run("torch", "onnxruntime", 1, 1, 5.0, model_sha256="aa" * 32)]
    assert sorted(r.contender for r in aggregate(runs)) == [
        "torch (eager) sha256:aaaaaaaa", "torch (eager) sha256:bbbbbbbb",
        "torch (onnxruntime) sha256:aaaaaaaa"]
    assert [r.contender for r in aggregate(runs[:1] + runs[2:])] == [
        "torch (eager)", "torch (onnxruntime)"]
