"""Data loading: read, decode and normalise batches of generated images from disk."""

from __future__ import annotations

from engine.scenarios.dataload.spec import LoadSpec
from engine.core.protocol import Event
from engine.scenarios.dataload.messages import MESSAGES, LoadResult
from engine.scenarios.base import Scenario, phase_of

__all__ = ["DataLoading", "DATA_LOADING"]


class DataLoading(Scenario):
    kind = LoadSpec.kind
    pinnable = False
    spec_type = LoadSpec
    worker_body = "engine.worker.dataload.body"
    messages = MESSAGES
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
