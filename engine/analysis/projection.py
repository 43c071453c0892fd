"""How many rounds would decide an undecided comparison, at a stated probability.

An undecided comparison says what it would take: the smallest max rounds M such that a
sweep run with `--max-rounds M` (looks at every round from its minimum to M: LookPlan(first,
M), its levels calibrated for M, the futility stop included) decides the comparison by
round M with probability at least PROBABILITY (80 %).

Plugging the observed mean and spread of 3-6 rounds into a power formula says what the
median sweep would need, so it came true about half the time (46-49 % for a 1.1x gap at
5 % noise), and the budget plan's quantile it used beyond the budget was not the plan a
larger budget runs. The probability here is predictive: the paired log ratios' mean and
standard deviation get their posterior given the rounds so far (Jeffreys' prior: sigma^2 ~
(n - 1) s^2 / chi2(n - 1), mu ~ N(mean, sigma^2 / n)), and for each of DRAWS draws a fresh
sweep of up to M rounds is simulated and judged by the rule itself. It is the same rule
(engine/analysis/paired.py's arithmetic, written for standard normal paths shared by every
draw: a path's mean and spread scale with sigma, and which round is furthest from the
median does not change), seeded, so a projection is a pure function of its inputs.
tests/test_projection.py checks in seeded sweeps that the stated 80 % comes true 80 % of
the time within 5 points.

M is searched from the minimum up, doubling the distance, then bisected. A hypothetical
plan is calibrated with PLAN_PATHS null sweeps (a tenth of a budget's: its levels are
within about +-0.003 of what the full calibration gives, ample for a projection) and
cached, so a page of undecided contests costs a few hundred milliseconds once.
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
# Posterior draws, each a simulated sweep: the probability at M is within about +-1.3
# points (binomial standard error at 80 %).
DRAWS = 1000
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
    return u, w, mean, sd, kmean, ksd


def _decided_by(m: int, mu, sigma, band: float, first: int, alpha: float, paths):
    """For posterior draws (mu, sigma: comparisons x draws): whether a fresh sweep with
    looks at rounds first..m decides the comparison by round m."""
    from scipy.special import chdtri, stdtrit

    _, _, zmean, zsd, kmean, ksd = paths
    looks = np.arange(first, m + 1)
    levels = np.asarray(nominal_levels(first, m, alpha, PLAN_PATHS))
    crit = stdtrit(looks - 1, 1 - levels / 2) / np.sqrt(looks)
    mu, sigma = mu[..., None], sigma[..., None]
    sl = slice(first - 1, m)
    gap = np.abs(mu + sigma * zmean[None, :, sl]) - band
    decided = np.abs(gap) > crit * sigma * zsd[None, :, sl]
    # the futility stop at a look that did not decide: even the kept rounds' favourable
    # spread would leave the interval at the last look across the margin
    df = np.maximum(looks - 2, 1)
    favourable = np.sqrt(df / chdtri(df, 1 - FUTILITY_CONFIDENCE))
    reach = stdtrit(m - 1, 1 - levels[-1] / 2) / np.sqrt(m)
    kgap = np.abs(np.abs(mu + sigma * kmean[None, :, sl]) - band)
    stop = ((looks >= max(first, FUTILITY_MIN_ROUNDS)) & ~decided
            & ((kgap == 0) | (sigma * ksd[None, :, sl] * favourable * reach >= kgap)))
    none = len(looks)
    first_decided = np.where(decided.any(-1), decided.argmax(-1), none)
    first_stop = np.where(stop.any(-1), stop.argmax(-1), none)
    return first_decided < first_stop


def _probability(m, n, mean, sd, band, first, alpha, draws) -> np.ndarray:
    """Predictive probability that a sweep with max rounds m decides each comparison."""
    from scipy.special import chdtri

    paths = _paths(draws, MAX_PROJECTED_ROUNDS)
    u, w = paths[0], paths[1]
    n, mean, sd = (np.asarray(x, dtype=float)[:, None] for x in (n, mean, sd))
    import os
    mode = os.environ.get("PMODE", "full")
    sigma = sd * np.sqrt((n - 1) / chdtri(n - 1, u[None, :]))
    if mode == "plugin":
        sigma = sd * np.ones_like(sigma)
        mu = mean + 0 * sigma
    elif mode == "mu":
        sigma = sd * np.ones_like(sigma)
        mu = mean + sigma * w[None, :] / np.sqrt(n)
    else:
        mu = mean + sigma * w[None, :] / np.sqrt(n)
    out = np.empty(len(n))
    block = max(1, _BLOCK // (draws * (m - first + 1)))
    for i in range(0, len(n), block):
        part = slice(i, i + block)
        out[part] = _decided_by(m, mu[part], sigma[part], band, first, alpha, paths).mean(-1)
    return out


def project_many(n, mean, sd, band: float, first: int, alpha: float,
                 draws: int = DRAWS) -> tuple[np.ndarray, np.ndarray]:
    """(rounds, probability) for comparisons of n paired rounds with this mean and
    standard deviation of log ratios (arrays), judged with margin `band` (log scale),
    looks from `first`, at `alpha`: rounds 0 where MAX_PROJECTED_ROUNDS would not do,
    probability at the rounds found (at the cap where none). All searched in lockstep,
    each candidate M once for every comparison that tries it."""
    n, mean, sd = (np.atleast_1d(np.asarray(x, dtype=float)) for x in (n, mean, sd))
    cap = MAX_PROJECTED_ROUNDS
    lo = np.full(len(n), first - 1)  # the largest M known to fall short
    hi = np.full(len(n), cap + 1)  # the smallest M known to reach the probability
    prob = np.zeros(len(n))
    cur = np.full(len(n), first)
    while True:
        active = np.flatnonzero(cur > 0)
        if not active.size:
            break
        for m in np.unique(cur[active]):
            idx = active[cur[active] == m]
            p = _probability(int(m), n[idx], mean[idx], sd[idx], band, first, alpha, draws)
            ok = p >= PROBABILITY
            hi[idx[ok]] = m
            prob[idx[ok]] = p[ok]
            lo[idx[~ok]] = m
            prob[idx[~ok & (m == cap)]] = p[~ok & (m == cap)]
        found = hi <= cap
        grow = np.minimum(cap, first + 2 * (lo - first) + 1)  # first, +1, +3, +7, ...
        cur = np.where(found, (lo + hi) // 2, np.where(lo < cap, grow, 0))
        cur = np.where(found & (hi - lo <= 1), 0, cur)
    return np.where(hi <= cap, hi, 0), prob


@lru_cache(maxsize=4096)
def project(n: int, mean: float, sd: float, band: float, first: int, alpha: float
            ) -> Projection:
    """The projection of one comparison (cached: a page asks again on every rerun)."""
    rounds, prob = project_many([n], [mean], [sd], band, first, alpha)
    return Projection(int(rounds[0]) or None, float(prob[0]))
