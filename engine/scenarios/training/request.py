"""What a training sweep asks for, as the Run page and `python -m engine train` fill it,
and its expansion into TrainSpecs.

A job's fields and its expansion, framework- and runner-free; engine/run/jobs/requests.py makes it a
`Request` (TrainRequest(Job, Request): how it is queued, run and stored as a sweep), since starting
workers is engine/run's and engine/scenarios/ may not import it.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.scenarios.base import models_label
from engine.scenarios.training.hooks import TRAINING
from engine.scenarios.training.spec import expand_train

__all__ = ["TrainJob"]


@dataclass(frozen=True)
class TrainJob:
    """A training sweep (engine.scenarios.training.spec.TrainSpec) as a dashboard job:
    its fields and their expansion (TrainRequest runs it)."""

    scenario = TRAINING

    models: tuple[str, ...]
    frameworks: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    threads: tuple[int, ...]
    epochs: int = 1
    steps_per_epoch: int | None = None
    dataset: str = "digits"
    lr: float = 0.01
    momentum: float = 0.9
    inter_threads: int = 1
    image_size: int | None = None
    synthetic_samples: int = 2048
    warmup_steps: int = 5
    data_seed: int = 0  # the model's initialisation and the data's order (TrainSpec.seed)
    profile_steps: int = 0
    runtimes: tuple[str, ...] = ()  # empty: each framework's default
    rounds: int = 1
    seed: int | None = None
    timeout_s: float = 3600.0
    memory_cap_bytes: int | None = None

    def label(self) -> str:
        return models_label(self.models, self.frameworks)

    def _expand(self):
        return expand_train(list(self.models), list(self.frameworks), list(self.batch_sizes),
                            list(self.threads), runtimes=list(self.runtimes) or None,
                            epochs=self.epochs, steps_per_epoch=self.steps_per_epoch,
                            dataset=self.dataset, lr=self.lr, momentum=self.momentum,
                            inter_threads=self.inter_threads, image_size=self.image_size,
                            synthetic_samples=self.synthetic_samples,
                            warmup_steps=self.warmup_steps, seed=self.data_seed,
                            profile_steps=self.profile_steps), []
