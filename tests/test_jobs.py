"""The dashboard's job queue with real worker processes (selftest models)."""

from dataclasses import dataclass

import psutil
import pytest

from engine.core.errors import UserError
from engine.run.jobs.queue import CANCELLED, DONE, QUEUED, JobManager, get_manager
from engine.run.jobs.requests import SweepRequest
from engine.core import MeasurementPolicy
from store.db import open_db

FAST = MeasurementPolicy(warmup_iters=1, min_time_s=0.02, min_iters=5)


def request(*models, rounds=1, **kw):
    return SweepRequest(models=models, frameworks=("selftest",), batch_sizes=(1,),
                        threads=(1,), policy=FAST, rounds=rounds, **kw)


def test_a_sweep_runs_to_completion_and_lands_linked_rows(db_path, worker_env):
    jm = JobManager(db_path)
    view = jm.submit(request("identity", "fault_raise", rounds=2))
    assert view.state == QUEUED and view.total == 4
    assert jm.wait(lambda m: (j := m.get(view.job_id)) is not None and j.state == DONE, 120)
    done = jm.get(view.job_id)
    assert done.done == 4 and len(done.finished) == 4
    assert sorted(f["model"] for f in done.finished) == ["fault_raise", "fault_raise",
                                                         "identity", "identity"]
    with open_db(db_path) as con:
        rows = con.execute("SELECT round_no, model, status FROM runs WHERE sweep_id = ? "
                           "ORDER BY started_at", [done.sweep_id]).fetchall()
    # round 1 forward, round 2 reversed
    assert [(r, m) for r, m, _ in rows] == [(1, "identity"), (1, "fault_raise"),
                                           (2, "fault_raise"), (2, "identity")]
    assert [s for _, m, s in rows if m == "fault_raise"] == ["error", "error"]
    # where its time went (the panel's caption): the two ok runs timed, each in its round's
    # worker, which imported once
    from engine.analysis.time_split import EXTRAS, time_split
    split = time_split(done.finished, done.ended_at - done.started_at,
                       worker_of=lambda f: f["worker"])
    ok = [f for f in done.finished if f["status"] == "ok"]
    assert split.measuring_s == sum(f["measured_s"] for f in ok) > 0
    # every extra the split reads is kept (a calibration's seconds were not, at first)
    assert all(set(f["extra"]) == set(EXTRAS) for f in done.finished)
    assert sorted({f["worker"][0] for f in done.finished}) == [1, 2]


def test_duplicate_is_refused_and_a_different_sweep_waits_in_the_queue(db_path, worker_env):
    jm = JobManager(db_path)
    first = jm.submit(request("fault_hang", timeout_s=600))
    assert jm.wait(lambda m: m.active() is not None and m.active().current is not None, 60)
    # a rerun or a second tab submitting the same sweep (even with another seed)
    with pytest.raises(UserError) as info:
        jm.submit(request("fault_hang", timeout_s=600, seed=5))
    assert str(info.value) == (f"sweep: the same sweep is already running (job "
                               f"{first.job_id}); wait for it or cancel it first")
    second = jm.submit(request("identity"))
    assert [j.job_id for j in jm.queued()] == [second.job_id]
    with pytest.raises(UserError, match="already queued"):
        jm.submit(request("identity"))
    assert jm.cancel(second.job_id) and jm.get(second.job_id).state == CANCELLED
    jm.cancel(first.job_id)
    assert jm.wait(lambda m: m.active() is None and not m.queued(), 60)


def test_cancel_kills_the_worker_and_records_the_run_in_flight(db_path, worker_env):
    jm = JobManager(db_path)
    view = jm.submit(request("fault_hang", "identity", timeout_s=600))
    assert jm.wait(lambda m: (a := m.active()) is not None and a.current is not None
                   and a.current["phase"] == "first forward", 60)
    pids = jm.active().worker_pids
    procs = [psutil.Process(p) for p in pids]
    assert len(procs) == 1 and procs[0].is_running()
    assert jm.cancel(view.job_id)
    assert jm.wait(lambda m: m.get(view.job_id).state == CANCELLED, 60)
    gone, alive = psutil.wait_procs(procs, timeout=30)
    assert alive == []
    with open_db(db_path) as con:
        rows = con.execute("SELECT model, status, reason FROM runs").fetchall()
    # the hanging run has its row; the identity run after it was never attempted
    assert rows == [("fault_hang", "killed", "cancelled by the user")]


def test_one_manager_per_database_in_the_process(db_path, tmp_path):
    assert get_manager(db_path) is get_manager(str(db_path))
    assert get_manager(db_path) is not get_manager(tmp_path / "other.duckdb")


def test_invalid_request_is_refused_before_queueing(db_path):
    jm = JobManager(db_path)
    with pytest.raises(UserError, match="batch_size: 0 is out of range"):
        jm.submit(SweepRequest(models=("identity",), frameworks=("selftest",),
                               batch_sizes=(0,), threads=(1,)))
    assert jm.queued() == [] and jm.active() is None


def test_a_batch_search_runs_as_a_job_and_reports_its_conclusion(db_path, worker_env):
    from engine.run.search.batch_search import BatchSearchRequest

    jm = JobManager(db_path)
    req = BatchSearchRequest(model="identity", framework="selftest", runtime="python",
                             threads=1, max_batch=4, margin=0.0, p99_bound_ms=1000.0,
                             policy=FAST)
    view = jm.submit(req)
    assert view.total == 15  # at most: pairs (1, 2), (2, 4) in 3 rounds each, 3 bisections
    assert jm.wait(lambda m: m.get(view.job_id).state in (DONE, "failed"), 120)
    done = jm.get(view.job_id)
    assert done.state == DONE, done.error
    batches = [f["batch_size"] for f in done.finished]
    assert batches[0] == 1 and set(batches) <= {1, 2, 4}
    assert done.result.startswith("optimal batch ") and "stopped: " in done.result
    with open_db(db_path) as con:
        n = con.execute("SELECT count(*) FROM runs WHERE sweep_id = ?",
                        [done.sweep_id]).fetchall()[0][0]
    assert n == len(batches)


def test_covering_requests_measure_the_given_configurations_one_per_image_size():
    configs = [dict(model="resnet18", framework="torch", runtime="libtorch", batch_size=32,
                    threads=2, image_size=32),
               dict(model="resnet18", framework="tensorflow", runtime="tf_function",
                    batch_size=32, threads=2, image_size=32),
               dict(model="resnet34", framework="torch", runtime="eager", batch_size=16,
                    threads=1, image_size=64)]
    small, large = SweepRequest.covering(configs)
    assert sorted((s.framework, s.runtime, s.batch_size, s.intra_threads, s.image_size)
                  for s in small.specs()) == [("tensorflow", "tf_function", 32, 2, 32),
                                              ("torch", "libtorch", 32, 2, 32)]
    assert [(s.model, s.runtime, s.batch_size, s.image_size) for s in large.specs()] == [
        ("resnet34", "eager", 16, 64)]


def test_the_panel_says_which_workers_are_starting_until_each_is_ready(db_path):
    """Before a worker's Ready no run of its can say a phase: the job names the workers
    being spawned or forked (the Pool's Starting notices) and for how long, until each
    one's Ready, its first run's event or its end. Notices scripted through the job's own
    callbacks, the clock injected."""
    from engine.core.protocol import Ready, Started
    from engine.present.outcome import starting_text
    from engine.run.process.drive import Starting, WorkerEvent

    now = [0.0]
    seen = []

    @dataclass(frozen=True)
    class Scripted(SweepRequest):
        def run(self, specs, *, on_event, on_plan, **kw):
            ready = Ready(pid=1, import_s=3.0, versions={}, threads={}, machine={}, env={})
            on_event(Starting(7, "tensorflow", "spawn", 2), 1)
            now[0] = 1.5
            on_event(Starting(8, "torch", "fork", 2), 1)
            now[0] = 2.0
            seen.append(jm.active().starting)
            on_event(WorkerEvent(ready, None, 8), 1)
            seen.append(jm.active().starting)
            on_event(WorkerEvent(Started("r1", 0.0), specs[0], 9), 1)  # another worker's
            seen.append(jm.active().starting)
            on_event(WorkerEvent(None, None, 7), 1)  # it ended before its Ready
            seen.append(jm.active().starting)
            return ""

    jm = JobManager(db_path, clock=lambda: now[0])
    view = jm.submit(Scripted(models=("identity",), frameworks=("selftest",),
                              batch_sizes=(1,), threads=(1,), policy=FAST))
    assert jm.wait(lambda m: m.get(view.job_id).state == DONE, 60)
    assert seen == [(("tensorflow", "spawn", 2.0), ("torch", "fork", 0.5)),
                    (("tensorflow", "spawn", 2.0),), (("tensorflow", "spawn", 2.0),), ()]
    assert starting_text(seen[0]) == (
        "starting: tensorflow worker, spawned, importing tensorflow, 2.0 s; "
        "torch worker, forked from a server that imported it, 0.5 s")
    assert starting_text(()) == ""
