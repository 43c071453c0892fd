"""The sequential rule's arithmetic on arrays: one implementation for a single comparison
(engine.analysis.sequential.compare_rounds), a sweep's contests (engine.analysis.contest)
and the seeded simulations of thousands of sweeps that check them.

Input is paired log ratios d (any leading shape, rounds last, NaN where a round is not
paired). Per comparison: n, mean and standard deviation of d, and the same without the
round furthest from their median (what the futility stop judges). The interval at a look
is mean +- t(1 - a / 2, n - 1) * sd / sqrt(n), a the plan's nominal level at that look for
the comparison's alpha (engine.analysis.sequential.nominal_levels); it names a winner when
it clears the margin, equivalent when it lies inside, and otherwise leaves the comparison
undecided, futile when even a favourable spread (the lower FUTILITY_CONFIDENCE limit of
the kept rounds' spread) would not decide it by the plan's last look.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.analysis.looks import CALIBRATION_PATHS, nominal_levels

__all__ = ["PairedStats", "paired_stats", "levels_at", "interval", "futile", "NONE",
           "UNDECIDED_CODE", "WINNER_CODE", "EQUIVALENT_CODE", "SINGLE_CODE"]

# A comparison's state as an array code (sequential.py names them in words).
NONE, UNDECIDED_CODE, WINNER_CODE, EQUIVALENT_CODE, SINGLE_CODE = -1, 0, 1, 2, 3


@dataclass(frozen=True)
class PairedStats:
    """Per comparison (arrays of one shape): paired rounds, mean and standard deviation of
    the log ratios; and mean and standard deviation of the n - 1 kept without the round
    furthest from the median (NaN where there are too few)."""

    n: np.ndarray
    mean: np.ndarray
    sd: np.ndarray
    kept_mean: np.ndarray
    kept_sd: np.ndarray


def paired_stats(d) -> PairedStats:
    """Statistics of log ratios d (rounds on the last axis, NaN where not paired)."""
    d = np.asarray(d, dtype=float)
    ok = ~np.isnan(d)
    n = ok.sum(-1)
    z = np.where(ok, d, 0.0)
    one = np.maximum(n, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = z.sum(-1)
        mean = np.where(n > 0, total / one, np.nan)
        dev = np.where(ok, d - mean[..., None], 0.0)
        sd = np.where(n > 1, np.sqrt((dev * dev).sum(-1) / np.maximum(n - 1, 1)), np.nan)
        # The round furthest from the median is left out (of rounds equally far, the last,
        # as the stable `sorted(d, key=distance)[:-1]` leaves it).
        ranked = np.sort(d, axis=-1)  # NaN sorts last
        low = np.take_along_axis(ranked, ((one - 1) // 2)[..., None], -1)[..., 0]
        high = np.take_along_axis(ranked, (one // 2)[..., None], -1)[..., 0]
        dist = np.where(ok, np.abs(d - ((low + high) / 2)[..., None]), -np.inf)
        last = d.shape[-1] - 1 - np.argmax(dist[..., ::-1], axis=-1)
        dropped = np.take_along_axis(z, last[..., None], -1)[..., 0]
        k = n - 1
        kmean = np.where(k > 0, (total - dropped) / np.maximum(k, 1), np.nan)
        kdev = np.where(ok, d - kmean[..., None], 0.0)
        kss = (kdev * kdev).sum(-1) - (dropped - kmean) ** 2
        ksd = np.where(k > 1, np.sqrt(np.maximum(kss, 0.0) / np.maximum(k - 1, 1)), np.nan)
    return PairedStats(n, mean, sd, kmean, ksd)


def levels_at(first: int, last: int, alpha, look, paths: int | None = None) -> np.ndarray:
    """The nominal level at each look (array) for each comparison's alpha (array or
    number), from the calibrated plan (first, last, alpha); a look before `first` uses the
    first's, after `last` the last's."""
    look = np.asarray(look)
    idx = np.clip(look, first, last) - first
    if np.ndim(alpha) == 0:  # one alpha for all: a lookup
        return np.asarray(nominal_levels(first, last, float(alpha),
                                         paths or CALIBRATION_PATHS))[idx]
    alpha = np.broadcast_to(np.asarray(alpha, dtype=float), look.shape)
    out = np.empty(look.shape)
    for a in np.unique(alpha):
        table = np.asarray(nominal_levels(first, last, float(a), paths or CALIBRATION_PATHS))
        here = alpha == a
        out[here] = table[idx[here]]
    return out


def interval(stats: PairedStats, look, band: float, first: int, last: int, alpha,
             paths: int | None = None):
    """(half-width, state code) of each comparison's interval at its look and alpha:
    WINNER_CODE when it clears the band, EQUIVALENT_CODE inside it, UNDECIDED_CODE,
    SINGLE_CODE for one paired round, NONE for none."""
    from scipy.special import stdtrit

    n, mean, sd = stats.n, stats.mean, stats.sd
    two = n >= 2
    level = levels_at(first, last, alpha, np.where(two, look, first), paths)
    with np.errstate(invalid="ignore"):
        crit = stdtrit(np.maximum(n - 1, 1), 1 - level / 2)
        half = np.where(two, crit * sd / np.sqrt(np.maximum(n, 1)), np.nan)
        lo, hi = mean - half, mean + half
        state = np.where((lo > band) | (hi < -band), WINNER_CODE,
                         np.where((-band < lo) & (hi < band), EQUIVALENT_CODE, UNDECIDED_CODE))
    state = np.where(two, state, np.where(n == 1, SINGLE_CODE, NONE))
    return half, state


def futile(stats: PairedStats, state, band: float, first: int, last: int, alpha,
           min_rounds: int, confidence: float, paths: int | None = None):
    """Undecided comparisons of at least max(first, min_rounds) paired rounds whose kept
    rounds, at the lower `confidence` limit of their spread, would still leave the
    interval at the plan's last look reaching across the margin: no round within the
    budget is likely to decide them. The same as sequential.rounds_needed at that spread
    exceeding `last` (the half-width shrinks with n, so comparing at `last` suffices)."""
    from scipy.special import chdtri, stdtrit

    n = stats.n
    k = n - 1
    eligible = (state == UNDECIDED_CODE) & (n >= max(first, min_rounds))
    last_level = levels_at(first, last, alpha, np.full(np.shape(n), last), paths)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.maximum(k - 1, 1)
        optimistic = stats.kept_sd * np.sqrt(df / chdtri(df, 1 - confidence))
        gap = np.abs(np.abs(stats.kept_mean) - band)
        reach = optimistic * stdtrit(last - 1, 1 - last_level / 2) / np.sqrt(last)
        stop = (gap == 0) | (reach >= gap)
    return eligible & stop
