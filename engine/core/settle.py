"""When warm-up and timing have what they need (issue 39): the two stated rules a timed loop
stops by, framework-free so that the worker's loop (engine/worker/measure.py), the tests'
fixed samples and the seeded simulations use the same code.

- Warm-up has settled when the median of its last WARM_K calls is within WARM_TOL of the
  median of the WARM_K before them (so at least 2 x WARM_K calls, the very first call timed
  apart as first_forward_s). Medians, not means: one preempted call does not keep a settled
  loop warming, nor end an unsettled one.
- Timing has what it needs when the median's distribution-free 95 % interval (the order
  statistics at n/2 -+ 1.96 sqrt(n)/2, which assumes only independent samples of one
  distribution) is at most MEDIAN_TOL of the median on either side.
"""

from __future__ import annotations

import math

__all__ = ["WARM_K", "WARM_TOL", "MEDIAN_TOL", "warmup_settled", "median_interval",
           "median_precise", "STOP_SETTLED", "STOP_PRECISE"]

WARM_K = 3
WARM_TOL = 0.01
MEDIAN_TOL = 0.05  # why 5 %: engine/core/policy.MeasurementPolicy
Z95 = 1.959963984540054

STOP_SETTLED = "warm-up settled"
STOP_PRECISE = "median's interval within 5 %"


def _median(xs) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def warmup_settled(warm_ns, k: int = WARM_K, tol: float = WARM_TOL) -> bool:
    """True when the last k calls' median is within tol of the k calls' before it."""
    if len(warm_ns) < 2 * k:
        return False
    prev = _median(warm_ns[-2 * k:-k])
    return prev > 0 and abs(_median(warm_ns[-k:]) - prev) <= tol * prev


def median_interval(samples) -> tuple[float, float] | None:
    """The distribution-free 95 % interval of the median: (x_(j), x_(k)) with
    j = floor(n/2 - z sqrt(n)/2), k = ceil(1 + n/2 + z sqrt(n)/2) (1-based), or None for
    under 6 samples (no pair of order statistics covers 95 % of the median's law)."""
    n = len(samples)
    if n < 6:
        return None
    s = sorted(samples)
    half = Z95 * math.sqrt(n) / 2
    j = max(1, math.floor(n / 2 - half))
    k = min(n, math.ceil(1 + n / 2 + half))
    return float(s[j - 1]), float(s[k - 1])


def median_precise(samples, tol: float = MEDIAN_TOL) -> bool:
    """True when the median's 95 % interval lies within tol of the median on both sides."""
    ci = median_interval(samples)
    if ci is None:
        return False
    m = _median(samples)
    return m > 0 and m - ci[0] <= tol * m and ci[1] - m <= tol * m
