"""Serving (issue 27, part 1): real MLPerf LoadGen tests in real worker subprocesses, small
(the selftest identity and a tiny torch model, well under a second of LoadGen each). Each
scenario is one stored row with LoadGen's verdict, figures, every query's latency and its
logs; a Server test at an absurd target QPS is INVALID for its performance constraints;
bad input is refused before any worker starts. Nothing here times or sleeps."""

from __future__ import annotations

import duckdb
import pytest

from engine.cli import main
from engine.scenarios.inference.spec import RunSpec
from engine.core.errors import UserError
from engine.core.limits import logical_cores
from engine.core.early_stopping import allowed_overs
from engine.scenarios.serving.loadgen import detail_value, parse_summary
from engine.scenarios.serving.spec import ServeSpec
from engine.scenarios import SERVING
from store.runs import loadgen_log, serving_result

IDENTITY = ["--model", "identity", "--framework", "selftest"]
SMALL = ["--min-duration", "0.3", "--min-queries", "50"]


def _rows(db_path) -> list[dict]:
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        cur = con.execute(
            "SELECT r.run_id, r.kind, r.status, r.reason, r.throughput, r.p99_ms, "
            "r.iterations, r.extra->>'scenario' AS scenario, s.result, s.failed_rules, "
            "s.query_count, s.samples_per_query, s.early_stopping, s.figures, "
            "(SELECT count(*) FROM samples m WHERE m.run_id = r.run_id "
            " AND m.phase = 'measure') AS latencies "
            "FROM runs r LEFT JOIN serving_results s USING (run_id) ORDER BY r.started_at")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]
    finally:
        con.close()


@pytest.mark.alone  # a LoadGen bound or a contention verdict: measured time
def test_every_scenario_is_one_valid_row_with_figures_latencies_and_logs(
        db_path, worker_env, capsys):
    # Offline sizes its one query on what a warm max batch did (no --target-qps: a low
    # expected QPS makes a query too short for the minimum duration, INVALID by design)
    code = main(["serve", "--scenario", "single-stream", "multi-stream", "offline",
                 *IDENTITY, *SMALL, "--max-batch", "4", "--db", str(db_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    code = main(["serve", "--scenario", "server", *IDENTITY, *SMALL, "--target-qps", "3000",
                 "--max-batch", "4", "--db", str(db_path)])
    out += capsys.readouterr().out
    assert code == 0, out
    rows = _rows(db_path)
    assert [r["scenario"] for r in rows] == ["single-stream", "multi-stream", "offline",
                                             "server"]
    for r in rows:
        assert (r["kind"], r["status"], r["result"], r["failed_rules"]) == (
            "serve", "ok", "VALID", "[]"), r
        assert r["throughput"] > 0 and r["p99_ms"] > 0
        # one latency per query (Offline: its one query's samples, one each)
        per = r["samples_per_query"] if r["scenario"] == "offline" else 1
        assert r["latencies"] == r["iterations"] == r["query_count"] * per > 0
        assert f"{r['scenario']} identity selftest" in out and "LoadGen VALID" in out
    by = {r["scenario"]: r for r in rows}
    assert by["multi-stream"]["samples_per_query"] == 8
    assert by["offline"]["query_count"] == 1
    assert '"90"' in by["single-stream"]["early_stopping"]  # LoadGen's p90 estimate
    assert '"target_qps": 3000.0' in by["server"]["figures"]

    con = duckdb.connect(str(db_path), read_only=True)
    try:
        for r in rows:  # the logs come back as LoadGen wrote them, and parse the same
            summary = loadgen_log(con, r["run_id"], "mlperf_log_summary.txt")
            detail = loadgen_log(con, r["run_id"], "mlperf_log_detail.txt")
            assert "Result is : VALID" in summary and '"result_validity"' in detail
            stored = serving_result(con, r["run_id"])
            assert {k: v for k, v in stored.items()
                    if k not in ("query_count", "samples_per_query", "overlatency_count")
                    } == parse_summary(summary)
            # LoadGen's own count of queries over the bound: Server's alone
            assert stored["overlatency_count"] == (
                detail_value(detail, "result_overlatency_query_count")
                if r["scenario"] == "server" else None)
            if r["scenario"] == "server":  # VALID over its queries: within what was allowed
                assert 0 <= stored["overlatency_count"] <= allowed_overs(r["query_count"])
    finally:
        con.close()


def test_server_at_an_absurd_target_qps_is_invalid_for_its_performance_constraints(
        db_path, worker_env, capsys, monkeypatch):
    # Every model call sleeps 2 ms, so no query can meet a 1 ms bound whatever the machine:
    # the bare identity model does about 200,000 QPS here, which made 200,000 a coin toss.
    monkeypatch.setenv("BENCH_SELFTEST_DELAY_MS", "2")
    code = main(["serve", "--scenario", "server", *IDENTITY, "--min-duration", "0.2",
                 "--min-queries", "50", "--target-qps", "20000", "--bound-ms", "1",
                 "--max-batch", "8", "--db", str(db_path)])
    out = capsys.readouterr().out
    [row] = _rows(db_path)
    assert code == 1  # an INVALID LoadGen result is an `invalid` row: exit 1, like `run`
    assert (row["status"], row["result"]) == ("invalid", "INVALID")
    assert "Performance constraints" in row["failed_rules"]
    assert "performance constraints" in row["reason"]
    assert row["latencies"] == row["query_count"] > 0
    assert "LoadGen INVALID (performance constraints" in out


def test_a_tiny_torch_model_serves_through_the_inference_backend(db_path, worker_env,
                                                                  capsys):
    code = main(["serve", "--scenario", "single-stream", "server", "--model",
                 "mobilenet_v3_small", "--framework", "torch", "--image-size", "32",
                 "--weight-policy", "random", *SMALL, "--target-qps", "100",
                 "--min-queries", "20", "--max-batch", "2", "--max-wait-ms", "1",
                 "--db", str(db_path)])
    capsys.readouterr()
    rows = _rows(db_path)
    assert [(r["scenario"], r["kind"]) for r in rows] == [("single-stream", "serve"),
                                                          ("server", "serve")]
    for r in rows:  # VALID or not (a shared machine), the test ran and was judged
        assert r["result"] in ("VALID", "INVALID") and r["throughput"] > 0
        assert r["status"] == ("ok" if r["result"] == "VALID" else "invalid")
        assert r["latencies"] == r["query_count"] > 0
    assert code == (0 if all(r["status"] == "ok" for r in rows) else 1)


def test_a_model_that_fails_leaves_one_error_row(db_path, worker_env, capsys):
    code = main(["serve", "--scenario", "single-stream", "--model", "fault_raise",
                 "--framework", "selftest", *SMALL, "--db", str(db_path)])
    capsys.readouterr()
    [row] = _rows(db_path)
    assert code == 1
    assert (row["status"], row["result"], row["scenario"]) == ("error", None,
                                                                "single-stream")
    assert "fault_raise" in row["reason"]


@pytest.mark.parametrize("args, field, allowed", [
    (["--scenario", "server", "--target-qps", "100", "--bound-ms", "0"], "bound_ms",
     "0.001..600000"),
    (["--scenario", "server", "--target-qps", "0"], "target_qps", "0.001..1e+07"),
    (["--scenario", "server"], "target_qps", "0.001..1e+07"),
    (["--scenario", "offline", "--max-batch", "1000"], "max_batch", "1..256"),
    (["--scenario", "streaming"], "scenario",
     "single-stream, multi-stream, server, offline"),
    (["--scenario", "single-stream", "--replicas", "2"], "replicas",
     "allowed: 1, or replicas with server or offline"),
    (["--scenario", "offline", "--replicas", str(logical_cores() + 1)], "replicas",
     f"allowed: integer 1..{logical_cores()}"),
    (["--scenario", "offline", "--replicas", "2", "--threads", str(logical_cores())],
     "replicas", f"allowed: at most {logical_cores()}"),
    (["--scenario", "offline", "--min-duration", "-1"], "min_duration_s", "0.01..86400"),
])
def test_bad_input_is_refused_naming_the_field_before_anything_runs(
        db_path, capsys, args, field, allowed):
    assert main(["serve", *args, *IDENTITY, "--db", str(db_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {field}:") and allowed in err, err
    assert not db_path.exists()  # no sweep row, no worker


def test_a_spec_round_trips_and_its_columns_are_the_suts():
    spec = ServeSpec(RunSpec("identity", "selftest", 4, 1), "server", target_qps=10.0,
                     bound_ms=5.0, max_wait_ms=1.0).validate(cores=2)
    assert ServeSpec.from_dict(spec.to_dict()) == spec
    assert (spec.model, spec.runtime, spec.batch_size, spec.kind) == (
        "identity", "python", 4, "serve")
    assert spec.server_target_latency_ns == 5_000_000
    assert spec.policy.min_time_s == 10.0 and spec.policy.min_iters == 100  # LoadGen's
    with pytest.raises(UserError, match="max_batch: multi-stream calls the model with 8"):
        ServeSpec(RunSpec("identity", "selftest", 4, 1), "multi-stream").validate(2)
    with pytest.raises(UserError, match="replicas: 3 is out of range; allowed: integer 1..2"):
        ServeSpec(RunSpec("identity", "selftest", 4, 1), "offline", replicas=3).validate(2)
    with pytest.raises(UserError, match="replicas: multi-stream issues one query at a time"):
        ServeSpec(RunSpec("identity", "selftest", 8, 1), "multi-stream",
                  replicas=2).validate(2)
    two = ServeSpec(RunSpec("identity", "selftest", 4, 1), "offline", replicas=2).validate(2)
    assert two.replicas == 2 and SERVING.worker_cpus(two) == 2  # its worker holds both
    assert not SERVING.runner_replicates  # the worker's own processes, not R workers


def test_the_libtorch_runtime_is_refused_for_serving_naming_why():
    with pytest.raises(UserError, match="runtime: libtorch times its own loop in C"):
        ServeSpec(RunSpec("resnet18", "torch", 1, 1, runtime="libtorch"),
                  "single-stream").validate(2)


SERVER_INVALID = """================================================
MLPerf Results Summary
================================================
SUT name : PySUT
Scenario : Server
Mode     : PerformanceOnly
Completed samples per second    : 450093.86
Result is : INVALID
  Performance constraints satisfied : NO
  Min duration satisfied : Yes
  Min queries satisfied : Yes
  Early stopping satisfied: NO
Recommendations:
 * Reduce target QPS to improve latency.
Early Stopping Result:
 * Run unsuccessful.

================================================
Additional Stats
================================================
Scheduled samples per second : 999200.79
99.00 percentile latency (ns)   : 604159386

================================================
Test Parameters Used
================================================
target_qps : 1e+06
target_latency (ns): 100000000
"""


def test_the_summary_parser_reads_loadgen_s_verdict_rules_and_figures():
    s = parse_summary(SERVER_INVALID)
    assert (s["scenario"], s["result"]) == ("Server", "INVALID")
    assert s["failed_rules"] == ["Performance constraints", "Early stopping"]
    assert s["rules"]["Min duration"] is True
    assert s["recommendations"] == ["Reduce target QPS to improve latency."]
    assert s["percentiles_ns"] == {"99": 604159386}
    assert s["figures"] == {"completed_samples_per_s": 450093.86,
                            "scheduled_samples_per_s": 999200.79, "target_qps": 1e6,
                            "target_latency_ns": 1e8}
