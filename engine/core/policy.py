"""When to stop timing: the measurement policy, and the names of the ways a timed loop ends."""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.errors import UserError
from engine.core.limits import ENERGY_S_RANGE, float_range, int_range

__all__ = ["MeasurementPolicy", "STOP_POLICY_MET", "STOP_MAX_TIME", "STOP_MAX_ITERS",
           "STOP_IMPRECISE", "WARM_SETTLED", "WARM_ITERS", "WARM_MAX_S", "PARENT_CORES_ENV",
           "WORKER_START_ENV", "WEIGHTS_ENV"]

# Set in a pinned worker's environment: the cores its parent moved itself to (the worker
# has the rest). A worker without it was not pinned.
PARENT_CORES_ENV = "BENCH_PARENT_CORES"
# Set in a worker forked from a fork server (engine/worker/zygote.py): "fork". A worker
# without it was spawned, and imported its framework itself.
WORKER_START_ENV = "BENCH_WORKER_START"
# Set by a runner on this machine: its folder of catalog models' calibrated weights, which
# the first worker to build a model writes and later ones read (engine/worker/weights.py).
WEIGHTS_ENV = "BENCH_WEIGHTS_DIR"

STOP_POLICY_MET = "policy met"  # the minimums, and the median's interval within median_tol
STOP_MAX_TIME = "max_time reached"
STOP_MAX_ITERS = "max_iters reached"
# the minimums met, the median's interval still wider than median_tol after precise_max_x
# times min_time_s: the run is valid, its interval says how sure its median is
STOP_IMPRECISE = "precise_max reached"

# Why warm-up ended (a record's extra["warmup_stop"]).
WARM_SETTLED = "settled"  # engine/core/settle.py's rule
WARM_ITERS = "warmup_iters reached"
WARM_MAX_S = "warmup_max_s reached"


@dataclass(frozen=True)
class MeasurementPolicy:
    """When to stop timing.

    Defaults: up to 10 warm-up iterations let allocators, caches and lazy initialisation
    settle (the very first forward is timed apart as first_forward_s); warm-up also ends
    once it has lasted warmup_max_s (1 s), because a model that takes a second per call is
    warm after one or two calls, and ten would cost more than the measurement itself.
    Then timing continues until
    BOTH 2 s and 30 iterations are reached: 30 samples put p90 and the quartiles between real
    samples, and 2 s spans many scheduler ticks, so one preemption cannot dominate the median.
    max_time_s bounds a slow model; stopping there before min_iters makes the run invalid.

    Both stop when they have what they need (issue 39; the rules in engine/core/settle.py):
    warm-up ends as soon as it has settled (settle_warmup: the median of its last 3 calls
    within 1 % of the 3 before), at the latest at the caps above; timing past the minimums
    goes on until the median's distribution-free 95 % interval is within median_tol of it
    on both sides, for at most precise_max_x times min_time_s in all (0 tolerance: stop at
    the minimums). The minimums are never shortened. median_tol is 5 %, not 1 %: a
    process's median is read against processes that differ by 6-17 %, and over 9 stored
    default sweeps replayed (bench/settle.py --replay) 5 % gave as much precision per second
    of wall time as 1 % (the paired residual 7.2 against 6.8 %, 1.05x against 1.02x the
    minimums' per wall second) in 12 s less timing a sweep (46.5 against 58.1 s): at 1 %
    the rule ended 6 of those 108 runs and the cap the rest, at 5 % about 69 would end
    before the cap.
    """

    warmup_iters: int = 10
    warmup_max_s: float = 1.0
    min_time_s: float = 2.0
    min_iters: int = 30
    max_time_s: float = 60.0
    max_iters: int = 100_000
    # >0: after the timed loop, an energy loop of at least this many seconds (issue 28;
    # engine/worker/energy.py): it never shares a second with the latency samples.
    energy_s: float = 0.0
    settle_warmup: bool = True
    median_tol: float = 0.05
    precise_max_x: float = 2.0

    def validate(self) -> "MeasurementPolicy":
        int_range("warmup_iters", self.warmup_iters, 0, 10_000)
        int_range("min_iters", self.min_iters, 1, 100_000)
        int_range("max_iters", self.max_iters, self.min_iters, 1_000_000)
        float_range("warmup_max_s", self.warmup_max_s, 0.0, 3600.0)
        float_range("min_time_s", self.min_time_s, 0.0, 3600.0)
        float_range("max_time_s", self.max_time_s, max(self.min_time_s, 0.001), 86_400.0)
        float_range("median_tol", self.median_tol, 0.0, 0.5)
        float_range("precise_max_x", self.precise_max_x, 1.0, 100.0)
        if not isinstance(self.settle_warmup, bool):
            raise UserError(f"settle_warmup: {self.settle_warmup!r} is not true or false",
                            field="settle_warmup")
        if self.energy_s != 0:
            lo, hi = ENERGY_S_RANGE
            if (isinstance(self.energy_s, bool) or not isinstance(self.energy_s, (int, float))
                    or not lo <= self.energy_s <= hi):  # NaN fails the comparison too
                raise UserError(f"energy_s: {self.energy_s!r} is out of range; allowed: 0 "
                                f"(no energy loop) or {lo:g}..{hi:g} seconds",
                                field="energy_s")
        return self
