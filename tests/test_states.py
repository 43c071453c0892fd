"""A configuration's state over fixed histories of sweeps (no database, no worker): each
transition asserted where it happens, the evidence a state carries, marks, and the gate's
own decision behind every point."""

import datetime as dt
from urllib.parse import quote_plus

import pytest

from engine.analysis.regress import IMPROVEMENT as GATE_IMPROVEMENT, REGRESSION as GATE_REGRESSION
from engine.analysis.regress import Config, compare_sets
from engine.analysis.state_timeline import SweepRows, latest, timeline, transitions
from engine.analysis.states import (ACKNOWLEDGED, DISTRIBUTION_CHANGE, IGNORED, IMPROVEMENT,
                                    INSUFFICIENT, MISSING, NO_CHANGE, NOT_COMPARABLE,
                                    RECOVERED, REGRESSION, SUSPICIOUS, Mark, StatePolicy,
                                    config_key, config_of_key, exit_status, read_state,
                                    worst_first)
from engine.core.errors import UserError

# A sweep's shared day factor, repeating: sweep means move about +-1 % from day to day.
DAY = (1.00, 1.01, 0.99, 1.005, 0.995, 1.0, 1.01, 0.99, 1.0, 1.005, 0.995, 1.0)
MODELS = ("resnet18", "mobilenet_v3_small")


def row(sweep, rnd, ms, model="resnet18", status="ok", **kw):
    return dict(dict(model=model, framework="torch", runtime="eager", batch_size=1,
                     intra_threads=4, image_size=224, precision="fp32", device="cpu",
                     inter_threads=1, sweep_id=sweep, round_no=rnd,
                     median_ms=ms if status == "ok" else None, status=status,
                     validity="valid", system_id="sys-a", machine_shape=None,
                     warmup_iters=10, min_time_s=2.0, min_iters=30, versions="torch 2.5.1"),
                **kw)


def history(levels, others=None, skip=None, **per_sweep):
    """Sweeps s00, s01, ... of two configurations: resnet18 at 10 ms x levels[d], mobilenet
    at 20 ms x others[d] (1 by default), three rounds each, times the day. skip: {sweep
    index: models left out}; per_sweep: a column's value from a sweep index on, for
    resnet18 (versions=(6, "torch 2.6.0"))."""
    others, skip = others or [1.0] * len(levels), skip or {}
    out = []
    for d, (a, b) in enumerate(zip(levels, others)):
        name = f"s{d:02d}"
        extra = {k: v for k, (frm, v) in per_sweep.items() if d >= frm}
        rows = []
        for model, base, level in (("resnet18", 10, a), ("mobilenet_v3_small", 20, b)):
            if model in skip.get(d, ()):
                continue
            for r in (1, 2, 3):
                status = "oom" if level is None else "ok"
                ms = None if level is None else base * level * DAY[d % len(DAY)] * (1 + 0.002 * r)
                rows.append(row(name, r, ms, model, status,
                                **(extra if model == "resnet18" else {})))
        out.append(SweepRows(name, dt.datetime(2026, 1, 1) + dt.timedelta(days=d), tuple(rows)))
    return out


def states_of(sweeps, model="resnet18", marks=(), policy=None):
    tl = timeline(sweeps, marks, policy)
    return next(v for c, v in tl.items() if c.model == model)


def changes(states):
    return [(sweep, new) for sweep, _, new in transitions(states)]


def test_a_slowdown_is_suspicious_then_a_regression_then_recovered_then_no_change():
    states = states_of(history([1] * 6 + [1.3] * 3 + [1] * 5))
    assert changes(states) == [("s00", INSUFFICIENT), ("s03", NO_CHANGE), ("s06", SUSPICIOUS),
                               ("s07", REGRESSION), ("s09", RECOVERED), ("s12", NO_CHANGE)]
    first = states[0]
    assert (first.note, first.baseline_needed) == ("0 baseline sweeps of the 3 needed", 3)
    reg = states[8]  # s08: the evidence is the run of violations, each the gate's decision
    assert (reg.state, reg.since) == (REGRESSION, "s07")
    assert [(p.sweep_id, p.verdict, round(p.ratio, 3)) for p in reg.points] == [
        ("s06", GATE_REGRESSION, 1.313), ("s07", GATE_REGRESSION, 1.287),
        ("s08", GATE_REGRESSION, 1.3)]
    p = reg.points[-1]
    assert (round(p.ci_low, 2), round(p.ci_high, 2)) == (1.27, 1.33)
    # the violations stay out of the baseline: every later point is judged against s00-s05
    assert p.baseline == ("s00", "s01", "s02", "s03", "s04", "s05")
    assert states[9].points[-1].baseline == ("s00", "s01", "s02", "s03", "s04", "s05")
    assert states[11].points[-1].baseline == ("s01", "s02", "s03", "s04", "s05", "s09", "s10")
    # recovered: the regression's points and the ones back inside since
    assert [q.sweep_id for q in states[11].points] == ["s06", "s07", "s08", "s09", "s10",
                                                       "s11"]
    # the other configuration never moved
    assert changes(states_of(history([1] * 6 + [1.3] * 3 + [1] * 5), MODELS[1])) == [
        ("s00", INSUFFICIENT), ("s03", NO_CHANGE)]


def test_a_single_violation_is_suspicious_for_lookback_points_never_a_regression():
    states = states_of(history([1] * 7 + [1.3] + [1] * 5))
    assert changes(states) == [("s00", INSUFFICIENT), ("s03", NO_CHANGE), ("s07", SUSPICIOUS),
                               ("s10", NO_CHANGE)]
    assert [q.sweep_id for q in states[9].points] == ["s07", "s08", "s09"]
    assert "s07" not in states[12].points[-1].baseline  # a violation is never a baseline


def test_a_sweep_beyond_the_threshold_the_gate_could_not_show_stays_out_of_baselines():
    states = states_of(history([1] * 6 + [1.105, 1.0]))
    (p,) = states[6].points
    assert (p.verdict, p.undecided, round(p.ratio, 3)) == (NO_CHANGE, True, 1.116)
    assert states[6].state == NO_CHANGE
    assert states[7].points[-1].baseline == ("s00", "s01", "s02", "s03", "s04", "s05")


def test_an_improvement_needs_two_points_and_stays_until_it_reverts_or_is_marked():
    sweeps = history([1] * 6 + [0.7] * 6 + [1] * 2)
    states = states_of(sweeps)
    assert changes(states) == [("s00", INSUFFICIENT), ("s03", NO_CHANGE), ("s07", IMPROVEMENT),
                               ("s12", NO_CHANGE)]
    assert [q.verdict for q in states[7].points] == [GATE_IMPROVEMENT, GATE_IMPROVEMENT]
    assert states[11].points[-1].baseline == ("s00", "s01", "s02", "s03", "s04", "s05")
    key = states[0].key
    accepted = states_of(sweeps, marks=[mark(DISTRIBUTION_CHANGE, key, sweep="s07")])
    assert changes(accepted) == [("s00", INSUFFICIENT), ("s03", NO_CHANGE),
                                 ("s07", INSUFFICIENT), ("s10", NO_CHANGE),
                                 ("s12", SUSPICIOUS), ("s13", REGRESSION)]


def test_missing_after_n_measured_sweeps_until_measured_again_and_failed_rounds():
    skip = {6: ("resnet18",), 7: ("resnet18",)}
    states = states_of(history([1] * 10, skip=skip))
    assert changes(states) == [("s00", INSUFFICIENT), ("s03", NO_CHANGE), ("s06", MISSING),
                               ("s08", NO_CHANGE)]
    assert states[6].note == "not measured in this sweep; measured in each of the 3 before " \
                             "(last s05)"
    assert states[7].since == "s06"
    # measured in only 2 of the 3 sweeps before: its silence is not called missing
    sparse = {2: ("resnet18",), 4: ("resnet18",)}
    assert changes(states_of(history([1] * 6, skip=sparse))) == [("s00", INSUFFICIENT),
                                                                 ("s05", NO_CHANGE)]
    failed = states_of(history([1] * 5 + [None] + [1] * 2))
    assert changes(failed) == [("s00", INSUFFICIENT), ("s03", NO_CHANGE), ("s05", MISSING),
                               ("s06", NO_CHANGE)]
    assert failed[5].note == "measured with no successful round (oom)"


def test_another_environment_is_not_comparable_then_builds_a_baseline_of_its_own():
    states = states_of(history([1] * 6 + [1.3] * 6, versions=(6, "torch 2.6.0")))
    assert changes(states) == [("s00", INSUFFICIENT), ("s03", NO_CHANGE),
                               ("s06", NOT_COMPARABLE), ("s07", INSUFFICIENT),
                               ("s09", NO_CHANGE)]
    assert states[6].note == "framework versions differ from the baseline's (sweep s05); " \
                             "not judged"
    assert states[6].points == () and states[7].note == "1 baseline sweep of the 3 needed"
    assert states[9].points[-1].baseline == ("s06", "s07", "s08")
    moved = states_of(history([1] * 5, system_id=(4, "sys-b")))
    assert moved[4].state == NOT_COMPARABLE and moved[4].note.startswith("machine differ")


def mark(kind, key=None, state=None, sweep=None, mark_id="m1"):
    return Mark(mark_id, kind, key, "ana@example.com", dt.datetime(2026, 2, 1), "known: "
                "new allocator", state, sweep)


def test_marks_acknowledge_a_state_ignore_a_configuration_and_restart_a_baseline():
    sweeps = history([1] * 6 + [1.3] * 8)
    key = config_key(next(c for c in timeline(sweeps) if c.model == "resnet18"))
    ack = mark(ACKNOWLEDGED, key, REGRESSION, "s07")
    states = states_of(sweeps, marks=[ack])
    assert [s.acknowledged is ack for s in states[6:9]] == [False, True, True]
    stale = mark(ACKNOWLEDGED, key, REGRESSION, "s06")  # not the sweep the state began at
    assert states_of(sweeps, marks=[stale])[8].acknowledged is None
    # distribution changes here, from s09 on: a new baseline, the new level no change
    moved = states_of(sweeps, marks=[mark(DISTRIBUTION_CHANGE, key, sweep="s09")])
    assert changes(moved) == [("s00", INSUFFICIENT), ("s03", NO_CHANGE), ("s06", SUSPICIOUS),
                              ("s07", REGRESSION), ("s09", INSUFFICIENT), ("s12", NO_CHANGE)]
    assert moved[12].points[-1].baseline == ("s09", "s10", "s11")
    group_wide = states_of(sweeps, MODELS[1], [mark(DISTRIBUTION_CHANGE, None, sweep="s09")])
    assert group_wide[9].state == INSUFFICIENT
    ignored = mark(IGNORED, key)
    last = latest(sweeps, [ignored])
    assert [(s.config.model, s.state, s.shown) for s in last] == [
        ("mobilenet_v3_small", NO_CHANGE, NO_CHANGE), ("resnet18", REGRESSION, IGNORED)]


def test_the_board_order_and_the_exit_status_follow_the_states_and_the_marks():
    sweeps = history([1] * 6 + [1.3] * 3, others=[1] * 8 + [None])
    last = latest(sweeps)
    assert [(s.config.model, s.state) for s in last] == [("resnet18", REGRESSION),
                                                         ("mobilenet_v3_small", MISSING)]
    assert exit_status(last) == 1
    key = last[0].key
    acked = latest(sweeps, [mark(ACKNOWLEDGED, key, REGRESSION, "s07")])
    assert [s.config.model for s in acked] == ["mobilenet_v3_small", "resnet18"]
    assert exit_status(acked) == 2  # the missing one is not judged
    assert exit_status(latest(history([1] * 5))) == 0
    assert exit_status(latest(history([1] * 2))) == 2  # nothing judged yet
    assert [s.state for s in worst_first(reversed(last))] == [REGRESSION, MISSING]


def test_every_point_is_the_gates_decision_on_its_baseline_sweeps():
    sweeps = history([1] * 6 + [1.05, 1.3])
    state = states_of(sweeps)[7]
    for p in state.points:
        cand = next(s for s in sweeps if s.sweep_id == p.sweep_id)
        base = [r for s in sweeps if s.sweep_id in p.baseline for r in s.rows]
        (ch,) = [c for c in compare_sets(base, list(cand.rows)).changes
                 if c.config.model == "resnet18"]
        d = ch.decision
        assert (p.verdict, p.ratio, p.ci_low, p.ci_high, p.p_value) == (
            d.verdict, d.ratio, d.ci_low, d.ci_high, d.p_value)
    assert state.state == SUSPICIOUS
    assert [p.verdict for p in state.points] == ["no change", "no change", GATE_REGRESSION]


def test_the_policy_is_checked_naming_the_field_and_its_range():
    for kw, field, allowed in ((dict(confirm=1), "confirm", "integer 2..10"),
                               (dict(threshold=0.0), "threshold", "number 0.01..1"),
                               (dict(window=2), "window", "integer 3..60 (at least "
                                                          "min_baseline)"),
                               (dict(missing_after=0), "missing_after", "integer 1..30")):
        with pytest.raises(UserError) as e:
            StatePolicy(**kw).validate()
        assert e.value.field == field and str(e.value).endswith(f"allowed: {allowed}")
    with pytest.raises(UserError) as e:
        StatePolicy(alert_states=("bad",)).validate()
    assert e.value.field == "alert_states"
    policy = StatePolicy()
    assert (policy.upper, policy.alerts(NO_CHANGE, REGRESSION),
            policy.alerts(REGRESSION, REGRESSION), policy.alerts(REGRESSION, NO_CHANGE),
            policy.alerts(NO_CHANGE, SUSPICIOUS)) == (1.1, True, False, False, False)


def test_a_key_round_trips_and_read_state_needs_confirm_points():
    c = Config("resnet18", "torch", "eager", 1, 4, 224, "fp32", "cpu", 1)
    assert config_of_key(config_key(c)) == c
    sweeps = history([1] * 6 + [1.3] * 3)
    points = list(states_of(sweeps)[8].points)
    assert read_state(points[:1], StatePolicy())[0] == SUSPICIOUS
    assert read_state(points, StatePolicy(confirm=3))[0] == REGRESSION
    assert read_state(points[:2], StatePolicy(confirm=3))[0] == SUSPICIOUS


def test_a_state_in_words_names_its_evidence_marks_and_the_view_of_its_baseline():
    from engine.present.states_text import evidence_text, policy_text, state_line, state_link

    sweeps = history([1] * 6 + [1.3] * 3)
    key = states_of(sweeps)[0].key
    s = states_of(sweeps, marks=[mark(ACKNOWLEDGED, key, REGRESSION, "s07")])[8]
    assert evidence_text(s.points) == ("1.30x (95 % CI 1.27-1.33) in sweep s08 against 6 "
                                       "baseline sweeps; earlier 1.31x, 1.29x")
    assert state_line(s).endswith("· since sweep s07 · " + evidence_text(s.points) +
                                  " · acknowledged by ana@example.com: known: new allocator")
    assert state_link("http://d.example/", s.sweep_id, s.config.label, s.points,
                      StatePolicy(threshold=0.05)) == (
        "http://d.example/history?baseline=s00%2Cs01%2Cs02%2Cs03%2Cs04%2Cs05&candidate=s08"
        "&threshold=5&config=" + quote_plus(s.config.label))
    text = policy_text(StatePolicy())
    for part in ("last 7 baseline sweeps (at least 3", "slower than 1.1x", "the last 2 or more",
                 "among the last 3", "each of the last 3 sweeps"):
        assert part in text
