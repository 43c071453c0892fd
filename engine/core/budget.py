"""How far a sweep may go past its minimum rounds to decide its contests."""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.errors import UserError
from engine.core.limits import (DEFAULT_MAX_ROUNDS, DEFAULT_ROUNDS, DEFAULT_VERDICT_MARGIN,
                                ROUNDS_RANGE, TIME_BUDGET_RANGE, VERDICT_MARGIN_RANGE,
                                float_range, int_range)

__all__ = ["RoundBudget", "round_floor_s", "default_max_rounds", "IMPORT_FLOOR_S"]

# The least a worker's start costs here before it times anything (interpreter, framework
# import from a warm page cache): what a budget must at least leave per worker group.
IMPORT_FLOOR_S = {"torch": 1.0, "tensorflow": 2.0}


def round_floor_s(specs) -> float:
    """A lower bound on one round's wall time, known before anything ran: every run times
    at least its policy's min_time_s, and every worker group starts a framework."""
    last, total = None, 0.0
    for s in specs:
        key = (s.framework, s.intra_threads, s.inter_threads, s.device)
        if key != last:  # consecutive specs of one key share a worker (worker_groups)
            total += IMPORT_FLOOR_S.get(s.framework, 0.0)
            last = key
        total += s.policy.min_time_s
    return total


def default_max_rounds(rounds: int) -> int:
    """DEFAULT_MAX_ROUNDS, or the minimum when that is higher; one round asked for is one
    round run (a quick look, not a verdict)."""
    return rounds if rounds == 1 else max(DEFAULT_MAX_ROUNDS, rounds)


@dataclass(frozen=True)
class RoundBudget:
    """rounds: the minimum, always run; max_rounds: the most any configuration gets;
    time_budget_s: the sweep's wall time past which no further round starts (None: no
    limit); margin: the practical margin a contest's interval must clear to name a winner
    (or lie inside to call the pair equivalent). Extra rounds run only the configurations
    of contests another round could still decide. The looks at rounds..max_rounds are
    where the sequential rule spends its error (engine/analysis/sequential.py)."""

    rounds: int = DEFAULT_ROUNDS
    max_rounds: int = DEFAULT_MAX_ROUNDS
    time_budget_s: float | None = None
    margin: float = DEFAULT_VERDICT_MARGIN

    def validate(self, specs=()) -> "RoundBudget":
        int_range("rounds", self.rounds, *ROUNDS_RANGE)
        int_range("max_rounds", self.max_rounds, self.rounds, ROUNDS_RANGE[1],
                  hint=f" (at least rounds, {self.rounds})")
        float_range("margin", self.margin, *VERDICT_MARGIN_RANGE)
        if self.time_budget_s is not None:
            float_range("time_budget_s", self.time_budget_s, *TIME_BUDGET_RANGE)
            floor = round_floor_s(specs)
            if self.time_budget_s < floor:
                raise UserError(
                    f"time_budget_s: {self.time_budget_s:g} s is too small for one round of "
                    f"this sweep, which takes at least {floor:g} s (each run's min_time plus "
                    f"each worker's framework start); allowed: number {floor:g}.."
                    f"{TIME_BUDGET_RANGE[1]:g}", field="time_budget_s")
        return self

    @classmethod
    def fixed(cls, rounds: int) -> "RoundBudget":
        """Exactly `rounds` rounds (what kinds without contests run)."""
        return cls(rounds, rounds, None)
