"""Replicas in one window: how long the window is, and what counts in it.

R replicas of one spec are released together into one window on the machine's monotonic
clock (engine.run.process.executors.window_times), the window long enough for the slowest
replica's min_iters. Each reports its samples with their end times; the machine's
throughput is summed only over the window every replica covered, a sample cut by an edge
counting by the share of it inside, so no replica's early start or late end, timed while
the others had stopped, flatters the sum.
"""

from __future__ import annotations

from dataclasses import replace

from engine.core.protocol import InferenceResult

__all__ = ["replica_window_s", "combine_replicas", "WINDOW_SKEW_FLAG"]


def replica_window_s(policy, per_sample_ns: int) -> float:
    """The replicas' common window: the policy's min_time, or long enough for the slowest
    replica's min_iters samples (a call, or a block of short calls, from its warm-up) with a
    fifth to spare; a twentieth more so that a replica waking a little late still times
    min_time of its own; at most max_time."""
    return min(policy.max_time_s, max(1.05 * policy.min_time_s + 0.01,
                                      1.2 * policy.min_iters * per_sample_ns / 1e9))


# A replica whose window opened or closed further than this share of the window from the
# others' is flagged on the row: the summed throughput then leans on fewer replicas.
WINDOW_SKEW_FLAG = 0.01


def _inside(r: InferenceResult, lo: int, hi: int) -> float:
    """How many of a replica's samples fell inside [lo, hi] (monotonic ns), counting a
    sample cut by an edge by the share of it inside."""
    n = 0.0
    for per_call, end in zip(r.samples_ns, r.sample_ends_ns):
        length = per_call * r.block_calls
        start = end - length
        overlap = min(end, hi) - max(start, lo)
        if overlap > 0:
            n += overlap / length if length else 1.0
    return n


def combine_replicas(results: list[InferenceResult], batch_size: int) -> InferenceResult:
    """One result from every replica's: samples of all (the per-request latency
    distribution across replicas), the window every replica covered, each replica's
    throughput over it (its calls inside it, those cut by an edge in part, times the batch,
    over its length; the run's is their sum), memory summed, and how far the windows'
    starts and ends were apart, flagged above WINDOW_SKEW_FLAG of the window."""
    first = results[0]
    combined = dict(samples_ns=tuple(x for r in results for x in r.samples_ns),
                    warmup_ns=tuple(x for r in results for x in r.warmup_ns),
                    warmup_s=max(r.warmup_s for r in results), sample_ends_ns=None,
                    measured_s=max(r.measured_s for r in results))  # each replica's own
    if all(r.sample_ends_ns for r in results):
        combined.update(_over_common_window(results, batch_size))
    else:  # a runtime that times itself reports no sample ends: each replica on its own
        combined["replica_throughputs"] = tuple(
            batch_size * len(r.samples_ns) / (sum(r.samples_ns) / 1e9)
            if sum(r.samples_ns) else 0.0 for r in results)
    peaks = [r.peak_rss_bytes for r in results]
    if all(p is not None for p in peaks):
        combined.update(peak_rss_bytes=sum(peaks), peak_rss_method=(
            f"sum over {len(results)} replicas of {first.peak_rss_method}"))
    for name in ("model_peak_bytes", "model_baseline_bytes", "reference_bytes"):
        values = [getattr(r, name) for r in results]
        if all(v is not None for v in values):
            combined[name] = sum(values)
    return replace(first, **combined)


def _over_common_window(results: list[InferenceResult], batch_size: int) -> dict:
    """The window every replica covered, each replica's throughput over it, and the skew
    of the windows' starts and ends."""
    starts = [r.sample_ends_ns[0] - r.samples_ns[0] * r.block_calls for r in results]
    ends = [r.sample_ends_ns[-1] for r in results]
    lo, hi = max(starts), min(ends)
    common = max(hi - lo, 1)
    start_skew, end_skew = max(starts) - min(starts), max(ends) - min(ends)
    frac = max(start_skew, end_skew) / common
    out = dict(window_s=common / 1e9,
               replica_throughputs=tuple(batch_size * r.block_calls * _inside(r, lo, hi)
                                         / (common / 1e9) for r in results),
               window_start_skew_ms=start_skew / 1e6, window_end_skew_ms=end_skew / 1e6,
               window_skew_frac=frac)
    if hi <= lo:  # no instant when every replica was timed: nothing to sum over
        out["broken"] = ("the replicas' windows did not overlap: no common window to sum "
                         "their throughput over")
    if frac > WINDOW_SKEW_FLAG:
        out["flags"] = (f"replica windows apart by {frac:.1%} of the common window (flag "
                        f"above {WINDOW_SKEW_FLAG:.0%}): the summed throughput counts only "
                        "the common window",)
    return out
