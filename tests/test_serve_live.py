"""Serving (issue 27): a LoadGen test's live progress, Server's minimum query count and the
refusal of a target QPS no SUT of this configuration could serve.

The live reports come from a real tiny LoadGen test (the selftest identity, a fraction of a
second, the report interval shortened through $BENCH_LIVE_PROGRESS_S); nothing here sleeps
or asserts a time. The texts are built from fixed values; the refusal reads a seeded store.
"""

from __future__ import annotations

from dataclasses import replace

import duckdb
import pytest

from engine.cli import main
from engine.core.errors import UserError
from engine.core.protocol import Progress
from engine.scenarios.serving.loadgen import LatencyHistogram
from engine.scenarios.serving.spec import (EARLY_STOPPING_MIN_QUERIES, check_reachable,
                                           default_min_queries, early_stopping_note)
from engine.present.serving_text import serve_plan
from engine.run.process.machine import system_info
from engine.run.jobs.serve_request import ServeRequest
from engine.scenarios import SERVING
from engine.scenarios.base import phase_of
from seeds.records import ok_record
from tests.serving_seed import seed_closed_loop
from tests.test_pages import FakeManager, page

IDENTITY = dict(model="identity", framework="selftest")


# -- 1. live progress ------------------------------------------------------------------------

def test_live_reports_arrive_during_a_real_test_with_rising_counts(db_path, worker_env,
                                                                   monkeypatch):
    monkeypatch.setenv("BENCH_LIVE_PROGRESS_S", "0.02")
    req = ServeRequest(scenarios=("single-stream", "server"), **IDENTITY, target_qps=3000.0,
                       max_batch=2, min_duration_s=0.3, min_query_count=50)
    specs, _ = req.expand()
    live: dict[str, list[Progress]] = {"single-stream": [], "server": []}
    stored = []

    def on_event(notice, round_no):
        ev = getattr(notice, "event", None)
        if isinstance(ev, Progress) and ev.completed is not None:
            live[notice.spec.scenario].append(ev)

    req.run(specs, db=db_path, runner=req.runner(db=db_path), seed=1,
            on_start=lambda sweep_id: None, on_stored=stored.append, on_event=on_event)
    assert [r.status for r in stored] == ["ok", "ok"], [r.reason for r in stored]
    for rec in stored:
        events = live[rec.extra["scenario"]]
        counts = [e.completed for e in events]
        assert len(events) >= 2 and counts == sorted(counts) and counts[-1] > counts[0]
        # the last report is the test's end: every query the SUT answered
        assert counts[-1] == rec.serving["query_count"]
        assert all(e.phase == "serve" and e.unit == "query" and e.per_s >= 0 for e in events)
        pct = 90.0 if rec.extra["scenario"] == "single-stream" else 99.0
        assert {e.tail_pct for e in events if e.completed} == {pct}  # none before a query
        assert events[-1].per_s > 0 and events[-1].tail_ms > 0
        assert phase_of(events[-1]).startswith(f"serve: {counts[-1]:,} queries, ")


LIVE = Progress("r1", "serve", 0, completed=1234, per_s=412.3, unit="query", tail_pct=99.0,
                tail_ms=23.14)


def test_the_cli_and_the_job_panel_say_the_live_figures():
    from dashboard.job_panel import in_flight_text

    assert phase_of(LIVE) == "serve: 1,234 queries, 412 QPS, p99 so far 23.1 ms"
    spec = ServeRequest(scenarios=("server",), **IDENTITY, target_qps=500.0).expand()[0][0]
    assert SERVING.describe_event(spec, LIVE) == (
        "server identity python t1: serve: 1,234 queries, 412 QPS, p99 so far 23.1 ms")
    cur = {"round": 1, "scenario": "server", "model": "identity", "framework": "selftest",
           "batch_size": 1, "threads": 1, "phase": phase_of(LIVE), "iters": 0}
    assert in_flight_text(cur) == (
        "In flight: **round 1 · server · identity · selftest · batch 1 · 1 threads** — "
        "serve: 1,234 queries, 412 QPS, p99 so far 23.1 ms")
    offline = Progress("r1", "serve", 0, completed=80_000, per_s=8000.0, unit="sample")
    assert phase_of(offline) == "serve: 80,000 samples, 8,000 samples/s"
    single = replace(LIVE, completed=1, per_s=9.5, tail_pct=90.0, tail_ms=0.0123)
    assert phase_of(single) == "serve: 1 query, 9.5 QPS, p90 so far 0.012 ms"
    assert phase_of(Progress("r1", "serve", 0)) == "serve"  # the phase change alone


def test_the_histogram_s_percentile_is_within_a_bucket_of_the_exact_one():
    h = LatencyHistogram()
    assert h.percentile_ns(99.0) is None
    values = [1_000_000 + 1000 * i for i in range(990)] + [50_000_000] * 10
    h.add(values[:500])
    h.add(values[500:])  # in two reports, as the worker adds each second's new ones
    exact = sorted(values)[989]  # the 990th of 1000: p99
    assert exact <= h.percentile_ns(99.0) <= exact * 2 ** (1 / 16)
    assert 50_000_000 <= h.percentile_ns(100.0) <= 50_000_000 * 2 ** (1 / 16)


# -- 2. Server's minimum query count ---------------------------------------------------------

def test_a_server_test_asks_for_459_queries_unless_the_user_names_fewer():
    from engine.run.search.max_qps import EARLY_STOPPING_MIN_QUERIES as SEARCH_MIN

    assert EARLY_STOPPING_MIN_QUERIES == {"single-stream": 64, "multi-stream": 662,
                                          "server": 459}
    assert SEARCH_MIN == EARLY_STOPPING_MIN_QUERIES["server"]  # the max-QPS search's floor
    req = ServeRequest(scenarios=("server", "single-stream"), **IDENTITY, target_qps=50.0,
                       bound_ms=15.0)
    server, single = req.expand()[0]
    assert (server.min_query_count, single.min_query_count) == (459, 100)
    assert default_min_queries("offline") == 100
    assert "Note" not in serve_plan(req, [server])

    fewer = replace(req, scenarios=("server",), min_query_count=50)
    [spec], _ = fewer.expand()
    assert spec.min_query_count == 50  # the user's value is kept
    assert serve_plan(fewer, [spec]).endswith(
        " Note: min queries 50: LoadGen's early stopping cannot judge p99 under 459 queries "
        "(a test that runs fewer is INVALID at any rate).")
    assert early_stopping_note("single-stream", 50) == (
        "min queries 50: LoadGen's early stopping cannot judge p90 under 64 queries (a test "
        "that runs fewer is INVALID at any rate)")
    assert early_stopping_note("single-stream", 64) is None
    assert early_stopping_note("offline", 1) is None


def test_the_cli_says_why_fewer_queries_may_be_invalid(db_path, monkeypatch, capsys):
    import engine.cli.serving as cli

    monkeypatch.setattr(cli, "run_and_summarize", lambda request, specs, args, **kw: [])
    assert main(["serve", "--scenario", "server", "--model", "identity", "--framework",
                 "selftest", "--target-qps", "50", "--min-queries", "50",
                 "--db", str(db_path)]) == 0
    assert ("note: server: min queries 50: LoadGen's early stopping cannot judge p99 under "
            "459 queries") in capsys.readouterr().out


# -- 3. an unreachable target QPS ------------------------------------------------------------

def test_the_check_allows_up_to_ten_times_the_closed_loop():
    check_reachable(4120.0, 412.0)
    check_reachable(1e6, None)  # no closed loop stored: nothing to judge by
    with pytest.raises(UserError) as exc:
        check_reachable(5000.0, 412.0)
    assert exc.value.field == "target_qps"
    assert str(exc.value) == (
        "target_qps: 5,000 QPS cannot be reached: the closed loop of this configuration on "
        "this machine did 412 samples/s; allowed: up to 10x the closed loop's 412 "
        "samples/s, i.e. 4,120")


def _seed_closed_loop(db_path, system_id: str, run_id: str = "closed-1") -> None:
    """A closed-loop identity run at 412 samples/s (batch 1, 1 thread) on system_id."""
    seed_closed_loop(db_path, run_id, system_id=system_id)


def test_the_cli_refuses_a_target_over_ten_times_this_machine_s_closed_loop(db_path, capsys):
    args = ["serve", "--scenario", "server", "--model", "identity", "--framework",
            "selftest", "--max-batch", "4", "--db", str(db_path)]
    _seed_closed_loop(db_path, "another-machine")
    import engine.cli.serving as cli
    original = cli.run_and_summarize
    try:  # another machine's closed loop says nothing of this one: nothing refused
        cli.run_and_summarize = lambda request, specs, args, **kw: []
        assert main([*args, "--target-qps", "5000"]) == 0
        _seed_closed_loop(db_path, system_info()["system_id"], "closed-2")
        assert main([*args, "--target-qps", "4000"]) == 0
        assert main([*args, "--target-qps", "5000"]) == 2
    finally:
        cli.run_and_summarize = original
    err = capsys.readouterr().err
    assert err.startswith("error: target_qps: 5,000 QPS cannot be reached") and (
        "allowed: up to 10x the closed loop's 412 samples/s, i.e. 4,120") in err, err


def test_the_deploy_form_refuses_it_before_launch(db_path, monkeypatch):
    manager = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: manager)
    _seed_closed_loop(db_path, system_info()["system_id"])
    at = page("views/deploy.py", db_path, monkeypatch)
    at.selectbox(key="sv_model").set_value("identity").run()
    at.selectbox(key="sv_threads").set_value(1)
    at.radio(key="sv_scenario").set_value("server").run()
    assert at.number_input(key="sv_min_queries").value == 459  # Server's default
    at.number_input(key="sv_qps").set_value(5000.0).run()
    assert [e.value for e in at.error] == [
        "target_qps: 5,000 QPS cannot be reached: the closed loop of this configuration on "
        "this machine did 412 samples/s; allowed: up to 10x the closed loop's 412 "
        "samples/s, i.e. 4,120"]
    assert at.button(key="sv_launch").disabled
    at.number_input(key="sv_qps").set_value(4000.0).run()
    assert not at.error and not at.button(key="sv_launch").disabled


def test_the_job_queue_judges_it_again_when_the_test_is_submitted(db_path):
    """The form judged the store as it was drawn; a closed loop stored since (another
    launch, the CLI) is judged when the test is submitted: nothing is queued or stored."""
    from engine.run.jobs.queue import JobManager
    from engine.run.search.serving_jobs import MaxQpsRequest

    seed_closed_loop(db_path, "closed-1")
    manager = JobManager(db_path)
    test = dict(scenarios=("server",), **IDENTITY, target_qps=5000.0, max_batch=4)
    with pytest.raises(UserError) as exc:
        manager.submit(ServeRequest(**test))
    assert (exc.value.field, str(exc.value)) == ("target_qps", (
        "target_qps: 5,000 QPS cannot be reached: the closed loop of this configuration on "
        "this machine did 412 samples/s; allowed: up to 10x the closed loop's 412 "
        "samples/s, i.e. 4,120"))
    assert manager.queued() == [] and manager.active() is None
    # a search's rates are its own: the form's target QPS does not refuse it
    search = MaxQpsRequest(**test, bound_ms=15.0)
    assert search.check_stored(search.specs(), db=db_path) is None
    with duckdb.connect(str(db_path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (1,)


def test_an_invalid_run_under_the_minimum_says_why_in_its_reason():
    s = {"result": "INVALID", "failed_rules": ["Early stopping"], "recommendations": []}
    rec = replace(ok_record("r-few"), serving=s,
                  extra={"scenario": "server", "min_query_count": 50})
    assert SERVING.finish_record(rec, None).reason == (
        "LoadGen: INVALID (early stopping not satisfied); min queries 50: LoadGen's early "
        "stopping cannot judge p99 under 459 queries (a test that runs fewer is INVALID at "
        "any rate)")
    enough = replace(rec, extra={"scenario": "server", "min_query_count": 459})
    assert SERVING.finish_record(enough, None).reason == (
        "LoadGen: INVALID (early stopping not satisfied)")
