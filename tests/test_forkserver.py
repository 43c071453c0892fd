"""Workers forked from a fork server (issue 39): the same rows and statuses as spawned
ones, the four faults included, the fork server's workers reaped and reported, and nothing
left behind when the runner closes."""

import os

import psutil
import pytest

from engine.core import MeasurementPolicy
from engine.core.protocol import Ready
from engine.run.process.drive import WorkerEvent
from engine.run.process.executors import LocalProcesses
from engine.run.process.forkserver import ForkServer
from engine.run.process.runner import Runner
from engine.scenarios.inference.spec import RunSpec

POLICY = MeasurementPolicy(warmup_iters=1, min_time_s=0.05, min_iters=5)


def selftest(model, framework="selftest"):
    return RunSpec(model, framework, 1, 1, policy=POLICY).validate(cores=2)


def _readies(out: list):
    def on_event(notice):
        if isinstance(notice, WorkerEvent) and isinstance(notice.event, Ready):
            out.append(notice.event)
    return on_event


def test_forked_workers_give_the_four_faults_their_four_statuses(worker_env):
    specs = [selftest(m) for m in ("identity", "fault_raise", "fault_hang", "fault_alloc",
                                   "fault_exit", "identity")]
    ready: list[Ready] = []
    runner = Runner(timeout_s=3.0, memory_cap_bytes=256 * 2**20,
                    executor=LocalProcesses(forked={"selftest"}))
    records = runner.run(specs, on_record=lambda r: None, on_event=_readies(ready))
    servers = list(runner.executor.forks._servers.values())
    assert [(r.model, r.status) for r in records] == [
        ("identity", "ok"), ("fault_raise", "error"), ("fault_hang", "timeout"),
        ("fault_alloc", "oom"), ("fault_exit", "killed"), ("identity", "ok")]
    assert [r.start for r in ready] == ["fork"] * 4
    assert records[4].signal == "SIGKILL" and records[4].exit_code == -9
    assert records[2].signal == "SIGKILL"
    assert records[3].reason.startswith("over its memory cap: ")
    # one fork server for the group's thread environment, its workers children of it
    [srv] = servers
    assert srv.usable and srv.threads == []
    # every worker it forked was reaped by it: none is left under it, zombie or alive
    assert psutil.Process(srv.proc.pid).children() == []
    runner.close()
    assert srv.proc.poll() is not None
    assert not [r.pid for r in ready if psutil.pid_exists(r.pid)
                and psutil.Process(r.pid).status() != psutil.STATUS_ZOMBIE]


def test_a_killed_fork_server_is_started_again_for_the_next_worker(worker_env):
    ready: list[Ready] = []
    runner = Runner(timeout_s=30.0, executor=LocalProcesses(forked={"selftest"}))
    runner.run([selftest("identity")], on_record=lambda r: None, on_event=_readies(ready))
    [srv] = runner.executor.forks._servers.values()
    srv.proc.kill()
    srv.proc.wait()
    # the next worker asks again: a fresh fork server forks it
    [rec] = runner.run([selftest("identity")], on_record=lambda r: None,
                       on_event=_readies(ready))
    [fresh] = runner.executor.forks._servers.values()
    assert rec.status == "ok" and [r.start for r in ready] == ["fork", "fork"]
    assert fresh is not srv and fresh.usable
    runner.close()


def test_frameworks_not_named_are_spawned(worker_env):
    ready: list[Ready] = []
    runner = Runner(timeout_s=30.0, executor=LocalProcesses(forked=()))
    [rec] = runner.run([selftest("identity")], on_record=lambda r: None,
                       on_event=_readies(ready))
    assert rec.status == "ok" and [r.start for r in ready] == ["spawn"]
    assert runner.executor.forks._servers == {}


def test_each_worker_is_announced_as_it_starts_with_how_it_starts(worker_env):
    """The Pool's Starting notice comes first for each worker (the panel's "starting:
    ... importing" line until its Ready), carrying how the executor started it, and the
    worker's own events and its end carry the same serial."""
    from engine.run.process.drive import Starting, Timing

    for forked, how in (({"selftest"}, "fork"), ((), "spawn")):
        notices: list = []
        runner = Runner(timeout_s=30.0, executor=LocalProcesses(forked=forked))
        records = runner.run([selftest("identity"), selftest("identity")],
                             on_record=lambda r: None, on_event=notices.append)
        runner.close()
        assert [r.status for r in records] == ["ok", "ok"]
        first, *rest = [n for n in notices if not isinstance(n, Timing)]
        assert (type(first), first.framework, first.start, first.runs) == (
            Starting, "selftest", how, 2)
        assert {n.worker for n in rest} == {first.worker}
        assert type(rest[0].event) is Ready and rest[0].event.start == how
        assert rest[-1].event is None and rest[-1].spec is None  # its stream ended


def test_an_idle_fork_server_ends_on_its_own_and_the_next_worker_gets_a_new_one(
        worker_env, monkeypatch):
    """A Runner nobody closes (a test's, a script's) must not keep a framework imported
    for the life of its process: with no worker alive and none asked for, the server ends
    by itself (30 s by default; 0.3 s here), and the next worker's request starts one."""
    monkeypatch.setenv("BENCH_FORK_SERVER_IDLE_S", "0.3")
    ready: list[Ready] = []
    runner = Runner(timeout_s=30.0, executor=LocalProcesses(forked={"selftest"}))
    [first] = runner.run([selftest("identity")], on_record=lambda r: None,
                         on_event=_readies(ready))
    [srv] = runner.executor.forks._servers.values()
    assert srv.proc.wait(timeout=30) == 0  # it ended, idle, once its worker was reaped
    [second] = runner.run([selftest("identity")], on_record=lambda r: None,
                          on_event=_readies(ready))
    [again] = runner.executor.forks._servers.values()
    runner.close()
    assert (first.status, second.status) == ("ok", "ok")
    assert [r.start for r in ready] == ["fork", "fork"] and again is not srv


def test_a_fork_server_reports_its_import_and_single_thread(worker_env):
    srv = ForkServer(os.sys.executable, "selftest", {"OMP_NUM_THREADS": "1"})
    try:
        assert srv.why_not is None and srv.threads == [] and srv.import_s >= 0
        proc = srv.spawn({}, None, None)
        proc.stdin.close()  # no Assign comes: the worker fails on the empty line, exit 1
        assert proc.wait(timeout=30) == 1
        # its stderr is the pipe handed over, and the server reported how it ended
        assert b"not a protocol line (not JSON)" in proc.stderr.read()
    finally:
        srv.close()
    assert srv.proc.poll() is not None


@pytest.mark.slow
def test_a_forked_torch_worker_measures_and_imported_nothing_itself(worker_env):
    ready: list[Ready] = []
    spec = RunSpec("resnet18", "torch", 1, 1, policy=POLICY, image_size=32).validate(cores=2)
    runner = Runner(timeout_s=120.0, executor=LocalProcesses(forked={"torch"}))
    try:
        [rec] = runner.run([spec], on_record=lambda r: None, on_event=_readies(ready))
        [srv] = runner.executor.forks._servers.values()
    finally:
        runner.close()
    assert rec.status == "ok" and rec.median_ms > 0
    assert [r.start for r in ready] == ["fork"]
    assert ready[0].import_s < 0.5 < srv.import_s  # torch was imported by the server


@pytest.mark.slow
def test_a_forked_tensorflow_worker_measures_and_imported_nothing_itself(worker_env):
    # TensorFlow with keras leaves jemalloc's background thread (pyarrow's) past a fork:
    # fork-safe (zygote.FORK_SAFE_THREADS), so the server is usable and its worker runs
    ready: list[Ready] = []
    spec = RunSpec("resnet18", "tensorflow", 1, 1, policy=POLICY,
                   image_size=32).validate(cores=2)
    runner = Runner(timeout_s=120.0, executor=LocalProcesses(forked={"tensorflow"}))
    try:
        [rec] = runner.run([spec], on_record=lambda r: None, on_event=_readies(ready))
        [again] = runner.run([spec], on_record=lambda r: None, on_event=_readies(ready))
        [srv] = runner.executor.forks._servers.values()
        assert srv.why_not is None and srv.threads == []
    finally:
        runner.close()
    assert (rec.status, again.status) == ("ok", "ok") and rec.median_ms > 0
    assert [r.start for r in ready] == ["fork", "fork"]
    assert ready[0].import_s < 0.5 < srv.import_s  # TensorFlow was imported by the server
    # the first worker waited for that import: its run says so, for the time split; the
    # next worker found the server ready
    assert rec.extra["fork_server_import_s"] == srv.import_s
    assert "fork_server_import_s" not in again.extra


def test_a_forked_worker_redraws_its_layout_at_page_grain():
    # what exec's ASLR would have drawn: a never-touched hole of the drawn pages, no access
    code = ("import mmap, random; from engine.worker.zygote import redraw_layout\n"
            "hole, heap = redraw_layout(random.Random(3))\n"
            "maps = open('/proc/self/maps').read().splitlines()\n"
            "sizes = [int(e, 16) - int(s, 16) for s, e in (l.split()[0].split('-') for l in maps"
            " if l.split()[1] == '---p')]\n"
            "print(hole, heap, hole * mmap.PAGESIZE in sizes)")
    import random
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(__file__)), timeout=60)
    rng = random.Random(3)
    want = (rng.randrange(1, 1 << 16), rng.randrange(0, 1 << 12))
    assert out.stdout.split() == [str(want[0]), str(want[1]), "True"], out.stderr
