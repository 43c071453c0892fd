"""A rough time estimate for a sweep, before launch.

Per run: model build, first forward, warm-up, then max(min_time, min_iters x latency),
capped at max_time; per worker group and round: the framework import. Latency comes from
the newest stored median for the same configuration, else from FLOPs and the throughput
this machine reached before (GFLOP/s per thread), else from a conservative default. It is
labelled rough on the page: first runs of a model are guesses.
"""

from __future__ import annotations

from engine.run.process.runner import worker_groups
from engine.scenarios.inference.spec import RunSpec

__all__ = ["estimate_seconds", "IMPORT_S", "BUILD_S", "DEFAULT_GFLOPS_PER_THREAD"]

IMPORT_S = {"torch": 5.0, "tensorflow": 6.0, "selftest": 0.2}  # measured here, cold cache
BUILD_S = {"torch": 0.6, "tensorflow": 3.0, "selftest": 0.0}
DEFAULT_GFLOPS_PER_THREAD = 8.0  # efficientnet_b0 eager reached 6-12 GFLOP/s per core here


def estimate_seconds(specs: list[RunSpec], rounds: int, *, known_latency_s=None,
                     flops_per_sample=None, gflops_per_thread=None) -> float:
    """known_latency_s(spec) -> seconds or None; flops_per_sample(spec) -> FLOPs or None;
    gflops_per_thread(framework) -> measured GFLOP/s per thread or None."""
    known_latency_s = known_latency_s or (lambda s: None)
    flops_per_sample = flops_per_sample or (lambda s: None)
    gflops_per_thread = gflops_per_thread or (lambda f: None)
    total = 0.0
    for group in worker_groups(specs):
        total += IMPORT_S.get(group[0].framework, 5.0)
        for s in group:
            lat = known_latency_s(s)
            if lat is None:
                flops = flops_per_sample(s) or 1e9
                rate = (gflops_per_thread(s.framework) or DEFAULT_GFLOPS_PER_THREAD)
                lat = flops * s.batch_size / (rate * 1e9 * s.intra_threads)
            p = s.policy
            warm = min(p.warmup_iters * lat, max(p.warmup_max_s, lat))
            timed = min(max(p.min_time_s, p.min_iters * lat), p.max_time_s + lat)
            energy = max(p.energy_s, lat) if p.energy_s else 0.0  # its loop, after timing
            total += BUILD_S.get(s.framework, 1.0) + lat + warm + timed + energy
    return total * rounds
