"""Data loading: read, decode and normalise batches of generated images from disk."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.protocol import Event, LoadResult
from engine.scenarios.base import Request, Scenario, phase_of
from engine.core.dataload import LoadSpec, expand_load
from engine.core.policy import MeasurementPolicy

__all__ = ["DataLoading", "DATA_LOADING", "LoadRequest"]


class DataLoading(Scenario):
    kind = LoadSpec.kind
    pinnable = False
    spec_type = LoadSpec
    worker_body = "engine.worker.dataload"
    title = "Data loading"
    sample_unit = "batch"

    def record_columns(self, spec) -> dict:
        return {"dataset": spec.dataset, "workers": spec.workers}

    def config_extra(self, spec) -> dict:
        return {"count": spec.count, "decoder": spec.decoder, "normalize": spec.normalize,
                "pipeline": spec.pipeline, "seed": spec.seed}

    def result_extra(self, res: LoadResult) -> dict:
        return {"check_error": res.check_error, "bytes_on_disk": res.bytes_on_disk,
                "batches_per_sample": res.batches_per_sample}

    def describe_event(self, spec, ev: Event) -> str:
        return (f"{spec.fmt} {spec.runtime} b{spec.batch_size} w{spec.workers} "
                f"t{spec.intra_threads}: {phase_of(ev)}")

    def run_label(self, rec) -> str:
        return f"{rec.model} {rec.runtime} b{rec.batch_size} w{rec.workers} t{rec.intra_threads}"

    def figure(self, rec) -> str:
        return (f"p50 {rec.median_ms:.2f} ms/batch, {rec.throughput:,.0f} images/s, "
                f"{rec.validity}")


DATA_LOADING = DataLoading()


@dataclass(frozen=True)
class LoadRequest(Request):
    """A data-loading sweep (engine.core.dataload.LoadSpec) as a dashboard job."""

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
    policy: MeasurementPolicy = field(default_factory=MeasurementPolicy)
    rounds: int = 1
    seed: int | None = None
    timeout_s: float = 1800.0
    memory_cap_bytes: int | None = None

    def _expand(self):
        return expand_load(list(self.formats), list(self.decoders), list(self.normalizers),
                           list(self.pipelines), list(self.batch_sizes), list(self.workers),
                           list(self.threads), count=self.count, image_size=self.image_size,
                           policy=self.policy)

    def label(self) -> str:
        return (f"{', '.join(self.formats)} × {', '.join(self.decoders)} × "
                f"{', '.join(self.pipelines)}")
