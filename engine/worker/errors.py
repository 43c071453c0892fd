"""Failures that are wrong answers, not crashes: a run that raises one is invalid and never
timed (engine.worker.harness.status_of). Framework-free, so every body and backend raises
the same class and the frame tells them apart by type."""

from __future__ import annotations

__all__ = ["OutputMismatch", "Diverged", "WRONG_ANSWERS", "ReplicaFailed"]


class OutputMismatch(Exception):
    """An output, or a decoded batch, that is not the reference's."""


class Diverged(Exception):
    """The training loss stopped being a number: the run says at which step."""


WRONG_ANSWERS = (OutputMismatch, Diverged)


class ReplicaFailed(Exception):
    """A serving replica's own failure (engine/worker/serving/replica.py: its load, its output
    check, a call), carrying the status the replica gave it."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
