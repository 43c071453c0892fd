"""Interference recorded, not guessed: the window arithmetic on fixed counters, the pinning
plan, and a real pinned worker's record."""

import os

import pytest

from engine.core.limits import logical_cores
from engine.run.process import pinning
from engine.worker.interference import Snapshot, interference


def snap(wall, busy, total, steal, own):
    return Snapshot(wall, (1,), busy, total, steal, own)


def test_steal_and_other_processes_are_shares_of_the_cores_capacity():
    # 2 s on one core: 2 s of capacity; the worker used 1.2 s, steal 0.24 s, the rest 0.4 s
    a = snap(100.0, busy=50.0, total=200.0, steal=1.0, own=3.0)
    b = snap(102.0, busy=51.84, total=202.0, steal=1.24, own=4.2)
    seen = interference(a, b)
    assert seen["steal_frac"] == pytest.approx(0.12)
    assert seen["others_cpu_frac"] == pytest.approx(0.2)
    assert seen["window_s"] == 2.0 and seen["cores"] == [1]
    assert seen["pinned"] is False and seen["parent_cores"] is None


def test_a_window_shorter_than_a_tick_measures_nothing():
    a = snap(0.0, 1.0, 2.0, 0.0, 0.0)
    seen = interference(a, snap(0.001, 1.0, 2.0, 0.0, 0.0))
    assert (seen["steal_frac"], seen["others_cpu_frac"]) == (None, None)


def test_a_worker_with_fewer_threads_than_cores_gets_cores_of_its_own():
    assert pinning.plan(1, allowed={0, 1}) == ((1,), (0,))
    assert pinning.plan(2, allowed={0, 1, 2, 3}) == ((2, 3), (0, 1))
    assert pinning.plan(2, allowed={0, 1}) is None  # every core: nothing to keep apart
    assert pinning.worker_env(((1,), (0,))) == {"BENCH_PARENT_CORES": "0"}
    assert pinning.worker_env(None) == {}


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_the_parent_keeps_off_the_workers_cores_while_it_runs_and_returns_after():
    before = os.sched_getaffinity(0)
    cores = sorted(before)
    pins = pinning.plan(1, allowed=set(cores))
    with pinning.parent_off(pins):
        assert os.sched_getaffinity(0) == set(pins[1])
        # a form drawn meanwhile still offers the machine's cores, not the parent's share
        assert logical_cores() == len(before)
    assert os.sched_getaffinity(0) == before and logical_cores() == len(before)


def test_a_real_run_records_its_window_its_pinning_and_its_blocks(db_path, capsys):
    from engine.cli import main
    from store.db import open_db
    from store.runs import list_runs
    rc = main(["run", "--model", "identity", "--framework", "selftest", "--threads", "1",
               "--rounds", "1", "--min-time", "0.2", "--warmup", "5", "--db", str(db_path),
               "--no-table"])
    capsys.readouterr()
    assert rc == 0
    with open_db(db_path) as con:
        [run_id] = list_runs(con).run_id.tolist()
        extra = __import__("json").loads(con.execute(
            "SELECT extra FROM runs WHERE run_id = ?", [run_id]).fetchall()[0][0])
    seen = extra["interference"]
    assert 0.0 <= seen["steal_frac"] <= 1.0 and 0.0 <= seen["others_cpu_frac"] <= 1.0
    assert seen["window_s"] >= 0.2 and seen["load_avg_1m_end"] >= 0.0
    if len(os.sched_getaffinity(0)) > 1:  # one thread on a machine of several cores: pinned
        assert seen["pinned"] is True and len(seen["cores"]) == 1
        assert seen["cores"][0] not in seen["parent_cores"]
    # an identity call takes microseconds: timed in blocks that fill about 1 ms
    assert extra["block_calls"] > 10 and extra["gc_disabled"] is True


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_workers_alive_at_once_keep_the_parent_off_until_the_last_one_ends():
    """An interleaved round holds several pinned workers at once: each new one is planned on
    the cores the parent had before any moved it, and the parent comes back only when the
    last ends, in whatever order they end."""
    before = os.sched_getaffinity(0)
    cores = sorted(before)
    pins = pinning.plan(1, allowed=set(cores))
    first, second = pinning.parent_off(pins), pinning.parent_off(pins)
    first.__enter__()
    assert pinning.usable_cores() == cores and pinning.plan(1) == pins  # not the parent's
    second.__enter__()
    first.__exit__(None, None, None)  # the first to start ends first
    assert os.sched_getaffinity(0) == set(pins[1])  # the second still runs
    second.__exit__(None, None, None)
    assert os.sched_getaffinity(0) == before
