"""A training run's result on the wire: a Result with its epochs, step losses and the
digest of what it was fed.

Registered with the protocol's decoder by the registry (engine/scenarios/__init__.py reads
the kind's Scenario.messages); encoded and decoded like every message (engine.core.protocol).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.protocol import Result

__all__ = ["TrainResult", "MESSAGES"]


@dataclass(frozen=True)
class TrainResult(Result):
    kind = "train_result"
    epochs: tuple[dict, ...] = ()  # per epoch: wall time, train and test loss and accuracy
    step_losses: tuple[float, ...] = ()
    data_description: str | None = None
    feed_sha256: str | None = None  # the images, labels and orders fed, in order


# The kind's messages, as its Scenario.messages lists them for the registry
MESSAGES = (TrainResult,)
