"""Plan a sweep's rounds: the same configurations, visited in an order that alternates.

Round 1 goes forward, round 2 in reverse, later rounds in an order shuffled with a seed
derived from the sweep's recorded seed. Slow drift of the machine and the luck of each
process then spread evenly over the contenders. Worker groups (framework, threads) stay
contiguous, so each round still pays each framework's import once; the order of the groups
and the order inside each group both alternate.
"""

from __future__ import annotations

import random

from engine.run.process.runner import worker_groups
from engine.scenarios.inference.spec import RunSpec

__all__ = ["plan_rounds", "order_name"]


def order_name(round_no: int) -> str:
    return {1: "forward", 2: "reversed"}.get(round_no, "shuffled")


def plan_rounds(specs: list[RunSpec], rounds: int, seed: int) -> list[list[RunSpec]]:
    """rounds lists of the same specs; round_no counts from 1."""
    groups = worker_groups(specs)
    plan = []
    for r in range(1, rounds + 1):
        if r == 1:
            ordered = [list(g) for g in groups]
        elif r == 2:
            ordered = [list(reversed(g)) for g in reversed(groups)]
        else:
            rng = random.Random(seed * 1000 + r)
            ordered = [rng.sample(g, len(g)) for g in rng.sample(groups, len(groups))]
        plan.append([s for g in ordered for s in g])
    return plan
