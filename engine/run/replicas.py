"""Replicas in one window: how long the window is, and what counts in it.

R replicas of one spec are released together into one window on the machine's monotonic
clock (engine.run.executors.window_times), the window long enough for the slowest
replica's min_iters. Each reports its samples with their end times; the machine's
throughput is summed only over the window every replica covered, a sample cut by an edge
counting by the share of it inside, so no replica's early start or late end, timed while
the others had stopped, flatters the sum.
"""

from __future__ import annotations

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


def _inside(r: dict, lo: int, hi: int) -> float:
    """How many of a replica's samples fell inside [lo, hi] (monotonic ns), counting a
    sample cut by an edge by the share of it inside."""
    calls = r.get("block_calls", 1)
    n = 0.0
    for per_call, end in zip(r["samples_ns"], r["sample_ends_ns"]):
        length = per_call * calls
        start = end - length
        overlap = min(end, hi) - max(start, lo)
        if overlap > 0:
            n += overlap / length if length else 1.0
    return n


def combine_replicas(results: list[dict], batch_size: int) -> dict:
    """One result event from every replica's: samples of all (the per-request latency
    distribution across replicas), the window every replica covered, each replica's
    throughput over it (its calls inside it, those cut by an edge in part, times the batch,
    over its length; the run's is their sum), memory summed, and how far the windows'
    starts and ends were apart, flagged above WINDOW_SKEW_FLAG of the window."""
    first = results[0]
    ev = dict(first)
    ev.pop("sample_ends_ns", None)
    ev["samples_ns"] = [x for r in results for x in r["samples_ns"]]
    ev["warmup_ns"] = [x for r in results for x in r["warmup_ns"]]
    ev["warmup_s"] = max(r["warmup_s"] for r in results)
    timed = [r for r in results if r.get("sample_ends_ns")]
    if len(timed) == len(results):
        calls = [r.get("block_calls", 1) for r in results]
        starts = [r["sample_ends_ns"][0] - r["samples_ns"][0] * c
                  for r, c in zip(results, calls)]
        ends = [r["sample_ends_ns"][-1] for r in results]
        lo, hi = max(starts), min(ends)
        if hi <= lo:  # no instant when every replica was timed: nothing to sum over
            ev["broken"] = ("the replicas' windows did not overlap: no common window to sum "
                            "their throughput over")
        common = max(hi - lo, 1)
        ev["measured_s"] = max(r["measured_s"] for r in results)  # each replica's own timing
        ev["window_s"] = common / 1e9
        ev["replica_throughputs"] = [batch_size * c * _inside(r, lo, hi) / (common / 1e9)
                                     for r, c in zip(results, calls)]
        start_skew, end_skew = max(starts) - min(starts), max(ends) - min(ends)
        ev["window_start_skew_ms"], ev["window_end_skew_ms"] = start_skew / 1e6, end_skew / 1e6
        ev["window_skew_frac"] = max(start_skew, end_skew) / common
        if ev["window_skew_frac"] > WINDOW_SKEW_FLAG:
            ev["flags"] = [f"replica windows apart by {ev['window_skew_frac']:.1%} of the "
                           f"common window (flag above {WINDOW_SKEW_FLAG:.0%}): the summed "
                           "throughput counts only the common window"]
    else:  # a runtime that times itself reports no sample ends: each replica on its own
        ev["measured_s"] = max(r["measured_s"] for r in results)
        ev["replica_throughputs"] = [
            batch_size * len(r["samples_ns"]) / (sum(r["samples_ns"]) / 1e9)
            if sum(r["samples_ns"]) else 0.0 for r in results]
        ev["window_start_skew_ms"] = ev["window_end_skew_ms"] = None
    peaks = [r.get("peak_rss_bytes") for r in results]
    if all(p is not None for p in peaks):
        ev["peak_rss_bytes"] = sum(peaks)
        ev["peak_rss_method"] = f"sum over {len(results)} replicas of {first['peak_rss_method']}"
    return ev
