"""A data-loading run's result on the wire: a Result with the first batch's check and the
bytes read.

Registered with the protocol's decoder by the registry (engine/scenarios/__init__.py reads
the kind's Scenario.messages); encoded and decoded like every message (engine.core.protocol).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.protocol import Result

__all__ = ["LoadResult", "MESSAGES"]


@dataclass(frozen=True)
class LoadResult(Result):
    kind = "load_result"
    check_error: float | None = None  # the first batch against the ground truth
    bytes_on_disk: int | None = None
    batches_per_sample: int | None = None


# The kind's messages, as its Scenario.messages lists them for the registry
MESSAGES = (LoadResult,)
