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
import shutil
import tempfile
from dataclasses import dataclass, replace

from engine.analysis.compare import contender_name
from engine.core.catalog import CPP_RUNNER_RUNTIMES
from engine.core.protocol import (BLOCKS, Armed, BlockTimed, Failed,
                                  Result, RunNext, RunOrder, Stop, TimeBlock)
from engine.scenarios.inference.messages import InferenceResult
from engine.run.process.drive import Pool, Timing, Worker
from engine.run.process.records import FLOP_FRAMEWORK, new_id
from engine.scenarios import scenario_of

__all__ = ["TogetherPlan", "plan_together", "run_together", "worker_key", "timing_line",
           "interleavable", "BLOCK_S", "MEMORY_SHARE", "WORKER_BYTES"]

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


def timing_line(timing: Timing) -> str:
    """How a round's contenders were timed, in words, from the runner's Timing notice."""
    if timing.mode == "interleaved":
        rest = f"; one after another: {timing.why}" if timing.why else ""
        return (f"contenders timed alternately in blocks, {timing.workers} workers warm at "
                f"once{rest}")
    return f"contenders timed one after another: {timing.why or 'nothing to interleave'}"


def interleavable(spec) -> str:
    """Why a spec cannot be timed in blocks, or "" when it can."""
    if getattr(spec, "replicas", 1) > 1:
        return "replicas share a window of their own"
    if spec.runtime in CPP_RUNNER_RUNTIMES:
        return "the LibTorch runner times itself"
    if getattr(getattr(spec, "policy", None), "energy_s", 0):
        return ("an energy loop follows each timed one and reads the whole package, which "
                "other contenders' blocks would run beside")
    if not scenario_of(spec).decides_contests:
        return "its runs are not contests"
    if not scenario_of(spec).interleaves:
        return "its worker times whole calls, not blocks"
    return ""


def worker_key(s) -> tuple:
    """The worker group a spec (or its record) runs in, as engine.run.process.runner groups them."""
    replica = getattr(s, "replica", None)
    if replica is None:  # a record keeps an A/A copy's number in its extra
        replica = (getattr(s, "extra", None) or {}).get("replica", 0)
    # TensorFlow's bf16 models are built under a process-wide Keras policy: their own
    # worker, so no fp32 run shares a process with one (issue 28)
    own = ("bf16",) if s.framework == "tensorflow" and s.precision == "bf16" else ()
    return (s.framework, s.intra_threads, s.inter_threads, s.device, replica,
            getattr(s, "replicas", 1) or 1, getattr(s, "wait_policy", "") or "", *own)


def _row(s) -> tuple:
    return (s.model, s.image_size, s.batch_size, s.intra_threads, s.precision,
            getattr(s, "user_model", None), getattr(s, "contention", "none"))


def _model(s) -> tuple:
    """What a worker's built model is keyed on (engine.worker.inference.body)."""
    return (s.model, s.image_size, getattr(s, "weight_policy", None), s.device, s.runtime,
            getattr(s, "user_model", None), s.precision)


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
        # A worker keeps one model built (engine.worker.inference.body): the contender whose model
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


class _Phase:
    """One contest's turn: who is armed, who timed its block, who met its policy, whose
    result came."""

    def __init__(self, members: list[tuple[int, str]], names: dict, block_s: float):
        self.members = members  # (worker index, run id), first mover first
        self.names, self.block_s = names, block_s  # contender of each worker index
        self.armed: set[int] = set()
        self.blocked: set[int] = set()  # timed the block it was last handed
        self.met: set[int] = set()
        self.blocks: dict[int, int] = {}
        self.reported: set[int] = set()  # its result came
        self.out: set[int] = set()  # failed, or its worker ended
        self.held: list[tuple[Worker, Result]] = []  # results whose rows wait for the phase

    def annotate(self, i: int, res: InferenceResult) -> InferenceResult:
        """A result with whom it was interleaved and in how many blocks (or, alone in its
        phase, why)."""
        others = [self.names[j] for j, _ in self.members if j != i]
        if not others:
            return replace(res, sequential="no rival of its contest in another worker at "
                                           "its turn: timed alone")
        return replace(res, interleaved={"with": others, "blocks": self.blocks.get(i, 0),
                                         "block_s": self.block_s})


def run_together(runner, plan: TogetherPlan, tags: dict, record, on_event,
                 known_stats, block_s: float = BLOCK_S) -> list:
    """Run the plan's phases; every run ends in exactly one record (through `record`),
    except those of a worker that died, which are returned for the sequential loop (its run
    in flight has its row). Returns the specs left over."""
    return _Together(runner, tags, record, on_event, known_stats, block_s).run(plan)


class _Together:
    """The plan's workers in one Pool (engine.run.process.drive), driven phase by phase."""

    def __init__(self, runner, tags, record, on_event, known_stats, block_s):
        self.runner, self.tags, self.record = runner, tags, record
        self.known_stats, self.block_s = known_stats, block_s
        self.pool = Pool(clock=runner.clock, poll_s=runner.poll_s, cancel=runner.cancel,
                         on_event=on_event)
        self.phase: _Phase | None = None
        self.left: list = []  # specs for the sequential loop
        self.traces: str | None = None

    def run(self, plan: TogetherPlan) -> list:
        neighbour = contextlib.ExitStack()
        try:
            self._start(plan)
            workers = self.pool.workers
            cursor = [0] * len(workers)  # each worker's next run
            for turn in plan.phases:
                members = []
                for i, _ in turn:
                    rid = workers[i].runs[cursor[i]][0]
                    cursor[i] += 1
                    if not workers[i].ended:
                        members.append((i, rid))
                if self._run_phase(members, neighbour) == "cancel":
                    return []
            self.pool.close()  # a clean end: stdin's end lets each worker exit
        finally:
            neighbour.close()
            if self.phase is not None:
                self._flush()  # an exception mid-phase: what came still gets its row
            self.pool.close(kill=True)
            if self.traces:
                shutil.rmtree(self.traces, ignore_errors=True)
        for w in self.pool.workers:
            if not w.ended:  # runs of a worker that ended cleanly but never began (none, or
                self.left.extend(s for _, s in w.pending())  # a broken plan)
        return self.left

    def _start(self, plan: TogetherPlan) -> None:
        runner = self.runner
        for specs_of in plan.workers:
            runs = [(new_id(), s) for s in specs_of]
            orders = [RunOrder(rid, s.to_dict(), self.known_stats(s)) for rid, s in runs]
            # A profiled run's pass comes after the phase's timed blocks (its result), and
            # leaves its Chrome trace here for runner._record, as in the sequential loop.
            if self.traces is None and any(s.profile_steps for s in specs_of):
                self.traces = tempfile.mkdtemp(prefix="bench-traces-")
            h = runner.executor.start(orders, specs_of[0], runner.memory_cap_bytes,
                                      sync=BLOCKS, trace_dir=self.traces)
            self.pool.start(h, runs)

    def _run_phase(self, members: list[tuple[int, str]], neighbour) -> str | None:
        """One contest: its contenders armed one after the other, timed in blocks in turn
        until each met its policy, then stopped; their rows when the phase ends."""
        runner, workers = self.runner, self.pool.workers
        names = {i: contender_name(vars(workers[i].specs[rid])) for i, rid in members}
        phase = self.phase = _Phase(members, names, self.block_s)
        self.pool.renew(runner.timeout_s * max(len(members), 1))
        neighbour.close()
        if members:  # a contest beside a neighbour has it for the whole phase
            neighbour.enter_context(runner.beside(workers[members[0][0]].specs[members[0][1]],
                                                  self.tags))
        outcome = self._arm(phase) or self._alternate(phase) or self._collect(phase)
        neighbour.close()
        self._flush()
        if outcome is not None:
            self._stop_all(outcome, *runner.stopped(
                outcome, f"interleaved with {len(members) - 1} other contender(s)"))
        return outcome

    def _arm(self, phase: _Phase) -> str | None:
        """One after the other: no contender's one-time costs are timed beside another's."""
        for i, _ in phase.members:
            self.pool.workers[i].handle.command(RunNext())
            outcome = self._drive(lambda i=i: i in phase.armed or i in phase.out)
            if outcome:
                return outcome
        return None

    def _alternate(self, phase: _Phase) -> str | None:
        """Blocks in turn, A B then B A (a linear drift falls on both alike), until every
        armed contender met its policy."""
        flip = False
        while True:
            active = [i for i, _ in phase.members if i in phase.armed and i not in phase.out]
            if not active or all(i in phase.met for i in active):
                return None
            order = active[::-1] if flip else active
            flip = not flip
            for i in order:
                if i in phase.out:
                    continue
                phase.blocked.discard(i)
                self.pool.workers[i].handle.command(TimeBlock(self.block_s))
                outcome = self._drive(lambda i=i: i in phase.blocked or i in phase.out)
                if outcome:
                    return outcome

    def _collect(self, phase: _Phase) -> str | None:
        finishing = [i for i, _ in phase.members if i in phase.armed and i not in phase.out]
        for i in finishing:
            self.pool.workers[i].handle.command(Stop())
        return self._drive(lambda: all(i in phase.reported or i in phase.out
                                       for i in finishing))

    def _drive(self, until) -> str | None:
        return self.pool.drive(self._on, until)

    def _on(self, w: Worker, ev) -> None:
        """One event of the phase's workers, after the pool's bookkeeping."""
        phase, i = self.phase, w.index
        if ev is None:
            self._ended(w)
            phase.out.add(i)
        elif isinstance(ev, Armed):
            phase.armed.add(i)
        elif isinstance(ev, BlockTimed):
            phase.blocks[i] = phase.blocks.get(i, 0) + 1
            if ev.met or ev.maxed:
                phase.met.add(i)
            phase.blocked.add(i)
        elif isinstance(ev, InferenceResult):  # done now (the worker may end right after
            self._finish(w, phase.annotate(i, ev))  # it); its row when its phase ends
            phase.reported.add(i)
        elif isinstance(ev, Failed):
            self._finish(w, ev)
            phase.out.add(i)

    def _finish(self, w: Worker, ev: Result | Failed) -> None:
        """A run's row; a result's waits for its phase's end (_flush)."""
        if isinstance(ev, Result) and self.phase is not None:
            self.phase.held.append((w, ev))
            return
        self.record(self.runner._record(ev.run_id, w.specs[ev.run_id], self.tags, ev, w.ctx,
                                        w.handle))

    def _flush(self) -> None:
        """The phase's results get their rows, the reference FLOP counter's framework first:
        the others' GFLOP/s is computed on its count, stored with its row."""
        held, self.phase.held = self.phase.held, []
        for w, res in sorted(held, key=lambda h: h[0].specs[h[1].run_id].framework
                             != FLOP_FRAMEWORK):
            self.record(self.runner._record(res.run_id, w.specs[res.run_id], self.tags, res,
                                            w.ctx, w.handle))

    def _ended(self, w: Worker) -> None:
        """w's stream ended: its run in flight (or, never ready, its next) fails with the
        exit's reason; the runs it had not begun go to the sequential loop."""
        status, reason, sig = w.exit()
        if w.in_flight is not None:
            self._finish(w, w.failed(w.in_flight, status, reason, sig))
        elif w.pending() and w.ctx.ready is None:
            rid = w.pending()[0][0]
            self._finish(w, w.failed(rid, status, f"worker failed during start-up: {reason}",
                                     sig))
        self.left.extend(s for _, s in w.pending())

    def _stop_all(self, why: str, status: str, reason: str) -> None:
        """The phase cannot finish: each of its contenders' workers is killed and its run
        gets its row (in flight, or told to start and not yet started); on a timeout, what
        those workers had not begun goes to the sequential loop."""
        for i, rid in self.phase.members:
            w = self.pool.workers[i]
            if w.ended:
                continue
            w.stop()
            if rid not in w.done:
                self._finish(w, w.failed(rid, status, reason, "SIGKILL"))
            if why == "timeout":
                self.left.extend(s for _, s in w.pending())
