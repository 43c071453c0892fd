"""The training loop, framework-neutral: the trainer (engine/worker/backends/train_*.py) does the
framework's work; this module orders the data, times every step and scores every epoch.

Imported by training workers only. Losses and accuracies on the test split are computed
here, in NumPy, from each framework's logits, so both are scored by the same formula.
"""

from __future__ import annotations

import gc
import hashlib
import math
import time
from typing import Callable

import numpy as np

from engine.worker.training.datasets import CLASSES, epoch_order, load_data
from engine.worker.errors import Diverged
from engine.worker.interference import interference, snapshot
from engine.worker.profiling import profile_pass
from engine.scenarios.training.spec import TrainSpec
from engine.scenarios.training.messages import TrainResult

__all__ = ["run_training", "Diverged", "cross_entropy", "DevicePeak"]

PROGRESS_EVERY_NS = 500_000_000


def cross_entropy(logits: np.ndarray, labels: np.ndarray) -> tuple[float, int]:
    """(summed cross-entropy, correct count) with a stable log-softmax in float64."""
    z = logits.astype(np.float64)
    z -= z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(labels)), labels].sum()), int(
        (logits.argmax(axis=1) == labels).sum())


def evaluate(trainer, x: np.ndarray, y: np.ndarray, batch: int) -> tuple[float, float]:
    loss, correct = 0.0, 0
    for i in range(0, len(y), batch):
        l, c = cross_entropy(trainer.logits(x[i:i + batch]), y[i:i + batch])
        loss += l
        correct += c
    return loss / len(y), correct / len(y)


def run_training(run_id: str, spec: TrainSpec, trainer, *,
                 progress: Callable[[str, int], None], trace_path: str | None = None,
                 clock: Callable[[], int] = time.perf_counter_ns) -> TrainResult:
    """Train, then (if asked) profile a few more steps apart."""
    t = clock()
    data = load_data(spec)
    x_train, x_test = trainer.prepare(data.x_train), trainer.prepare(data.x_test)
    if hasattr(trainer, "load"):  # the C++ trainer builds its model inside train_all
        trainer.load(spec, CLASSES)
    load_s = (clock() - t) / 1e9
    steps, b = spec.steps_in_epoch(), spec.batch_size
    # Fingerprints of what was fed (the images, labels and every epoch's order): equal
    # across frameworks means the same samples in the same order, which a reader can check.
    feed = hashlib.sha256(data.x_train.tobytes() + data.y_train.tobytes())
    own_peak = None
    before = snapshot()
    if hasattr(trainer, "train_all"):  # the runtime trains in a process of its own (C++)
        orders = [epoch_order(len(data.y_train), e, spec.seed)
                  for e in range(1, spec.epochs + 1)]
        for order in orders:
            feed.update(order[:steps * b].tobytes())
        out = trainer.train_all(spec, x_train, data.y_train, x_test, data.y_test, orders,
                                steps, progress)
        step_ns, losses, own_peak = out["step_ns"], out["losses"], out["peak_rss_bytes"]
        epochs = []
        for epoch, e in enumerate(out["epochs"], start=1):
            test_loss, correct_test = cross_entropy(e["test_logits"], data.y_test)
            epochs.append(dict(epoch=epoch, steps=steps, samples=steps * b, wall_s=e["wall_s"],
                               samples_per_s=steps * b / e["wall_s"] if e["wall_s"] else None,
                               train_loss=e["loss_sum"] / steps,
                               train_acc=e["correct"] / (steps * b),
                               test_loss=test_loss / len(data.y_test),
                               test_acc=correct_test / len(data.y_test), eval_s=None))
        device_peak = trainer.device_peak_bytes()
    else:
        # warm-up's steps, as the result counts them below: at least one step is measured
        total = spec.steps_in_epoch() * spec.epochs
        peak = DevicePeak(trainer, min(spec.warmup_steps, total - 1))
        step_ns, losses, epochs = _train_in_process(spec, trainer, data, x_train, x_test,
                                                    feed, progress, clock, peak)
        device_peak = peak.bytes
    window = interference(before, snapshot())  # the epochs, scoring included
    # Python's garbage collector was off during the timed steps (the C++ trainer has none).
    gc_disabled = None if hasattr(trainer, "train_all") else True
    w = min(spec.warmup_steps, len(step_ns) - 1)  # at least one step stays measured
    profile = {}
    if spec.profile_steps and trace_path:
        progress("profile", len(step_ns))
        idx = epoch_order(len(data.y_train), 0, spec.seed)[:b]
        xb, yb = x_train[idx], data.y_train[idx]
        profile = profile_pass(spec.framework, lambda: trainer.train_step(xb, yb),
                               spec.profile_steps, trace_path, cuda=spec.device == "cuda")
    stats = trainer.model_stats()
    return TrainResult(run_id, load_s=load_s, first_forward_s=step_ns[0] / 1e9,
                       warmup_ns=tuple(step_ns[:w]), samples_ns=tuple(step_ns[w:]),
                       warmup_s=sum(step_ns[:w]) / 1e9, measured_s=sum(step_ns[w:]) / 1e9,
                       stop_reason="steps", gc_disabled=gc_disabled, interference=window,
                       epochs=tuple(epochs), step_losses=tuple(losses),
                       data_description=data.description, feed_sha256=feed.hexdigest(),
                       params=stats.params, params_trainable=stats.params_trainable,
                       flops_per_sample=None, flops_method=stats.flops_method,
                       device_peak_bytes=device_peak, peak_rss_bytes=own_peak,
                       prepare_s=getattr(trainer, "prepare_s", None), **profile)


class DevicePeak:
    """A trainer's device peak over the measured steps alone: its counter reset before the
    first step after warm-up (the first steps' allocations, an optimizer's state being
    made, are warm-up's) and again after each epoch's scoring, read as each epoch's steps
    end, so evaluation (no gradients, a last batch of another shape) is never in it and
    the figure does not depend on what ran before in the worker. None on a CPU."""

    def __init__(self, trainer, warmup_steps: int):
        self.trainer, self.warmup_steps = trainer, warmup_steps
        self.armed = False
        self.bytes: int | None = None

    def before_step(self, done: int) -> None:
        """Outside the timed interval, with `done` steps taken so far."""
        if not self.armed and done >= self.warmup_steps:
            self.trainer.reset_device_peak()
            self.armed = True

    def epoch_trained(self) -> None:
        if self.armed:
            read = self.trainer.device_peak_bytes()
            if read is not None:
                self.bytes = read if self.bytes is None else max(self.bytes, read)

    def epoch_scored(self) -> None:
        if self.armed:
            self.trainer.reset_device_peak()


def _train_in_process(spec, trainer, data, x_train, x_test, feed, progress, clock,
                      peak: DevicePeak):
    """Python-driven training: one timed train_step per batch, scored after each epoch."""
    steps, b = spec.steps_in_epoch(), spec.batch_size
    step_ns: list[int] = []
    losses: list[float] = []
    epochs: list[dict] = []
    last_progress = clock()
    for epoch in range(1, spec.epochs + 1):
        order = epoch_order(len(data.y_train), epoch, spec.seed)
        feed.update(order[:steps * b].tobytes())
        loss_sum, correct = 0.0, 0
        progress(f"epoch {epoch}/{spec.epochs}", len(step_ns))
        # The cyclic collector is off during the epoch's steps (a collection would land in
        # whichever step crossed its threshold); it runs again between epochs, untimed.
        gc.disable()
        start = clock()
        try:
            for s in range(steps):
                idx = order[s * b:(s + 1) * b]
                xb, yb = x_train[idx], data.y_train[idx]
                peak.before_step(len(step_ns))
                t0 = clock()
                loss, c = trainer.train_step(xb, yb)
                step_ns.append(clock() - t0)
                if not math.isfinite(loss):
                    raise Diverged(f"training diverged: the loss became {loss} at step "
                                   f"{len(step_ns)} (epoch {epoch}); lower lr ({spec.lr:g}) or "
                                   f"momentum ({spec.momentum:g})")
                losses.append(loss)
                loss_sum += loss
                correct += c
                if clock() - last_progress > PROGRESS_EVERY_NS:
                    progress(f"epoch {epoch}/{spec.epochs}", len(step_ns))
                    last_progress = clock()
        finally:
            gc.enable()
        wall_s = (clock() - start) / 1e9
        peak.epoch_trained()
        t0 = clock()
        test_loss, test_acc = evaluate(trainer, x_test, data.y_test, b)
        epochs.append(dict(epoch=epoch, steps=steps, samples=steps * b, wall_s=wall_s,
                           samples_per_s=steps * b / wall_s if wall_s else None,
                           train_loss=loss_sum / steps, train_acc=correct / (steps * b),
                           test_loss=test_loss, test_acc=test_acc,
                           eval_s=(clock() - t0) / 1e9))
        peak.epoch_scored()
    return step_ns, losses, epochs
