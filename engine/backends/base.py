"""The small protocol every runtime implements. The worker drives it; it never times."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from engine.spec import RunSpec

__all__ = ["Backend", "ModelStats", "SEED"]

# One seed for weights and inputs, so both frameworks see statistically identical work.
SEED = 0


@dataclass(frozen=True)
class ModelStats:
    params: int  # the framework's own count (torch: parameters(); Keras: count_params())
    params_trainable: int
    flops_per_sample: int | None  # FLOPs (not MACs) of one forward of one sample
    flops_method: str


class Backend(Protocol):
    def versions(self) -> dict: ...
    def effective_threads(self) -> dict: ...
    def load(self, spec: RunSpec) -> None: ...
    def model_stats(self, spec: RunSpec, count_flops: bool) -> ModelStats: ...
    def make_step(self, spec: RunSpec) -> Callable[[], int | None]: ...
    def context(self): ...  # entered around first forward, warm-up and timing
    def device_peak_bytes(self) -> int | None: ...
    def unload(self) -> None: ...
