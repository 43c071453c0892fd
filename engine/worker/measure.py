"""The timing loop. No printing, no framework imports: a backend hands it one `step`.

`step()` runs one forward and makes its result real (synchronised, materialised). It returns
None, and the loop times it with `clock` (perf_counter_ns), or returns its own duration in ns
when the device measured it (CUDA events), since a CPU timer around asynchronous GPU work
measures the launch, not the work.

A call under about 1 ms is timed in blocks (as torch.utils.benchmark's blocked_autorange
does): one timer read around k calls, the sample being the block's time over k. Timer
granularity and one call's jitter then no longer decide the quartiles, and the loop's own
overhead is paid once per block. The block size is stored with the samples.
"""

from __future__ import annotations

import gc
import math
import time
from dataclasses import dataclass
from typing import Callable

from engine.spec.policy import (STOP_MAX_ITERS, STOP_MAX_TIME, STOP_POLICY_MET,
                                MeasurementPolicy)

__all__ = ["LoopResult", "time_loop", "block_size", "STOP_POLICY_MET", "STOP_MAX_TIME",
           "STOP_MAX_ITERS", "BLOCK_TARGET_NS"]

# Calls faster than this are timed in blocks that last about this long.
BLOCK_TARGET_NS = 1_000_000
BLOCK_MAX_CALLS = 10_000

# Progress is reported at most this often, between iterations, outside the timed interval.
PROGRESS_EVERY_NS = 250_000_000


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
              before_timing: Callable[[], None] | None = None) -> LoopResult:
    """Warm up (warmup_iters, or fewer once warmup_max_s has passed), then time until BOTH
    min_time_s and min_iters are met (or a max is hit).

    The cyclic garbage collector is off while the loop runs (as timeit does): a collection
    triggered by the allocation count would land in whichever iteration crossed the
    threshold, a stall that belongs to no call. Reference counting still frees everything
    that is not a cycle. No collection is forced either: memory a collection frees inside a
    run goes back to the system unseen by the kernel's high-water mark (peak RSS)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _loop(step, policy, clock, on_progress, before_timing)
    finally:
        if was_enabled:
            gc.enable()


def _loop(step, policy, clock, on_progress, before_timing=None) -> LoopResult:
    warm = []
    self_timed = False
    warm_max_ns = int(policy.warmup_max_s * 1e9)
    w0 = clock()
    for _ in range(policy.warmup_iters):
        t0 = clock()
        own = step()
        t1 = clock()
        self_timed = own is not None
        warm.append(own if self_timed else t1 - t0)
        if t1 - w0 >= warm_max_ns:
            break
    w1 = clock()
    # A step that measures itself (CUDA events) reports each call: never blocked.
    block = 1 if self_timed else block_size(warm)
    calls = range(block)

    min_ns = int(policy.min_time_s * 1e9)
    max_ns = int(policy.max_time_s * 1e9)
    min_iters, max_iters = policy.min_iters, policy.max_iters
    samples: list[int] = []
    append = samples.append
    if before_timing is not None:  # replicas: wait here until every one is warm
        before_timing()
    start = clock()
    next_report = start + PROGRESS_EVERY_NS
    while True:
        if block == 1:
            t0 = clock()
            own = step()
            t1 = clock()
            append(own if own is not None else t1 - t0)
        else:
            t0 = clock()
            for _ in calls:
                step()
            t1 = clock()
            append((t1 - t0) // block)
        elapsed = t1 - start
        n = len(samples)
        if n >= min_iters and elapsed >= min_ns:
            reason = STOP_POLICY_MET
            break
        if elapsed >= max_ns:
            reason = STOP_MAX_TIME
            break
        if n >= max_iters:
            reason = STOP_MAX_ITERS
            break
        if on_progress is not None and t1 >= next_report:
            on_progress(n * block, elapsed)
            next_report = t1 + PROGRESS_EVERY_NS
    return LoopResult(tuple(warm), tuple(samples), w1 - w0, t1 - start, reason,
                      gc_disabled=True, block_calls=block)
