"""Training: SGD steps timed one by one, each epoch scored on the test split."""

from __future__ import annotations

from engine.core.catalog import CATALOG
from engine.core.protocol import Event, Progress
from engine.scenarios.training.messages import MESSAGES, TrainResult
from engine.scenarios.training.spec import TrainSpec
from engine.scenarios.base import Scenario

__all__ = ["Training", "TRAINING"]


class Training(Scenario):
    kind = TrainSpec.kind
    spec_type = TrainSpec
    worker_body = "engine.worker.training.body"
    messages = MESSAGES
    title = "Training"
    sample_unit = "training step"
    step_noun = "step"
    progress_unit = "step"

    def record_columns(self, spec) -> dict:
        return {"dataset": spec.dataset}

    def config_extra(self, spec) -> dict:
        return {"lr": spec.lr, "momentum": spec.momentum, "optimizer": "sgd",
                "epochs": spec.epochs, "steps_per_epoch": spec.steps_in_epoch(),
                "seed": spec.seed, "warmup_steps": spec.warmup_steps,
                "profile_steps": spec.profile_steps,
                # BatchNorm momentum in torch's convention, both frameworks (catalog.py)
                "bn_momentum": CATALOG[spec.model].torch_bn_momentum}

    def result_extra(self, res: TrainResult) -> dict:
        return {"data": res.data_description, "feed_sha256": res.feed_sha256}

    def result_columns(self, res: TrainResult) -> dict:
        return {"epochs": tuple(res.epochs), "step_losses": tuple(res.step_losses)}

    def throughput(self, spec, res: TrainResult, samples_ns) -> float | None:
        # Over the measured steps only: the warm-up steps (the first one carries TensorFlow's
        # trace and every allocator's first touch) are reported apart, as warmup_s and
        # first_forward_s. Epoch wall times, data feeding included, stay in the epochs.
        total = sum(samples_ns)
        return spec.batch_size * len(samples_ns) / (total / 1e9) if total else None

    def progress_total(self, specs: list) -> int:
        return sum(s.steps_in_epoch() * s.epochs for s in specs)

    def progress_units(self, ev: Event) -> int | None:
        return ev.iters if isinstance(ev, Progress) else None

    def figure(self, rec) -> str | None:
        if rec.status not in ("ok", "invalid") or not rec.epochs:
            return None
        return (f"{rec.throughput:,.1f} samples/s, step p50 {rec.median_ms:.1f} ms, "
                f"test acc {rec.epochs[-1]['test_acc']:.1%}")


TRAINING = Training()
