"""What a data-loading sweep asks for, as the Run page and `python -m engine dataload` fill
it, and its expansion into LoadSpecs.

A job's fields and its expansion, framework- and runner-free; engine/run/jobs/requests.py makes it a
`Request` (LoadRequest(Job, Request): how it is queued, run and stored as a sweep), since starting
workers is engine/run's and engine/scenarios/ may not import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.policy import MeasurementPolicy
from engine.scenarios.dataload.hooks import DATA_LOADING
from engine.scenarios.dataload.spec import expand_load

__all__ = ["LoadJob"]


@dataclass(frozen=True)
class LoadJob:
    """A data-loading sweep (engine.scenarios.dataload.spec.LoadSpec) as a dashboard job:
    its fields and their expansion (LoadRequest runs it)."""

    scenario = DATA_LOADING

    formats: tuple[str, ...]
    decoders: tuple[str, ...]
    normalizers: tuple[str, ...]
    pipelines: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    workers: tuple[int, ...]
    threads: tuple[int, ...]
    count: int = 256
    image_size: int = 256
    data_seed: int = 0  # the generated images (LoadSpec.seed)
    policy: MeasurementPolicy = field(default_factory=MeasurementPolicy)
    rounds: int = 1
    seed: int | None = None
    timeout_s: float = 1800.0
    memory_cap_bytes: int | None = None

    def _expand(self):
        return expand_load(list(self.formats), list(self.decoders), list(self.normalizers),
                           list(self.pipelines), list(self.batch_sizes), list(self.workers),
                           list(self.threads), count=self.count, image_size=self.image_size,
                           seed=self.data_seed, policy=self.policy)

    def label(self) -> str:
        return (f"{', '.join(self.formats)} × {', '.join(self.decoders)} × "
                f"{', '.join(self.pipelines)}")
