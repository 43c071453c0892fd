"""The training body of a worker: one trainer per runtime, each run trained and scored by
engine.worker.training.train_loop inside the worker's frame."""

from __future__ import annotations

from engine.worker.backends import load_trainer
from engine.worker.harness import Frame
from engine.worker.training.train_loop import run_training

__all__ = ["run_group"]


def run_group(runs, frame: Frame) -> None:
    first = runs[0][1]
    trainers = {first.runtime: load_trainer(first.framework, first.runtime)}
    frame.ready(trainers[first.runtime].versions(),
           trainers[first.runtime].effective_threads())
    for run_id, spec, _ in runs:
        if spec.runtime not in trainers:  # eager and LibTorch share a torch worker
            trainers[spec.runtime] = load_trainer(spec.framework, spec.runtime)
        trainer = trainers[spec.runtime]
        progress = frame.progress(run_id)

        def body(spec=spec, run_id=run_id, progress=progress, trainer=trainer):
            try:
                return run_training(run_id, spec, trainer, progress=progress,
                                    trace_path=frame.trace_path(run_id))
            finally:
                trainer.unload()
        frame.guarded(run_id, spec, body)
