"""PyTorch eager inference under inference_mode; CUDA timed with events."""

from __future__ import annotations

import copy
import sys
import time

import numpy as np
import torch
import torchvision

from engine.worker import user_models, weights
from engine.worker.backends.base import (ERROR_SEED, SEED, ModelStats, check_agreement,
                                         check_close, compared_rows, error_batches,
                                         output_error, output_matrix)
from engine.core.catalog import get_model
from engine.core.encoders import FLOPS_METHOD, encoder, encoder_flops
from engine.core.precision import REDUCED
from engine.scenarios.inference.spec import RunSpec

CALIBRATION_PASSES = 3
CALIBRATION_BATCH = 2


def make_input(spec: RunSpec) -> np.ndarray:
    rng = np.random.default_rng(SEED)
    return rng.standard_normal((spec.batch_size, 3, spec.image_size, spec.image_size),
                               dtype=np.float32)


def catalog_inputs(spec: RunSpec, gen: np.random.Generator) -> list[np.ndarray]:
    """One batch of a catalog model's inputs drawn from gen: an encoder's (token ids and
    mask, or ViT's images: engine/worker/backends/hf_encoders.py), else N,C,H,W images."""
    if encoder(spec.model) is not None:
        from engine.worker.backends import hf_encoders
        return hf_encoders.inputs(spec.model, spec.batch_size, spec.image_size, gen)
    return [gen.standard_normal((spec.batch_size, 3, spec.image_size, spec.image_size),
                                dtype=np.float32)]


def make_inputs(spec: RunSpec) -> list[np.ndarray]:
    """The model's inputs for one batch: a catalog model's (one image batch, or a token
    model's ids and mask), or the inputs a user's model describes (issue #14), generated
    from the same seed."""
    if spec.user_model is not None:
        return user_models.arrays(spec.user_model.inputs, spec.batch_size, SEED)
    return catalog_inputs(spec, np.random.default_rng(SEED))


def input_tensors(spec: RunSpec, device) -> list:
    """The inputs as tensors on the device, each in its declared dtype (NumPy has no
    bfloat16: those are generated as float32 and cast here)."""
    xs = [torch.from_numpy(a).to(device) for a in make_inputs(spec)]
    if spec.user_model is not None:
        xs = [x.to(torch.bfloat16) if i.dtype == "bfloat16" else x
              for x, i in zip(xs, spec.user_model.inputs)]
    return xs


def as_matrix(out):
    """A module's output (a tensor, or a user model's tuple/dict of them) as one float
    array, a row per sample (engine.worker.backends.base.output_matrix)."""
    return output_matrix(out, lambda t: t.detach().float().cpu().numpy()
                         if isinstance(t, torch.Tensor) else t)


def dtype_of(spec: RunSpec):
    return torch.bfloat16 if spec.precision == "bf16" else torch.float32


def to_precision(model, spec: RunSpec):
    """Cast after the fp32 reference was taken: bf16 runs are checked against fp32 eager.
    int8: torch's dynamic quantization, which covers Linear layers (weights int8, activations
    quantized per call); torch 2.14 still runs it and marks torch.ao.quantization deprecated
    in favour of torchao, which is not installed. Convolutions stay fp32, so on a CNN int8
    changes only its classifier."""
    if spec.precision == "int8":
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear},
                                                          dtype=torch.qint8)
    return model.to(dtype_of(spec))


def build_model(spec: RunSpec, device):
    """(the seeded torchvision model with the spec's weight policy applied, in eval mode;
    how its calibrated weights came (engine.worker.weights: read from the runner's file,
    or calibrated here; None for any other); the seconds calibrating took). Every torch
    runtime starts from this, so they all run the same weights."""
    torch.manual_seed(SEED)
    if spec.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device cuda requested but torch.cuda.is_available() is False")
    if spec.user_model is not None:  # the user's weights, as given: never re-calibrated
        model = user_models.torch_model(spec.user_model).to(device)
        # an exported program's module is in inference form already, and refuses .eval()
        return (model if spec.user_model.format == "pt2" else model.eval()), None, 0.0
    if encoder(spec.model) is not None:  # no BatchNorm: nothing to calibrate
        from engine.worker.backends import hf_encoders
        return hf_encoders.build(spec.model, spec.image_size).to(device), None, 0.0
    model = getattr(torchvision.models, get_model(spec.model).torch_builder)(weights=None)
    model = model.to(device)
    how, seconds = None, 0.0
    if spec.weight_policy == "bn_calibrated":
        # Calibrated in every worker, never read from the runner's file as TensorFlow's
        # are: workers that read the state dict instead ran efficientnet_b0 b1 slower, 24.6
        # against 18.8 ms at the centre over 10 processes each (Mann-Whitney p 0.014, the
        # spread's Brown-Forsythe p 0.054; bench/starts.py --weights), so what a worker
        # does before timing moves torch's per-process lottery, for a 0.2 s saving.
        t = time.perf_counter()
        _calibrate_batchnorm(model, spec, device)
        how, seconds = weights.CALIBRATED, time.perf_counter() - t
    return model.eval(), how, seconds


class Backend:
    """Eager PyTorch, and the base of every torch runtime.

    load() builds the fp32 eager model once: it is every torch runtime's reference and the
    model parameters and FLOPs are counted on. convert() turns it into the runtime's form
    (timed as prepare_s where that is real work); a bf16 cast or a layout change works on a
    copy, because both act on a module in place and would change the reference. prepare()
    runs for every batch size: the reference's output on this run's input against the
    runtime's (first_output(), where a shape-specialised runtime compiles).
    """

    prepare_s = 0.0
    # how the calibrated weights came and the seconds calibrating took, kept out of the
    # build time (engine.worker.weights)
    weights_from = None
    calibrate_s = 0.0
    output_rel_diff = 0.0
    first_forward_s = None
    output_error = None  # a reduced-precision run's OutputError against fp32 eager
    runtime_settings = None  # what a runtime chose and says of itself (OpenVINO's)
    compiles_in_check = False  # torch.compile: its check's call is the compile
    reference_name = "eager fp32"
    is_reference = True  # eager fp32 is checked against nothing; subclasses set False
    converts_in_place = False
    holds_own_weights = False  # the runtime runs a copy its module does not show (ONNX)

    def __init__(self):
        self.model = None
        self.reference = None
        self.device = None

    def versions(self) -> dict:
        return {"torch": torch.__version__, "torchvision": torchvision.__version__,
                "numpy": np.__version__, "mkldnn": torch.backends.mkldnn.is_available(),
                "cuda": torch.version.cuda,
                # an encoder's builder (hf_encoders) imports it; a CNN's worker never does
                **({"transformers": sys.modules["transformers"].__version__}
                   if "transformers" in sys.modules else {})}

    def effective_threads(self) -> dict:
        return {"torch_intra_op": torch.get_num_threads(),
                "torch_inter_op": torch.get_num_interop_threads()}

    def load(self, spec: RunSpec) -> None:
        self.device = torch.device(spec.device)
        self.reference, self.weights_from, self.calibrate_s = build_model(spec, self.device)
        self.prepare_s = 0.0
        model = self.reference
        if spec.precision != "fp32" or self.converts_in_place:
            model = copy.deepcopy(model)
        self.output_error = None  # counted once per built model, at its first run
        self.model = self.convert(self.cast(model, spec), spec)

    def cast(self, model, spec: RunSpec):
        """The eager model in the run's precision (runtimes that take the precision as a
        setting of their own, OpenVINO and ONNX Runtime's quantizer, start from fp32)."""
        return to_precision(model, spec)

    def convert(self, model, spec: RunSpec):
        """The runtime's shape-independent form of the (copied, cast) eager model; sets
        prepare_s where that is real work."""
        return model

    def to_input(self, x, spec: RunSpec):
        """An fp32 input in the runtime's dtype and layout (integer inputs, token ids, and
        inputs declared in another float type stay as they are)."""
        # only float32 follows the run's precision: a declared float16/bfloat16 input stays
        return x.to(dtype_of(spec)) if x.dtype == torch.float32 else x

    def first_output(self, xs, spec: RunSpec):
        """The runtime's output on xs as a float array; shape-specialised runtimes compile
        here."""
        with torch.inference_mode():
            return as_matrix(self.model(*xs))

    def prepare(self, spec: RunSpec) -> None:
        self.first_forward_s = None
        if self.is_reference and spec.precision == "fp32":
            self.output_rel_diff = 0.0
            return
        rows = compared_rows(spec)
        xs = input_tensors(spec, self.device)
        with torch.inference_mode():
            reference = as_matrix(self.reference(*(x[rows] for x in xs)))
        xs = [self.to_input(x, spec) for x in xs]
        t = time.perf_counter()
        got = self.first_output(xs, spec)
        if not self.compiles_in_check:
            self.first_forward_s = time.perf_counter() - t
        got = got[rows]
        self.output_rel_diff = check_close(reference, got, self.reference_name, spec.precision)
        if spec.precision in REDUCED and spec.user_model is None and self.output_error is None:
            self.output_error = self.error_figures(spec)
            check_agreement(self.output_error, spec.precision)

    def error_figures(self, spec: RunSpec):
        """OutputError against fp32 eager on error_batches() generated batches of this
        run's size (ERROR_SEED, apart from the timed input's)."""
        gen = np.random.default_rng(ERROR_SEED)
        refs, gots = [], []
        for _ in range(error_batches(spec.batch_size)):
            xs = [torch.from_numpy(a).to(self.device) for a in catalog_inputs(spec, gen)]
            with torch.inference_mode():
                refs.append(as_matrix(self.reference(*xs)))
            gots.append(self.first_output([self.to_input(x, spec) for x in xs], spec))
        return output_error(np.concatenate(refs), np.concatenate(gots))

    def model_stats(self, spec: RunSpec, count_flops: bool) -> ModelStats:
        model = self.reference  # the fp32 eager module, whatever the runtime made of it
        params = sum(p.numel() for p in model.parameters())
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        flops = None
        method = "torch.utils.flop_counter.FlopCounterMode (2 FLOPs per MAC)"
        if spec.user_model is None and encoder(spec.model) is not None:
            # the counter misses CPU attention (engine/core/encoders.py): counted from the
            # configuration, as the TensorFlow side counts it
            return ModelStats(params, trainable, encoder_flops(spec.model, spec.image_size)
                              if count_flops else None, FLOPS_METHOD)
        if count_flops:
            from dataclasses import replace

            from torch.utils.flop_counter import FlopCounterMode

            xs = input_tensors(replace(spec, batch_size=1), self.device)
            try:
                with FlopCounterMode(display=False) as counter, torch.inference_mode():
                    model(*xs)
                flops = int(counter.get_total_flops())
            except Exception as exc:  # noqa: BLE001 - a user's module the counter cannot see
                if spec.user_model is None:
                    raise
                method = f"not counted: FlopCounterMode failed ({type(exc).__name__})"
        return ModelStats(params, trainable, flops, method)

    def make_step(self, spec: RunSpec):
        xs = [self.to_input(x, spec) for x in input_tensors(spec, self.device)]
        model = self.model
        if self.device.type == "cuda":
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)

            def step():
                start.record()
                model(*xs)
                end.record()
                end.synchronize()
                return int(start.elapsed_time(end) * 1e6)  # ms -> ns, measured on the GPU
            return step

        if len(xs) == 1:  # the catalog's case: no unpacking in the timed call
            (x,) = xs

            def step():
                model(x)
            return step

        def step():
            model(*xs)
        return step

    def context(self):
        # Entered once around first forward, warm-up and timing (not per call): a context
        # entered per iteration would be timed as harness overhead.
        return torch.inference_mode()

    def start_device(self, spec: RunSpec) -> None:
        """Start what any model's first CUDA call starts (the context, cuDNN, cuBLAS and
        their handles) before the worker takes the memory baseline a model is measured from
        (engine/worker/inference/body.py's Models.ensure): about 400 MiB of host memory on
        an H200 that is CUDA's, not the model's. Nothing on the CPU."""
        if spec.device == "cuda":
            _start_cuda(dtype_of(spec))

    def reset_device_peak(self) -> None:
        """Where the device peak starts: called after warm-up (engine.worker.measure's
        after_warmup), so the peak is the timed loop's, whatever ran before in the worker;
        cuDNN's per-shape algorithm search on a shape's first call is left out."""
        if self.device is not None and self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()

    def device_peak_bytes(self):
        """Bytes torch's allocator held for tensors at most since reset_device_peak (the
        weights and inputs resident then count: a reset starts the peak at what is
        allocated)."""
        if self.device is not None and self.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated())
        return None

    def reference_bytes(self) -> int:
        """The bytes of the eager reference's parameters and buffers that this runtime keeps
        for its output check and its own model does not share (a copy cast or laid out
        apart, a frozen graph, an ONNX session's own weights): counted apart from what the
        model adds. 0 for eager fp32, which is its own reference, and torch.compile, which
        wraps the reference's module. Host memory only: it is taken off a resident-set
        peak, which a CUDA reference's weights are not in."""
        if self.is_reference or self.reference is None:
            return 0
        own = (_storages(self.model) if isinstance(self.model, torch.nn.Module)
               and not self.holds_own_weights else {})
        return sum(n for ptr, n in _storages(self.reference).items() if ptr not in own)

    def unload(self) -> None:
        self.model = self.reference = None
        if self.device is not None and self.device.type == "cuda":
            torch.cuda.empty_cache()


def _start_cuda(dtype) -> None:
    """One small forward on CUDA through the layers the catalog's models call (convolution,
    BatchNorm, pooling, Linear: cuDNN and cuBLAS), in the run's dtype, so the context and
    those libraries are loaded. A model's own kernels, loaded on its first call (CUDA's
    lazy module loading), stay the model's."""
    if not torch.cuda.is_available():
        raise RuntimeError("device cuda requested but torch.cuda.is_available() is False")
    nn = torch.nn
    probe = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
    probe = probe.to("cuda", dtype).eval()
    with torch.inference_mode():
        probe(torch.zeros(2, 3, 16, 16, device="cuda", dtype=dtype))
    torch.cuda.synchronize()


def _storages(module: torch.nn.Module) -> dict[int, int]:
    """A module's parameter and buffer storages in host memory: address -> bytes, each
    counted once. A CUDA module's are on the device, in no resident set (its device peak
    counts them)."""
    out = {}
    for t in (*module.parameters(), *module.buffers()):
        if t.device.type != "cpu":
            continue
        storage = t.untyped_storage()
        out[storage.data_ptr()] = storage.nbytes()
    return out


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
