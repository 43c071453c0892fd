"""PyTorch eager inference under inference_mode; CUDA timed with events."""

from __future__ import annotations

import numpy as np
import torch
import torchvision

from engine.backends.base import SEED, ModelStats
from engine.catalog import get_model
from engine.spec import RunSpec

CALIBRATION_PASSES = 3
CALIBRATION_BATCH = 2


def make_input(spec: RunSpec) -> np.ndarray:
    rng = np.random.default_rng(SEED)
    return rng.standard_normal((spec.batch_size, 3, spec.image_size, spec.image_size),
                               dtype=np.float32)


def dtype_of(spec: RunSpec):
    return torch.bfloat16 if spec.precision == "bf16" else torch.float32


def input_tensor(spec: RunSpec, device):
    return torch.from_numpy(make_input(spec)).to(device=device, dtype=dtype_of(spec))


def to_precision(model, spec: RunSpec):
    """Cast after the fp32 reference was taken: bf16 runs are checked against fp32 eager."""
    return model.to(dtype_of(spec))


def eager_reference(spec: RunSpec):
    """(device, fp32 eager model, fp32 input, its output as numpy): where every torch
    runtime starts, so each one is checked against the same reference."""
    device = torch.device(spec.device)
    model = build_model(spec, device)
    x = torch.from_numpy(make_input(spec)).to(device)
    with torch.inference_mode():
        reference = model(x).cpu().numpy()
    return device, model, x, reference


def build_model(spec: RunSpec, device):
    """The seeded torchvision model with the spec's weight policy applied, in eval mode.
    Every torch runtime starts from this, so they all run the same weights."""
    torch.manual_seed(SEED)
    if spec.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device cuda requested but torch.cuda.is_available() is False")
    model = getattr(torchvision.models, get_model(spec.model).torch_builder)(weights=None)
    model = model.to(device)
    if spec.weight_policy == "bn_calibrated":
        _calibrate_batchnorm(model, spec, device)
    return model.eval()


class Backend:
    prepare_s = 0.0
    output_rel_diff = 0.0  # eager is the reference

    def __init__(self):
        self.model = None
        self.eager = None
        self.device = None

    def versions(self) -> dict:
        return {"torch": torch.__version__, "torchvision": torchvision.__version__,
                "numpy": np.__version__, "mkldnn": torch.backends.mkldnn.is_available(),
                "cuda": torch.version.cuda}

    def effective_threads(self) -> dict:
        return {"torch_intra_op": torch.get_num_threads(),
                "torch_inter_op": torch.get_num_interop_threads()}

    def load(self, spec: RunSpec) -> None:
        self.device = torch.device(spec.device)
        self.model = build_model(spec, self.device)
        self.output_rel_diff = 0.0
        if spec.precision != "fp32":  # the fp32 model is the reference for its bf16 self
            from engine.backends.base import check_close

            x = torch.from_numpy(make_input(spec)).to(self.device)
            with torch.inference_mode():
                reference = self.model(x).float().cpu().numpy()
                self.model = to_precision(self.model, spec)
                got = self.model(x.to(dtype_of(spec))).float().cpu().numpy()
            self.output_rel_diff = check_close(reference, got, "eager fp32", spec.precision)

    def model_stats(self, spec: RunSpec, count_flops: bool) -> ModelStats:
        # Runtimes that replace the module (scripted, compiled) keep the eager one in
        # self.eager: parameters and FLOPs are counted there.
        model = self.eager if self.eager is not None else self.model
        params = sum(p.numel() for p in model.parameters())
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        flops = None
        if count_flops:
            from torch.utils.flop_counter import FlopCounterMode

            dtype = next(model.parameters()).dtype
            x = torch.zeros(1, 3, spec.image_size, spec.image_size, device=self.device,
                            dtype=dtype)
            with FlopCounterMode(display=False) as counter, torch.inference_mode():
                model(x)
            flops = int(counter.get_total_flops())
        return ModelStats(params, trainable, flops,
                          "torch.utils.flop_counter.FlopCounterMode (2 FLOPs per MAC)")

    def make_step(self, spec: RunSpec):
        x = input_tensor(spec, self.device)
        model = self.model
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)

            def step():
                start.record()
                model(x)
                end.record()
                end.synchronize()
                return int(start.elapsed_time(end) * 1e6)  # ms -> ns, measured on the GPU
            return step

        def step():
            model(x)
        return step

    def context(self):
        # Entered once around first forward, warm-up and timing (not per call): a context
        # entered per iteration would be timed as harness overhead.
        return torch.inference_mode()

    def device_peak_bytes(self):
        if self.device is not None and self.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated())
        return None

    def unload(self) -> None:
        self.model = self.eager = None
        if self.device is not None and self.device.type == "cuda":
            torch.cuda.empty_cache()


def _calibrate_batchnorm(model, spec: RunSpec, device) -> None:
    """Set BatchNorm running statistics to the input distribution's, as training would.

    momentum=None makes torch keep a cumulative average over the calibration passes.
    """
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    saved = [m.momentum for m in bns]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    gen = torch.Generator().manual_seed(SEED + 1)
    model.train()
    with torch.no_grad():
        for _ in range(CALIBRATION_PASSES):
            model(torch.randn(CALIBRATION_BATCH, 3, spec.image_size, spec.image_size,
                              generator=gen).to(device))
    for m, mom in zip(bns, saved):
        m.momentum = mom
    model.eval()
