"""Sweeps launched from the dashboard: a queue that lives in the server process.

The Streamlit script reruns on every interaction; a job must not. `get_manager(db)` returns
one JobManager per database for the whole server process; its single thread runs one sweep
at a time, the others wait in its queue. A rerun, a second tab or a closed tab only reads
snapshots: a request equal to one queued or running is refused, and a closed tab leaves the
job running (reopen the page to see it). Cancel sets an event the Runner checks every
poll: it kills the worker's whole process group and records the run in flight as killed.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from engine.errors import UserError
from engine.rounds import DEFAULT_ROUNDS
from engine.runner import Runner
from engine.spec import MeasurementPolicy, RunSpec, expand_load, expand_sweep, expand_train
from engine.sweep import run_sweep

__all__ = ["SweepRequest", "TrainRequest", "LoadRequest", "BatchSearchRequest", "JobView", "JobManager", "get_manager", "QUEUED", "RUNNING",
           "DONE", "CANCELLED", "FAILED"]

QUEUED, RUNNING, DONE, CANCELLED, FAILED = "queued", "running", "done", "cancelled", "failed"
_FINISHED = (DONE, CANCELLED, FAILED)
HISTORY = 20  # finished jobs kept for the page to show



def _check_rounds(rounds: int) -> None:
    if not 1 <= rounds <= 100:
        raise UserError(f"rounds: {rounds} is out of range; allowed: integer 1..100",
                        field="rounds")

@dataclass(frozen=True)
class SweepRequest:
    models: tuple[str, ...]
    frameworks: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    threads: tuple[int, ...]
    image_size: int | None = None
    precision: str = "fp32"
    inter_threads: int = 1
    weight_policy: str = "bn_calibrated"
    policy: MeasurementPolicy = field(default_factory=MeasurementPolicy)
    rounds: int = DEFAULT_ROUNDS
    seed: int | None = None
    timeout_s: float = 600.0
    memory_cap_bytes: int | None = None
    runtimes: tuple[str, ...] = ()  # empty: each framework's default runtime
    profile_steps: int = 0  # >0: profile this many iterations after each timed pass

    def specs(self) -> list[RunSpec]:
        """Validated specs, or UserError naming the field."""
        _check_rounds(self.rounds)
        return expand_sweep(list(self.models), list(self.frameworks), list(self.batch_sizes),
                            list(self.threads), inter_threads=self.inter_threads,
                            precision=self.precision, image_size=self.image_size,
                            weight_policy=self.weight_policy, policy=self.policy,
                            runtimes=list(self.runtimes) or None,
                            profile_steps=self.profile_steps)

    def same_work(self, other: "SweepRequest") -> bool:
        """Equal but for the seed: launching it twice would measure the same thing twice."""
        return replace(self, seed=None) == replace(other, seed=None)

    @classmethod
    def covering(cls, configs: list[dict]) -> list["SweepRequest"]:
        """Inference sweeps that measure these configurations (dicts with model, framework,
        runtime, batch_size, threads, image_size), one per image size: each sweep is the
        cross product of what its configurations use, so it may measure a few more."""
        by_size: dict[int, list[dict]] = {}
        for c in configs:
            by_size.setdefault(int(c["image_size"]), []).append(c)

        def values(rows, key, cast=str):
            return tuple(sorted({cast(r[key]) for r in rows}))
        return [cls(models=values(rows, "model"), frameworks=values(rows, "framework"),
                    batch_sizes=values(rows, "batch_size", int),
                    threads=values(rows, "threads", int), image_size=size,
                    runtimes=values(rows, "runtime"))
                for size, rows in sorted(by_size.items())]


@dataclass(frozen=True)
class TrainRequest:
    """A training sweep (engine.spec.TrainSpec) as a dashboard job."""

    models: tuple[str, ...]
    frameworks: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    threads: tuple[int, ...]
    epochs: int = 1
    steps_per_epoch: int | None = None
    dataset: str = "digits"
    lr: float = 0.01
    momentum: float = 0.9
    profile_steps: int = 0
    runtimes: tuple[str, ...] = ()  # empty: each framework's default
    rounds: int = 1
    seed: int | None = None
    timeout_s: float = 3600.0
    memory_cap_bytes: int | None = None

    def specs(self) -> list:
        _check_rounds(self.rounds)
        return expand_train(list(self.models), list(self.frameworks), list(self.batch_sizes),
                            list(self.threads), runtimes=list(self.runtimes) or None,
                            epochs=self.epochs,
                            steps_per_epoch=self.steps_per_epoch, dataset=self.dataset,
                            lr=self.lr, momentum=self.momentum,
                            profile_steps=self.profile_steps)

    def same_work(self, other) -> bool:
        return replace(self, seed=None) == replace(other, seed=None)


@dataclass(frozen=True)
class LoadRequest:
    """A data-loading sweep (engine.spec.LoadSpec) as a dashboard job."""

    formats: tuple[str, ...]
    decoders: tuple[str, ...]
    normalizers: tuple[str, ...]
    pipelines: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    workers: tuple[int, ...]
    threads: tuple[int, ...]
    count: int = 256
    image_size: int = 256
    policy: MeasurementPolicy = field(default_factory=MeasurementPolicy)
    rounds: int = 1
    seed: int | None = None
    timeout_s: float = 1800.0
    memory_cap_bytes: int | None = None

    def expand(self) -> tuple[list, list[str]]:
        """(specs, skipped): what runs, and a line for each combination that cannot."""
        _check_rounds(self.rounds)
        return expand_load(list(self.formats), list(self.decoders), list(self.normalizers),
                           list(self.pipelines), list(self.batch_sizes), list(self.workers),
                           list(self.threads), count=self.count, image_size=self.image_size,
                           policy=self.policy)

    def specs(self) -> list:
        return self.expand()[0]

    def same_work(self, other) -> bool:
        return replace(self, seed=None) == replace(other, seed=None)


@dataclass(frozen=True)
class BatchSearchRequest:
    """An optimal-batch search (engine.batch_search) as a dashboard job."""

    model: str
    framework: str
    runtime: str | None
    threads: int
    image_size: int | None = None
    precision: str = "fp32"
    start: int = 1
    max_batch: int = 4096
    margin: float = 0.05
    p99_bound_ms: float | None = None
    policy: MeasurementPolicy = field(default_factory=lambda: MeasurementPolicy(
        warmup_iters=3, min_time_s=1.0, min_iters=10))
    timeout_s: float = 600.0
    memory_cap_bytes: int | None = None
    rounds: int = 1  # a search is one pass; kept so views treat both kinds alike
    seed: int | None = None

    @property
    def models(self):
        return (self.model,)

    @property
    def frameworks(self):
        return (self.framework,)

    def base(self) -> RunSpec:
        return RunSpec(self.model, self.framework, self.start, self.threads,
                       image_size=self.image_size, precision=self.precision,
                       runtime=self.runtime, policy=self.policy).validate()

    def specs(self) -> list[RunSpec]:
        base = self.base()
        if not 0 <= self.margin <= 1:
            raise UserError(f"margin: {self.margin} is out of range; allowed: number 0..1",
                            field="margin")
        # The most probes it can take: doublings up to max_batch, plus 3 bisections.
        n = max(1, (self.max_batch // max(self.start, 1)).bit_length()) + 3
        return [base] * n

    def same_work(self, other) -> bool:
        return self == other


@dataclass(frozen=True)
class JobView:
    """A snapshot for the page: plain values, safe to read from any thread."""

    job_id: int
    request: SweepRequest
    state: str
    total: int
    done: int
    sweep_id: str | None
    current: dict | None  # model, framework, batch_size, threads, round, phase, iters
    finished: tuple[dict, ...]  # per finished run: model, framework, batch, ..., status, p50
    error: str
    queued_at: float
    started_at: float | None
    ended_at: float | None
    worker_pids: tuple[int, ...]
    result: str = ""


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

    def view(self) -> JobView:
        return JobView(self.job_id, self.request, self.state, self.total, self.done,
                       self.sweep_id, dict(self.current) if self.current else None,
                       tuple(self.finished), self.error, self.queued_at, self.started_at,
                       self.ended_at, tuple(self.worker_pids), self.result)


class JobManager:
    def __init__(self, db_path: str | Path, *, clock: Callable[[], float] = time.time,
                 runner_options: dict | None = None):
        self.db_path = Path(db_path)
        self.clock = clock
        self.runner_options = runner_options or {}
        self._lock = threading.Condition()
        self._queue: deque[_Job] = deque()
        self._active: _Job | None = None
        self._history: deque[_Job] = deque(maxlen=HISTORY)
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None

    # -- what pages call -------------------------------------------------------------------
    def submit(self, request: SweepRequest) -> JobView:
        specs = request.specs()  # UserError before anything is queued
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
                self._active = None
                self._history.appendleft(job)
                self._lock.notify_all()

    def _update(self, job: _Job, **changes):
        with self._lock:
            for k, v in changes.items():
                setattr(job, k, v)
            self._lock.notify_all()

    def _search(self, job, req, runner, on_stored, on_event) -> None:
        _search_job(self, job, req, runner, on_stored, on_event)

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
                    "throughput": rec.throughput, "reason": rec.reason})
                self._lock.notify_all()

        def on_event(ev, round_no):
            spec = ev.get("spec")
            with self._lock:
                if ev["event"] == "ready":
                    job.worker_pids.append(ev["pid"])
                elif spec is not None and ev["event"] in ("started", "progress"):
                    job.current = {"model": spec.model, "framework": spec.framework,
                                   "batch_size": spec.batch_size,
                                   "threads": spec.intra_threads, "round": round_no,
                                   "phase": ev.get("phase", "start"),
                                   "iters": ev.get("iters", 0)}
                self._lock.notify_all()

        runner = Runner(timeout_s=req.timeout_s, memory_cap_bytes=req.memory_cap_bytes,
                        cancel=job.cancel, **self.runner_options)
        if isinstance(req, BatchSearchRequest):
            self._search(job, req, runner, on_stored, on_event)
            return
        seed = req.seed if req.seed is not None else random.randrange(2**31)
        run_sweep(job.specs, db=self.db_path, rounds=req.rounds, seed=seed, runner=runner,
                  command="dashboard", on_start=lambda sid: self._update(job, sweep_id=sid),
                  on_stored=on_stored, on_event=on_event)


def _search_job(manager: "JobManager", job, req: BatchSearchRequest, runner, on_stored,
                on_event) -> None:
    from engine.batch_search import stored_batch_search

    inner = runner.run

    def run(specs, **kw):  # progress events carry the probe number as the "round"
        return inner(specs, on_event=lambda ev: on_event(ev, len(job.finished) + 1), **kw)

    runner.run = run
    _, res = stored_batch_search(
        req.base(), db=manager.db_path, runner=runner,
        command=f"dashboard batch-search {req.model} {req.framework}",
        on_start=lambda sid: manager._update(job, sweep_id=sid), on_stored=on_stored,
        start=req.start, max_batch=req.max_batch, margin=req.margin,
        p99_bound_ms=req.p99_bound_ms)
    summary = (f"optimal batch {res.best_batch} ({res.best_throughput:,.1f} samples/s)"
               if res.best_batch else "no batch size succeeded")
    if req.p99_bound_ms is not None:
        summary += f"; largest batch with p99 <= {req.p99_bound_ms:g} ms: {res.p99_batch}"
    manager._update(job, total=len(res.probes), error="", result=f"{summary}; stopped: "
                    f"{res.stop_reason}")


_MANAGERS: dict[str, JobManager] = {}
_MANAGERS_LOCK = threading.Lock()


def get_manager(db_path: str | Path) -> JobManager:
    """The one manager per database in this process (the Streamlit server's)."""
    key = str(Path(db_path).resolve())
    with _MANAGERS_LOCK:
        if key not in _MANAGERS:
            _MANAGERS[key] = JobManager(key)
        return _MANAGERS[key]
