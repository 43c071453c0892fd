"""Result sets and the regression check through the store, the CLI (seeded sweeps, among
them a selftest build made slower on purpose; one real delayed selftest sweep) and the
History page."""

import json
import re
from dataclasses import replace

import numpy
import pytest
from streamlit.testing.v1 import AppTest

from engine.cli import main
from engine.core.errors import UserError
from store.db import open_db
from store.history import result_sets, selection_runs
from tests.conftest import ROOT
from seeds.records import SYSTEM, ok_record

OTHER = {**SYSTEM, "system_id": "sys-other-0002", "hostname": "other"}
# sweep, commit, torch version, machine, round medians (ms) of mobilenet b1 t1: the baseline
# build (commit aaaa1111) measured on three days, a slower build, and one on another machine
SWEEPS = [("sweep-a", "aaaa1111", "2.5.1", SYSTEM, (10.0, 10.1, 9.9)),
          ("sweep-a2", "aaaa1111", "2.5.1", SYSTEM, (10.5, 10.6, 10.4)),
          ("sweep-a3", "aaaa1111", "2.5.1", SYSTEM, (10.2, 10.3, 10.1)),
          ("sweep-b", "bbbb2222", "2.6.0", SYSTEM, (13.0, 13.2, 12.9)),
          ("sweep-c", "bbbb2222", "2.6.0", OTHER, (5.0, 5.1, 4.9))]


def seed_history(db_path):
    from store.runs import save_record, save_sweep

    with open_db(db_path) as con:
        for n, (sweep_id, commit, torch, system, medians) in enumerate(SWEEPS):
            save_sweep(con, sweep_id, rounds=3, seed=1, plan=[[]] * 3, configurations=1)
            for rnd, ms in enumerate(medians, 1):
                rec = ok_record(f"{sweep_id}-{rnd}", samples=(int(ms * 1e6),) * 3,
                                minute=10 * n + rnd, model="mobilenet_v3_small")
                save_record(con, replace(rec, sweep_id=sweep_id, round_no=rnd,
                                         git_commit=commit, system_id=system["system_id"],
                                         versions={"torch": torch, "numpy": "2.1.3"}), system)


@pytest.fixture
def history_db(db_path):
    seed_history(db_path)
    return db_path


def test_result_sets_list_commit_versions_and_machine_newest_first(history_db):
    with open_db(history_db) as con:
        sets = result_sets(con)
    assert sets.sweep_id.tolist() == ["sweep-c", "sweep-b", "sweep-a3", "sweep-a2", "sweep-a"]
    assert sets.commits.tolist() == [["bbbb2222"], ["bbbb2222"], *[["aaaa1111"]] * 3]
    assert sets.versions.tolist() == ["torch 2.6.0", "torch 2.6.0", *["torch 2.5.1"] * 3]
    assert sets.machines.tolist() == [["sys-other-0002"], *[["sys-test-0001"]] * 4]
    assert sets.machine_names.tolist()[0] == ["Test CPU @ 2 GHz on other"]
    assert (sets.runs.tolist(), sets.ok.tolist()) == ([3] * 5, [3] * 5)


def test_a_sweep_run_outside_a_git_checkout_lists_no_commit(db_path):
    """Runs stored with no commit (a copy of the project that is not a git checkout): the
    list of commits is empty, not a crash on the NULL DuckDB hands over."""
    from store.runs import save_record, save_sweep

    with open_db(db_path) as con:
        save_sweep(con, "no-git", rounds=1, seed=1, plan=[[]], configurations=1)
        rec = ok_record("no-git-1", samples=(10_000_000,) * 3, model="mobilenet_v3_small")
        save_record(con, replace(rec, sweep_id="no-git", round_no=1, git_commit=None,
                                 system_id=SYSTEM["system_id"]), SYSTEM)
        sets = result_sets(con)
    assert sets.sweep_id.tolist() == ["no-git"]
    assert sets.commits.tolist() == [[]]
    assert sets.machines.tolist() == [[SYSTEM["system_id"]]]


@pytest.mark.parametrize("selector, label, sweeps", [
    ("sweep-a", "sweep sweep-a", {"sweep-a"}),  # an exact id wins over sweep-a2
    ("sweep-a,sweep-a2", "2 sweeps (sweep-a, sweep-a2)", {"sweep-a", "sweep-a2"}),
    ("commit:aaaa", "commit aaaa1111", {"sweep-a", "sweep-a2", "sweep-a3"}),
    ("commit:bbbb", "commit bbbb2222", {"sweep-b", "sweep-c"}),
    ("torch:2.5", "torch 2.5.1", {"sweep-a", "sweep-a2", "sweep-a3"}),
    ("torch:2.6.0", "torch 2.6.0", {"sweep-b", "sweep-c"}),
    ("machine:sys-other", "machine sys-othe", {"sweep-c"}),
])
def test_selectors_name_their_runs(history_db, selector, label, sweeps):
    with open_db(history_db) as con:
        sel, rows = selection_runs(con, selector)
    assert sel.label == label
    assert {r["sweep_id"] for r in rows} == sweeps and len(rows) == 3 * len(sweeps)
    assert rows[0]["versions"] in ("torch 2.5.1", "torch 2.6.0")
    assert (rows[0]["warmup_iters"], rows[0]["min_time_s"], rows[0]["min_iters"]) == (2, 0.0, 3)


@pytest.mark.parametrize("selector, message", [
    ("sweep-", "candidate: 'sweep-' matches 5 inference sweeps; allowed: a sweep id or unique "
               "prefix (see `python -m engine history`), commit:<prefix>, machine:<system_id "
               "prefix>, or <package>:<version> with package one of numpy, torch"),
    ("commit:cc", "candidate: 'commit:cc' matches 0 commits (none); allowed: a unique prefix "
                  "of aaaa1111, bbbb2222"),
    ("torch:2.7", "candidate: no inference runs with torch '2.7'; allowed: torch:<version> "
                  "with version one of 2.5.1, 2.6.0"),
    ("jax:0.4", "candidate: unknown selector 'jax' in 'jax:0.4'; allowed: a sweep id"),
])
def test_a_bad_selector_names_the_option_and_what_is_allowed(history_db, selector, message):
    with open_db(history_db) as con, pytest.raises(UserError) as e:
        selection_runs(con, selector, "candidate")
    assert e.value.field == "candidate" and str(e.value).startswith(message)


def test_compare_baseline_candidate_prints_verdicts_and_gates(history_db, capsys):
    db = ["--db", str(history_db)]
    # the baseline build on two days against the slower build: a regression, exit 1
    assert main(["compare", "--baseline", "torch:2.5", "--candidate", "sweep-b", *db]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "baseline torch 2.5.1 (9 runs) · candidate sweep sweep-b (3 runs)"
    row = [c.strip() for c in out[3].split("  ") if c.strip()]
    assert row[:9] == [
        "mobilenet_v3_small 64px b1 t1 · torch (eager)", "sys-test", "10.23", "13.03",
        "1.274x", "1.128-1.439", "3/1", "9/3", "regression · FAILS > 1.1x"]
    assert out[-1] == ("regression gate: 1 configuration slower than 1.1x (5 % family-wise "
                       "over the configurations judged): exit 1")
    # the gate at 1.40x lets a 1.27x slowdown pass; the reverse is an improvement
    assert main(["compare", "--baseline", "torch:2.5", "--candidate", "sweep-b",
                 "--fail-above", "1.4", *db]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "regression gate: no configuration slower than 1.4x among 1 compared (1 undecided: "
        "more sweeps narrow them): exit 0")
    assert main(["compare", "--baseline", "sweep-b", "--candidate", "commit:aaaa", *db]) == 0
    assert "improvement" in capsys.readouterr().out
    # one sweep on each side: a slower day or a slower build? It cannot say: exit 2
    assert main(["compare", "--baseline", "sweep-a", "--candidate", "sweep-b", *db]) == 2
    out = capsys.readouterr().out
    assert "undecided: one baseline sweep cannot tell a slower day from a slower build" in out
    assert out.splitlines()[-1].startswith("regression gate: cannot judge: 1 configuration "
                                           "compared with one sweep on each side")
    # another machine is not comparable; with nothing compared the gate cannot judge
    assert main(["compare", "--baseline", "sweep-a", "--candidate", "machine:sys-o", *db]) == 2
    out = capsys.readouterr().out
    assert "not comparable" in out and "different machine: baseline sys-test, candidate " \
        "sys-othe" in out
    assert out.splitlines()[-1].startswith("regression gate: cannot judge: 1 configuration "
                                           "measured in the baseline without a comparable")


@pytest.mark.parametrize("argv, message", [
    (["--baseline", "sweep-a"], "error: candidate: missing; --baseline and --candidate go "
                                "together"),
    (["sweep-a", "--baseline", "sweep-a", "--candidate", "sweep-b"],
     "error: sweep: 'sweep-a' given with --baseline/--candidate; allowed: "),
    (["--baseline", "sweep-a", "--candidate", "sweep-b", "--threshold", "2"],
     "error: threshold: 2.0 is out of range; allowed: number 0.01..1"),
    (["--baseline", "sweep-a", "--candidate", "sweep-b", "--fail-above", "0.9"],
     "error: fail_above: 0.9 is out of range; allowed: number 1..100"),
])
def test_compare_refuses_bad_regression_options(history_db, capsys, argv, message):
    assert main(["compare", *argv, "--db", str(history_db)]) == 2
    assert capsys.readouterr().err.startswith(message)


def test_old_compare_of_one_sweep_still_works(history_db, capsys):
    assert main(["compare", "sweep-a", "--db", str(history_db)]) == 0
    assert capsys.readouterr().out.startswith("sweep sweep-a: 3 runs")


def test_history_command_lists_result_sets(history_db, capsys):
    assert main(["history", "--db", str(history_db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["created", "(UTC)", "sweep", "commit", "framework", "versions",
                                "machine", "rounds", "ok/runs"]
    assert [l.split()[2] for l in lines[2:7]] == ["sweep-c", "sweep-b", "sweep-a3", "sweep-a2",
                                                  "sweep-a"]
    assert re.split(r"\s{2,}", lines[2])[1:] == [
        "sweep-c", "bbbb2222", "torch 2.6.0", "Test CPU @ 2 GHz on other (sys-othe)", "3",
        "3/3"]
    assert lines[7].startswith("compare two of them: python -m engine compare --baseline")


# A selftest `identity` build measured twice (its sweeps' round medians 2.048 and 1.953125 ms:
# a geometric centre of exactly 2 ms, 2.4 % either side of it), the same build once more at
# 2 ms, and a build made twice as slow at 4 ms, its delay on record in versions as the
# selftest backend reports it (engine/worker/backends/selftest.py).
SELFTEST_SWEEPS = [("st-base-1", "2", 2_048_000), ("st-base-2", "2", 1_953_125),
                   ("st-same", "2", 2_000_000), ("st-slow", "4", 4_000_000)]


def seed_selftest_sweeps(db_path):
    from store.runs import save_record, save_sweep

    with open_db(db_path) as con:
        for n, (sweep_id, delay, median_ns) in enumerate(SELFTEST_SWEEPS):
            save_sweep(con, sweep_id, rounds=2, seed=1, plan=[[]] * 2, configurations=1)
            for rnd in (1, 2):
                rec = ok_record(f"{sweep_id}-{rnd}", minute=10 * n + rnd,
                                samples=(median_ns - 10_000, median_ns, median_ns + 10_000),
                                model="identity", framework="selftest", image_size=32)
                save_record(con, replace(rec, sweep_id=sweep_id, round_no=rnd,
                                         versions={"numpy": "2.1.3",
                                                   "selftest_delay_ms": delay}), SYSTEM)


def test_compare_catches_a_build_made_twice_as_slow(db_path, capsys):
    seed_selftest_sweeps(db_path)
    db = ["--db", str(db_path)]

    def check(baseline, candidate):
        rc = main(["compare", "--baseline", baseline, "--candidate", candidate,
                   "--fail-above", "1.10", *db])
        out = capsys.readouterr().out.splitlines()
        row = re.split(r"\s{2,}", out[3])
        assert row[:2] == ["identity 32px b1 t1 · selftest (python)", "sys-test"], row
        # exit status, baseline and candidate ms, ratio, its interval, verdict, gate
        return rc, *row[2:6], row[8], out[-1]

    base = "st-base-1,st-base-2"
    # The baseline's two sweep means are log 2 +- log 1.024: a spread of sd = 0.0335 with one
    # degree of freedom, so se = sd * sqrt(1/2 + 1/1) = 0.0411 and the 95 % interval is the
    # ratio times exp(+-12.706 * se) = 0.593..1.685. 2x is still past 1.1x: one-sided
    # t = (log 2 - log 1.1) / se = 14.6, p = 0.022.
    assert check(base, "st-slow") == (
        1, "2", "4", "2.000x", "1.187-3.371", "regression · FAILS > 1.1x",
        "regression gate: 1 configuration slower than 1.1x (5 % family-wise over the "
        "configurations judged): exit 1")
    assert check("st-slow", base) == (
        0, "4", "2", "0.500x", "0.297-0.843", "improvement",
        "regression gate: no configuration slower than 1.1x among 1 compared: exit 0")
    # the same build again: exactly 1x, but one degree of freedom cannot rule out 1.1x
    assert check(base, "st-same") == (
        0, "2", "2", "1.000x", "0.593-1.685", "no change · undecided",
        "regression gate: no configuration slower than 1.1x among 1 compared (1 undecided: "
        "more sweeps narrow them): exit 0")
    # the delay is on record: the slow sweep's versions say so
    assert main(["history", *db]) == 0
    rows = [re.split(r"\s{2,}", l) for l in capsys.readouterr().out.splitlines()[2:6]]
    assert {r[1]: r[3] for r in rows} == {
        "st-slow": "numpy 2.1.3 selftest_delay_ms 4",
        **{s: "numpy 2.1.3 selftest_delay_ms 2" for s in ("st-same", "st-base-2",
                                                          "st-base-1")}}


@pytest.mark.slow
def test_a_real_delayed_selftest_sweep_records_its_delay(db_path, worker_env, monkeypatch):
    """The delay reaches a real worker subprocess and its versions, so the stored sweeps the
    test above seeds look like what a run stores. No timing is asserted: the machine's load
    decides those."""
    monkeypatch.setenv("BENCH_SELFTEST_DELAY_MS", "4")
    assert main(["run", "--model", "identity", "--framework", "selftest", "--batch", "1",
                 "--min-time", "0.01", "--min-iters", "3", "--warmup", "1", "--rounds", "1",
                 "--no-table", "--db", str(db_path)]) == 0
    with open_db(db_path) as con:
        sets = result_sets(con)
    assert (sets.runs.tolist(), sets.ok.tolist()) == ([1], [1])
    assert sets.versions.tolist() == [f"numpy {numpy.__version__} selftest_delay_ms 4"]


def history_page(db_path, monkeypatch, query=None):
    monkeypatch.setenv("BENCH_DB", str(db_path))
    # app.py does not route to it yet: the page runs on its own, as Streamlit allows
    at = AppTest.from_file(str(ROOT / "views" / "history.py"), default_timeout=60)
    at.query_params.update(query or {})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_history_page_on_an_empty_database_says_what_to_do(db_path, monkeypatch):
    at = history_page(db_path, monkeypatch)
    assert at.info[0].value.startswith("No inference sweeps stored yet")


def test_history_page_shows_verdicts_and_a_configuration_over_time(history_db, monkeypatch):
    at = history_page(history_db, monkeypatch)
    assert (at.multiselect(key="baseline").value, at.multiselect(key="candidate").value) == (
        ["sweep-b"], ["sweep-c"])
    assert at.dataframe[0].value.verdict.tolist() == ["not comparable"]
    at.multiselect(key="baseline").set_value(["sweep-a", "sweep-a2", "sweep-a3"])
    at.multiselect(key="candidate").set_value(["sweep-b"])
    at.run()
    assert not at.exception
    assert {m.label: m.value for m in at.metric} == {
        "regression": "1", "improvement": "0", "no change": "0", "not comparable": "0"}
    table = at.dataframe[0].value
    assert table.verdict.tolist() == ["regression · FAILS > 1.1x"]
    # sweep means against the baseline's three days: their spread has 2 degrees of freedom
    assert round(table.ratio[0], 3) == 1.274 and table["95 % CI"][0] == "1.128-1.439"
    assert table.sweeps[0] == "3/1"
    assert any("exit 1" in c.value for c in at.caption)
    assert at.selectbox(key="config").value == "mobilenet_v3_small 64px b1 t1 · torch (eager)"
    (chart,) = at.get("plotly_chart")
    fig = json.loads(chart.proto.spec)
    # one line per torch version (two machines: named); sweep-c ran on the other machine
    assert sorted(t["name"] for t in fig["data"]) == [
        "torch 2.5.1 @sys-test", "torch 2.6.0 @sys-othe", "torch 2.6.0 @sys-test"]
    assert at.query_params["baseline"] == "sweep-a,sweep-a2,sweep-a3"
    at.number_input(key="threshold").set_value(40.0).run()
    assert at.dataframe[0].value.verdict.tolist()[0].startswith("no change")
    assert (at.query_params["candidate"], at.query_params["threshold"]) == ("sweep-b", "40")
    assert at.query_params["config"] == "mobilenet_v3_small 64px b1 t1 · torch (eager)"


def test_verdict_cells_are_coloured_by_verdict(history_db):
    from engine.analysis.regress import compare_sets
    from engine.present.history import VERDICT_CSS, style_verdicts, verdict_frame

    with open_db(history_db) as con:
        _, a = selection_runs(con, "commit:aaaa")
        _, b = selection_runs(con, "sweep-b")
    for base, cand, verdict in ((a, b, "regression"), (b, a, "improvement")):
        df = verdict_frame(compare_sets(base, cand))
        ctx = style_verdicts(df)._compute().ctx  # (row, column) -> [(property, value)]
        assert df.verdict.tolist()[0].split(" · ")[0] == verdict
        assert "; ".join(f"{k}: {v}" for k, v in ctx[(0, 8)]) == VERDICT_CSS[verdict]


def test_a_link_reproduces_the_comparison(history_db, monkeypatch):
    at = history_page(history_db, monkeypatch, {"baseline": "sweep-a,sweep-a2,sweep-a3",
                                                "candidate": "sweep-b", "threshold": "40"})
    assert at.number_input(key="threshold").value == 40.0
    assert at.multiselect(key="baseline").value == ["sweep-a", "sweep-a2", "sweep-a3"]
    assert at.dataframe[0].value.verdict.tolist()[0].startswith("no change")


def test_history_page_names_a_bad_link_and_falls_back(history_db, monkeypatch):
    at = history_page(history_db, monkeypatch, {"baseline": "nope", "candidate": "sweep-a",
                                                "threshold": "500"})
    assert [w.value for w in at.warning] == [
        "link: baseline='nope' is not allowed; allowed: one of sweep-c, sweep-b, sweep-a3, "
        "sweep-a2, sweep-a; ignored",
        "link: threshold='500' is not allowed; allowed: number 1..100; ignored"]
    assert (at.multiselect(key="baseline").value, at.multiselect(key="candidate").value) == (
        ["sweep-b"], ["sweep-a"])
    assert at.number_input(key="threshold").value == 10.0
