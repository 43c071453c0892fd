"""A CUDA run's two memory figures, by the order the worker takes them in (CI has no GPU).

FakeDevice stands in for the one thing CI cannot run, torch.cuda's allocator counters and
the host memory CUDA's context holds; the worker's own code (Models, _run, time_loop,
run_training) is real. Its numbers are the H200's, in MiB: resnet18's 45 MiB of weights,
cuDNN's algorithm search on a shape's first call (cudnn.benchmark on) briefly holding
600 more, and a CUDA context with cuDNN and cuBLAS holding 400 MiB of host memory.
"""

from __future__ import annotations

import contextlib

import numpy as np

from engine.core import MeasurementPolicy
from engine.scenarios.inference.spec import RunSpec
from engine.scenarios.training.spec import TrainSpec
from engine.worker.backends.base import ModelStats
from engine.worker.harness import Frame
from engine.worker.inference.body import Models, _run
from engine.worker.training.train_loop import run_training

WEIGHTS, SEARCH, PER_SAMPLE, CONTEXT, HOST_START = 45, 600, 10, 400, 100


class FakeDevice:
    """Allocated and peak bytes as torch.cuda counts them (a reset starts the peak at what
    is allocated), a shape's first call searching, and the host memory CUDA starts with
    the first thing that touches the device."""

    def __init__(self):
        self.allocated = self.peak = 0
        self.searched: set = set()
        self.host = HOST_START
        self.started = False

    def start(self):
        if not self.started:  # torch starts the context lazily, on the first device op
            self.started = True
            self.host += CONTEXT

    def call(self, batch: int, per_sample: int = PER_SAMPLE):
        self.start()
        if batch not in self.searched:
            self.searched.add(batch)
            self.peak = max(self.peak, self.allocated + SEARCH)
        self.peak = max(self.peak, self.allocated + per_sample * batch)

    def reset_peak(self):
        self.peak = self.allocated


class FakeBackend:
    """torch_eager.Backend's interface over a FakeDevice."""

    prepare_s = 0.0
    output_rel_diff = 0.0
    first_forward_s = None

    def __init__(self, device: FakeDevice):
        self.device = device

    def versions(self):
        return {}

    def effective_threads(self):
        return {}

    def start_device(self, spec):
        self.device.start()

    def load(self, spec):
        self.device.start()
        self.device.allocated += WEIGHTS

    def prepare(self, spec):
        pass

    def model_stats(self, spec, count_flops):
        self.device.call(1)  # the FLOP count runs the model at batch 1 on the device
        return ModelStats(1, 1, 2, "fake")

    def make_step(self, spec):
        return lambda: (self.device.call(spec.batch_size), 1_000)[1]  # event-timed ns

    def context(self):
        return contextlib.nullcontext()

    def reset_device_peak(self):
        self.device.reset_peak()

    def device_peak_bytes(self):
        return self.device.peak

    def reference_bytes(self):
        return 0

    def unload(self):
        self.device.allocated = 0


POLICY = MeasurementPolicy(warmup_iters=3, warmup_max_s=60.0, min_time_s=0.0, min_iters=4)


def _worker(device: FakeDevice) -> Models:
    spec = RunSpec("identity", "selftest", 1, 1, runtime="python")
    models = Models(spec, resident=lambda: device.host)
    models.backends = {spec.runtime: FakeBackend(device)}
    models.backend = models.backends[spec.runtime]
    return models


def _peak(models: Models, batch: int, known) -> int:
    spec = RunSpec("identity", "selftest", batch, 1, device="cuda", policy=POLICY,
                   runtime="python")
    frame = Frame(lambda message: None, cap=None, t0=0.0, trace_dir=None)
    return _run(frame, models, f"b{batch}", spec, known).device_peak_bytes


def test_the_device_peak_is_the_timed_loops_whatever_ran_before_in_the_worker():
    # Round 1 counts FLOPs in the worker (batch 1's search before anything is timed);
    # round 2 has them from the store, so batch 1's search comes with its first call.
    # Both read the weights plus batch 1's own use: 84.4 against 664.8 MiB before the fix.
    round_1, round_2 = _worker(FakeDevice()), _worker(FakeDevice())
    counted = {"params": 1, "params_trainable": 1, "flops_per_sample": 2,
               "flops_method": "fake"}
    assert _peak(round_1, 1, None) == _peak(round_2, 1, counted) == WEIGHTS + PER_SAMPLE
    # batch 8 searches on its first call too: its peak is its own use, not the search's
    assert _peak(round_1, 8, counted) == WEIGHTS + 8 * PER_SAMPLE


def test_the_model_baseline_is_taken_after_the_device_started():
    device = FakeDevice()
    models = _worker(device)
    _peak(models, 1, None)
    # the context's 400 are in the baseline; the model then adds its own on top
    assert models.baseline == HOST_START + CONTEXT


class FakeTrainer:
    """train_torch.Trainer's interface over a FakeDevice: the first step makes SGD's
    momentum buffers (as many as the weights); evaluation is another batch shape."""

    def __init__(self, device: FakeDevice):
        self.device = device

    def prepare(self, x):
        return x

    def load(self, spec, classes):
        self.device.allocated += WEIGHTS

    def train_step(self, xb, yb):
        if not self.device.searched:
            self.device.allocated += WEIGHTS
        self.device.call(len(xb), per_sample=3)
        return 1.0, 0

    def logits(self, xb):
        self.device.call(len(xb), per_sample=1)
        return np.zeros((len(xb), 10), dtype=np.float32)

    def model_stats(self):
        return ModelStats(1, 1, None, "not counted for training")

    def reset_device_peak(self):
        self.device.reset_peak()

    def device_peak_bytes(self):
        return self.device.peak


def test_a_training_device_peak_leaves_out_warm_up_and_evaluation():
    # 128 training images in steps of 24 (5 a epoch), 32 test images scored as 24 + 8:
    # the test set's last batch is a shape of its own, searched between the epochs.
    spec = TrainSpec("resnet18", "torch", 24, 1, epochs=2, dataset="synthetic",
                     synthetic_samples=128, image_size=8, warmup_steps=2, device="cuda")
    result = run_training("t", spec, FakeTrainer(FakeDevice()), progress=lambda *a: None)
    assert len(result.warmup_ns) == 2 and len(result.samples_ns) == 8
    assert result.device_peak_bytes == 2 * WEIGHTS + 3 * 24


def test_warm_up_alone_still_leaves_a_measured_step_whose_peak_is_read():
    spec = TrainSpec("resnet18", "torch", 24, 1, epochs=1, steps_per_epoch=2,
                     dataset="synthetic", synthetic_samples=128, image_size=8,
                     warmup_steps=5, device="cuda")
    result = run_training("t", spec, FakeTrainer(FakeDevice()), progress=lambda *a: None)
    assert len(result.samples_ns) == 1
    assert result.device_peak_bytes == 2 * WEIGHTS + 3 * 24


def test_a_reference_kept_off_the_host_is_not_taken_off_the_resident_peak():
    # meta stands in for cuda: a device's weights are in no resident set, so a runtime's
    # model MiB on CUDA is not lowered by its reference's device bytes
    import copy

    import torch

    from engine.worker.backends.torch_eager import Backend

    backend = Backend()
    backend.is_reference = False
    backend.reference = torch.nn.Linear(4, 4)  # 16 + 4 float32: 80 bytes
    backend.model = copy.deepcopy(backend.reference)
    assert backend.reference_bytes() == 80
    backend.reference = backend.reference.to("meta")
    assert backend.reference_bytes() == 0
