"""Pin a worker to cores of its own, and keep this process off them while it runs.

When a worker uses fewer threads than the cores this process may use, its threads get the
last `intra_threads` of those cores and every thread of this process (the CLI, or the
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

from engine.core.policy import PARENT_CORES_ENV

__all__ = ["plan", "parent_off", "worker_env", "pin_child", "usable_cores"]

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


def plan(threads: int, allowed=None) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(worker cores, parent cores), or None when the worker needs every core."""
    cores = sorted(allowed if allowed is not None else usable_cores())
    if threads >= len(cores):
        return None
    return tuple(cores[-threads:]), tuple(cores[:-threads])


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
