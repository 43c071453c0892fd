"""A worker that raises, hangs, allocates past its cap, and exits abruptly: four rows with
the four right statuses, the runs around them still run, and no process is left behind."""

import psutil
import pytest

from engine.core.protocol import Ready
from engine.run.process.drive import WorkerEvent
from engine.run.process.executors import classify_exit
from engine.run.process.held import HeldWorker
from engine.run.process.runner import Runner
from engine.core import MeasurementPolicy
from engine.scenarios.inference.spec import RunSpec

POLICY = MeasurementPolicy(warmup_iters=1, min_time_s=0.05, min_iters=5)


def selftest(model):
    return RunSpec(model, "selftest", 1, 1, policy=POLICY).validate(cores=2)


def test_four_faults_four_statuses_and_no_orphans(worker_env):
    specs = [selftest(m) for m in ("identity", "fault_raise", "fault_hang", "fault_alloc",
                                   "fault_exit", "identity")]
    pids, stored = set(), []
    runner = Runner(timeout_s=3.0, memory_cap_bytes=256 * 2**20)

    def on_event(notice):
        if isinstance(notice, WorkerEvent) and isinstance(notice.event, Ready):
            pids.add(notice.event.pid)
    records = runner.run(specs, on_record=stored.append, sweep_id="s-faults",
                         on_event=on_event)
    assert stored == records
    assert [(r.model, r.status) for r in records[1:5]] == [
        ("fault_raise", "error"), ("fault_hang", "timeout"), ("fault_alloc", "oom"),
        ("fault_exit", "killed")]
    # The identity runs before and after still measured (a no-op, timed in blocks of calls).
    for r in (records[0], records[-1]):
        assert r.median_ms > 0 and r.iterations >= 5
        assert r.status == "ok" and r.extra["block_calls"] > 1
    by = {r.model: r for r in records[1:5]}
    assert by["fault_raise"].reason == \
        "ValueError: fault_raise: this diagnostic model fails while loading"
    assert "ValueError" in by["fault_raise"].stderr_tail
    assert by["fault_hang"].reason == ("exceeded the 3 s wall-time limit per run (in phase "
                                       "first forward, after 0 timed iterations)")
    assert by["fault_hang"].signal == "SIGKILL"
    # held by the kernel (a memory cgroup) where the machine allows one, else the watchdog
    assert by["fault_alloc"].reason.startswith("over its memory cap: ")
    assert by["fault_exit"].signal == "SIGKILL" and by["fault_exit"].exit_code == -9
    assert all(r.sweep_id == "s-faults" and r.median_ms is None for r in records[1:5])
    # The hang, the allocation (ended at its cap) and the exit each end their worker: four
    # workers ran; all are gone.
    assert len(pids) == 4
    assert not [p for p in pids if psutil.pid_exists(p)
                and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


def test_worker_that_dies_during_start_up_still_leaves_one_row(worker_env, tmp_path):
    bad_python = tmp_path / "python"
    bad_python.write_text("#!/bin/sh\necho 'no such interpreter' >&2\nexit 3\n")
    bad_python.chmod(0o755)
    records = Runner(timeout_s=30, python=str(bad_python)).run(
        [selftest("identity"), selftest("identity")], on_record=lambda r: None)
    assert [r.status for r in records] == ["killed", "killed"]
    assert records[0].reason == ("worker failed during start-up: worker exited with code 3 "
                                 "before reporting a result")
    assert records[0].stderr_tail.strip() == "no such interpreter"


@pytest.mark.parametrize("rc, tail, expected", [
    (-9, "", ("killed", "worker was killed by SIGKILL before reporting a result (an external "
              "kill, or the kernel's OOM killer)", "SIGKILL")),
    (-6, "terminate called after throwing an instance of 'std::bad_alloc'",
     ("oom", "worker ran out of memory and died from SIGABRT", "SIGABRT")),
    (-11, "", ("killed", "worker died from SIGSEGV before reporting a result", "SIGSEGV")),
    (1, "", ("killed", "worker exited with code 1 before reporting a result", None)),
])
def test_exit_classification(rc, tail, expected):
    assert classify_exit(rc, tail) == expected


def test_a_runtime_whose_output_differs_is_invalid_and_not_timed(worker_env):
    spec = RunSpec("identity", "selftest", 1, 1, policy=POLICY, runtime="mismatch").validate(cores=2)
    [rec] = Runner(timeout_s=30).run([spec], on_record=lambda r: None)
    assert rec.status == "invalid" and rec.runtime == "mismatch"
    assert rec.reason == ("OutputMismatch: output differs from the python reference: max "
                          "|diff| 0.5 is 50.00% of max |output| 1 (tolerance 0.1%)")
    assert rec.iterations is None and rec.median_ms is None  # never timed


def test_a_timed_run_records_that_the_garbage_collector_was_off(worker_env):
    spec = RunSpec("identity", "selftest", 1, 1, policy=POLICY).validate(cores=2)
    [rec] = Runner(timeout_s=30).run([spec], on_record=lambda r: None)
    assert rec.median_ms is not None and rec.extra["gc_disabled"] is True


def test_the_cli_exits_1_and_names_each_status_that_is_not_ok(worker_env, db_path, capsys):
    from engine.cli import main
    rc = main(["run", "--model", "identity", "fault_raise", "fault_hang", "fault_alloc",
               "fault_exit", "--framework", "selftest", "--min-time", "0.05", "--min-iters",
               "5", "--warmup", "1", "--rounds", "1", "--timeout", "3", "--memory-cap-mb",
               "256", "--no-table", "--db", str(db_path)])
    assert rc == 1
    assert capsys.readouterr().out.endswith(
        f"\n5 runs stored in {db_path}; 4 not ok: 1 error, 1 timeout, 1 oom, 1 killed\n")
    # An output check that fails is a run not ok either: invalid exits 1 alone.
    rc = main(["run", "--model", "identity", "--framework", "selftest", "--runtime",
               "mismatch", "--min-time", "0.05", "--min-iters", "5", "--warmup", "1",
               "--rounds", "1", "--no-table", "--db", str(db_path)])
    assert rc == 1
    assert capsys.readouterr().out.endswith(
        f"\n1 runs stored in {db_path}; 1 not ok: 1 invalid\n")


def test_a_batch_search_fails_on_an_error_or_when_nothing_fits(worker_env, db_path, capsys):
    from engine.cli import main
    common = ["--framework", "selftest", "--max-batch", "4", "--min-time", "0.05",
              "--min-iters", "5", "--db", str(db_path)]
    assert main(["batch-search", "--model", "fault_raise", *common]) == 1
    assert capsys.readouterr().out.endswith("\n1 probes; 1 failed: 1 error\n")
    # Out of memory at the first batch: the search found no batch at all.
    assert main(["batch-search", "--model", "fault_alloc", "--memory-cap-mb", "256",
                 *common]) == 1
    assert capsys.readouterr().out.endswith(
        "\n1 probes; no batch fits: every probe ran out of memory\n")
    assert main(["batch-search", "--model", "identity", *common]) == 0
    assert capsys.readouterr().out.endswith("; none failed\n")


@pytest.mark.parametrize("held_by", ["cgroup", "watchdog"])
def test_a_run_past_its_resident_cap_is_one_oom_row_saying_what_held_it(worker_env, held_by):
    """The cap is on resident memory the run adds, held by the kernel in a memory cgroup of
    the worker's own where the machine allows one, else by the worker's RSS watchdog; the
    row says which, and the next run gets a fresh worker."""
    from engine.run.process.cgroups import make_worker_cgroup
    from engine.run.process.executors import LocalProcesses

    if held_by == "cgroup":
        probe = make_worker_cgroup()
        if probe is None:
            pytest.skip("this machine lets no memory cgroup be made: the watchdog case runs")
        probe.remove()
    runner = Runner(timeout_s=30.0, memory_cap_bytes=256 * 2**20,
                    executor=LocalProcesses(memory_cgroups=held_by == "cgroup"))
    records = runner.run([selftest("fault_alloc"), selftest("identity")],
                         on_record=lambda r: None)
    assert [r.status for r in records] == ["oom", "ok"]
    reason = records[0].reason
    assert reason.startswith("over its memory cap: ")
    if held_by == "cgroup":
        assert "the kernel's OOM killer ended the worker at its memory cgroup's limit" in reason
        assert records[0].signal == "SIGKILL"
    else:
        assert "RSS watchdog, read every 50 ms" in reason and "the cap is 256 MiB" in reason
        over = float(reason.split(" MiB over the ")[0].split(", ")[-1].replace(",", ""))
        assert 256 < over < 256 + 4 * 64  # caught within a few of its 64 MiB steps


def test_the_cap_marker_in_a_stderr_tail_makes_the_run_oom():
    status, reason, sig = classify_exit(
        -9, "Traceback...\nmemory cap: resident memory 700 MiB, 300 MiB over ...\n")
    assert (status, sig) == ("oom", "SIGKILL")
    assert reason == "over its memory cap: resident memory 700 MiB, 300 MiB over ..."


def test_a_held_worker_serves_runs_given_one_at_a_time_and_is_replaced_when_it_dies(
        worker_env):
    """A batch search's probes: each run given after the last one ended, all in one warm
    worker, until a run ends that worker; the next run gets a fresh one."""
    pids = []

    def on_event(notice):
        if isinstance(notice, WorkerEvent) and isinstance(notice.event, Ready):
            pids.append(notice.event.pid)
    runner = Runner(timeout_s=30.0, memory_cap_bytes=256 * 2**20)
    with HeldWorker(runner) as held:
        statuses = [r.status for m in ("identity", "identity", "fault_exit", "identity")
                    for r in held.run([selftest(m)], on_record=lambda r: None,
                                      on_event=on_event)]
        assert statuses == ["ok", "ok", "killed", "ok"]
        assert held.started == 2 and len(set(pids)) == 2
        alive = pids[-1]
        assert psutil.pid_exists(alive)
    assert not psutil.pid_exists(alive)  # closing let it go, and it was reaped
