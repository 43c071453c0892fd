"""Regression verdicts on constructed round medians and seeded simulations (no database, no
worker): sweep-to-sweep spread, Holm over configurations, one rule for the table and the
gate."""

import math
import random

import pytest

from engine.analysis.multiplicity import Statistic, step_down_minp
from engine.analysis.evidence import ONE_SWEEP, PAIRED, SWEEPS, Evidence
from engine.analysis.regress import (IMPROVEMENT, NO_CHANGE, NOT_COMPARABLE, REGRESSION,
                                     Config, compare_sets, decide)
from engine.analysis.trend import history_points
from engine.present.history import gate_line
from engine.core.errors import UserError


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


# The same build measured on three days: sweep means 10.0, 10.6, 9.7 (one configuration).
BASE = sweep("b1", [10.0, 10.1, 9.9]) + sweep("b2", [10.5, 10.7, 10.6]) + \
    sweep("b3", [9.6, 9.8, 9.7])


def test_a_clear_slowdown_against_repeated_baseline_sweeps_is_a_regression():
    cmp = compare_sets(BASE, sweep("c", [15.0, 15.3, 14.8]))
    (c,) = cmp.changes
    d = c.decision
    assert (c.verdict, d.method, d.undecided, d.judged, c.sweeps) == (
        REGRESSION, SWEEPS, False, True, (3, 1))
    # three baseline sweeps: the day-to-day spread has 2 degrees of freedom
    assert (round(cmp.sweep_sd, 4), cmp.sweep_df) == (0.0451, 2)
    assert (round(d.ratio, 4), round(d.ci_low, 3), round(d.ci_high, 3)) == (1.4894, 1.19,
                                                                           1.863)
    assert round(d.p_value, 4) == 0.0141  # a family of one: the one-sided t p-value
    assert d.note.startswith("slower than 1.1x: adjusted p = 0.014 <= 0.05")
    assert cmp.failing() == (c,) and gate_line(cmp)[0] == 1
    # a p two significant digits would print as 0 is said as a bound, not as certainty
    far = compare_sets(BASE, sweep("c", [100.0, 102.0, 99.0])).changes[0].decision
    assert far.p_value < 0.001 and far.note.startswith("slower than 1.1x: adjusted p < 0.001")


def test_the_reverse_is_an_improvement_and_never_fails_the_gate():
    cmp = compare_sets(BASE, sweep("c", [6.6, 6.7, 6.5]))
    assert cmp.changes[0].verdict == IMPROVEMENT and cmp.failing() == ()
    assert gate_line(cmp)[0] == 0


def test_one_sweep_on_each_side_cannot_tell_a_slower_day_from_a_slower_build():
    cmp = compare_sets(sweep("b", [10.0, 10.2, 9.9]), sweep("c", [30.0, 30.3, 29.8]))
    (c,) = cmp.changes
    assert (c.verdict, c.decision.undecided, c.decision.judged) == (NO_CHANGE, True, False)
    assert c.decision.note == ONE_SWEEP and round(c.decision.ratio, 2) == 2.99
    assert cmp.sweep_sd is None and cmp.unjudged() == (c,)
    code, line = gate_line(cmp)
    assert code == 2 and line.startswith("regression gate: cannot judge: 1 configuration "
                                         "compared with one sweep on each side")


def test_a_change_inside_the_threshold_is_no_change_and_a_wide_one_is_undecided():
    same = compare_sets(BASE, sweep("c", [10.05, 10.1, 10.0]), threshold=0.5)
    assert same.changes[0].verdict == NO_CHANGE and not same.changes[0].decision.undecided
    assert same.changes[0].decision.note.endswith("lies within the threshold (±50 %)")
    wide = compare_sets(BASE, sweep("c", [11.5, 11.6, 11.4]))  # 1.14x, day spread 4.5 %
    d = wide.changes[0].decision
    assert (d.verdict, d.undecided, d.judged) == (NO_CHANGE, True, True)
    assert d.note == ("undecided: 1.14x, and the 95 % CI 0.91-1.43 includes 1; more sweeps "
                      "on either side narrow it")
    assert gate_line(wide)[0] == 0  # judged; not shown to be a regression


def test_fail_above_moves_the_regression_bound_and_the_gate_follows_the_verdict():
    cand = sweep("c", [15.0, 15.3, 14.8])
    assert compare_sets(BASE, cand, fail_above=1.1).changes[0].verdict == REGRESSION
    strict = compare_sets(BASE, cand, fail_above=1.45)  # 1.50x is not surely beyond 1.45x
    assert strict.changes[0].verdict == NO_CHANGE and strict.failing() == ()
    assert gate_line(strict)[0] == 0


def test_the_very_same_rounds_are_paired():
    rows = sweep("s1", [10.0, 10.4, 9.8])
    (c,) = compare_sets(rows, rows).changes
    assert (c.verdict, c.decision.method, c.decision.ratio) == (NO_CHANGE, PAIRED, 1.0)
    assert (c.decision.ci_low, c.decision.ci_high) == (1.0, 1.0)


def test_step_down_min_p_adjusts_for_the_family_and_for_how_alike_its_members_move():
    lone = step_down_minp([Statistic(2.92, 2, True)], rho=0.9)
    assert round(lone[0], 2) == 0.05  # a family of one: the plain one-sided t p-value
    # 50 configurations, one of them at t = 6 (raw p 0.013 on 2 degrees of freedom): with
    # no day in common it is not enough (Bonferroni would ask p < 0.001; sharing only the
    # spread's estimate, 0.13 here); moving together on a shared day, it is
    tests = [Statistic(6.0, 2, True)] + [Statistic(0.0, 2, True)] * 49
    apart, together = step_down_minp(tests, rho=0.0)[0], step_down_minp(tests, rho=0.9)[0]
    assert (round(apart, 3), round(together, 3)) == (0.133, 0.034)
    # a statistic that stands alone (paired rounds) gets its own spread
    mixed = step_down_minp([Statistic(10.0, 2, False), Statistic(0.5, 5, True)], rho=0.5)
    assert mixed[0] <= 0.05 < mixed[1]


def test_decide_names_its_reason_and_checks_the_threshold():
    none = decide(Evidence(math.log(1.3), None, None, SWEEPS, ONE_SWEEP))
    assert (none.verdict, none.judged, none.note) == (NO_CHANGE, False, ONE_SWEEP)
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(UserError) as e:
            decide(Evidence(0.1, 0.01, 5, SWEEPS), bad)
        assert e.value.field == "threshold"
        assert str(e.value) == f"threshold: {bad!r} is out of range; allowed: number 0.01..1"


def _identical_builds(configs: int, trials: int, seed: int, threshold: float = 0.01,
                      slower: float = 1.0) -> float:
    """Share of trials in which any configuration is called a regression: 3 baseline
    sweeps and 1 candidate sweep of the same build (candidate `slower` times slower), each
    sweep on a day of its own (10 % day-to-day, shared by its configurations), each
    configuration 3 % apart from sweep to sweep and each round 5 %."""
    rng, alarms = random.Random(seed), 0
    for _ in range(trials):
        base, cand = [], []
        for name, side, k, factor in (("b", base, 3, 1.0), ("c", cand, 1, slower)):
            for s in range(k):
                day = rng.gauss(0, 0.10)
                for c in range(configs):
                    level = math.log((10 + c) * factor) + day + rng.gauss(0, 0.03)
                    side += [row(f"{name}{s}", r, math.exp(level + rng.gauss(0, 0.05)),
                                 batch_size=c + 1) for r in (1, 2, 3)]
        alarms += any(ch.verdict == REGRESSION for ch in compare_sets(
            base, cand, threshold).changes)
    return alarms / trials


def test_identical_builds_on_drifting_days_raise_a_false_alarm_at_most_at_the_stated_rate():
    # the strictest threshold the gate allows (1 %): the error rate is the tests' own
    assert _identical_builds(1, 1000, seed=1) <= 0.05 + 0.01  # 1000 trials: SE 0.7 %
    assert _identical_builds(50, 60, seed=2) <= 0.05 + 0.03  # 60 trials: SE 2.8 %
    # and a build twice as slow is caught (3 baseline sweeps leave the day's spread 2
    # degrees of freedom: a wide interval, so not every time)
    assert _identical_builds(1, 50, seed=3, slower=2.0) >= 0.95
    assert _identical_builds(50, 10, seed=4, slower=2.0) >= 0.9


def test_sets_are_compared_configuration_by_configuration():
    base = BASE + sweep("b1", [20.0, 20.4], batch_size=8) + sweep("b2", [20.8, 21.0],
                                                                  batch_size=8)
    cand = sweep("c", [15.0, 15.3, 14.8]) + sweep("c", [20.1, 20.2], batch_size=8)
    cmp = compare_sets(base, cand, baseline="sweeps b", candidate="sweep c")
    assert [(c.config.batch_size, c.verdict, c.machine) for c in cmp.changes] == [
        (1, REGRESSION, "sys-a"), (8, NO_CHANGE, "sys-a")]
    first = cmp.changes[0]
    assert first.config.label == "resnet18 224px b1 t4 · torch (eager)"
    assert (round(first.baseline_ms, 3), round(first.candidate_ms, 3)) == (10.093, 15.032)
    assert (cmp.count(REGRESSION), cmp.count(NO_CHANGE)) == (1, 1)


def test_replicas_shape_and_model_file_make_configurations_of_their_own():
    base = BASE + [dict(r, replicas=2) for r in BASE]
    cand = sweep("c", [15.0, 15.3, 14.8], replicas=2)
    verdicts = {c.config.replicas: c.verdict for c in compare_sets(base, cand).changes}
    assert verdicts == {None: NOT_COMPARABLE, 2: REGRESSION}  # never blended
    shaped = compare_sets(BASE, sweep("c", [10.0, 10.1], machine_shape="c6i.8xlarge"))
    assert [c.decision.note for c in shaped.changes] == [
        "different machine: baseline sys-a, candidate sys-a c6i.8xlarge"]
    files = compare_sets([dict(r, model_sha256="aa" * 32) for r in BASE],
                         sweep("c", [10.0, 10.1], model_sha256="bb" * 32))
    assert sorted(c.decision.note for c in files.changes) == [
        "missing in the baseline", "missing in the candidate"]
    assert Config.of(row("s", 1, 1.0, model_sha256="aa" * 32, replicas=2)).label == (
        "resnet18 224px b1 t4 · torch (eager) x2 replicas sha256:aaaaaaaa")
    assert Config.of(row("s", 1, 1.0, contention="onoff", wait_policy="passive")).label == (
        "resnet18 224px b1 t4 · torch (eager) OMP passive · on/off neighbour")


def test_another_machine_is_not_comparable():
    cmp = compare_sets(sweep("s1", [10.0, 10.1]), sweep("s2", [20.0, 20.1], system_id="sys-b"))
    (c,) = cmp.changes
    assert (c.verdict, c.machine, c.decision.ratio) == (NOT_COMPARABLE, None, None)
    assert c.decision.note == "different machine: baseline sys-a, candidate sys-b"
    assert cmp.failing() == () and cmp.unverified() == (c,) and cmp.compared == 0
    assert gate_line(cmp) == (2, "regression gate: cannot judge: 1 configuration measured in "
                                 "the baseline without a comparable successful run in the "
                                 "candidate (missing, failed, or on another machine or "
                                 "policy): exit 2")


def test_another_measurement_policy_is_not_comparable():
    cmp = compare_sets(sweep("s1", [10.0, 10.1]),
                       sweep("s2", [20.0, 20.1], warmup=2, min_time=0.05, min_iters=5))
    (c,) = cmp.changes
    assert c.verdict == NOT_COMPARABLE
    assert c.decision.note == ("different measurement policy: baseline warmup 10, min_time "
                               "2 s, min_iters 30, candidate warmup 2, min_time 0.05 s, "
                               "min_iters 5")


def test_missing_or_failed_on_one_side_is_not_comparable_and_the_gate_cannot_judge():
    base = sweep("s1", [10.0, 10.1]) + sweep("s1", [5.0, 5.1], model="resnet50")
    cand = (sweep("s2", [10.0, 10.1], status="oom")
            + sweep("s2", [7.0, 7.1], model="mobilenet_v3_small"))
    cmp = compare_sets(base, cand)
    assert [(c.config.model, c.verdict, c.decision.note) for c in cmp.changes] == [
        ("mobilenet_v3_small", NOT_COMPARABLE, "missing in the baseline"),
        ("resnet18", NOT_COMPARABLE, "no successful round in the candidate (2 failed: oom)"),
        ("resnet50", NOT_COMPARABLE, "missing in the candidate")]
    # A gate cannot pass what it could not check: the failed and the missing candidate
    # configurations are unverified (the one only the candidate has is not).
    assert [c.config.model for c in cmp.unverified()] == ["resnet18", "resnet50"]
    assert cmp.compared == 0 and cmp.failing() == ()
    assert gate_line(cmp)[0] == 2


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
        "inter_threads": 1, "replicas": 1, "contention": "none", "wait_policy": ""}
    assert c.label == "resnet18 224px b1 t4 · torch (eager) #2"
