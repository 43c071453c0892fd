"""R replicas behind one queue (issue 27, part 1): a Server or Offline test whose model runs
in R processes of its own, each pinned to cores of its own, fed by the worker's batcher.
Real LoadGen tests of the selftest identity (and a tiny torch model) in real worker
subprocesses; each failure of a replica is one row with its status. The batcher's rule is
also driven directly with two lanes and LoadGen's completion callback recorded (the queue,
not LoadGen, is under test there). Nothing here times or sleeps."""

from __future__ import annotations

import json
import threading
import types

import duckdb
import pytest

from engine.cli import main
from engine.scenarios.inference.spec import RunSpec
from engine.core.limits import logical_cores
from engine.scenarios.serving.spec import ServeSpec
from engine.worker.serving.replica import replica_cores
from engine.worker.serving.body import _Batcher

IDENTITY = ["--model", "identity", "--framework", "selftest"]
TWO = ["--replicas", "2", "--threads", "1"]
needs_two_cores = pytest.mark.skipif(logical_cores() < 2, reason="2 replicas need 2 cores")


def _rows(db_path) -> list[dict]:
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        cur = con.execute(
            "SELECT r.status, r.reason, r.replicas, r.intra_threads, r.iterations, "
            "r.throughput, r.peak_rss_bytes, r.peak_rss_method, r.model_peak_bytes, r.extra, "
            "s.result, s.query_count, s.samples_per_query FROM runs r "
            "LEFT JOIN serving_results s USING (run_id) ORDER BY r.started_at")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, row)) for row in cur.fetchall()]
    finally:
        con.close()
    for r in rows:
        r["extra"] = json.loads(r["extra"])
    return rows


@needs_two_cores
@pytest.mark.alone  # a LoadGen bound or a contention verdict: measured time
def test_server_and_offline_run_two_replicas_each_on_cores_of_its_own(db_path, worker_env,
                                                                       capsys):
    code = main(["serve", "--scenario", "server", *IDENTITY, *TWO, "--max-batch", "4",
                 "--target-qps", "2000", "--min-duration", "0.3", "--min-queries", "459",
                 "--db", str(db_path)])
    code += main(["serve", "--scenario", "offline", *IDENTITY, *TWO, "--max-batch", "4",
                  "--min-duration", "0.3", "--db", str(db_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = _rows(db_path)
    assert [r["extra"]["scenario"] for r in rows] == ["server", "offline"]
    for r in rows:
        assert (r["status"], r["result"], r["replicas"], r["intra_threads"]) == (
            "ok", "VALID", 2, 1)
        cpus = [set(c.split(",")) for c in r["extra"]["replica_cpus"]]
        assert len(cpus) == 2 and not cpus[0] & cpus[1]  # no CPU shared
        assert r["extra"]["cores_used"] == 2  # the worker held both replicas' cores
        calls = r["extra"]["replica_calls"]
        assert sum(calls) == r["extra"]["model_calls"]
        per = r["samples_per_query"] if r["extra"]["scenario"] == "offline" else 1
        assert r["iterations"] == r["query_count"] * per > 0  # every latency kept
        assert "replica processes" in r["peak_rss_method"]
        assert r["peak_rss_bytes"] > r["model_peak_bytes"] >= 0
    # whichever replica is free takes the next batch: under 2000 QPS both answer
    assert min(rows[0]["extra"]["replica_calls"]) > 0
    assert "b4 t1 x2: ok, LoadGen VALID" in out


@needs_two_cores
def test_a_torch_model_serves_from_two_replicas(db_path, worker_env, capsys):
    code = main(["serve", "--scenario", "offline", "--model", "mobilenet_v3_small",
                 "--framework", "torch", "--image-size", "32", "--weight-policy", "random",
                 *TWO, "--max-batch", "2", "--min-duration", "0.5", "--db", str(db_path)])
    capsys.readouterr()
    [row] = _rows(db_path)
    assert row["result"] in ("VALID", "INVALID") and row["throughput"] > 0  # judged
    assert code == (0 if row["status"] == "ok" else 1)
    assert row["replicas"] == 2 and len(row["extra"]["replica_calls"]) == 2
    # two copies of the model: what they add is counted in each replica's own process
    assert row["model_peak_bytes"] > 0


@needs_two_cores
@pytest.mark.parametrize("model, runtime, status, words", [
    ("fault_raise", "python", "error", "replica 1 of 2: ValueError: fault_raise"),
    ("identity", "mismatch", "invalid", "replica 1 of 2: OutputMismatch"),
    ("fault_alloc", "python", "oom", "over its memory cap"),
])
def test_a_replica_that_fails_leaves_one_row_with_its_status(db_path, worker_env, capsys,
                                                             model, runtime, status, words):
    code = main(["serve", "--scenario", "offline", "--model", model, "--framework",
                 "selftest", "--runtime", runtime, *TWO, "--max-batch", "2",
                 "--min-duration", "0.3", "--memory-cap-mb", "256", "--timeout", "60",
                 "--db", str(db_path)])
    capsys.readouterr()
    [row] = _rows(db_path)
    assert code == 1
    assert (row["status"], row["replicas"]) == (status, 2)
    assert words in row["reason"], row["reason"]


def test_replicas_get_whole_cores_of_their_own():
    smt = {0: (0, 0), 1: (0, 1), 2: (0, 0), 3: (0, 1)}  # siblings i and i+2
    assert replica_cores([0, 1, 2, 3], 2, 1, smt) == [(2,), (3,)]  # a core each
    assert replica_cores([0, 1, 2, 3], 2, 2, smt) == [(0, 2), (1, 3)]  # both siblings
    flat = {c: (0, c) for c in range(4)}
    assert replica_cores([0, 1, 2, 3], 2, 2, flat) == [(0, 1), (2, 3)]


def _fake_loadgen(done: list):
    """LoadGen's two calls the batcher makes, recording each completed sample id."""
    return types.SimpleNamespace(
        QuerySampleResponse=lambda sid, data, size: sid,
        QuerySamplesComplete=lambda responses: done.extend(responses))


def _spec(max_batch: int, replicas: int) -> ServeSpec:
    return ServeSpec(RunSpec("identity", "selftest", max_batch, 1), "offline",
                     replicas=replicas)


def test_the_batcher_feeds_whichever_replica_is_free():
    done: list = []
    started = {"a": threading.Event(), "b": threading.Event()}
    release = threading.Event()
    calls: dict = {"a": [], "b": []}

    def lane(name):
        def call(n):  # busy until released: the next batch must go to the other lane
            calls[name].append(n)
            started[name].set()
            release.wait(10)
        return call

    b = _Batcher(_fake_loadgen(done), [lane("a"), lane("b")], _spec(4, 2), _NoContext)
    b.issue([types.SimpleNamespace(id=i) for i in range(8)])
    both = started["a"].wait(10) and started["b"].wait(10)
    release.set()
    b.stop()
    assert both  # each lane took a batch while the other was busy
    assert calls == {"a": [4], "b": [4]} and b.calls == 2
    assert sorted(done) == list(range(8))  # every sample completed once
    assert b.error is None and len(b.latencies) == 8


def test_after_a_failed_call_the_queue_drains_without_calls_and_the_error_is_kept():
    done: list = []
    calls: list = []

    def failing(n):
        calls.append(n)
        raise RuntimeError("replica 2 of 2: boom")

    b = _Batcher(_fake_loadgen(done), [failing], _spec(2, 1), _NoContext)
    b.issue([types.SimpleNamespace(id=i) for i in range(6)])
    b.stop()
    assert sorted(done) == list(range(6))  # LoadGen hears of every sample: its test ends
    assert calls == [2]  # one call failed; the rest were completed without one
    assert str(b.error) == "replica 2 of 2: boom"


class _NoContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_replica_waiting_for_its_batch_to_fill_never_takes_an_empty_one():
    """Two replicas wait for a batch of 2 to fill (max wait long): when one takes what was
    queued, the other goes on waiting for the next sample; stopped, neither is handed an
    empty batch (a batch of 0 would close a replica process mid-test)."""
    done: list = []
    calls: list = []
    release = threading.Event()

    def lane(n):
        calls.append(n)
        release.wait(10)

    spec = ServeSpec(RunSpec("identity", "selftest", 2, 1), "server", target_qps=1.0,
                     max_wait_ms=60_000.0, replicas=2)
    b = _Batcher(_fake_loadgen(done), [lane, lane], spec, _NoContext)
    b.issue([types.SimpleNamespace(id=i) for i in range(2)])  # full: one replica takes it
    b.issue([types.SimpleNamespace(id=2)])  # the other waits for a second sample
    release.set()  # the first is free again, and waits too
    b.stop()  # the sample left goes to one of them; nothing to the other
    assert sorted(done) == [0, 1, 2] and sorted(calls) == [1, 2] and 0 not in calls
