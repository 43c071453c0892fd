"""Where a sweep's variation comes from: the machine's drift between rounds, which pairing
cancels, and the noise pairing leaves, which a verdict must beat; and what was recorded
while the runs ran (steal, other processes) as the likely cause.

A two-way model without interaction on log round medians, configuration + round +
residual, least squares over the cells measured (extra rounds run only undecided
configurations, so the design is unbalanced; backfitting converges to the fit). Pure
Python, for the dashboard as much as the CLI.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

__all__ = ["NoiseModel", "noise_model", "fit_two_way", "likely_cause", "drift_cause", "STEAL_NOTABLE",
           "OTHERS_NOTABLE"]

# Interference worth naming as a noisy verdict's likely cause: shares of the worker's cores.
STEAL_NOTABLE = 0.02
OTHERS_NOTABLE = 0.05


@dataclass(frozen=True)
class NoiseModel:
    """Log round medians as configuration + round + residual (a two-way model without
    interaction, least squares over the cells measured). The round effects are the drift
    every configuration of a round shared, which pairing cancels; the residual is the
    noise pairing leaves, the noise a verdict must beat."""

    residual: float  # residual standard deviation (log scale), per configuration and round
    drift: float  # max - min of the round effects (log scale)
    df: int  # residual degrees of freedom
    configurations: int
    rounds: int
    round_effects: dict  # round -> effect (log scale, centred)

    @property
    def residual_pct(self) -> float:
        return 100 * math.expm1(self.residual)

    @property
    def drift_pct(self) -> float:
        return 100 * math.expm1(self.drift)

    @property
    def slowest(self) -> int:
        return max(self.round_effects, key=self.round_effects.get)

    @property
    def fastest(self) -> int:
        return min(self.round_effects, key=self.round_effects.get)


def _quiet(results) -> list:
    """Configurations measured without our neighbour: its busy phases are the setting a
    contention run asks for, not the machine's noise or drift."""
    return [r for r in results if r.contention == "none"]


def noise_model(results) -> NoiseModel | None:
    """Fit the two-way model to the round medians of configurations measured in at least
    two rounds, without our neighbour; None without a residual degree of freedom (fewer
    than 2 configurations or 2 rounds)."""
    return fit_two_way({r.key: {k: math.log(v) for k, v in r.round_medians.items()}
                        for r in _quiet(results) if len(r.round_medians) >= 2})


def fit_two_way(cells: dict) -> NoiseModel | None:
    """The two-way fit itself: cells maps a configuration to {round: log value} (a round
    is anything measured once by every configuration: a round of a sweep, a sweep of a
    set); None without a residual degree of freedom."""
    rounds = sorted({k for c in cells.values() for k in c})
    n = sum(len(c) for c in cells.values())
    df = n - len(cells) - len(rounds) + 1
    if len(cells) < 2 or len(rounds) < 2 or df < 1:
        return None
    mu = {c: statistics.fmean(v.values()) for c, v in cells.items()}
    rho = dict.fromkeys(rounds, 0.0)
    for _ in range(200):  # backfitting converges to the least-squares fit of an unbalanced
        new = {r: statistics.fmean(v[r] - mu[c] for c, v in cells.items() if r in v)
               for r in rounds}  # design (every round shares configurations with others)
        centre = statistics.fmean(new.values())
        new = {r: e - centre for r, e in new.items()}
        mu = {c: statistics.fmean(y - new[r] for r, y in v.items()) for c, v in cells.items()}
        moved = max(abs(new[r] - rho[r]) for r in rounds)
        rho = new
        if moved < 1e-12:
            break
    rss = sum((y - mu[c] - rho[r]) ** 2 for c, v in cells.items() for r, y in v.items())
    return NoiseModel(math.sqrt(rss / df), max(rho.values()) - min(rho.values()), df,
                      len(cells), len(rounds), rho)


def likely_cause(results) -> str:
    """Names what most likely made these configurations' rounds disagree, from what was
    recorded while they ran (steal, other processes), or says nothing was recorded."""
    steal = max((r.steal for r in results if r.steal is not None), default=None)
    others = max((r.others for r in results if r.others is not None), default=None)
    causes = []
    if steal is not None and steal >= STEAL_NOTABLE:
        causes.append(f"steal took {steal:.0%} of a run")
    if others is not None and others >= OTHERS_NOTABLE:
        causes.append(f"other processes took {others:.0%} of a run's cores")
    if causes:
        return "likely cause: " + " and ".join(causes)
    if steal is None and others is None:
        return "no interference was recorded for these runs"
    return ("no steal or other-process load above "
            f"{STEAL_NOTABLE:.0%}/{OTHERS_NOTABLE:.0%} was measured: the spread is between "
            "the processes themselves")


def _round_load(results, round_no: int, i: int) -> float | None:
    values = [r.round_load[round_no][i] for r in results
              if round_no in r.round_load and r.round_load[round_no][i] is not None]
    return statistics.fmean(values) if values else None


def drift_cause(results, model: NoiseModel) -> str:
    """What the slowest round recorded against the fastest one (mean steal and other
    processes' CPU over its runs), naming it as the drift's likely cause, or says nothing
    was recorded or nothing stood out."""
    slow, fast = model.slowest, model.fastest
    results = _quiet(results)
    steal = [_round_load(results, r, 0) for r in (slow, fast)]
    others = [_round_load(results, r, 1) for r in (slow, fast)]
    if steal[0] is None and others[0] is None:
        return "no interference was recorded for these runs"
    causes = []
    if steal[0] is not None and steal[0] - (steal[1] or 0.0) >= STEAL_NOTABLE:
        causes.append(f"steal took {steal[0]:.0%} of its runs' cores "
                      f"({steal[1] or 0.0:.0%} in round {fast})")
    if others[0] is not None and others[0] - (others[1] or 0.0) >= OTHERS_NOTABLE:
        causes.append(f"other processes took {others[0]:.0%} of its runs' cores "
                      f"({others[1] or 0.0:.0%} in round {fast})")
    if causes:
        return f"likely cause: in round {slow}, the slowest, " + " and ".join(causes)
    return (f"round {slow}, the slowest, recorded no more steal or other-process load than "
            f"round {fast}: the machine itself (clock, memory, caches) or load outside the "
            "measured cores")
