"""Shared versus dedicated (issue 24 point 7): the sweep option, its settings, what the page
and the table say on fixed rounds, and a real selftest sweep beside the engine's own
neighbour."""

import pytest

from engine.analysis.compare import aggregate
from engine.analysis.contention import slowdowns, verdict_changes, wait_policy_effects
from engine.analysis.sweep_verdict import judge_sweep
from engine.cli import main
from engine.present.tables import contention_lines
from engine.scenarios.inference.expand import expand_sweep
from engine.core.errors import UserError
from engine.scenarios.inference.expand import with_contention
from store.db import open_db
from store.queries import results_table
from seeds.records import spec


def test_contention_measures_every_configuration_beside_each_neighbour_and_torch_passive():
    base = expand_sweep(["mobilenet_v3_small"], ["torch", "tensorflow"], [1], [1], cores=2)
    got = [(s.framework, s.contention, s.wait_policy) for s in with_contention(base)]
    assert got == [("torch", "none", ""), ("torch", "steady", ""), ("torch", "onoff", ""),
                   ("tensorflow", "none", ""), ("tensorflow", "steady", ""),
                   ("tensorflow", "onoff", ""), ("torch", "none", "passive"),
                   ("torch", "steady", "passive"), ("torch", "onoff", "passive")]


@pytest.mark.parametrize("change, field, message", [
    (dict(contention="sometimes"), "contention", "contention: 'sometimes' is not supported; "
                                                 "allowed: none, steady, onoff"),
    (dict(wait_policy="active"), "wait_policy", "wait_policy: 'active' is not supported"),
    (dict(wait_policy="passive", framework="tensorflow", runtime=None),
     "wait_policy", "wait_policy: 'passive' sets torch's OpenMP wait policy; tensorflow has "
                    "none"),
])
def test_a_bad_contention_or_wait_policy_names_the_field(change, field, message):
    with pytest.raises(UserError) as e:
        spec(**change)
    assert e.value.field == field and str(e.value).startswith(message)


def test_a_cluster_sweep_cannot_have_the_neighbour(capsys, db_path):
    rc = main(["run", "--model", "identity", "--framework", "selftest", "--contention",
               "--executor", "ray", "--address", "127.0.0.1:1", "--db", str(db_path)])
    assert rc == 2 and capsys.readouterr().err.startswith(
        "error: contention: the neighbour runs on this machine's cores")
    assert not db_path.exists()


def _run(fw, rt, r, ms, contention="none", wait_policy=""):
    return dict(model="m", image_size=64, batch_size=8, intra_threads=2, framework=fw,
                runtime=rt, round_no=r, status="ok", validity="valid", median_ms=ms,
                contention=contention, wait_policy=wait_policy)


ROUNDS = (1, 2, 3)
# Quiet, TensorFlow wins (55 vs 100 ms); beside a steady neighbour torch's spinning threads
# collapse (about 10x) while TensorFlow slows 1.3x; torch with passive waits slows 1.4x.
RUNS = ([_run("torch", "eager", r, ms) for r, ms in zip(ROUNDS, (100, 104, 98))]
        + [_run("tensorflow", "tf_function", r, ms) for r, ms in zip(ROUNDS, (55, 56, 54))]
        + [_run("torch", "eager", r, ms, "steady") for r, ms in zip(ROUNDS, (990, 1050, 1010))]
        + [_run("tensorflow", "tf_function", r, ms, "steady")
           for r, ms in zip(ROUNDS, (72, 73, 70))]
        + [_run("torch", "eager", r, ms, "none", "passive")
           for r, ms in zip(ROUNDS, (101, 105, 99))]
        + [_run("torch", "eager", r, ms, "steady", "passive")
           for r, ms in zip(ROUNDS, (140, 146, 139))])


def test_slowdowns_are_paired_by_round_against_the_same_configuration_quiet():
    results = aggregate(RUNS)
    got = {(s.contender, s.condition): round(s.paired.speedup, 2) for s in slowdowns(results)}
    assert got == {("tensorflow (tf_function)", "steady"): 1.30,
                   ("torch (eager)", "steady"): 10.10,
                   ("torch (eager) OMP passive", "steady"): 1.39}
    [change] = verdict_changes(results)
    assert (change.row, change.condition, change.quiet, change.busy, change.changed) == (
        ("m", 64, 8, 2), "steady", "tensorflow (tf_function)", "tensorflow (tf_function)",
        False)
    effects = {(c, cond): round(cmp.speedup, 2)
               for _, c, cond, _, _, cmp in wait_policy_effects(results)}
    assert effects == {("torch (eager)", "none"): 0.99, ("torch (eager)", "steady"): 7.18}


def test_a_sweep_of_two_machines_pairs_each_machines_wait_policies_apart():
    """A machine suffix follows the policy in the name (torch (eager) OMP passive @A): the
    policy is read from its field, so each machine's passive runs pair with its own."""
    runs = [dict(r, system_id=m, machine_shape=m, median_ms=r["median_ms"] * k)
            for m, k in (("A", 1.0), ("B", 2.0)) for r in RUNS]
    effects = {(c, cond): round(cmp.speedup, 2)
               for _, c, cond, _, _, cmp in wait_policy_effects(aggregate(runs))}
    assert effects == {("torch (eager) @A", "none"): 0.99, ("torch (eager) @A", "steady"): 7.18,
                       ("torch (eager) @B", "none"): 0.99, ("torch (eager) @B", "steady"): 7.18}
    got = {(s.contender, s.condition) for s in slowdowns(aggregate(runs))}
    assert ("torch (eager) OMP passive @B", "steady") in got and len(got) == 6
    changes = verdict_changes(aggregate(runs))
    assert [(c.condition, c.quiet, c.busy) for c in changes] == [
        ("steady", "tensorflow (tf_function) @A", "tensorflow (tf_function) @A")]


def test_a_neighbour_that_flips_the_winner_is_said_so():
    runs = [r for r in RUNS if r["wait_policy"] == ""]
    runs += [_run("torch", "eager", r, ms) for r, ms in zip((4,), (101,))]
    flip = [dict(r, median_ms=r["median_ms"] / 20) if r["framework"] == "torch"
            and r["contention"] == "steady" else r for r in runs]
    [change] = verdict_changes(aggregate(flip))
    assert change.changed and (change.quiet, change.busy) == ("tensorflow (tf_function)",
                                                             "torch (eager)")
    lines = contention_lines(judge_sweep(flip))
    assert "  m 64px b8 t2: the verdict changes beside a steady neighbour: tensorflow " \
           "(tf_function) wins quietly, torch (eager) beside a steady neighbour" in lines


def test_the_table_says_what_the_neighbour_costs_and_what_passive_waits_do():
    lines = contention_lines(judge_sweep(RUNS))
    assert lines[0].startswith("shared versus dedicated")
    assert ("  m 64px b8 t2 · torch (eager): 10.10x (95 % CI 9.61-10.62, 3 rounds) slower "
            "beside a steady neighbour (100.64 -> 1,016.36 ms)") in lines
    assert ("  m 64px b8 t2 · torch (eager) beside a steady neighbour: OMP_WAIT_POLICY=PASSIVE "
            "is 7.18x faster (1,016.36 -> 141.63 ms, 95 % CI 6.94-7.42)") in lines
    assert ("  m 64px b8 t2 · torch (eager) on a dedicated machine: OMP_WAIT_POLICY=PASSIVE "
            "is 1.01x slower (100.64 -> 101.64 ms, 95 % CI 1.01-1.01)") in lines
    assert contention_lines(judge_sweep(RUNS[:6])) == []  # no neighbour: nothing to say


@pytest.mark.alone  # a LoadGen bound or a contention verdict: measured time
def test_a_real_sweep_beside_the_neighbour_stores_each_setting_apart(db_path, worker_env,
                                                                     capsys):
    assert main(["run", "--model", "identity", "--framework", "selftest", "--threads", "1",
                 "--contention", "--rounds", "2", "--max-rounds", "2", "--min-time", "1",
                 "--min-iters", "5", "--warmup", "2", "--db", str(db_path)]) == 0
    out = capsys.readouterr().out
    with open_db(db_path) as con:
        rows = con.execute(
            "SELECT contention, count(*), min((extra->'interference'->>'others_cpu_frac')"
            "::DOUBLE), list(DISTINCT extra->>'$.neighbour.mode'), "
            "list(DISTINCT (extra->>'$.neighbour.core')::INTEGER), "
            "list(DISTINCT (extra->'interference'->'cores'->>0)::INTEGER) "
            "FROM runs GROUP BY contention ORDER BY contention").fetchall()
        shown = sorted(results_table(con)["setting"])  # the Results page's column
    assert [(c, n) for c, n, *_ in rows] == [("none", 2), ("onoff", 2), ("steady", 2)]
    assert shown == ["", "", "on/off neighbour", "on/off neighbour", "steady neighbour",
                     "steady neighbour"]
    # the neighbour ran on the worker's own core, as the run records
    assert [(c, modes, cores == pinned) for c, _, _, modes, cores, pinned in rows[1:]] == [
        ("onoff", ["onoff"], True), ("steady", ["steady"], True)]
    assert rows[0][3] == [None]  # a quiet run had none
    # and took a share of that core all the timed window long, in every round. A 1 s window:
    # in 0.3 s ones the scheduler let the worker, just woken from its wait for the go,
    # run nearly alone (0.03-0.19 of the core went to the neighbour; 0.36 over 1 s).
    steady = rows[2][2]
    assert steady > 0.10
    assert "identity 32px · steady neighbour" in out
    assert "slower beside a steady neighbour" in out


def test_the_compare_page_shows_shared_versus_dedicated(db_path, monkeypatch):
    from dataclasses import replace

    from streamlit.testing.v1 import AppTest

    from store.runs import save_record, save_sweep
    from tests.conftest import ROOT
    from seeds.records import SYSTEM, ok_record

    with open_db(db_path) as con:
        save_sweep(con, "sweep-shared", rounds=3, seed=1, plan=[[]] * 3, configurations=4,
                   rule={"min_rounds": 3, "max_rounds": 6, "margin": 0.02, "alpha": 0.05})
        for r in RUNS:
            rec = ok_record(f"{r['framework']}-{r['contention']}-{r['wait_policy']}-"
                            f"{r['round_no']}", samples=(int(r["median_ms"] * 1e6),) * 3,
                            minute=r["round_no"], framework=r["framework"],
                            runtime=r["runtime"], batch_size=8, intra_threads=2)
            save_record(con, replace(rec, sweep_id="sweep-shared", round_no=r["round_no"],
                                     contention=r["contention"],
                                     wait_policy=r["wait_policy"]), SYSTEM)
    monkeypatch.setenv("BENCH_DB", str(db_path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("views/compare.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert [h.value for h in at.subheader if h.value == "Shared versus dedicated"]
    shown = [m.value for m in at.markdown]
    assert ("- resnet18 64px b8 t2 · torch (eager): 10.10x (95 % CI 9.61-10.62, 3 rounds) "
            "slower beside a steady neighbour (100.64 -> 1,016.36 ms)") in shown
    # the setting picker names the neighbour's setting apart, the quiet one first
    labels = at.selectbox(key="setting").options
    assert len(labels) == 2 and "steady neighbour" in labels[1]


def test_a_condition_is_named_with_its_article():
    from engine.present.tables import _beside
    assert [_beside(c) for c in ("steady", "onoff")] == ["beside a steady neighbour",
                                                          "beside an on/off neighbour"]
