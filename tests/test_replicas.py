"""Replicas as a sweep dimension (issue #15): R identical workers at once, each on cores of
its own, armed when warm and timed over one window; one row whose samples are all of
theirs and whose throughput is their sum. Refusals name both fields; any replica that fails
fails the run in exactly one row."""

import pytest

from engine.cli import main
from engine.core.errors import UserError
from engine.scenarios.inference.expand import expand_sweep, left_out_splits
from engine.scenarios.inference.spec import RunSpec
from store.db import open_db

QUICK = ["--model", "identity", "--framework", "selftest", "--batch", "1", "--rounds", "1",
         "--min-time", "0.05", "--min-iters", "20", "--warmup", "2", "--no-table"]


@pytest.mark.parametrize("change, message", [
    (dict(replicas=3, intra_threads=1), "replicas: 3 is out of range"),
    (dict(replicas=2, intra_threads=2), "replicas: 2 replicas x 2 intra_threads = 4 threads; "
                                        "allowed: at most 2"),
    (dict(replicas=2, framework="torch", model="resnet18", runtime="libtorch"),
     "the LibTorch runner times itself"),
    (dict(replicas=2, framework="torch", model="resnet18", device="cuda"),
     "one device is not split here"),
    (dict(replicas=2, framework="torch", model="resnet18", profile_steps=3),
     "the profiler's pass is apart from the timed window"),
])
def test_replicas_that_cannot_share_the_machine_are_refused_naming_the_fields(change,
                                                                              message):
    spec = RunSpec(**{**dict(model="identity", framework="selftest", batch_size=1,
                             intra_threads=1), **change})
    with pytest.raises(UserError) as e:
        spec.validate(cores=2)
    assert e.value.field == "replicas" and message in str(e.value)


def test_thread_and_replica_lists_give_the_splits_that_fit_the_cores():
    specs = expand_sweep(["identity"], ["selftest"], [1], [1, 2], replicas=[1, 2], cores=2)
    assert [(s.intra_threads, s.replicas) for s in specs] == [(1, 1), (1, 2), (2, 1)]
    assert left_out_splits([1, 2], [1, 2], cores=2) == ["2 threads x 2 replicas = 4 > 2 cores"]
    assert left_out_splits([1], [1, 2], cores=2) == []
    with pytest.raises(UserError) as e:  # nothing fits: refused, not emptied
        expand_sweep(["identity"], ["selftest"], [1], [2], replicas=[2], cores=2)
    assert e.value.field == "replicas"


def test_two_replicas_time_one_window_and_store_one_row(db_path, worker_env):
    assert main(["run", *QUICK, "--threads", "1", "--replicas", "1", "2",
                 "--db", str(db_path)]) == 0
    with open_db(db_path) as con:
        rows = con.execute(
            "SELECT replicas, status, iterations, throughput, "
            "extra->'replica_throughputs', (extra->>'window_start_skew_ms')::DOUBLE, "
            "peak_rss_method, (SELECT count(*) FROM samples s WHERE s.run_id = r.run_id "
            "AND s.phase = 'measure') FROM runs r ORDER BY replicas").fetchall()
    (one, two) = rows
    assert one[:2] == (1, "ok") and two[:2] == (2, "ok")
    import json
    per = json.loads(two[4])
    assert len(per) == 2 and two[3] == pytest.approx(sum(per))  # the machine's: their sum
    assert two[7] == two[2] >= 2 * 20  # every replica's samples, each at least min_iters
    assert two[5] >= 0  # how far apart the windows opened is recorded (bench/replicas.py
    # and the note report its size; a test asserts no wall-clock figure)
    assert two[6].startswith("sum over 2 replicas of ")
    from engine.analysis.compare import aggregate
    from store.runs import list_sweeps, sweep_rounds
    with open_db(db_path) as con:
        sweep = list_sweeps(con).sweep_id.iloc[0]
        names = sorted(r.contender for r in aggregate(sweep_rounds(con, sweep)))
    assert names == ["selftest (python)", "selftest (python) x2 replicas"]  # two columns


def test_a_failing_or_hanging_replica_fails_the_run_in_one_row(db_path, worker_env):
    assert main(["run", *QUICK, "--model", "fault_raise", "fault_hang", "--threads", "1",
                 "--replicas", "2", "--timeout", "3", "--db", str(db_path)]) == 1  # not ok
    with open_db(db_path) as con:
        rows = con.execute("SELECT model, replicas, status, reason FROM runs "
                           "ORDER BY model").fetchall()
    assert [r[:3] for r in rows] == [("fault_hang", 2, "timeout"), ("fault_raise", 2, "error")]
    assert rows[0][3] == ("exceeded the 3 s wall-time limit per run (in phase first forward, "
                          "0 of 2 replicas armed)")
    assert rows[1][3].startswith(("replica 1 of 2: ", "replica 2 of 2: "))
