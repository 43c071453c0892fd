"""Pin a worker to cores of its own, and keep this process off them while it runs.

When a worker uses fewer threads than the cores this process may use, its threads get
whole physical cores of the last ones (engine/core/topology.py: one thread per core when
there are cores enough, so N threads are N cores whichever way the machine numbers its
hardware threads; both hardware threads of a core otherwise) and every thread of this process (the CLI, or the
dashboard when a job runs from it: its server, its job thread) moves to the others until the
worker ends. The worker's threads then never queue behind the parent's event loop or its
pipe readers. With as many threads as cores there is nothing to keep apart: nothing is
pinned, and the record says so. Other programs on the machine are not moved (they are not
ours to move); the worker's interference record measures what they took.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager

from engine.core.limits import PROCESS_CORES
from engine.core.policy import PARENT_CORES_ENV
from engine.core.topology import (read_topology, replica_cpus, split_whole_cores,
                                  whole_cores)

__all__ = ["plan", "replica_cores", "parent_off", "worker_env", "pin_child", "usable_cores"]

# Workers alive at once (a round's interleaved groups) each keep the parent off their cores:
# the first to start moves it, the last to end moves it back, in whatever order they end.
_HELD: dict = {"parent_cores": [], "saved": {}, "everything": None}
_LOCK = threading.Lock()


def usable_cores() -> list[int]:
    """The cores this process may use: those it had before a worker moved it off its cores
    (while workers run, its own affinity is only what they leave it)."""
    with _LOCK:
        held = _HELD["everything"] if _HELD["parent_cores"] else None
    return sorted(held if held is not None else os.sched_getaffinity(0))


def plan(threads: int, allowed=None, topology=None
         ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(worker CPUs, parent CPUs), or None when the worker needs every logical CPU. The
    worker's CPUs lie on whole cores of its own (topology: logical CPU -> (package, core),
    read from /sys when not given); the parent gets the other cores, or stays where it is
    when the worker's threads take every core (one thread per core, pinned all the same)."""
    cores = sorted(allowed if allowed is not None else usable_cores())
    if threads >= len(cores):
        return None
    topology = read_topology(cores) if topology is None else topology
    split = split_whole_cores(cores, topology, 1, threads)
    if split is None:
        return None
    mine = split[0]
    parent = tuple(c for g in whole_cores(cores, topology) if not set(g) & set(mine)
                   for c in g)
    return mine, parent or tuple(cores)


def replica_cores(cpus, replicas: int, threads: int, topology=None) -> list[tuple[int, ...]]:
    """Each replica's CPUs: whole cores of its own (engine/core/topology.py), so no two
    replicas share a physical core; when whole cores cannot hold them (odd threads on
    hardware threads), consecutive CPUs in core order, siblings together."""
    cpus = sorted(cpus)
    return replica_cpus(cpus, replicas, threads,
                        read_topology(cpus) if topology is None else topology)


def worker_env(pins) -> dict:
    return {PARENT_CORES_ENV: ",".join(map(str, pins[1]))} if pins else {}


def pin_child(pins, everything=None):
    """A preexec step for the worker: its own cores, inherited by every thread it starts;
    unpinned, every core this process had before any worker moved it (`everything`): a
    child forked while the parent keeps off another worker's cores would inherit only
    the parent's."""
    cores = pins[0] if pins is not None else everything
    if cores is None:
        return lambda: None
    return lambda: os.sched_setaffinity(0, cores)


def _tasks() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


def _apply(cores) -> None:
    for tid in _tasks():
        try:
            _HELD["saved"].setdefault(tid, os.sched_getaffinity(tid))
            os.sched_setaffinity(tid, cores)
        except OSError:  # the thread ended meanwhile
            pass


@contextmanager
def parent_off(pins):
    """Every thread of this process on the parent cores while the block runs (on the cores
    every active block leaves it, when several run at once); each thread's own affinity back
    when the last one ends (threads started inside inherit the parent cores)."""
    if pins is None:
        yield
        return
    with _LOCK:
        if not _HELD["parent_cores"]:
            _HELD["everything"] = os.sched_getaffinity(0)
            PROCESS_CORES["held"] = set(_HELD["everything"])
        _HELD["parent_cores"].append(set(pins[1]))
        _apply(set.intersection(*_HELD["parent_cores"]) or set(pins[1]))
    try:
        yield
    finally:
        with _LOCK:
            _HELD["parent_cores"].remove(set(pins[1]))
            if _HELD["parent_cores"]:
                _apply(set.intersection(*_HELD["parent_cores"]) or set(pins[1]))
            else:
                for tid in _tasks():  # threads started meanwhile get what the process had
                    try:
                        os.sched_setaffinity(tid, _HELD["saved"].get(tid, _HELD["everything"]))
                    except OSError:
                        pass
                _HELD["saved"].clear()
                PROCESS_CORES["held"] = None
