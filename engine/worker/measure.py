"""The timing loop. No printing, no framework imports: a backend hands it one `step`.

`step()` runs one forward and makes its result real (synchronised, materialised). It returns
None, and the loop times it with `clock` (perf_counter_ns), or returns its own duration in ns
when the device measured it (CUDA events), since a CPU timer around asynchronous GPU work
measures the launch, not the work.

A call under about 1 ms is timed in blocks (as torch.utils.benchmark's blocked_autorange
does): one timer read around k calls, the sample being the block's time over k. Timer
granularity and one call's jitter then no longer decide the quartiles, and the loop's own
overhead is paid once per block. The block size is stored with the samples.

Three ways to decide when timing ends (`gate`):
- none (a run on its own): until the policy is met (min_time and min_iters) or a max is hit;
- a window (a replica, engine/run/process/runner.py): wait, warm, for the parent's one start and end
  on CLOCK_MONOTONIC (shared by every process of the machine), time until the end, and keep
  each sample's end time so the parent counts only what fell inside every replica's window;
- blocks (contenders interleaved): time one block of the length the parent asks for, say
  so, wait for the next; the parent alternates the contenders of a contest block by block
  until every one has met its policy, then says stop. Both then see the same machine
  within a block's length, so drift and a neighbour's busy seconds fall on both alike.
"""

from __future__ import annotations

import gc
import math
import time
from dataclasses import dataclass
from typing import Callable

from engine.core.policy import (STOP_IMPRECISE, STOP_MAX_ITERS, STOP_MAX_TIME,
                                STOP_POLICY_MET, WARM_ITERS, WARM_MAX_S, WARM_SETTLED,
                                MeasurementPolicy)
from engine.core.settle import median_precise, warmup_settled
from engine.core.protocol import BLOCKS, WINDOW  # the gates a parent holds a loop with

__all__ = ["LoopResult", "time_loop", "block_size", "STOP_POLICY_MET", "STOP_MAX_TIME",
           "STOP_MAX_ITERS", "STOP_IMPRECISE", "BLOCK_TARGET_NS", "WINDOW", "BLOCKS"]


# Calls faster than this are timed in blocks that last about this long.
BLOCK_TARGET_NS = 1_000_000
BLOCK_MAX_CALLS = 10_000

# Progress is reported at most this often, between iterations, outside the timed interval.
PROGRESS_EVERY_NS = 250_000_000
# Once the minimums are met, the median's interval is checked at most this often (a sort of
# the samples, between iterations, outside the timed interval).
PRECISE_EVERY_NS = 100_000_000


@dataclass(frozen=True)
class LoopResult:
    warmup_ns: tuple[int, ...]
    samples_ns: tuple[int, ...]  # per call: a block's time over block_calls
    warmup_wall_ns: int
    wall_ns: int  # from the first timed iteration's start to the last one's end
    stop_reason: str
    # Python's cyclic garbage collector was off during warm-up and timing (None: the loop
    # ran outside Python, e.g. the LibTorch C++ runner).
    gc_disabled: bool | None = None
    block_calls: int = 1  # calls per timed sample
    # A window's samples: each one's end on the monotonic clock (the parent keeps what
    # fell inside every replica's window). Interleaved: the timed blocks it took.
    sample_ends_ns: tuple[int, ...] | None = None
    blocks: int = 0
    warmup_stop: str = ""  # why warm-up ended (engine/core/policy.py's WARM_*)


def block_size(warmup_ns) -> int:
    """Calls per timed sample: 1 for calls of about BLOCK_TARGET_NS or more (or when warm-up
    timed nothing), else enough calls to fill it, from warm-up's median call."""
    if not warmup_ns:
        return 1
    per_call = sorted(warmup_ns)[len(warmup_ns) // 2]
    if per_call >= BLOCK_TARGET_NS:
        return 1
    return min(BLOCK_MAX_CALLS, math.ceil(BLOCK_TARGET_NS / max(per_call, 1)))


def time_loop(step: Callable[[], int | None], policy: MeasurementPolicy, *,
              clock: Callable[[], int] = time.perf_counter_ns,
              on_progress: Callable[[int, int], None] | None = None,
              gate=None, after_warmup: Callable[[], None] | None = None) -> LoopResult:
    """Warm up (warmup_iters, or fewer once warmup_max_s has passed), then time until BOTH
    min_time_s and min_iters are met (or a max is hit), or as the gate says: gate.mode is
    WINDOW (gate.window(per_sample_ns) -> (start_ns, end_ns) on `clock`, which must then be
    the monotonic clock; gate.sleep_until(ns)) or BLOCKS (gate.next_block(per_sample_ns) ->
    seconds, or None to stop; gate.report(iters, elapsed_ns, met, maxed) after each).
    after_warmup() runs once between warm-up and the first timed call, on no clock: where a
    figure over the timed loop starts (a backend's device peak memory counter is reset there,
    so one-time first-call work such as cuDNN's algorithm search is not in it).

    The cyclic garbage collector is off while the loop runs (as timeit does): a collection
    triggered by the allocation count would land in whichever iteration crossed the
    threshold, a stall that belongs to no call. Reference counting still frees everything
    that is not a cycle. No collection is forced either: memory a collection frees inside a
    run goes back to the system unseen by the kernel's high-water mark (peak RSS)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _loop(step, policy, clock, on_progress, gate, after_warmup)
    finally:
        if was_enabled:
            gc.enable()


class _Sampler:
    """Times one sample: one call, or a block of calls under BLOCK_TARGET_NS."""

    def __init__(self, step, block: int, clock):
        self.step, self.block, self.clock = step, block, clock
        self.calls = range(block)
        self.samples: list[int] = []

    def __call__(self) -> int:
        clock, step = self.clock, self.step
        if self.block == 1:
            t0 = clock()
            own = step()
            t1 = clock()
            self.samples.append(own if own is not None else t1 - t0)
        else:
            t0 = clock()
            for _ in self.calls:
                step()
            t1 = clock()
            self.samples.append((t1 - t0) // self.block)
        return t1


def _loop(step, policy, clock, on_progress, gate=None, after_warmup=None) -> LoopResult:
    warm = []
    self_timed = False
    warm_max_ns = int(policy.warmup_max_s * 1e9)
    warm_stop = WARM_ITERS
    w0 = clock()
    for _ in range(policy.warmup_iters):
        t0 = clock()
        own = step()
        t1 = clock()
        self_timed = own is not None
        warm.append(own if self_timed else t1 - t0)
        if policy.settle_warmup and warmup_settled(warm):
            warm_stop = WARM_SETTLED
            break
        if t1 - w0 >= warm_max_ns:
            warm_stop = WARM_MAX_S
            break
    w1 = clock()
    # A step that measures itself (CUDA events) reports each call: never blocked.
    block = 1 if self_timed else block_size(warm)
    # one timed sample's length, from warm-up: what a parent sizes a replicas' window by
    per_sample = (sorted(warm)[len(warm) // 2] if warm else 0) * block
    sample = _Sampler(step, block, clock)
    done = (tuple(warm), w1 - w0, block, warm_stop)
    if after_warmup is not None:
        after_warmup()
    if gate is not None and gate.mode == WINDOW:
        return _windowed(sample, policy, gate, per_sample, done)
    if gate is not None and gate.mode == BLOCKS:
        return _blocked(sample, policy, gate, per_sample, done)

    min_ns = int(policy.min_time_s * 1e9)
    max_ns = int(policy.max_time_s * 1e9)
    precise_ns = _precise_max_ns(policy)
    min_iters, max_iters = policy.min_iters, policy.max_iters
    start = clock()
    next_report = start + PROGRESS_EVERY_NS
    next_check = start
    while True:
        t1 = sample()
        elapsed = t1 - start
        n = len(sample.samples)
        if n >= min_iters and elapsed >= min_ns and t1 >= next_check:
            if _precise(sample.samples, policy):
                reason = STOP_POLICY_MET
                break
            if elapsed >= precise_ns:
                reason = STOP_IMPRECISE
                break
            next_check = t1 + PRECISE_EVERY_NS
        if elapsed >= max_ns:
            reason = STOP_MAX_TIME
            break
        if n >= max_iters:
            reason = STOP_MAX_ITERS
            break
        if on_progress is not None and t1 >= next_report:
            on_progress(n * block, elapsed)
            next_report = t1 + PROGRESS_EVERY_NS
    return LoopResult(done[0], tuple(sample.samples), done[1], t1 - start, reason,
                      gc_disabled=True, block_calls=block, warmup_stop=done[3])


def _precise_max_ns(policy) -> int:
    """How long timing may go on, minimums met, for the median's interval to narrow."""
    return int(policy.min_time_s * max(policy.precise_max_x, 1.0) * 1e9)


def _precise(samples, policy) -> bool:
    """The median's 95 % interval within median_tol of it (always, at tolerance 0)."""
    return policy.median_tol <= 0 or median_precise(samples, policy.median_tol)


def _windowed(sample, policy, gate, per_sample: int, done) -> LoopResult:
    """A replica: from the parent's start to its end, every replica on the same clock."""
    start_ns, end_ns = gate.window(per_sample)
    gate.sleep_until(start_ns)
    start = sample.clock()
    ends = []
    reason = STOP_POLICY_MET
    while True:
        t1 = sample()
        ends.append(t1)
        if t1 >= end_ns:
            break
        if len(ends) >= policy.max_iters:
            reason = STOP_MAX_ITERS
            break
    return LoopResult(done[0], tuple(sample.samples), done[1], t1 - start, reason,
                      gc_disabled=True, block_calls=done[2], sample_ends_ns=tuple(ends),
                      warmup_stop=done[3])


def _blocked(sample, policy, gate, per_sample: int, done) -> LoopResult:
    """A contender interleaved with others: one block at a time, when the parent says. One
    that has hit a max times nothing more (its rivals may still be catching up)."""
    min_ns, max_ns = int(policy.min_time_s * 1e9), int(policy.max_time_s * 1e9)
    precise_ns = _precise_max_ns(policy)
    timed, blocks, reason, maxed = 0, 0, STOP_POLICY_MET, False
    while (seconds := gate.next_block(per_sample)) is not None:
        if not maxed:
            b0 = sample.clock()
            length = int(seconds * 1e9)
            while True:
                t1 = sample()
                if t1 - b0 >= length or len(sample.samples) >= policy.max_iters:
                    break
            timed += t1 - b0
            blocks += 1
        n = len(sample.samples)
        maxed = timed >= max_ns or n >= policy.max_iters
        met = False
        if maxed:
            reason = STOP_MAX_ITERS if n >= policy.max_iters else STOP_MAX_TIME
        elif n >= policy.min_iters and timed >= min_ns:
            # met: what this contender needs; the parent stops when every one has it
            precise = _precise(sample.samples, policy)
            met = precise or timed >= precise_ns
            reason = STOP_POLICY_MET if precise else STOP_IMPRECISE
        gate.report(n * done[2], timed, met, maxed)
    return LoopResult(done[0], tuple(sample.samples), done[1], timed, reason,
                      gc_disabled=True, block_calls=done[2], blocks=blocks,
                      warmup_stop=done[3])
