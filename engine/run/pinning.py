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
from contextlib import contextmanager

from engine.spec.policy import PARENT_CORES_ENV

__all__ = ["plan", "parent_off", "worker_env", "pin_child"]


def plan(threads: int, allowed=None) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(worker cores, parent cores), or None when the worker needs every core."""
    cores = sorted(allowed if allowed is not None else os.sched_getaffinity(0))
    if threads >= len(cores):
        return None
    return tuple(cores[-threads:]), tuple(cores[:-threads])


def worker_env(pins) -> dict:
    return {PARENT_CORES_ENV: ",".join(map(str, pins[1]))} if pins else {}


def pin_child(pins):
    """A preexec step for the worker: its own cores, inherited by every thread it starts."""
    if pins is None:
        return lambda: None
    return lambda: os.sched_setaffinity(0, pins[0])


def _tasks() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


@contextmanager
def parent_off(pins):
    """Every thread of this process on the parent cores while the block runs; each thread's
    own affinity back afterwards (threads started inside inherit the parent cores)."""
    if pins is None:
        yield
        return
    everything = os.sched_getaffinity(0)
    saved = {}
    for tid in _tasks():
        try:
            saved[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, pins[1])
        except OSError:  # the thread ended meanwhile
            pass
    try:
        yield
    finally:
        for tid in _tasks():  # threads started meanwhile get what the process had
            try:
                os.sched_setaffinity(tid, saved.get(tid, everything))
            except OSError:
                pass
