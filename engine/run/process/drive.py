"""The parent's one protocol loop: every event of every worker passes through Pool.drive.

A Pool holds the worker handles of one of the Runner's jobs: one worker over a group of
runs, R replicas of one run, or a round's interleaved contenders (engine/run/process/together.py).
drive() takes their events from one queue and keeps what every job needs (each worker's
Ready, its run in flight with its phase and iterations, the runs that ended, a line that
broke the protocol, the end of its stream), then hands each event to the job's handler,
until the job's condition holds, the deadline passes or the run is cancelled. The handler
decides what an event means for the records; nothing here writes one.

The Runner's callers see every worker event as it arrives (a WorkerEvent, with its run's
spec), a Starting notice as each worker is started (what it does until its Ready: spawn or
fork, import its framework) and the Runner's own Timing notices, through on_event.
"""

from __future__ import annotations

import itertools
import math
import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable

from engine.core.protocol import (BlockTimed, Event, Failed, Progress, ProtocolError, Ready,
                                  Result, Started)
from engine.run.process.records import load_avg

__all__ = ["Pool", "Worker", "RunContext", "WorkerEvent", "Timing", "Starting"]

_serials = itertools.count(1)  # a worker's number in this process, for Starting and its events


@dataclass(frozen=True)
class WorkerEvent:
    """A worker's event as the Runner passes it on, with the spec of its run (None for the
    worker's Ready). event None: the worker's stream ended."""

    event: Event | None
    spec: object | None = None
    worker: int = 0  # the serial of the worker that sent it (Starting.worker)


@dataclass(frozen=True)
class Starting:
    """A worker just started (the Pool's notice): until its Ready it is being spawned or
    forked and is importing its framework, the phases no worker event can tell."""

    worker: int  # its serial: its events' WorkerEvent.worker
    framework: str  # what it imports ("" for a kind without one)
    start: str  # "spawn", "fork", or "" where the executor does not say (a cluster node)
    runs: int  # the runs it was given
    # forked: the seconds its fork server took to import the framework, when this worker
    # waited for that (the server's first); None otherwise
    server_import_s: float | None = None


@dataclass(frozen=True)
class Timing:
    """How a round's contenders are timed: the Runner's own notice, not a worker's."""

    mode: str  # "interleaved" or "sequential"
    why: str = ""  # what runs one group after another, and why
    workers: int = 0  # interleaved: workers warm at once


@dataclass
class RunContext:
    """What the parent knows of a worker's run before it ends: its record's context.
    Replicas of one run share one (the first replica's Ready and start)."""

    ready: Ready | None = None
    run_id: str | None = None  # the run it describes
    started_at: float | None = None
    load_avg: float | None = None
    phase: str = "start-up"
    iters: int = 0


class Worker:
    """One worker handle as the loop sees it."""

    def __init__(self, index: int, handle, runs: list[tuple[str, object]], ctx: RunContext):
        self.index, self.handle, self.ctx = index, handle, ctx
        self.serial = next(_serials)
        self.runs = list(runs)  # (run id, spec) in the order the worker runs them
        self.specs = dict(self.runs)
        self.ready: Ready | None = None  # its own (ctx.ready may be another replica's)
        self.done: set[str] = set()  # runs that have their ending
        self.in_flight: str | None = None
        self.ended = False  # its stream ended, or the parent stopped it
        self.closed = False
        self.code: int | None = None  # exit code, once closed
        self.broken: str | None = None  # why its lines stopped being the protocol

    def pending(self) -> list[tuple[str, object]]:
        return [(rid, s) for rid, s in self.runs if rid not in self.done]

    def close(self, *, kill: bool = False) -> None:
        if not self.closed:
            if kill:
                self.handle.kill()
            self.code = self.handle.close()
            self.closed = True

    def stop(self) -> None:
        """Kill it: what it still sends is no news."""
        self.close(kill=True)
        self.ended = True

    def exit(self) -> tuple[str, str, str | None]:
        """(status, reason, signal) for its end without a word for its run."""
        if self.broken:  # killed by the parent for a line it could not read
            return "error", f"the worker broke the protocol: {self.broken}", "SIGKILL"
        return self.handle.classify(self.code)

    def failed(self, run_id: str, status: str, reason: str, signal: str | None = None) -> Failed:
        """The parent's word for one of its runs (an exit, a timeout, a cancel): that run
        has its ending."""
        self.done.add(run_id)
        if self.in_flight == run_id:
            self.in_flight = None
        return Failed(run_id, status, reason, ended_at=time.time(), exit_code=self.code,
                      signal=signal)


Handler = Callable[[Worker, "Event | None"], None]


class Pool:
    """Worker handles driven by one loop. As a context manager, an exception kills them
    all; a normal exit closes what is still open (stdin's end lets each worker exit)."""

    def __init__(self, *, clock: Callable[[], float], poll_s: float,
                 cancel: threading.Event, on_event: Callable = lambda notice: None):
        self.clock, self.poll_s, self.cancel, self.on_event = clock, poll_s, cancel, on_event
        self.workers: list[Worker] = []
        self.deadline = math.inf
        self._queue: queue.Queue = queue.Queue()

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, exc_type, *_) -> None:
        self.close(kill=exc_type is not None)

    def start(self, handle, runs: list[tuple[str, object]],
              ctx: RunContext | None = None) -> Worker:
        w = Worker(len(self.workers), handle, runs, ctx or RunContext())
        self.workers.append(w)
        first = runs[0][1] if runs else None
        self.on_event(Starting(w.serial, getattr(first, "framework", "") or "",
                               getattr(handle, "how_started", "") or "", len(runs),
                               getattr(handle, "server_import_s", None)))
        threading.Thread(target=self._pump, args=(w,), daemon=True).start()
        return w

    def _pump(self, w: Worker) -> None:
        while True:
            ev = w.handle.events.get()
            self._queue.put((w, ev))
            if ev is None:
                return

    def renew(self, seconds: float) -> None:
        self.deadline = self.clock() + seconds

    def close(self, *, kill: bool = False) -> None:
        for w in self.workers:
            w.close(kill=kill)

    def drive(self, on: Handler, until: Callable[[], bool]) -> str | None:
        """Events through the shared bookkeeping, then on(worker, event) (None: its stream
        ended), until until() holds; "cancel" or "timeout" when it cannot. Past the
        deadline, what is already queued is taken first: a result that came in time counts."""
        while not until():
            if self.cancel.is_set():
                return "cancel"
            remaining = self.deadline - self.clock()
            try:
                w, ev = (self._queue.get(timeout=min(remaining, self.poll_s)) if remaining > 0
                         else self._queue.get_nowait())
            except queue.Empty:
                if remaining <= 0:
                    return "timeout"
                continue
            if self._note(w, ev):
                on(w, ev)
                spec = (None if ev is None or isinstance(ev, Ready)
                        else w.specs.get(ev.run_id))
                self.on_event(WorkerEvent(ev, spec, w.serial))
        return None

    def _note(self, w: Worker, ev) -> bool:
        """What every job keeps of an event; False for no news: what a stopped or broken
        worker still sent, a run's event after its ending, a line that broke the protocol
        (the worker is killed for it, and its end says why)."""
        if ev is None:
            if w.ended:
                return False
            w.ended = True
            w.close()
            return True
        if w.ended or w.broken:
            return False
        if isinstance(ev, ProtocolError):
            w.broken = str(ev)
            w.handle.kill()
            return False
        if isinstance(ev, Ready):
            w.ready = ev
            w.ctx.ready = w.ctx.ready or ev
            return True
        if ev.run_id in w.done:
            return False
        ctx = w.ctx
        if isinstance(ev, Started):
            w.in_flight = ev.run_id
            if ctx.run_id != ev.run_id:  # a replica's sibling may have started it already
                ctx.run_id, ctx.started_at, ctx.phase, ctx.iters = ev.run_id, ev.started_at, \
                    "load", 0
                ctx.load_avg = load_avg(ctx.ready)
        elif isinstance(ev, Progress):
            ctx.phase, ctx.iters = ev.phase, ev.iters
        elif isinstance(ev, BlockTimed):
            ctx.phase, ctx.iters = "measure", ev.iters
        elif isinstance(ev, (Result, Failed)):
            w.done.add(ev.run_id)
            if w.in_flight == ev.run_id:
                w.in_flight = None
        return True
