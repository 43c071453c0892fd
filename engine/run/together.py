"""Contenders of a contest timed alternately in short blocks, their workers warm at once.

A round used to run one worker group after another, so the two contenders of a contest were
timed seconds to minutes apart; a neighbour's busy phase lasting seconds then hit one and not
the other, and the round's ratio took the hit. Here every worker group of the round starts
at once and holds at a gate (engine.worker.harness). Contest by contest (a phase), each
contender's worker is let start its run (load, prepare, warm up: one after the other, so
no contender's one-time costs are timed beside another's) and says "armed"; a contest
measured beside a controlled neighbour has it running for the whole phase; then the parent
hands out blocks of BLOCK_S seconds in turn, A B B A ..., until every contender has met its
measurement policy, and says stop. Both see the same machine within a block's length, so
drift and a neighbour's busy seconds fall on both alike. Fresh processes each round still
capture the process-to-process variance the rounds are there to measure.

What does not interleave runs one group after another as before (Runner's own loop), and
the record says why: replicas (their own shared window), runtimes that time themselves
(the LibTorch runner), a worker per run, an executor on another machine (each block would
cross the network twice), and workers that together would not fit in memory. A worker that
dies leaves its run one row and its remaining runs to the sequential loop.
"""

from __future__ import annotations

import contextlib
import queue
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass

from engine.analysis.compare import contender_name
from engine.run.records import FLOP_FRAMEWORK, load_avg, new_id, worker_ctx
from engine.scenarios import scenario_of

__all__ = ["TogetherPlan", "plan_together", "run_together", "merge", "worker_key",
           "timing_line", "interleavable", "BLOCK_S", "MEMORY_SHARE", "WORKER_BYTES"]

# A block's length: short against a neighbour's busy phase (seconds), long against the
# handover (a pipe write and a wake-up, well under a millisecond) and a call of the slowest
# model at small batches.
BLOCK_S = 0.25
# Workers at once may use this share of the memory available when the round starts.
MEMORY_SHARE = 0.75
# A worker's resident size before its first run was measured (its framework and a model):
# what the memory check assumes for a group it has not seen yet.
WORKER_BYTES = {"torch": 1_500_000_000, "tensorflow": 2_000_000_000, "selftest": 150_000_000}
DEFAULT_WORKER_BYTES = 2_000_000_000


def timing_line(ev: dict) -> str:
    """How a round's contenders were timed, in words, from the runner's "timing" event."""
    if ev["mode"] == "interleaved":
        rest = f"; one after another: {ev['why']}" if ev.get("why") else ""
        return (f"contenders timed alternately in blocks, {ev['workers']} workers warm at "
                f"once{rest}")
    return f"contenders timed one after another: {ev['why'] or 'nothing to interleave'}"


def interleavable(spec) -> str:
    """Why a spec cannot be timed in blocks, or "" when it can."""
    if getattr(spec, "replicas", 1) > 1:
        return "replicas share a window of their own"
    if spec.runtime == "libtorch":
        return "the LibTorch runner times itself"
    if not scenario_of(spec).decides_contests:
        return "its runs are not contests"
    return ""


def worker_key(s) -> tuple:
    """The worker group a spec (or its record) runs in, as engine.run.runner groups them."""
    replica = getattr(s, "replica", None)
    if replica is None:  # a record keeps an A/A copy's number in its extra
        replica = (getattr(s, "extra", None) or {}).get("replica", 0)
    return (s.framework, s.intra_threads, s.inter_threads, s.device, replica,
            getattr(s, "replicas", 1) or 1, getattr(s, "wait_policy", "") or "")


def merge(i: int, handle, merged: queue.Queue) -> None:
    """Forward worker i's events into one queue, as (i, event), until its end (None)."""
    def pump():
        while True:
            ev = handle.events.get()
            merged.put((i, ev))
            if ev is None:
                return
    threading.Thread(target=pump, daemon=True).start()


def _row(s) -> tuple:
    return (s.model, s.image_size, s.batch_size, s.intra_threads, s.precision,
            getattr(s, "user_model", None), getattr(s, "contention", "none"))


def _model(s) -> tuple:
    """What a worker's built model is keyed on (engine.worker.inference)."""
    return (s.model, s.image_size, getattr(s, "weight_policy", None), s.device, s.runtime,
            getattr(s, "user_model", None))


@dataclass(frozen=True)
class TogetherPlan:
    """workers: per worker group, its specs in the order its phases need them; phases: per
    contest (and, where one group holds two of a contest's contenders, per turn), the
    (worker index, spec) pairs timed alternately, first mover first."""

    workers: tuple[tuple, ...]
    phases: tuple[tuple[tuple[int, object], ...], ...]


def plan_together(specs: list, *, available_bytes: int | None = None,
                  peak_bytes: dict | None = None) -> tuple[TogetherPlan | None, list, str]:
    """(the plan, or None; the specs left to the sequential loop; why they are, in words).
    peak_bytes: worker key -> the largest resident size its runs reached so far."""
    left = [s for s in specs if interleavable(s)]
    why = sorted({interleavable(s) for s in left})
    mine = [s for s in specs if not interleavable(s)]
    keys = list(dict.fromkeys(worker_key(s) for s in mine))
    rows = list(dict.fromkeys(_row(s) for s in mine))
    shared = [r for r in rows if len({worker_key(s) for s in mine if _row(s) == r}) > 1]
    if len(keys) < 2 or not shared:
        contests = any(sum(_row(s) == r for s in mine) > 1 for r in rows)
        reason = "each contest's contenders share one worker" if contests else ""
        return None, specs, "; ".join(filter(None, [reason, *why]))
    if available_bytes is not None:
        peak_bytes = peak_bytes or {}
        need = sum(peak_bytes.get(k) or WORKER_BYTES.get(k[0], DEFAULT_WORKER_BYTES)
                   for k in keys)
        if need > MEMORY_SHARE * available_bytes:
            return None, specs, (f"the {len(keys)} workers need about {need / 2**30:.1f} GiB "
                                 f"together, over {MEMORY_SHARE:.0%} of the "
                                 f"{available_bytes / 2**30:.1f} GiB available: one after "
                                 "another")
    phases, loaded = [], [None] * len(keys)
    for row in rows:
        per = [[s for s in mine if _row(s) == row and worker_key(s) == k] for k in keys]
        # A worker keeps one model built (engine.worker.inference): the contender whose model
        # it holds from the last contest goes first, so a second batch size reuses it.
        per = [sorted(p, key=lambda s, w=w: _model(s) != loaded[w]) for w, p in enumerate(per)]
        loaded = [_model(p[-1]) if p else loaded[w] for w, p in enumerate(per)]
        turns = max(len(p) for p in per)
        for j in range(turns):
            turn = [(w, per[w][j]) for w in range(len(keys)) if j < len(per[w])]
            turn.sort(key=lambda ws: mine.index(ws[1]))  # the plan's order: who goes first
            phases.append(tuple(turn))
    workers = tuple(tuple(s for phase in phases for w, s in phase if w == i)
                    for i in range(len(keys)))
    return TogetherPlan(workers, tuple(phases)), left, "; ".join(why)


class _Worker:
    def __init__(self, handle, runs: list[tuple[str, object]]):
        self.handle, self.runs = handle, runs
        self.ctx = worker_ctx()
        self.done: set[str] = set()
        self.in_flight: str | None = None
        self.ended = False
        self.closed = False
        self.code = None


class _Phase:
    """One contest's turn: who is armed, who met its policy, whose result came."""

    def __init__(self, members: list[tuple[int, str]], names: dict, block_s: float):
        self.members = members  # (worker index, run id), first mover first
        self.names, self.block_s = names, block_s  # contender of each worker index
        self.armed: set[int] = set()
        self.met: set[int] = set()
        self.blocks: dict[int, int] = {}
        self.out: set[int] = set()  # failed, or its worker ended
        self.held: list[tuple[int, str, dict]] = []  # results whose rows wait for the phase

    def annotate(self, i: int, ev: dict) -> dict:
        """A result event with whom it was interleaved and in how many blocks (or, alone in
        its phase, why)."""
        others = [self.names[j] for j, _ in self.members if j != i]
        if not others:
            return {**ev, "sequential": "no rival of its contest in another worker at its "
                                        "turn: timed alone"}
        return {**ev, "interleaved": {"with": others, "blocks": self.blocks.get(i, 0),
                                      "block_s": self.block_s}}


def run_together(runner, plan: TogetherPlan, tags: dict, record, on_event,
                 known_stats, block_s: float = BLOCK_S) -> list:
    """Run the plan's phases; every run ends in exactly one record (through `record`),
    except those of a worker that died, which are returned for the sequential loop (its run
    in flight has its row). Returns the specs left over."""
    merged: queue.Queue = queue.Queue()
    workers: list[_Worker] = []
    specs: dict[str, object] = {}
    left: list = []

    def finish(i, rid, ev, phase=None):
        """Run rid's row; a result in a phase is held until the phase ends (flush)."""
        w = workers[i]
        w.done.add(rid)
        if w.in_flight == rid:
            w.in_flight = None
        if phase is not None:
            phase.held.append((i, rid, ev))
            return
        rec = runner._record(rid, specs[rid], tags, ev, w.ctx, w.handle)
        record(rec)
        on_event({**ev, "spec": specs[rid]})

    def flush(phase):
        """The phase's results get their rows, the reference FLOP counter's framework first:
        the others' GFLOP/s is computed on its count, stored with its row."""
        held, phase.held = phase.held, []
        for i, rid, ev in sorted(held, key=lambda h: specs[h[1]].framework != FLOP_FRAMEWORK):
            finish(i, rid, ev)

    def fail(i, rid, status, reason, sig=None, rc=None):
        finish(i, rid, {"event": "failed", "run_id": rid, "status": status, "reason": reason,
                        "exit_code": rc, "signal": sig, "ended_at": time.time()})

    def ended(i):
        """Worker i's stream ended: its run in flight (or its next) fails with the exit's
        reason; the runs it had not begun go to the sequential loop."""
        w = workers[i]
        w.ended = True
        w.code = w.handle.close()
        w.closed = True
        status, reason, sig = w.handle.classify(w.code)
        pending = [(rid, s) for rid, s in w.runs if rid not in w.done]
        if w.in_flight is not None:
            fail(i, w.in_flight, status, reason, sig, w.code)
        elif pending and not w.ctx["ready"]:
            rid = pending[0][0]
            fail(i, rid, status, f"worker failed during start-up: {reason}", sig, w.code)
        left.extend(s for rid, s in w.runs if rid not in w.done)

    def handle(i, ev, phase: _Phase | None, results: dict):
        """One event of worker i: bookkeeping, rows for failures and results."""
        if ev is None:
            if not workers[i].ended:  # not already ended by a kill (stop_all)
                ended(i)
            if phase is not None:
                phase.out.add(i)
            return
        w, event = workers[i], ev["event"]
        if w.ended or ev.get("run_id") in w.done:  # what a killed worker had still queued
            return
        if event == "ready":
            w.ctx["ready"] = ev
        elif event == "started":
            w.in_flight = ev["run_id"]
            w.ctx.update(started_at=ev["started_at"], phase="load", iters=0,
                         load_avg=load_avg(w.ctx["ready"]))
        elif event == "progress":
            w.ctx.update(phase=ev["phase"], iters=ev["iters"])
        elif event == "armed" and phase is not None:
            phase.armed.add(i)
        elif event == "block" and phase is not None:
            phase.blocks[i] = phase.blocks.get(i, 0) + 1
            w.ctx.update(phase="measure", iters=ev["iters"])
            if ev["met"] or ev["maxed"]:
                phase.met.add(i)
            results.setdefault("blocked", set()).add(i)
        elif event == "result":  # done now (the worker may end right after it); its row
            if phase is not None:  # comes when its phase ends (flush)
                finish(i, ev["run_id"], phase.annotate(i, ev), phase)
            else:
                finish(i, ev["run_id"], ev)
            results[i] = True
        elif event == "failed":
            finish(i, ev["run_id"], ev)
            if phase is not None:
                phase.out.add(i)
        if event in ("started", "progress", "block"):
            on_event({**ev, "spec": specs.get(ev.get("run_id"))})

    def wait(phase, results, until, deadline) -> str | None:
        """Drive events until until() holds; "timeout" or "cancel" when it cannot (the events
        already queued are taken first: a result that arrived in time counts)."""
        while not until():
            if runner.cancel.is_set():
                return "cancel"
            remaining = deadline - runner.clock()
            if remaining <= 0:
                try:
                    i, ev = merged.get_nowait()
                except queue.Empty:
                    return "timeout"
                handle(i, ev, phase, results)
                continue
            try:
                i, ev = merged.get(timeout=min(remaining, runner.poll_s))
            except queue.Empty:
                continue
            handle(i, ev, phase, results)
        return None

    def stop_all(phase, why: str, status: str, reason: str):
        """The phase cannot finish: each of its contenders' workers is killed and its run
        gets its row (in flight, or told to start and not yet started); on a timeout, what
        those workers had not begun goes to the sequential loop."""
        for i, rid in phase.members:
            w = workers[i]
            if w.ended:
                continue
            w.handle.kill()
            w.code = w.handle.close()
            w.closed = w.ended = True
            if rid not in w.done:
                fail(i, rid, status, reason, "SIGKILL", w.code)
            if why == "timeout":
                left.extend(s for r, s in w.runs if r not in w.done)

    neighbour = contextlib.ExitStack()
    traces = phase = None
    try:
        for specs_of in plan.workers:
            runs = [(new_id(), s) for s in specs_of]
            specs.update(runs)
            payload = [{"run_id": rid, "spec": s.to_dict(), "known_stats": known_stats(s)}
                       for rid, s in runs]
            # A profiled run's pass comes after the phase's timed blocks (its result), and
            # leaves its Chrome trace here for runner._record, as in the sequential loop.
            if traces is None and any(s.profile_steps for s in specs_of):
                traces = tempfile.mkdtemp(prefix="bench-traces-")
            h = runner.executor.start(payload, specs_of[0], runner.memory_cap_bytes,
                                      sync="blocks", trace_dir=traces)
            workers.append(_Worker(h, runs))
            merge(len(workers) - 1, h, merged)
        cursor = [0] * len(workers)  # each worker's next run
        for turn in plan.phases:
            members = []
            for i, _ in turn:
                rid = workers[i].runs[cursor[i]][0]
                cursor[i] += 1
                if not workers[i].ended:
                    members.append((i, rid))
            names = {i: contender_name(vars(specs[rid])) for i, rid in members}
            phase, results = _Phase(members, names, block_s), {}
            deadline = runner.clock() + runner.timeout_s * max(len(members), 1)
            outcome = None
            neighbour.close()
            if members:  # a contest beside a neighbour has it for the whole phase
                neighbour.enter_context(runner.beside(specs[members[0][1]], tags))
            for i, rid in members:  # one after the other: one-time costs apart
                workers[i].handle.command("run")
                outcome = wait(phase, results,
                               lambda i=i: i in phase.armed or i in phase.out, deadline)
                if outcome:
                    break
            flip = False
            while outcome is None:
                active = [i for i, _ in members if i in phase.armed and i not in phase.out]
                if not active or all(i in phase.met for i in active):
                    break
                order = active[::-1] if flip else active
                flip = not flip
                for i in order:  # A B, then B A: a linear drift falls on both alike
                    if i in phase.out:
                        continue
                    results.pop("blocked", None)
                    workers[i].handle.command(f"block {block_s:g}")
                    outcome = wait(phase, results, lambda i=i: i in results.get(
                        "blocked", ()) or i in phase.out, deadline)
                    if outcome:
                        break
            if outcome is None:
                finishing = [i for i, _ in members if i in phase.armed and i not in phase.out]
                for i in finishing:
                    workers[i].handle.command("stop")
                outcome = wait(phase, results,
                               lambda: all(i in results or i in phase.out for i in finishing),
                               deadline)
            neighbour.close()
            flush(phase)
            if outcome == "cancel":
                stop_all(phase, "cancel", "killed", runner.cancel_reason)
                return []
            if outcome == "timeout":
                stop_all(phase, "timeout", "timeout",
                         f"exceeded the {runner.timeout_s:g} s wall-time limit per run "
                         f"(interleaved with {len(members) - 1} other contender(s))")
        for w in workers:  # a clean end: stdin's end lets each worker exit
            if not w.closed:
                w.handle.close()
                w.closed = True
    finally:
        neighbour.close()
        if phase is not None:
            flush(phase)  # an exception mid-phase: what came still gets its row
        for w in workers:
            if not w.closed:
                w.handle.kill()
                w.handle.close()
                w.closed = True
        if traces:
            shutil.rmtree(traces, ignore_errors=True)
    for w in workers:
        if not w.ended:  # runs of a worker that ended cleanly but never began (none, or a
            left.extend(s for rid, s in w.runs if rid not in w.done)  # broken plan)
    return left
