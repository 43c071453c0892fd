"""Runs specs in worker subprocesses and turns every ending into exactly one RunRecord.

One worker per consecutive (framework, intra, inter, device) group, so framework imports are
paid once per group and torch and TensorFlow never share a process. The parent enforces a
wall-time limit per run (killing the worker's whole process group), passes the memory cap to
the worker (RLIMIT_AS per run), and respawns a worker for the rest of a group when one dies,
so results already reported are kept and the next runs still run. Where a worker runs is
the executor's business (engine/run/process/executors.py); turning its events into records is
engine/run/process/records.py's.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import replace
from typing import Callable

from engine.core.errors import plain_text
from engine.scenarios.inference.spec import RunSpec
from engine.core.protocol import WINDOW, Failed, Result, RunOrder, Started
from engine.core.record import RunRecord
from engine.run.process.drive import Pool, RunContext, Timing, Worker
from engine.run.process.executors import STDERR_TAIL_BYTES, LocalProcesses
from engine.run.process.records import base_fields, new_id, record_from_result
from engine.run.process.replicas import Replicas, replica_window_s, with_every_replicas_cores
from engine.run.process.neighbour import Neighbour
from engine.run.process.together import plan_together, run_together, worker_key
from engine.run.process.machine import git_commit, system_info
from engine.scenarios import scenario_of

__all__ = ["Runner", "worker_groups"]


class Runner:
    """Runs a list of validated specs; calls on_record once per spec, as each one ends."""

    width = 1  # the machines each spec runs on (a fleet's runner: one per node kind)

    def __init__(self, *, timeout_s: float = 600.0, memory_cap_bytes: int | None = None,
                 python: str = sys.executable, clock: Callable[[], float] = time.monotonic,
                 poll_s: float = 0.2, cancel: threading.Event | None = None,
                 process_per_run: bool = False, executor=None,
                 machine_shape: str | None = None, interleave: bool = True):
        self.timeout_s = timeout_s
        # the catalog shape this machine is (resolved by the caller), stored with each run
        self.machine_shape = machine_shape
        self.memory_cap_bytes = memory_cap_bytes
        self.executor = executor or LocalProcesses(python)
        self.clock = clock
        self.poll_s = poll_s
        self.cancel = cancel or threading.Event()
        # What a run stopped by `cancel` is recorded with: the user's cancel, unless a
        # caller that shares the event says otherwise (a fleet whose other node failed).
        self.cancel_reason = "cancelled by the user"
        # process_per_run: a fresh worker for every run (full isolation, imports paid each
        # time); the default shares one worker per (framework, threads) group.
        self.process_per_run = process_per_run
        # interleave: a round's contenders in different workers are timed alternately in
        # blocks (engine/run/process/together.py) where they can be; else one group after another.
        self.interleave = interleave
        self._peaks: dict = {}  # worker key -> largest resident size its runs reached

    def close(self) -> None:
        """End what the executor keeps between runs (its fork servers, its weights
        folder); the runner stays usable and starts them again when a worker asks."""
        close = getattr(self.executor, "close", None)
        if close is not None:
            close()

    def run(self, specs: list[RunSpec], *, on_record: Callable[[RunRecord], None],
            on_event: Callable[[object], None] | None = None,
            sweep_id: str | None = None, round_no: int | None = None,
            known_stats: Callable[[RunSpec], dict | None] | None = None) -> list[RunRecord]:
        """known_stats(spec): params and FLOPs the store already holds for the spec's model
        (its scenario counts them), passed to the worker so it does not count them again.
        on_event(notice): every worker event as it arrives (engine.run.process.drive.WorkerEvent),
        and how each round's contenders are timed (Timing)."""
        on_event = on_event or (lambda e: None)
        known_stats = known_stats or (lambda spec: None)
        records: list[RunRecord] = []
        timing = {"why": ""}  # why the rest runs one group after another
        record = self._keeper(records, on_record, timing)
        tags = {"sweep_id": sweep_id, "round_no": round_no}  # copied onto every record
        if any(getattr(s, "contention", "none") != "none" for s in specs):
            with Neighbour(self.neighbour_core(), "steady"):
                pass  # it can start here: a round never loses a run to a neighbour that can't
        specs = self._together(specs, tags, record, on_event, known_stats, timing)
        groups = [[s] for s in specs] if self.process_per_run else worker_groups(specs)
        for group in groups:
            if (getattr(group[0], "replicas", 1) > 1  # R workers at once, one spec at a time
                    and scenario_of(group[0]).runner_replicates):
                for spec in group:
                    if self.cancel.is_set():
                        break
                    self._run_replicas(new_id(), spec, tags, record, on_event, known_stats)
                continue
            pending = [(new_id(), s) for s in group]
            while pending and not self.cancel.is_set():
                done = self._run_worker(pending, tags, record, on_event, known_stats)
                pending = [(rid, s) for rid, s in pending if rid not in done]
            if self.cancel.is_set():
                break
        return records

    def _keeper(self, records: list, on_record, timing: dict) -> Callable[[RunRecord], None]:
        """What every ended run goes through: its worker's peak kept (for planning
        interleaved rounds), how it was timed and beside which neighbour said on it, then
        on_record."""
        def record(r: RunRecord):
            if r.peak_rss_bytes:
                key = worker_key(r)
                self._peaks[key] = max(self._peaks.get(key) or 0, r.peak_rss_bytes)
            if timing["why"] and not (r.extra or {}).get("interleaved") \
                    and not (r.extra or {}).get("sequential"):
                r = replace(r, extra={**(r.extra or {}), "sequential": timing["why"]})
            if (r.contention or "none") != "none":  # where our neighbour ran, and how
                r = replace(r, extra={**(r.extra or {}), "neighbour": {
                    "core": self.neighbour_core(), "mode": r.contention}})
            records.append(r)
            on_record(r)
        return record

    def _together(self, specs, tags, record, on_event, known_stats, timing) -> list:
        """Time what interleaves (engine/run/process/together.py); return the specs left for one
        group after another, saying why in an event and on their records."""
        if (not self.interleave or self.process_per_run or not specs
                or not getattr(self.executor, "interleaves", False)
                or not scenario_of(specs[0]).interleaves):
            return specs
        import psutil

        plan, rest, why = plan_together(specs, peak_bytes=self._peaks,
                                        available_bytes=psutil.virtual_memory().available)
        if plan is None:
            timing["why"] = why
            if why:  # a round without a contest has nothing to say
                on_event(Timing("sequential", why))
            return rest
        on_event(Timing("interleaved", why, workers=len(plan.workers)))
        left = run_together(self, plan, tags, record, on_event, known_stats)
        if self.cancel.is_set():
            return []
        # what runs next, one group after another, says why on its records (set only now:
        # the interleaved runs above have theirs)
        timing["why"] = "; ".join(filter(None, [
            why, "its interleaved worker ended early" if left else ""]))
        return left + rest

    def _pool(self, on_event=lambda notice: None) -> Pool:
        return Pool(clock=self.clock, poll_s=self.poll_s, cancel=self.cancel,
                    on_event=on_event)

    def _run_worker(self, pending, tags, record, on_event, known_stats) -> set[str]:
        """Run one worker over `pending`; return the run ids that got their row."""
        orders = [RunOrder(rid, s.to_dict(), known_stats(s)) for rid, s in pending]
        # Profiled runs leave their Chrome trace here; _record reads it into the record.
        trace_dir = (tempfile.mkdtemp(prefix="bench-traces-")
                     if any(s.profile_steps for _, s in pending) else None)
        try:
            with self._pool(on_event) as pool:
                handle = self.executor.start(orders, pending[0][1], self.memory_cap_bytes,
                                             trace_dir=trace_dir)
                w = pool.start(handle, pending)
                self._drive(pool, w, tags, record)
            return w.done
        finally:
            if trace_dir:
                shutil.rmtree(trace_dir, ignore_errors=True)

    def beside(self, spec, tags: dict):
        """The controlled neighbour a run with contention runs beside (a context manager;
        nothing for a run without): on the last of the cores its worker may use, which is
        one of its own; its on/off phases seeded by the run's configuration and round."""
        mode = getattr(spec, "contention", "none")
        if mode == "none":
            return contextlib.nullcontext()
        seed = zlib.crc32(repr((spec.key(), tags.get("sweep_id"), tags.get("round_no")))
                          .encode())
        return Neighbour(self.neighbour_core(), mode, seed=seed)

    def neighbour_core(self) -> int:
        """The last of the cores a worker may use: one of every worker's own."""
        return self.executor.core_ids()[-1]

    def _drive(self, pool: Pool, w: Worker, tags, record,
               done: Callable[[], bool] = lambda: False) -> None:
        """One worker through its runs, each run's row as it ends, each run under the
        wall-time limit; a worker that exits, hangs or is cancelled leaves its run in
        flight (or, ending before one began, its next) one failed row. done(): the runs
        asked for have ended and the worker stays, held for more (HeldWorker)."""
        neighbour = contextlib.ExitStack()  # the run in flight's, when it has contention

        def on(w, ev):
            if isinstance(ev, Started):
                pool.renew(self.timeout_s)
                neighbour.enter_context(self.beside(w.specs[ev.run_id], tags))
            elif isinstance(ev, (Result, Failed)):
                neighbour.close()
                record(self._record(ev.run_id, w.specs[ev.run_id], tags, ev, w.ctx, w.handle))
                pool.renew(self.timeout_s)
        pool.renew(self.timeout_s)
        with neighbour:
            outcome = pool.drive(on, until=lambda: w.ended or done())
        if outcome is None and not w.ended:
            return  # held: the worker waits, warm, for its next runs
        w.close(kill=outcome is not None)
        rid = w.in_flight or next((rid for rid, _ in w.pending()), None)
        if rid is None:
            return
        if outcome is not None:
            status, reason = self.stopped(outcome, f"in phase {w.ctx.phase}, after "
                                                   f"{w.ctx.iters} timed iterations")
            sig = "SIGKILL"
        else:
            status, reason, sig = w.exit()
            if w.in_flight is None:
                reason = f"worker failed during start-up: {reason}"
        record(self._record(rid, w.specs[rid], tags, w.failed(rid, status, reason, sig),
                            w.ctx, w.handle))

    def _run_replicas(self, rid, spec: RunSpec, tags, record, on_event, known_stats) -> None:
        """spec.replicas workers of one spec at once, each on intra_threads cores of its
        own. Each loads, prepares and warms up, then says Armed; when all have, the
        executor releases them into one window (a start and an end on the machine's
        monotonic clock, awaited on a cluster node too). One record: every replica's
        samples (the per-request latency distribution), throughput summed over what fell
        inside the window every replica covered (combine_replicas). Any replica that fails
        fails the run, and the others are stopped."""
        n, t = spec.replicas, spec.intra_threads
        # Whole cores of their own per replica; a cluster node's as positions its host maps
        per_replica = self.executor.replica_cores(n, t)
        order = RunOrder(rid, spec.to_dict(), known_stats(spec))
        ctx = RunContext()  # the run's, shared: the first replica's Ready and start
        with self._pool(on_event) as pool, contextlib.ExitStack() as neighbour:
            job = Replicas(rid, spec, release=lambda per_sample_ns: self.executor.release(
                [w.handle for w in pool.workers], replica_window_s(spec.policy, per_sample_ns)))
            neighbour.enter_context(self.beside(spec, tags))
            for i in range(n):
                pool.start(self.executor.start([order], spec, self.memory_cap_bytes,
                                               cores=per_replica[i],
                                               sync=WINDOW), [(rid, spec)], ctx)
            pool.renew(self.timeout_s)
            outcome = pool.drive(job.on, until=lambda: job.failure is not None
                                 or all(w.ended for w in pool.workers))
            if outcome is not None:
                job.failure = Failed(rid, *self.stopped(
                    outcome, f"in phase {ctx.phase}, {len(job.armed)} of {n} replicas armed"))
            pool.close(kill=job.failure is not None)
        ctx.ready = with_every_replicas_cores(ctx.ready, pool.workers)
        record(self._record(rid, spec, tags, job.ending(), ctx, pool.workers[0].handle))

    def stopped(self, outcome: str, where: str) -> tuple[str, str]:
        """(status, reason) of a run the parent stopped: cancelled, or past its wall-time
        limit (`where` it was then)."""
        if outcome == "cancel":
            return "killed", self.cancel_reason
        return "timeout", f"exceeded the {self.timeout_s:g} s wall-time limit per run ({where})"

    def _record(self, run_id, spec: RunSpec, tags, ev: Result | Failed, ctx: RunContext,
                worker) -> RunRecord:
        ready = ctx.ready
        # A cluster node's worker: the record names that node, its system and its checkout
        # (engine/run/cluster/node_host.py adds them to `ready`); its tagged shape unless the
        # caller named one. A node lost before `ready` is named by the executor.
        node = (ready.node if ready is not None else None) or {}
        if not node and getattr(worker, "node", None) is not None:
            node = {"node_id": worker.node.node_id, "hostname": worker.node.hostname,
                    "shape": worker.node.shape}
        base = base_fields(spec, run_id=run_id, tags=tags, ready=ready,
                           started_at=ctx.started_at, ended_at=ev.ended_at,
                           load_avg=ctx.load_avg,
                           memory_cap_bytes=node.get("memory_cap_bytes") or self.memory_cap_bytes,
                           timeout_s=self.timeout_s,
                           git_commit=node.get("git_commit") if node else git_commit(),
                           system_id=((node.get("system") or {}).get("system_id")
                                      if node else system_info()["system_id"]),
                           machine_shape=self.machine_shape or node.get("shape"),
                           node=node)
        server_import_s = getattr(worker, "server_import_s", None)
        if server_import_s is not None:  # its fork server's import, which it waited for
            base["extra"] = {**base["extra"], "fork_server_import_s": server_import_s}
        if isinstance(ev, Failed):
            tail = ev.traceback or worker.stderr_tail()
            return RunRecord(**base, status=ev.status, reason=plain_text(ev.reason),
                             exit_code=ev.exit_code, signal=ev.signal,
                             stderr_tail=tail[-STDERR_TAIL_BYTES:],
                             model_sha256=ev.model_sha256, model_bytes=ev.model_bytes)
        return record_from_result(base, ev, spec)


def worker_groups(specs: list[RunSpec]) -> list[list[RunSpec]]:
    """Consecutive specs sharing a worker: same framework, thread counts and device (and
    replica: an A/A test's second copy runs in a process of its own)."""
    groups: list[list[RunSpec]] = []
    for s in specs:
        key = worker_key(s)
        if groups and worker_key(groups[-1][0]) == key:
            groups[-1].append(s)
        else:
            groups.append([s])
    return groups
