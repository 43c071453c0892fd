"""Before anything is timed: a run's greedy tokens against the reference's (engine/scenarios/
generation/agreement.py states the figure and the thresholds). Below its precision's
threshold the run raises OutputMismatch, which the worker's frame makes an `invalid` row
with the figure in its reason, as every wrong answer is (engine/worker/errors.py).
Framework-free (numpy)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from engine.scenarios.generation.agreement import (REFERENCE_TEXT, agreement_share,
                                                   threshold)
from engine.worker.errors import OutputMismatch

__all__ = ["check_agreement"]


def check_agreement(tokens, reference: Path | np.ndarray, precision: str) -> tuple[float, int]:
    """(share, positions compared); OutputMismatch naming both when below the threshold."""
    ref = np.load(reference) if isinstance(reference, Path) else np.asarray(reference)
    share, n = agreement_share(tokens, ref)
    limit = threshold(precision)
    if share < limit:
        raise OutputMismatch(
            f"greedy tokens agree with the reference ({REFERENCE_TEXT}) on {share:.1%} of "
            f"{n} positions (rows x first {n // ref.shape[0]} tokens), under the {limit:.0%} "
            f"threshold for {precision}")
    return share, n
