"""Statistics derived from raw samples, and the validity verdict.

Percentiles use linear interpolation between order statistics (Hyndman-Fan type 7), the
same definition as numpy's default and DuckDB's quantile_cont, so figures computed here and
in SQL agree. Pure Python: the dashboard imports this without numpy or a framework.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Stats", "summarize", "percentile", "verdict",
           "NOISY_IQR_RATIO", "INVALID_IQR_RATIO"]

# IQR/median thresholds as torch.utils.benchmark uses them: above 10 % the measurement is
# visibly disturbed ("noisy"); above 25 % there was significant environmental influence and
# the median cannot be trusted for a comparison ("invalid").
NOISY_IQR_RATIO = 0.10
INVALID_IQR_RATIO = 0.25


@dataclass(frozen=True)
class Stats:
    count: int
    mean: float
    median: float
    p90: float
    p95: float
    p99: float
    min: float
    max: float
    std: float  # sample standard deviation (n - 1)
    q1: float
    q3: float
    iqr: float
    cv: float  # std / mean


def percentile(sorted_values, q: float) -> float:
    """Type-7 percentile of already sorted values, q in [0, 100]."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("percentile of no values")
    pos = (n - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def summarize(samples) -> Stats:
    xs = sorted(samples)
    n = len(xs)
    if n == 0:
        raise ValueError("no samples to summarize")
    mean = math.fsum(xs) / n
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
    q1, q3 = percentile(xs, 25), percentile(xs, 75)
    return Stats(count=n, mean=mean, median=percentile(xs, 50), p90=percentile(xs, 90),
                 p95=percentile(xs, 95), p99=percentile(xs, 99), min=float(xs[0]),
                 max=float(xs[-1]), std=std, q1=q1, q3=q3, iqr=q3 - q1,
                 cv=std / mean if mean else 0.0)


def verdict(stats: Stats, *, iterations: int, measured_s: float, min_iters: int,
            min_time_s: float, hit_max_iters: bool = False) -> tuple[str, str]:
    """('valid' | 'noisy' | 'invalid', reason). The reason is empty for a valid run.

    A run that stopped at max_iters (a very fast model) has all the samples it may keep,
    so the time floor is not held against it.
    """
    problems = []
    if iterations < min_iters:
        problems.append(f"only {iterations} of the required {min_iters} iterations ran "
                        f"before max_time")
    if measured_s < min_time_s and not hit_max_iters:
        problems.append(f"measured {measured_s:.3f} s, under the required {min_time_s:g} s")
    ratio = stats.iqr / stats.median if stats.median else math.inf
    if ratio > INVALID_IQR_RATIO:
        problems.append(f"IQR/median {ratio:.1%} above {INVALID_IQR_RATIO:.0%}: "
                        f"significant interference during the run")
    if problems:
        return "invalid", "; ".join(problems)
    if ratio > NOISY_IQR_RATIO:
        return "noisy", f"IQR/median {ratio:.1%} above {NOISY_IQR_RATIO:.0%}"
    return "valid", ""
