"""A data-loading run inside a worker: generate (once) the image set, check the first batch
against the ground truth, then time batches with the same loop and policy as inference."""

from __future__ import annotations

import importlib.metadata
import json
import time
from typing import Callable

from engine.worker.dataload.images import check_batch, generate_dataset, make_batch_source
from engine.worker.measure import time_loop
from engine.scenarios.dataload.spec import LoadSpec
from engine.core.paths import data_root
from engine.scenarios.dataload.messages import LoadResult

__all__ = ["measure_loading", "versions", "batches_per_sample"]

_DISTRIBUTIONS = ("numpy", "pillow", "opencv-python-headless", "scikit-image", "tifffile",
                  "torch", "tensorflow-cpu", "tensorflow")


def versions() -> dict:
    """Installed versions of everything a data-loading run may use (package metadata: no
    import)."""
    out = {}
    for dist in _DISTRIBUTIONS:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def batches_per_sample(spec: LoadSpec) -> int:
    return max(1, 2 * spec.workers)


def measure_loading(run_id: str, spec: LoadSpec,
                    progress: Callable[[str, int], None]) -> LoadResult:
    progress("generate", 0)
    t = time.perf_counter()
    folder = generate_dataset(data_root(), spec.fmt, spec.count, spec.image_size, spec.seed)
    load_s = time.perf_counter() - t
    manifest = json.loads((folder / "manifest.json").read_text())
    progress("load", 0)
    t = time.perf_counter()
    source = make_batch_source(folder, spec.fmt, spec.decoder, spec.normalize, spec.pipeline,
                               spec.batch_size, spec.workers, spec.intra_threads)
    prepare_s = time.perf_counter() - t
    try:
        t = time.perf_counter()
        first = source.next()  # worker start-up lands here, timed apart as first_forward_s
        first_s = time.perf_counter() - t
        # A wrong decode (BGR for RGB, a dropped band) is invalid before anything is timed.
        err = check_batch(first, spec.fmt, spec.image_size, spec.seed,
                          range(spec.batch_size), decoder=spec.decoder)
        del first

        # With parallel workers, batches arrive in bursts: one is waited for, the next few
        # are already there. Per-batch times are then bimodal and their median means
        # nothing, so a sample times a whole cycle of the workers (each worker keeps 2
        # batches in flight) and is stored divided by its batch count: ms per batch.
        per_sample = batches_per_sample(spec)

        def step():
            for _ in range(per_sample):
                source.next()  # materialised by the source; the loop times the call

        loop = time_loop(step, spec.policy,
                         on_progress=lambda n, _ns: progress("measure", n))
    finally:
        source.close()
    return LoadResult(run_id, load_s=load_s, prepare_s=prepare_s, first_forward_s=first_s,
                      warmup_ns=tuple(ns // per_sample for ns in loop.warmup_ns),
                      samples_ns=tuple(ns // per_sample for ns in loop.samples_ns),
                      batches_per_sample=per_sample,
                      warmup_s=loop.warmup_wall_ns / 1e9, measured_s=loop.wall_ns / 1e9,
                      stop_reason=loop.stop_reason, gc_disabled=loop.gc_disabled,
                      warmup_stop=loop.warmup_stop,
                      check_error=err, bytes_on_disk=manifest.get("bytes"))
