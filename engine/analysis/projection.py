"""How many rounds would decide an undecided comparison, at a stated probability.

An undecided comparison says what it would take: the smallest max rounds M such that a
sweep run with `--max-rounds M` (looks at every round from its minimum to M: LookPlan(first,
M), its levels calibrated for M, the futility stop included) decides the comparison by
round M with probability at least PROBABILITY (80 %).

Plugging the observed mean and spread of 3-6 rounds into a half-width formula says what the
median sweep would need and states no probability; it used the budget plan's last quantile
beyond the budget, not the plan a larger budget runs. How often it came true depended on
the case (bench/verdict_rates.py, a fresh sweep with the rounds it named: 69 % at 1.1x and
5 % noise per process, 83 % at 5 % paired noise; the issue measured 46-49 %). The probability here is predictive: the paired log ratios' mean and
standard deviation get their posterior given the rounds so far (Jeffreys' prior: sigma^2 ~
(n - 1) s^2 / chi2(n - 1), mu ~ N(mean, sigma^2 / n)), and for each of DRAWS draws a fresh
sweep of up to M rounds is simulated and judged by the rule itself. It is the same rule
(engine/analysis/paired.py's arithmetic, written for standard normal paths shared by every
draw: a path's mean and spread scale with sigma, and which round is furthest from the
median does not change), seeded, so a projection is a pure function of its inputs.
tests/test_projection.py checks it in seeded sweeps: at 1.1x and 5 % noise per process the
stated 80 % came true in 79 % (2,000 sweeps; 82 % of 4,000). It is a probability over what
the rounds so far leave uncertain, not a promise at every true gap: where the budget
decided most contests (1.1x at 3.5 % noise) the undecided ones look worse than the truth
and 96 % came true; where it decided few (1.05x at 5 %) the few it names fall short (22 %).
After 3-6 noisy rounds the gap may sit near the margin, so many comparisons are told that
even MAX_PROJECTED_ROUNDS reach 80 % only with the probability stated.

M is one of candidates(first) (every count to 8, then a coarser grid): the cap is tried
first (a screen with a fifth of the draws settles those clearly short), then a bisection.
A hypothetical plan is calibrated with PLAN_PATHS null sweeps (a tenth of a budget's: its
levels are within about +-0.003 of what the full calibration gives, ample for a
projection) and cached, so the grid bounds the plans ever calibrated (about a second once
per minimum rounds and alpha) and a page's projection then costs milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from engine.analysis.looks import FUTILITY_CONFIDENCE, FUTILITY_MIN_ROUNDS, nominal_levels
from engine.core.limits import ROUNDS_RANGE

__all__ = ["Projection", "project", "project_many", "PROBABILITY", "DRAWS", "PLAN_PATHS",
           "MAX_PROJECTED_ROUNDS", "PROJECTION_SEED"]

PROBABILITY = 0.80
# Posterior draws, each a simulated sweep: the probability at M is within about +-1.8
# points (binomial standard error at 80 %).
DRAWS = 500
PROJECTION_SEED = 20261127
PLAN_PATHS = 20_000
# The most rounds a sweep can be asked for (--max-rounds): beyond it, "more than".
MAX_PROJECTED_ROUNDS = ROUNDS_RANGE[1]
# How many (draw x look) cells one block of the simulation holds at most (memory).
_BLOCK = 4_000_000


@dataclass(frozen=True)
class Projection:
    """rounds: the smallest max rounds that decides the comparison with probability at
    least PROBABILITY (None: not within MAX_PROJECTED_ROUNDS); probability: the
    predictive probability at `rounds` (at MAX_PROJECTED_ROUNDS when None)."""

    rounds: int | None
    probability: float


@lru_cache(maxsize=4)
def _paths(draws: int, cap: int):
    """Standard normal paths of `cap` rounds, their running mean and standard deviation,
    the same without the round furthest from the median (n >= 3), and the uniform and
    normal numbers that turn a comparison's statistics into posterior draws."""
    rng = np.random.default_rng(PROJECTION_SEED)
    u = rng.random(draws)
    w = rng.standard_normal(draws)
    z = rng.standard_normal((draws, cap))
    r = np.arange(1, cap + 1)
    s1, s2 = np.cumsum(z, axis=1), np.cumsum(z * z, axis=1)
    mean = s1 / r
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt(np.maximum(s2 - r * mean * mean, 0.0) / (r - 1))
    kmean, ksd = np.full_like(mean, np.nan), np.full_like(mean, np.nan)
    for n in range(3, cap + 1):
        head = z[:, :n]
        dist = np.abs(head - np.median(head, axis=1)[:, None])
        # the last of equally far rounds, as the rule's stable sort drops
        drop = head[np.arange(draws), n - 1 - np.argmax(dist[:, ::-1], axis=1)]
        k1, k2 = s1[:, n - 1] - drop, s2[:, n - 1] - drop * drop
        kmean[:, n - 1] = k1 / (n - 1)
        ksd[:, n - 1] = np.sqrt(np.maximum(k2 - (n - 1) * kmean[:, n - 1] ** 2, 0.0) / (n - 2))
    f32 = np.float32
    return u, w, mean.astype(f32), sd.astype(f32), kmean.astype(f32), ksd.astype(f32)


def _decided_by(m: int, mu, sigma, band: float, first: int, alpha: float, paths):
    """For posterior draws (mu, sigma: comparisons x draws): whether a fresh sweep with
    looks at rounds first..m decides the comparison by round m."""
    from scipy.special import chdtri, stdtrit

    _, _, zmean, zsd, kmean, ksd = paths
    looks = np.arange(first, m + 1)
    levels = np.asarray(nominal_levels(first, m, alpha, PLAN_PATHS))
    crit = (stdtrit(looks - 1, 1 - levels / 2) / np.sqrt(looks)).astype(np.float32)
    mu, sigma = mu[..., None], sigma[..., None]
    sl = slice(first - 1, m)
    gap = np.abs(mu + sigma * zmean[None, :, sl]) - band
    decided = np.abs(gap) > crit * sigma * zsd[None, :, sl]
    # the futility stop at a look that did not decide: even the kept rounds' favourable
    # spread would leave the interval at the last look across the margin
    df = np.maximum(looks - 2, 1)
    favourable = np.sqrt(df / chdtri(df, 1 - FUTILITY_CONFIDENCE)).astype(np.float32)
    reach = np.float32(stdtrit(m - 1, 1 - levels[-1] / 2) / np.sqrt(m))
    kgap = np.abs(np.abs(mu + sigma * kmean[None, :, sl]) - band)
    stop = ((looks >= max(first, FUTILITY_MIN_ROUNDS)) & ~decided
            & ((kgap == 0) | (sigma * ksd[None, :, sl] * favourable * reach >= kgap)))
    none = len(looks)
    first_decided = np.where(decided.any(-1), decided.argmax(-1), none)
    first_stop = np.where(stop.any(-1), stop.argmax(-1), none)
    return first_decided < first_stop


def _draws(n, mean, sd, draws: int):
    """Posterior draws of each comparison's (mu, sigma): comparisons x draws, float32."""
    from scipy.special import chdtri

    u, w = (x[:draws] for x in _paths(max(draws, DRAWS), MAX_PROJECTED_ROUNDS)[:2])
    scale = np.empty((len(n), draws))
    for k in np.unique(n):  # sigma / s: one chi-square transform per count of rounds
        scale[n == k] = np.sqrt((k - 1) / chdtri(k - 1, u))
    sigma = sd[:, None] * scale
    mu = mean[:, None] + sigma * w[None, :] / np.sqrt(n)[:, None]
    return mu.astype(np.float32), sigma.astype(np.float32)  # half the memory traffic


def _probability(m, mu, sigma, band, first, alpha) -> np.ndarray:
    """Predictive probability that a sweep with max rounds m decides each comparison,
    from its posterior draws."""
    draws = mu.shape[1]
    paths = tuple(x[:draws] for x in _paths(max(draws, DRAWS), MAX_PROJECTED_ROUNDS))
    out = np.empty(len(mu))
    block = max(1, _BLOCK // (draws * (m - first + 1)))
    for i in range(0, len(mu), block):
        part = slice(i, i + block)
        out[part] = _decided_by(m, mu[part], sigma[part], band, first, alpha, paths).mean(-1)
    return out


def candidates(first: int) -> list[int]:
    """The max rounds a projection names: every count to 8, then a coarser grid to
    MAX_PROJECTED_ROUNDS (a projection is "about": the grid bounds how many plans are ever
    calibrated for it)."""
    grid = [*range(2, 9), 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80,
            MAX_PROJECTED_ROUNDS]
    return [first] + [g for g in grid if first < g <= MAX_PROJECTED_ROUNDS]


def project_many(n, mean, sd, band: float, first: int, alpha: float,
                 draws: int = DRAWS) -> tuple[np.ndarray, np.ndarray]:
    """(rounds, probability) for comparisons of n paired rounds with this mean and
    standard deviation of log ratios (arrays), judged with margin `band` (log scale),
    looks from `first`, at `alpha`: rounds 0 where MAX_PROJECTED_ROUNDS would not do,
    probability at the rounds found (at the cap where none). A bisection over
    candidates(first), in lockstep: each candidate once for every comparison trying it."""
    n, mean, sd = (np.atleast_1d(np.asarray(x, dtype=float)) for x in (n, mean, sd))
    grid = np.asarray(candidates(first))
    top = len(grid) - 1
    # The cap first: a comparison it would not decide is answered there. A screen with a
    # fifth of the draws settles those clearly short (4 standard errors below) at a fifth
    # of the cost; the rest are simulated in full.
    cap, screen = int(grid[top]), max(draws // 5, 1)
    mu, sigma = _draws(n, mean, sd, draws)
    prob = _probability(cap, mu[:, :screen], sigma[:, :screen], band, first, alpha)
    full = np.flatnonzero(prob >= PROBABILITY - 4 * np.sqrt(0.16 / screen))
    prob[full] = _probability(cap, mu[full], sigma[full], band, first, alpha)
    lo = np.full(len(n), -1)  # the largest index known to fall short
    hi = np.where(prob >= PROBABILITY, top, top + 1)  # the smallest known to reach it
    lo[hi > top] = top
    while True:
        active = np.flatnonzero(hi - lo > 1)
        if not active.size:
            break
        mid = (lo + hi) // 2
        for i in np.unique(mid[active]):
            idx = active[mid[active] == i]
            p = _probability(int(grid[i]), mu[idx], sigma[idx], band, first, alpha)
            ok = p >= PROBABILITY
            hi[idx[ok]] = i
            lo[idx[~ok]] = i
            prob[idx[ok]] = p[ok]
    return np.where(hi <= top, grid[np.minimum(hi, top)], 0), prob


@lru_cache(maxsize=4096)
def project(n: int, mean: float, sd: float, band: float, first: int, alpha: float
            ) -> Projection:
    """The projection of one comparison (cached: a page asks again on every rerun)."""
    rounds, prob = project_many([n], [mean], [sd], band, first, alpha)
    return Projection(int(rounds[0]) or None, float(prob[0]))
