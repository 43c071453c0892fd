"""Statistics derived from raw samples, and the validity verdict.

Percentiles use linear interpolation between order statistics (Hyndman-Fan type 7), the
same definition as numpy's default and DuckDB's quantile_cont, so figures computed here and
in SQL agree. Pure Python: the dashboard imports this without numpy or a framework.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Stats", "summarize", "percentile", "verdict", "p99_confident",
           "NOISY_IQR_RATIO", "TAIL_MEAN_RATIO", "TAIL_P99_RATIO", "P99_MIN_SAMPLES"]

# IQR/median above 10 %: the run was visibly disturbed (torch.utils.benchmark's threshold).
# Dispersion only ever flags a run "noisy": it never makes it invalid, because dropping the
# disturbed processes keeps the lucky ones and biases the figure (a round dropped this way
# was faster than the one kept) while hiding the very noise it reacted to.
NOISY_IQR_RATIO = 0.10
# The tail: stalls that leave the quartiles alone still cost throughput. A mean 10 % above
# the median (27 x 10 ms + 3 x 30 ms: 20 %), or a p99 twice the median, flags the run.
TAIL_MEAN_RATIO = 1.10
TAIL_P99_RATIO = 2.0
# Below this many samples p99 is an extreme order statistic (at 30 it is the second largest
# sample), so wherever it is shown it is marked low-confidence.
P99_MIN_SAMPLES = 100


def p99_confident(count: int | None) -> bool:
    return bool(count) and count >= P99_MIN_SAMPLES


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

    'invalid' is for a broken rule only: the policy not met (too few iterations before
    max_time, too little measured time) or a non-finite figure. Dispersion and the tail make
    a run 'noisy', with the figures that did. A run that stopped at max_iters (a very fast
    model) has all the samples it may keep, so the time floor is not held against it.
    """
    problems = []
    if iterations < min_iters:
        problems.append(f"only {iterations} of the required {min_iters} iterations ran "
                        f"before max_time")
    if measured_s < min_time_s and not hit_max_iters:
        problems.append(f"measured {measured_s:.3f} s, under the required {min_time_s:g} s")
    if not all(math.isfinite(v) for v in (stats.mean, stats.median, stats.max)) \
            or stats.median <= 0:
        problems.append("a non-finite or non-positive latency")
    if problems:
        return "invalid", "; ".join(problems)
    flags = []
    ratio = stats.iqr / stats.median
    if ratio > NOISY_IQR_RATIO:
        flags.append(f"IQR/median {ratio:.1%} above {NOISY_IQR_RATIO:.0%}")
    if stats.mean / stats.median > TAIL_MEAN_RATIO:
        flags.append(f"tail: mean {stats.mean / stats.median - 1:.1%} above the median "
                     f"(threshold {TAIL_MEAN_RATIO - 1:.0%}): stalls")
    elif stats.p99 / stats.median > TAIL_P99_RATIO:
        flags.append(f"tail: p99 {stats.p99 / stats.median:.1f}x the median (threshold "
                     f"{TAIL_P99_RATIO:g}x)")
    return ("noisy", "; ".join(flags)) if flags else ("valid", "")
