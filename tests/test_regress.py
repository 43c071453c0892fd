"""Regression verdicts on constructed round medians (no database, no worker)."""

import pytest

from engine.analysis.regress import (IMPROVEMENT, NO_CHANGE, NOT_COMPARABLE, PAIRED,
                                     REGRESSION, THRESHOLD_ONLY, WELCH, Config, compare_sets,
                                     decide, history_points)
from engine.spec.errors import UserError


def rounds(sweep, *medians):
    """Round medians of one sweep: rounds of two sweeps never share a key."""
    return {(sweep, i): m for i, m in enumerate(medians, 1)}


BASE = rounds("b", 10.0, 10.2, 9.9)


def test_a_clear_slowdown_is_a_regression_on_welchs_interval():
    d = decide(BASE, rounds("c", 15.0, 15.3, 14.8))
    assert (d.verdict, d.method, d.undecided) == (REGRESSION, WELCH, False)
    # geometric means 15.032 / 10.033; the interval is scipy's Welch t-test on the logs
    assert d.ratio == pytest.approx(1.498315, abs=1e-6)
    assert (d.ci_low, d.ci_high) == (pytest.approx(1.444852, abs=1e-6),
                                     pytest.approx(1.553756, abs=1e-6))
    assert d.note == "95 % CI 1.44-1.55 clears the threshold (±10 %)"
    assert d.significant and d.fails(1.10) and not d.fails(1.50)


def test_the_reverse_is_an_improvement_and_never_fails_the_gate():
    d = decide(rounds("c", 15.0, 15.3, 14.8), BASE)
    assert (d.verdict, d.method) == (IMPROVEMENT, WELCH)
    assert d.ratio == pytest.approx(1 / 1.498315, abs=1e-6)
    assert (round(d.ci_low, 4), round(d.ci_high, 4)) == (0.6436, 0.6921)
    assert not d.fails(1.0)


def test_a_change_inside_the_threshold_is_no_change_even_when_significant():
    d = decide(BASE, rounds("c", 10.5, 10.6, 10.4))
    assert (d.verdict, d.undecided, d.note) == (NO_CHANGE, False, "within the threshold (±10 %)")
    assert round(d.ratio, 4) == 1.0466 and d.significant  # 1.01-1.08: real, but small
    assert not d.fails(1.10) and d.fails(1.04)  # a stricter gate is the user's call


def test_beyond_the_threshold_with_an_interval_including_one_is_undecided():
    d = decide(rounds("b", 10.0, 13.0), rounds("c", 12.0, 17.0))
    assert (d.verdict, d.undecided) == (NO_CHANGE, True)
    assert d.note == "undecided: 1.25x, but the 95 % CI 0.46-3.44 includes 1"
    assert not d.significant and not d.fails(1.10)


def test_an_interval_reaching_inside_the_threshold_is_undecided_until_more_rounds():
    b, c = [10.0, 10.3, 9.8, 10.1], [11.5, 12.6, 12.0, 12.2]
    d = decide(rounds("b", *b[:3]), rounds("c", *c[:3]))
    assert (d.verdict, d.undecided) == (NO_CHANGE, True)
    assert d.note == ("undecided: 1.20x, but the 95 % CI 1.09-1.32 reaches inside the "
                      "threshold (±10 %)")
    assert d.significant and d.fails(1.10)  # the gate asks "significantly slower than 1.10x"
    d = decide(rounds("b", *b), rounds("c", *c))  # a fourth round each narrows it
    assert (d.verdict, round(d.ci_low, 3), round(d.ci_high, 3)) == (REGRESSION, 1.135, 1.271)


def test_the_same_sweeps_rounds_are_paired():
    d = decide({1: 10.0, 2: 10.4, 3: 10.1}, {1: 13.0, 2: 13.6, 3: 13.2})
    assert (d.verdict, d.method) == (REGRESSION, PAIRED)
    assert (round(d.ratio, 4), round(d.ci_low, 4), round(d.ci_high, 4)) == (
        1.3049, 1.2944, 1.3155)


def test_a_single_round_is_decided_by_the_threshold_alone_and_says_so():
    d = decide({1: 10.0}, rounds("c", 12.0, 12.2))
    assert (d.verdict, d.method, d.ci_low, d.ci_high) == (REGRESSION, THRESHOLD_ONLY, None, None)
    assert d.note == ("a single round on the baseline side: no interval, decided by the "
                      "threshold (±10 %) alone")
    assert d.fails(1.10) and not d.fails(1.25)
    d = decide({1: 10.0}, {2: 10.5})
    assert (d.verdict, round(d.ratio, 3)) == (NO_CHANGE, 1.05)
    assert d.note.startswith("a single round on the baseline and candidate side")


def test_a_ratio_within_the_noise_floor_is_undecided():
    d = decide(BASE, rounds("c", 11.5, 11.6, 11.45), floor=0.2)
    assert (d.verdict, d.undecided, round(d.ratio, 3)) == (NO_CHANGE, True, 1.148)
    assert d.note == ("undecided: 1.15x is within the noise floor (20.0%: how far rounds of "
                      "one configuration land apart)")
    assert decide(BASE, rounds("c", 11.5, 11.6, 11.45), floor=0.05).verdict == REGRESSION


@pytest.mark.parametrize("threshold", [0.0, 1.5, float("nan")])
def test_a_threshold_out_of_range_names_the_field_and_range(threshold):
    with pytest.raises(UserError) as e:
        decide(BASE, BASE, threshold)
    assert e.value.field == "threshold"
    assert str(e.value) == f"threshold: {threshold!r} is out of range; allowed: number 0.01..1"


def row(sweep, rnd, ms, *, system_id="sys-a", warmup=10, min_time=2.0, min_iters=30,
        status="ok", **config):
    cfg = {**dict(model="resnet18", framework="torch", runtime="eager", batch_size=1,
                  intra_threads=4, image_size=224, precision="fp32", device="cpu",
                  inter_threads=1), **config}
    return dict(cfg, sweep_id=sweep, round_no=rnd, median_ms=ms if status == "ok" else None,
                status=status, validity="valid", system_id=system_id, warmup_iters=warmup,
                min_time_s=min_time, min_iters=min_iters)


def sweep(name, medians, **kw):
    return [row(name, i, m, **kw) for i, m in enumerate(medians, 1)]


def test_sets_are_compared_configuration_by_configuration():
    base = sweep("s1", [10.0, 10.2, 9.9]) + sweep("s1", [20.0, 20.4], batch_size=8)
    cand = sweep("s2", [15.0, 15.3, 14.8]) + sweep("s2", [20.1, 20.2], batch_size=8)
    cmp = compare_sets(base, cand, baseline="sweep s1", candidate="sweep s2")
    assert [(c.config.batch_size, c.verdict, c.machine) for c in cmp.changes] == [
        (1, REGRESSION, "sys-a"), (8, NO_CHANGE, "sys-a")]
    first = cmp.changes[0]
    assert first.config.label == "resnet18 224px b1 t4 · torch (eager)"
    assert (round(first.baseline_ms, 3), round(first.candidate_ms, 3)) == (10.033, 15.032)
    # the noise floor: median of the four configurations' round spreads (max - min over
    # the geometric mean): 0.5 %, 2.0 %, 3.0 %, 3.3 % -> (2.0 + 3.0) / 2
    assert round(cmp.floor, 4) == 0.0249
    assert [c.config for c in cmp.failing(1.10)] == [first.config]
    assert (cmp.count(REGRESSION), cmp.count(NO_CHANGE)) == (1, 1)


def test_another_machine_is_not_comparable():
    cmp = compare_sets(sweep("s1", [10.0, 10.1]), sweep("s2", [20.0, 20.1], system_id="sys-b"))
    (c,) = cmp.changes
    assert (c.verdict, c.machine, c.decision.ratio) == (NOT_COMPARABLE, None, None)
    assert c.decision.note == "different machine: baseline sys-a, candidate sys-b"
    assert cmp.failing(1.0) == () and cmp.unverified() == () and cmp.compared == 0
    # a candidate on both machines: compared where the baseline ran, the rest named
    both = sweep("s2", [20.0, 20.1], system_id="sys-b") + sweep("s3", [15.0, 15.2])
    cmp = compare_sets(sweep("s1", [10.0, 10.1]), both)
    assert [(c.machine, c.verdict, c.decision.note) for c in cmp.changes] == [
        ("sys-a", REGRESSION, "95 % CI 1.45-1.56 clears the threshold (±10 %)"),
        ("sys-b", NOT_COMPARABLE, "different machine: baseline sys-a, candidate sys-b")]


def test_another_measurement_policy_is_not_comparable():
    cmp = compare_sets(sweep("s1", [10.0, 10.1]),
                       sweep("s2", [20.0, 20.1], warmup=2, min_time=0.05, min_iters=5))
    (c,) = cmp.changes
    assert c.verdict == NOT_COMPARABLE
    assert c.decision.note == ("different measurement policy: baseline warmup 10, min_time "
                               "2 s, min_iters 30, candidate warmup 2, min_time 0.05 s, "
                               "min_iters 5")


def test_missing_or_failed_on_one_side_is_not_comparable():
    base = sweep("s1", [10.0, 10.1]) + sweep("s1", [5.0, 5.1], model="resnet50")
    cand = (sweep("s2", [10.0, 10.1], status="oom")
            + sweep("s2", [7.0, 7.1], model="mobilenet_v3_small"))
    notes = [(c.config.model, c.verdict, c.decision.note)
             for c in compare_sets(base, cand).changes]
    assert notes == [
        ("mobilenet_v3_small", NOT_COMPARABLE, "missing in the baseline"),
        ("resnet18", NOT_COMPARABLE, "no successful round in the candidate (2 failed: oom)"),
        ("resnet50", NOT_COMPARABLE, "missing in the candidate")]
    # A gate cannot pass what it could not check: the failed and the missing candidate
    # configurations are unverified (the one only the candidate has is not).
    cmp = compare_sets(base, cand)
    assert [c.config.model for c in cmp.unverified()] == ["resnet18", "resnet50"]
    assert cmp.compared == 0 and cmp.failing(1.1) == ()


def test_rounds_of_two_sweeps_in_one_set_are_all_kept():
    """Round 1 of sweep s1 and round 1 of s3 are two rounds, not one overwritten."""
    base = sweep("s1", [10.0, 10.2]) + sweep("s3", [9.9, 10.1])
    (c,) = compare_sets(base, sweep("s2", [15.0, 15.3])).changes
    assert len(c.baseline.round_medians) == 4 and c.decision.method == WELCH


def test_a_configuration_compared_with_itself_in_one_sweep_is_paired_and_unchanged():
    rows = sweep("s1", [10.0, 10.4, 9.8])
    (c,) = compare_sets(rows, rows).changes
    assert (c.verdict, c.decision.method, c.decision.ratio) == (NO_CHANGE, PAIRED, 1.0)
    assert (c.decision.ci_low, c.decision.ci_high) == (1.0, 1.0)


def test_history_points_are_one_per_sweep_with_the_geometric_mean():
    rows = [dict(r, sweep_created=created, versions=v, git_commit="abc")
            for created, name, meds, v in ((2, "s2", [4.0, 9.0], "torch 2.6"),
                                           (1, "s1", [2.0, 8.0], "torch 2.5"))
            for r in sweep(name, meds)]
    rows.append(dict(row("s1", 3, None, status="error"), sweep_created=1, versions="torch 2.5",
                     git_commit="abc"))
    points = history_points(rows)
    assert [(p.sweep_id, p.center_ms, p.min_ms, p.max_ms, p.rounds, p.versions)
            for p in points] == [("s1", 4.0, 2.0, 8.0, 2, "torch 2.5"),
                                 ("s2", 6.0, 4.0, 9.0, 2, "torch 2.6")]


def test_config_values_follow_the_store_columns():
    from store.history import CONFIG_COLUMNS
    c = Config.of(row("s1", 1, 1.0, replica=1))
    assert dict(zip(CONFIG_COLUMNS, c.values)) == {
        "model": "resnet18", "framework": "torch", "runtime": "eager", "batch_size": 1,
        "intra_threads": 4, "image_size": 224, "precision": "fp32", "device": "cpu",
        "inter_threads": 1}
    assert c.label == "resnet18 224px b1 t4 · torch (eager) #2"
