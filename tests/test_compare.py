"""Round aggregation, paired comparisons and the table on fixed numbers (the sequential rule
itself: tests/test_sequential.py)."""

import pytest

from engine.analysis.compare import (ConfigResult, aggregate, contender_name, contests,
                                     summarize_rounds, undecided)
from engine.analysis.noise import likely_cause, noise_model
from engine.analysis.sequential import (EQUIVALENT, SINGLE, UNDECIDED, WINNER, VerdictRule,
                                        compare_rounds)
from engine.analysis.sweep_verdict import judge_sweep
from engine.present.tables import compare_table, ms_text
from engine.run.jobs.rounds import order_name, plan_rounds
from engine.scenarios.inference.expand import expand_sweep


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
    # no rule: one look at the rounds given, the plain 95 % Student-t interval, no margin
    c = compare_rounds({1: 10, 2: 11, 3: 10.5}, {1: 20, 2: 21.5, 3: 20.8})
    assert c.rounds == 3 and c.significant and c.state == WINNER
    assert (round(c.speedup, 4), round(c.ci_low, 4), round(c.ci_high, 4)) == \
        (1.9784, 1.9225, 2.036)
    assert c.decided
    assert c.sentence("A", "B") == "A is 1.98x faster than B (95 % CI 1.92-2.04, 3 rounds)"
    # the same pair seen from the other side
    r = compare_rounds({1: 20, 2: 21.5, 3: 20.8}, {1: 10, 2: 11, 3: 10.5})
    assert r.sentence("B", "A") == "A is 1.98x faster than B (95 % CI 1.92-2.04, 3 rounds)"


def test_known_insignificant_pair():
    c = compare_rounds({1: 10, 2: 12, 3: 9}, {1: 11, 2: 10, 3: 10.5})
    assert not c.significant and not c.decided and c.state == UNDECIDED
    assert (round(c.speedup, 4), round(c.ci_low, 4), round(c.ci_high, 4)) == \
        (1.0226, 0.6544, 1.598)  # t(0.975, 2) = 4.30265, not the rounded 4.303
    assert round(c.noise_pct, 1) == 19.7  # the paired log ratios' spread, per round
    assert c.sentence("A", "B").startswith(
        "no decision between A and B: A measured 1.02x faster than B, 95 % CI 0.65-1.60 "
        "over 3 rounds; ")
    # Leaning the other way, the sentence names B and inverts the interval.
    r = compare_rounds({1: 11, 2: 10, 3: 10.5}, {1: 10, 2: 12, 3: 9})
    assert r.sentence("A", "B").startswith(
        "no decision between A and B: B measured 1.02x faster than A, 95 % CI 0.65-1.60")
    two = compare_rounds({1: 10, 2: 12}, {1: 11, 2: 10})
    assert "2 rounds give a very wide interval: 3 or more narrow it" in two.sentence("A", "B")


def test_pairs_only_rounds_both_have_and_one_round_gives_no_interval():
    c = compare_rounds({1: 10, 3: 10}, {1: 20, 2: 20})
    assert c.rounds == 1 and not c.significant and c.speedup == 2.0 and c.state == SINGLE
    assert c.sentence("A", "B") == ("A vs B: 2.00x from a single round; no interval "
                                    "(run at least 2 rounds)")
    assert compare_rounds({1: 1.0}, {2: 1.0}) is None


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
    text = compare_table(judge_sweep(runs))
    lines = text.splitlines()
    assert lines[0] == "median latency per batch [ms], lower is better (up to 3 rounds)"
    # every contender ran every round: the drift-adjusted figures are the geometric means
    assert any(line.startswith("drift-adjusted figures: a configuration + round fit")
               for line in lines) and "--raw" not in text
    row1 = next(l for l in lines[2:5] if l.startswith("m 64px      1"))
    assert "*10.49 [10.00-11.00]" in row1 and "20.76 [20.00-21.50]" in row1
    row8 = next(l for l in lines[2:5] if l.startswith("m 64px      8"))
    assert "*10.26 [9.00-12.00] ?" in row8  # torch: rounds span 29 %: noisy
    assert "~10.49 [10.00-11.00] (1 timeout)" in row8  # tf: no decision against torch
    # the default rule: looks at rounds 3-6, so the interval is wider than a one-look 1.92-2.04
    assert "  m 64px b1 t2: torch (eager) is 1.98x faster than tensorflow (tf_function) " \
           "(95 % sequential interval 1.91-2.05, 3 rounds)" in lines
    assert any(l.startswith("  m 64px b8 t2: no decision between ") for l in lines)
    assert any(l.startswith("measurement noise ±") for l in lines)
    assert any(l.startswith("the machine drifted ") for l in lines)


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


def test_a_difference_names_a_winner_only_beyond_the_margin_and_is_equivalent_inside_it():
    # Six rounds, b consistently 8-12 % slower: the interval (about 1.09-1.11) excludes 1.
    a = {r: 10.0 for r in range(1, 7)}
    b = dict(zip(range(1, 7), (10.8, 11.2, 11.0, 10.9, 11.1, 11.0)))
    cmp = compare_rounds(a, b, VerdictRule.of(6, 6, 0.02))
    assert (round(cmp.speedup, 3), round(cmp.ci_low, 3), round(cmp.ci_high, 3)) == \
        (1.1, 1.085, 1.115)
    assert cmp.state == WINNER  # 8.5 % or more: beyond a 2 % margin
    # the same rounds against a 15 % margin: the whole interval is inside it
    wide = compare_rounds(a, b, VerdictRule.of(6, 6, 0.15))
    assert wide.significant and wide.state == EQUIVALENT
    assert compare_rounds(b, a, VerdictRule.of(6, 6, 0.15)).state == EQUIVALENT  # either way
    # a 10 % margin sits inside the interval: neither
    assert compare_rounds(a, b, VerdictRule.of(6, 6, 0.10)).state == UNDECIDED


def test_only_configurations_of_undecided_contests_need_more_rounds():
    runs = [_run("torch", "eager", 1, r, m) for r, m in ((1, 10.0), (2, 10.1), (3, 10.2))]
    runs += [_run("tf", "fn", 1, r, m) for r, m in ((1, 20.0), (2, 20.2), (3, 20.1))]
    runs += [_run("torch", "eager", 8, r, m) for r, m in ((1, 50.0), (2, 52.0), (3, 49.0))]
    runs += [_run("tf", "fn", 8, r, m) for r, m in ((1, 51.0), (2, 50.0), (3, 50.5))]
    assert undecided(aggregate(runs)) == {("m", 64, 8, 2, "none", "torch (eager)"),
                                          ("m", 64, 8, 2, "none", "tf (fn)")}
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
    model = noise_model(results)  # every round counts in the noise too
    assert (model.configurations, model.rounds, model.df) == (2, 3, 2)


def test_a_noisy_verdict_names_its_likely_cause():
    def cr(steal, others):
        return ConfigResult("m", 64, 1, 2, "x", {}, (), None, round_load={1: (steal, others)})
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
