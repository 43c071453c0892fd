"""Replicas in one window: how long the window is, and what counts in it.

R replicas of one spec are released together into one window on the machine's monotonic
clock (engine.run.process.executors.window_times), the window long enough for the slowest
replica's min_iters. Each reports its samples with their end times; the machine's
throughput is summed only over the window every replica covered, a sample cut by an edge
counting by the share of it inside, so no replica's early start or late end, timed while
the others had stopped, flatters the sum. `Replicas` gathers the replicas' events while the
Runner drives them (who is armed, each result, the first failure) and makes their one
ending; the run's cores are every replica's, each physical core counted once.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable

from engine.scenarios.inference.spec import RunSpec
from engine.core.protocol import Armed, Failed, Ready, Result
from engine.scenarios.inference.messages import InferenceResult
from engine.run.process.drive import Worker

__all__ = ["replica_window_s", "combine_replicas", "WINDOW_SKEW_FLAG", "Replicas",
           "with_every_replicas_cores", "replicas_cores_used"]


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


class Replicas:
    """What a replicated run gathers from its replicas' events (the Pool's handler): who is
    armed, each one's result, the first failure; and the one ending they make."""

    def __init__(self, rid: str, spec: RunSpec, release: Callable[[int], None]):
        self.rid, self.spec, self.release = rid, spec, release
        self.armed: dict[int, int] = {}  # worker index -> its sample's length
        self.results: dict[int, InferenceResult] = {}
        self.failure: Failed | None = None

    def on(self, w: Worker, ev) -> None:
        n = self.spec.replicas
        label = f"replica {w.index + 1} of {n}"
        if ev is None and w.index not in self.results:  # it exited without its result
            status, reason, sig = w.exit()
            self.failure = self.failure or Failed(self.rid, status, f"{label}: {reason}",
                                                  signal=sig)
        elif isinstance(ev, Armed):
            self.armed[w.index] = ev.per_sample_ns or 0
            if len(self.armed) == n:  # every replica warm: one window for all
                self.release(max(self.armed.values()))
        elif isinstance(ev, InferenceResult):
            self.results[w.index] = ev
        elif isinstance(ev, Failed):  # the digest of a user's model travels with it
            self.failure = self.failure or replace(ev, reason=f"{label}: {ev.reason}")

    def ending(self) -> Result | Failed:
        n = self.spec.replicas
        if self.failure is None and len(self.results) < n:
            self.failure = Failed(self.rid, "killed", f"{n - len(self.results)} of {n} "
                                                      "replicas ended without a result")
        if self.failure is not None:
            return replace(self.failure, ended_at=time.time())
        return combine_replicas([self.results[i] for i in range(n)], self.spec.batch_size)


def with_every_replicas_cores(ready: Ready | None, workers: list[Worker]) -> Ready | None:
    """The run's Ready with the physical cores of every replica, each counted once (what
    Cost divides the summed throughput by): replicas on hardware threads of one core share
    it, and a sum would count it twice. Not known (left out) when a replica's worker did not
    name its cores."""
    if ready is None:
        return ready
    return replace(ready, machine={**ready.machine,
                                   "cores_used": replicas_cores_used(
                                       [w.ready.machine if w.ready else {} for w in workers])})


def replicas_cores_used(machines: list[dict]) -> int | None:
    """Distinct physical cores over the replicas' machine facts (their core_ids)."""
    ids = [m.get("core_ids") for m in machines]
    if not ids or not all(ids):
        return None
    return len({c for i in ids for c in i})
