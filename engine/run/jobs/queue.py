"""Sweeps launched from the dashboard: a queue that lives in the server process.

The Streamlit script reruns on every interaction; a job must not. `get_manager(db)` returns
one JobManager per database for the whole server process; its single thread runs one sweep
at a time, the others wait in its queue. A rerun, a second tab or a closed tab only reads
snapshots: a request equal to one queued or running is refused, and a closed tab leaves the
job running (reopen the page to see it). Cancel sets an event the Runner checks every
poll: it kills the worker's whole process group and records the run in flight as killed.
A request whose executor is "ray" runs on the nodes of the cluster the server is configured
with (engine/run/cluster/join.py); its progress arrives through the same callbacks.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from engine.run.cluster.join import release
from engine.analysis.time_split import EXTRAS, PHASES
from engine.run.process.together import timing_line, worker_key
from engine.run.jobs.requests import Request
from engine.core.errors import UserError, refuse_read_only
from engine.core.protocol import Progress, Ready, Started
from engine.run.process.drive import Starting, Timing
from engine.scenarios import scenario_of
from engine.scenarios.base import phase_of

__all__ = ["JobView", "JobManager", "SessionJobs", "get_manager", "QUEUED", "RUNNING", "DONE",
           "CANCELLED",
           "FAILED"]

QUEUED, RUNNING, DONE, CANCELLED, FAILED = "queued", "running", "done", "cancelled", "failed"
HISTORY = 20  # finished jobs kept for the page to show
# A finished run's seconds per phase, kept for the job's time split
SPLIT_FIELDS = tuple(f for _, f in PHASES) + ("measured_s",)


@dataclass(frozen=True)
class JobView:
    """A snapshot for the page: plain values, safe to read from any thread."""

    job_id: int
    request: Request  # a scenario's request, or a batch search
    state: str
    total: int
    done: int
    sweep_id: str | None
    current: dict | None  # model, framework, batch_size, threads, round, phase, iters, scenario
    finished: tuple[dict, ...]  # per finished run: model, framework, batch, ..., status, p50
    error: str
    queued_at: float
    started_at: float | None
    ended_at: float | None
    worker_pids: tuple[int, ...]
    result: str = ""
    timing: str = ""  # how the latest round's contenders are timed (together.timing_line)
    # workers started and not yet ready: (framework, "spawn"/"fork"/"", seconds since),
    # what they do before a run of theirs can say a phase (start, import)
    starting: tuple[tuple[str, str, float], ...] = ()


class _Job:
    def __init__(self, job_id, request, specs, clock):
        self.job_id, self.request, self.specs = job_id, request, specs
        self.state, self.done, self.sweep_id = QUEUED, 0, None
        self.total = len(specs) * request.rounds
        self.current, self.finished, self.error = None, [], ""
        self.queued_at, self.started_at, self.ended_at = clock(), None, None
        self.cancel = threading.Event()
        self.worker_pids: list[int] = []
        self.result = ""  # a search's conclusion
        self.timing = ""
        self.clock = clock
        self.starting: dict[int, tuple[str, str, float]] = {}  # worker serial -> since

    def view(self) -> JobView:
        return JobView(self.job_id, self.request, self.state, self.total, self.done,
                       self.sweep_id, dict(self.current) if self.current else None,
                       tuple(self.finished), self.error, self.queued_at, self.started_at,
                       self.ended_at, tuple(self.worker_pids), self.result, self.timing,
                       tuple((fw, how, max(0.0, self.clock() - t))
                             for fw, how, t in self.starting.values()))


class JobManager:
    def __init__(self, db_path: str | Path, *, clock: Callable[[], float] = time.time,
                 runner_options: dict | None = None, read_only: bool = False):
        self.db_path = Path(db_path)
        self.read_only = read_only  # viewer mode: the server itself refuses every write
        self.clock = clock
        self.runner_options = runner_options or {}
        self._lock = threading.Condition()
        self._queue: deque[_Job] = deque()
        self._active: _Job | None = None
        self._history: deque[_Job] = deque(maxlen=HISTORY)
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None

    # -- what pages call -------------------------------------------------------------------
    def _refuse_in_viewer_mode(self, action: str) -> None:
        if self.read_only:
            raise UserError(f"{action}: this dashboard is in viewer mode (read-only); run "
                            "sweeps from a dashboard started without BENCH_VIEWER, or with "
                            "`python -m engine run`", field=action)

    def submit(self, request: Request) -> JobView:
        self._refuse_in_viewer_mode("sweep")
        specs = request.specs()  # UserError before anything is queued
        # the store as it is now: the page judged it when the form was drawn
        request.check_stored(specs, db=self.db_path)
        with self._lock:
            for job in self._pending():
                if job.request.same_work(request):
                    where = "running" if job.state == RUNNING else "queued"
                    raise UserError(f"sweep: the same sweep is already {where} (job "
                                    f"{job.job_id}); wait for it or cancel it first",
                                    field="sweep")
            job = _Job(next(self._ids), request, specs, self.clock)
            self._queue.append(job)
            self._ensure_thread()
            self._lock.notify_all()
            return job.view()

    def cancel(self, job_id: int) -> bool:
        self._refuse_in_viewer_mode("cancel")
        with self._lock:
            for job in self._pending():
                if job.job_id == job_id:
                    if job.state == QUEUED:
                        self._queue.remove(job)
                        job.state, job.ended_at = CANCELLED, self.clock()
                        self._history.appendleft(job)
                    job.cancel.set()
                    self._lock.notify_all()
                    return True
        return False

    def active(self) -> JobView | None:
        with self._lock:
            return self._active.view() if self._active else None

    def queued(self) -> list[JobView]:
        with self._lock:
            return [j.view() for j in self._queue]

    def history(self) -> list[JobView]:
        with self._lock:
            return [j.view() for j in self._history]

    def get(self, job_id: int) -> JobView | None:
        with self._lock:
            for j in itertools.chain(self._pending(), self._history):
                if j.job_id == job_id:
                    return j.view()
        return None

    def wait(self, predicate: Callable[[JobManager], bool], timeout: float) -> bool:
        """Block until predicate(self) holds (re-checked at every job update) or timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: predicate(self), timeout=timeout)

    # -- the job thread --------------------------------------------------------------------
    def _pending(self):
        return ([self._active] if self._active else []) + list(self._queue)

    def _ensure_thread(self):
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="sweep-jobs", daemon=True)
            self._thread.start()

    def _loop(self):
        while True:
            with self._lock:
                if not self._queue:
                    self._thread = None
                    return
                job = self._queue.popleft()
                self._active = job
                job.state, job.started_at = RUNNING, self.clock()
                self._lock.notify_all()
            try:
                self._run(job)
                final = CANCELLED if job.cancel.is_set() else DONE
                error = ""
            except Exception as exc:  # shown on the page; the queue goes on
                final, error = FAILED, f"{type(exc).__name__}: {exc}"
            with self._lock:
                job.state, job.error, job.ended_at = final, error, self.clock()
                job.current = None
                job.starting.clear()
                self._active = None
                self._history.appendleft(job)
                self._lock.notify_all()

    def _update(self, job: _Job, **changes):
        with self._lock:
            for k, v in changes.items():
                setattr(job, k, v)
            self._lock.notify_all()

    def _run(self, job: _Job) -> None:
        req = job.request

        def on_stored(rec):
            with self._lock:
                job.done += 1
                job.finished.append({
                    "run_id": rec.run_id, "round": rec.round_no, "model": rec.model,
                    "framework": rec.framework, "batch_size": rec.batch_size,
                    "threads": rec.intra_threads, "runtime": rec.runtime,
                    "status": rec.status, "p50_ms": rec.median_ms, "p99_ms": rec.p99_ms,
                    "throughput": rec.throughput, "reason": rec.reason,
                    "machine_shape": rec.machine_shape,
                    "node_id": rec.node_id,
                    "scenario": (rec.extra or {}).get("scenario"),  # a serving test's
                    # where its time went (engine/analysis/time_split.py), its worker named
                    **{f: getattr(rec, f) for f in SPLIT_FIELDS},
                    "extra": {k: (rec.extra or {}).get(k) for k in EXTRAS},
                    "worker": (rec.round_no, *worker_key(rec))})
                self._lock.notify_all()

        def on_event(notice, round_no):
            with self._lock:
                if isinstance(notice, Timing):
                    job.timing = timing_line(notice)
                elif isinstance(notice, Starting):
                    job.starting[notice.worker] = (notice.framework, notice.start,
                                                   self.clock())
                elif isinstance(notice.event, Ready):
                    job.worker_pids.append(notice.event.pid)
                    job.starting.pop(notice.worker, None)
                elif notice.spec is not None and isinstance(notice.event, (Started, Progress)):
                    ev, spec = notice.event, notice.spec
                    job.current = {"model": spec.model, "framework": spec.framework,
                                   # a serving test's scenario (single-stream, server,
                                   # ...), as its stored row's extra will carry it
                                   "scenario": scenario_of(spec).config_extra(spec)
                                   .get("scenario"),
                                   "batch_size": spec.batch_size,
                                   "threads": spec.intra_threads, "round": round_no,
                                   "phase": phase_of(ev),
                                   "iters": ev.iters if isinstance(ev, Progress) else 0}
                if not isinstance(notice, (Timing, Starting)) and (
                        notice.spec is not None or notice.event is None):
                    job.starting.pop(notice.worker, None)  # it ran a run, or it ended
                self._lock.notify_all()

        runner = self._runner(job)
        try:
            width = runner.width  # a fleet runs every run on each node kind
            if width > 1:
                self._update(job, total=job.total * width)

            def on_plan(step):
                with self._lock:  # a worker killed before its Ready is not starting still
                    job.starting.clear()
                if step.why != "minimum":  # an extra round: its runs join the total
                    self._update(job, total=job.total + len(step.specs) * width)

            seed = req.seed if req.seed is not None else random.randrange(2**31)
            result = req.run(job.specs, db=self.db_path, runner=runner, seed=seed,
                             on_start=lambda sid: self._update(job, sweep_id=sid),
                             on_stored=on_stored, on_event=on_event, on_plan=on_plan)
        finally:
            release(runner)  # a cluster job's actors; the Ray connection stays for the next
        if result:  # a search: its conclusion, and the probes it took
            self._update(job, total=job.done, error="", result=result)

    def _runner(self, job: _Job):
        """This machine's Runner, or for a request whose executor is "ray" a runner on the
        cluster's nodes it names (engine/run/cluster/join.py), its specs checked against the
        cores of the nodes it got (one may have left since the page listed them)."""
        req = job.request
        if req.executor == "ray":
            from engine.run.cluster.join import job_runner

            plan, runner = job_runner(req, db=self.db_path, cancel=job.cancel)
            try:
                for spec in job.specs:
                    spec.validate(plan.cores)
            except BaseException:
                release(runner)
                raise
            return runner
        # $BENCH_MACHINE_SHAPE, checked per job
        return req.runner(db=self.db_path, cancel=job.cancel, **self.runner_options)


_MANAGERS: dict[tuple[str, bool], JobManager] = {}
_MANAGERS_LOCK = threading.Lock()


class SessionJobs:
    """The job queue as one browser session may use it: reads pass through; submit and
    cancel need a session that may write (dashboard.access.Access.can_write). Pages
    only get this, so a crafted request from a read-only session changes nothing even where
    a page forgot to hide a control. Each read is named here: a page that asks for anything
    else fails where it asks."""

    def __init__(self, manager: JobManager, access):
        self._manager, self._access = manager, access

    @property
    def db_path(self) -> Path:
        return self._manager.db_path

    def active(self) -> JobView | None:
        return self._manager.active()

    def queued(self) -> list[JobView]:
        return self._manager.queued()

    def history(self) -> list[JobView]:
        return self._manager.history()

    def get(self, job_id: int) -> JobView | None:
        return self._manager.get(job_id)

    def wait(self, predicate: Callable[[JobManager], bool], timeout: float) -> bool:
        return self._manager.wait(predicate, timeout)

    def _check(self, action: str) -> None:
        refuse_read_only(self._access, action)

    def submit(self, request: Request) -> JobView:
        self._check("sweep")
        return self._manager.submit(request)

    def cancel(self, job_id: int) -> bool:
        self._check("cancel")
        return self._manager.cancel(job_id)


def get_manager(db_path: str | Path, read_only: bool = False) -> JobManager:
    """The one manager per database in this process (the Streamlit server's)."""
    key = (str(Path(db_path).resolve()), read_only)
    with _MANAGERS_LOCK:
        if key not in _MANAGERS:
            _MANAGERS[key] = JobManager(key[0], read_only=read_only)
        return _MANAGERS[key]
