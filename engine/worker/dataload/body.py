"""The data-loading body of a worker: each run timed by engine.worker.dataload.load_loop inside the
worker's frame."""

from __future__ import annotations

from engine.worker.harness import Frame
from engine.worker.dataload.load_loop import measure_loading, versions

__all__ = ["run_group"]


def run_group(runs, frame: Frame) -> None:
    frame.ready(versions(), {"threads": runs[0][1].intra_threads})
    for run_id, spec, _ in runs:
        progress = frame.progress(run_id)
        frame.guarded(run_id, spec, lambda run_id=run_id, spec=spec, progress=progress:
                      measure_loading(run_id, spec, progress))
