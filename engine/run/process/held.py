"""A worker kept warm across calls, for runs decided one after another (a batch search's
probes): `with HeldWorker(runner) as h: h.run([spec], ...)`."""

from __future__ import annotations

from typing import Callable

from engine.scenarios.inference.spec import RunSpec
from engine.core.protocol import More, RunOrder
from engine.core.record import RunRecord
from engine.run.process.drive import Pool, Worker
from engine.run.process.records import new_id
from engine.run.process.runner import Runner
from engine.run.process.together import worker_key

__all__ = ["HeldWorker"]


class HeldWorker:
    """One worker kept warm across run() calls, for runs decided one after another (a batch
    search's probes): the framework is imported once and every run is timed in one process
    (two processes here differ by up to 40 %, so a process per probe would put that between
    probes). A call it cannot serve from the held worker (several specs, replicas, a
    profiled run, process_per_run, an executor that cannot hold a worker) runs as
    Runner.run would; a spec of another worker group, or a worker that ended (an oom or
    timed-out probe), gets a fresh worker, held from then on. Closing it lets the worker go."""

    def __init__(self, runner: Runner):
        self.runner = runner
        self.pool: Pool | None = None
        self.w: Worker | None = None
        self.key: tuple | None = None
        self.started = 0  # workers started: what a caller can say of its search

    def __enter__(self) -> "HeldWorker":
        return self

    def __exit__(self, exc_type, *_) -> None:
        self.close(kill=exc_type is not None)

    def close(self, *, kill: bool = False) -> None:
        if self.pool is not None:
            self.pool.close(kill=kill)
        self.pool = self.w = self.key = None

    def run(self, specs: list[RunSpec], *, on_record: Callable[[RunRecord], None],
            on_event: Callable[[object], None] | None = None, sweep_id: str | None = None,
            round_no: int | None = None,
            known_stats: Callable[[RunSpec], dict | None] | None = None) -> list[RunRecord]:
        r = self.runner
        if (len(specs) != 1 or getattr(specs[0], "replicas", 1) > 1 or r.process_per_run
                or getattr(specs[0], "profile_steps", 0)
                or not getattr(r.executor, "holds", False)):
            return r.run(specs, on_record=on_record, on_event=on_event, sweep_id=sweep_id,
                         round_no=round_no, known_stats=known_stats)
        [spec] = specs
        if r.cancel.is_set():
            return []
        records: list[RunRecord] = []
        record = r._keeper(records, on_record, {"why": ""})
        tags = {"sweep_id": sweep_id, "round_no": round_no}
        rid = new_id()
        order = RunOrder(rid, spec.to_dict(), (known_stats or (lambda s: None))(spec))
        if self.w is not None and (self.w.ended or self.w.closed
                                   or self.key != worker_key(spec)):
            self.close()
        if self.w is None:
            self.pool = r._pool()
            handle = r.executor.start([order], spec, r.memory_cap_bytes, held=True)
            self.w, self.key = self.pool.start(handle, [(rid, spec)]), worker_key(spec)
            self.started += 1
        else:
            self.w.runs.append((rid, spec))
            self.w.specs[rid] = spec
            self.w.handle.command(More((order,)))
        self.pool.on_event = on_event or (lambda e: None)
        w = self.w
        try:
            r._drive(self.pool, w, tags, record, done=lambda: rid in w.done)
        except BaseException:
            self.close(kill=True)
            raise
        return records
