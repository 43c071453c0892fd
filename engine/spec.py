"""What to run: a frozen, hashable `RunSpec`, its measurement policy, and sweep expansion.

Every field is checked here, before anything is spawned, and a bad one is refused with a
`UserError` naming the field and the allowed values.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace

from engine.catalog import CATALOG, DIAGNOSTIC_MODELS, FRAMEWORKS, RUNTIMES
from engine.errors import UserError

__all__ = [
    "MeasurementPolicy", "RunSpec", "expand_sweep", "logical_cores",
    "BATCH_RANGE", "IMAGE_RANGE", "PRECISIONS", "DEVICES", "WEIGHT_POLICIES", "parse_int_list",
    "runtimes_for", "spec_from_dict", "SPEC_TYPES", "TrainSpec", "LoadSpec", "DATASETS", "TRAIN_RUNTIMES", "PROFILE_RANGE",
    "expand_train", "expand_load",
]

BATCH_RANGE = (1, 4096)
# Keras applications refuse inputs under 32 px; above 1024 px a batch of EfficientNet-B7
# activations no longer fits a 24 GiB machine, so larger sizes are refused up front.
IMAGE_RANGE = (32, 1024)
PRECISIONS = ("fp32", "bf16")
# bf16 where the runtime supports it (AMX-bf16 CPUs run it natively); the rest are refused
# up front, with the reason.
BF16_RUNTIMES = {("torch", "eager"), ("torch", "channels_last"), ("torch", "torchscript"),
                 ("torch", "compile")}
_NO_BF16 = {
    ("torch", "onnxruntime"): "ONNX Runtime's CPU execution provider lacks bf16 kernels for "
                              "these convolutions",
    ("torch", "libtorch"): "the C++ runner feeds fp32 inputs",
}
_NO_BF16_TF = ("Keras runs bf16 only under a process-wide mixed-precision policy, which would "
               "leak into the worker's other runs")
DEVICES = ("cpu", "cuda")
# Runtimes that run on the CPU only, with the reason; TensorFlow as a whole is CPU-only here.
CPU_ONLY_RUNTIMES = {
    ("torch", "onnxruntime"): "the project installs ONNX Runtime's CPU execution provider",
    ("torch", "libtorch"): "the C++ runner is built against libtorch_cpu",
}
# bn_calibrated: a few train-mode passes set BatchNorm statistics to those of the input
# distribution, as trained weights would have them; random: the initialiser's values as is.
WEIGHT_POLICIES = ("bn_calibrated", "random")
# Profiled iterations in the extra, untimed pass: 0 switches profiling off. A handful of
# steps shows every operator; hundreds only grow the trace.
PROFILE_RANGE = (0, 50)
# ONNX Runtime and the C++ runner execute outside the torch profiler's sight.
PROFILED_RUNTIMES = {"torch": ("eager", "channels_last", "torchscript", "compile"),
                     "tensorflow": ("keras", "tf_function", "xla")}


def logical_cores() -> int:
    """Cores this process may run on (the affinity mask, which containers narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class MeasurementPolicy:
    """When to stop timing.

    Defaults: up to 10 warm-up iterations let allocators, caches and lazy initialisation
    settle (the very first forward is timed apart as first_forward_s); warm-up also ends
    once it has lasted warmup_max_s (1 s), because a model that takes a second per call is
    warm after one or two calls, and ten would cost more than the measurement itself.
    Then timing continues until
    BOTH 2 s and 30 iterations are reached: 30 samples put p90 and the quartiles between real
    samples, and 2 s spans many scheduler ticks, so one preemption cannot dominate the median.
    max_time_s bounds a slow model; stopping there before min_iters makes the run invalid.
    """

    warmup_iters: int = 10
    warmup_max_s: float = 1.0
    min_time_s: float = 2.0
    min_iters: int = 30
    max_time_s: float = 60.0
    max_iters: int = 100_000

    def validate(self) -> "MeasurementPolicy":
        _int_range("warmup_iters", self.warmup_iters, 0, 10_000)
        _int_range("min_iters", self.min_iters, 1, 100_000)
        _int_range("max_iters", self.max_iters, self.min_iters, 1_000_000)
        _float_range("warmup_max_s", self.warmup_max_s, 0.0, 3600.0)
        _float_range("min_time_s", self.min_time_s, 0.0, 3600.0)
        _float_range("max_time_s", self.max_time_s, max(self.min_time_s, 0.001), 86_400.0)
        return self


@dataclass(frozen=True)
class RunSpec:
    model: str
    framework: str
    batch_size: int
    intra_threads: int
    inter_threads: int = 1
    precision: str = "fp32"
    image_size: int | None = None  # None: the model's native size, resolved by validate()
    device: str = "cpu"
    weight_policy: str = "bn_calibrated"
    policy: MeasurementPolicy = field(default_factory=MeasurementPolicy)
    runtime: str | None = None  # None: the framework's default, resolved by validate()
    # >0: after the timed pass, profile this many more iterations in a separate pass
    profile_steps: int = 0
    kind = "inference"  # class constant, not a field: the runs table's `kind`

    def key(self) -> tuple:
        """Identity of a configuration (what a comparison groups by)."""
        return (self.model, self.framework, self.runtime, self.batch_size, self.intra_threads,
                self.inter_threads, self.precision, self.image_size, self.device)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunSpec":
        d = dict(d)
        d["policy"] = MeasurementPolicy(**d.get("policy", {}))
        return cls(**d)

    def validate(self, cores: int | None = None) -> "RunSpec":
        """Return the spec with defaults resolved, or raise UserError naming the field."""
        cores = cores or logical_cores()
        if self.framework not in FRAMEWORKS:
            raise UserError(f"framework: unknown {self.framework!r}; allowed: "
                            f"{', '.join(f for f in FRAMEWORKS if f != 'selftest')}",
                            field="framework")
        if self.framework == "selftest":
            if self.model not in DIAGNOSTIC_MODELS:
                raise UserError(f"model: {self.model!r} is not a selftest model; allowed: "
                                f"{', '.join(DIAGNOSTIC_MODELS)}", field="model")
            native = 32
        else:
            if self.model not in CATALOG:
                raise UserError(f"model: unknown {self.model!r}; allowed: "
                                f"{', '.join(CATALOG)}", field="model")
            native = CATALOG[self.model].native_size
        runtime = self.runtime or FRAMEWORKS[self.framework]
        if runtime not in RUNTIMES[self.framework]:
            raise UserError(f"runtime: {runtime!r} is not available for {self.framework}; "
                            f"allowed: {', '.join(RUNTIMES[self.framework])}", field="runtime")
        _int_range("batch_size", self.batch_size, *BATCH_RANGE)
        _int_range("intra_threads", self.intra_threads, 1, cores,
                   hint=f" (this machine has {cores} logical cores)")
        _int_range("inter_threads", self.inter_threads, 1, cores,
                   hint=f" (this machine has {cores} logical cores)")
        _choice("precision", self.precision, PRECISIONS)
        if self.precision == "bf16" and (self.framework, runtime) not in BF16_RUNTIMES:
            why = _NO_BF16.get((self.framework, runtime), _NO_BF16_TF
                               if self.framework == "tensorflow" else "diagnostic runtime")
            raise UserError(f"precision: bf16 is not supported by {self.framework} {runtime}: "
                            f"{why}; allowed: fp32 (bf16 runs on torch eager, channels_last, "
                            "torchscript and compile)", field="precision")
        _choice("device", self.device, DEVICES)
        if self.device == "cuda" and self.framework == "tensorflow":
            raise UserError("device: cuda is not available for tensorflow here: the project "
                            "installs tensorflow-cpu; allowed for tensorflow: cpu",
                            field="device")
        if self.device == "cuda" and (self.framework, runtime) in CPU_ONLY_RUNTIMES:
            raise UserError(f"device: cuda is not available for {self.framework} {runtime}: "
                            f"{CPU_ONLY_RUNTIMES[(self.framework, runtime)]}; allowed: cpu",
                            field="device")
        _choice("weight_policy", self.weight_policy, WEIGHT_POLICIES)
        size = native if self.image_size is None else self.image_size
        _int_range("image_size", size, *IMAGE_RANGE)
        _int_range("profile_steps", self.profile_steps, *PROFILE_RANGE)
        if self.profile_steps and runtime not in PROFILED_RUNTIMES.get(self.framework, ()):
            raise UserError(f"profile_steps: {self.framework} {runtime} cannot be profiled "
                            f"(the profilers see only in-process torch and TensorFlow ops); "
                            f"allowed: 0, or a runtime among "
                            f"{', '.join(PROFILED_RUNTIMES.get(self.framework, ()))}",
                            field="profile_steps")
        return replace(self, image_size=size, runtime=runtime, policy=self.policy.validate())


def runtimes_for(frameworks, runtimes) -> dict[str, list[str]]:
    """Which of the named runtimes each framework runs (its default when none is named).
    Every named runtime must apply to some framework, and every framework must get one."""
    if not runtimes:
        return {f: [FRAMEWORKS[f]] for f in frameworks if f in FRAMEWORKS}
    out = {f: [r for r in _unique(runtimes) if r in RUNTIMES.get(f, {})] for f in frameworks}
    for r in _unique(runtimes):
        if not any(r in RUNTIMES.get(f, {}) for f in frameworks):
            allowed = "; ".join(f"{f}: {', '.join(RUNTIMES[f])}" for f in frameworks
                                if f in RUNTIMES)
            raise UserError(f"runtime: {r!r} is not available for {', '.join(frameworks)}; "
                            f"allowed: {allowed}", field="runtime")
    for f, rs in out.items():
        if not rs and f in RUNTIMES:
            raise UserError(f"runtime: none of the named runtimes applies to {f}; allowed "
                            f"for {f}: {', '.join(RUNTIMES[f])}", field="runtime")
    return out


def expand_sweep(models, frameworks, batch_sizes, threads, *, inter_threads=1,
                 precision="fp32", image_size=None, device="cpu",
                 weight_policy="bn_calibrated", policy=None, cores=None,
                 runtimes=None, profile_steps=0) -> list[RunSpec]:
    """The cartesian product, validated, ordered so each (framework, threads) group is
    contiguous: the runner starts one worker per group and pays the imports once. Within
    a group, a model's batch sizes follow each other so a built model is reused."""
    for name, values in (("model", models), ("framework", frameworks),
                         ("batch_size", batch_sizes), ("threads", threads)):
        if not values:
            raise UserError(f"{name}: pick at least one value", field=name)
    policy = policy or MeasurementPolicy()
    for f in frameworks:  # an unknown framework is named before any runtime is
        if f not in FRAMEWORKS:
            RunSpec(models[0], f, 1, 1).validate(cores)
    per_fw = runtimes_for(_unique(frameworks), runtimes)
    specs = [
        RunSpec(model=m, framework=f, batch_size=b, intra_threads=t,
                inter_threads=inter_threads, precision=precision, image_size=image_size,
                device=device, weight_policy=weight_policy, policy=policy,
                runtime=rt, profile_steps=profile_steps).validate(cores)
        for f in _unique(frameworks) for t in _unique(threads) for m in _unique(models)
        for rt in per_fw[f] for b in _unique(batch_sizes)
    ]
    return specs


def _unique(values):
    return list(dict.fromkeys(values))


def _int_range(name, value, lo, hi, hint=""):
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{name}: {value!r} is not an integer; allowed: integer {lo}..{hi}{hint}",
                        field=name)
    if not lo <= value <= hi:
        raise UserError(f"{name}: {value} is out of range; allowed: integer {lo}..{hi}{hint}",
                        field=name)


def _float_range(name, value, lo, hi):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise UserError(f"{name}: {value!r} is out of range; allowed: number {lo:g}..{hi:g}",
                        field=name)


def _choice(name, value, allowed):
    if value not in allowed:
        raise UserError(f"{name}: {value!r} is not supported; allowed: {', '.join(allowed)}",
                        field=name)


def parse_int_list(text: str, name: str, lo: int, hi: int) -> list[int]:
    """'1, 8 32' -> [1, 8, 32]; a bad entry is refused naming the field and the range."""
    values = []
    for tok in text.replace(",", " ").split():
        try:
            v = int(tok)
        except ValueError:
            raise UserError(f"{name}: {tok!r} is not an integer; allowed: integer {lo}..{hi}",
                            field=name) from None
        _int_range(name, v, lo, hi)
        values.append(v)
    return values


# -- training ---------------------------------------------------------------------------------

DATASETS = {
    "digits": "scikit-learn's handwritten digits (1,797 images of 8x8, 10 classes; shipped "
              "inside the package), resized bilinearly to 32x32x3 and split 80/20 "
              "(stratified, fixed seed): 1,437 train and 360 test images",
    "synthetic": "random normal inputs and random labels of the chosen image size: pure "
                 "speed, nothing to learn (accuracy stays near chance)",
}
# How each framework trains (the first is the default): torch in eager mode, or the same
# model scripted and trained by the LibTorch C++ trainer; TensorFlow through one compiled
# tf.function train step (what Keras' fit() runs), GradientTape inside.
TRAIN_RUNTIMES = {"torch": ("eager", "libtorch"), "tensorflow": ("tf_function",)}
TRAIN_BATCH_RANGE = (1, 1024)
EPOCH_RANGE = (1, 1000)
STEPS_RANGE = (1, 1_000_000)
SYNTHETIC_RANGE = (16, 1_000_000)
DIGITS_TRAIN = 1437  # the digits split's training images (80 % of 1,797, stratified)


@dataclass(frozen=True)
class TrainSpec:
    """One training run: a model trained with SGD for some epochs, every step timed.

    Both frameworks get the same images in the same order (engine.datasets draws the
    order from the seed), and the last partial batch of an epoch is dropped, so every
    timed step does the same work. The first warmup_steps steps (tracing, allocator
    warm-up) are kept as warm-up samples, outside the statistics.
    """

    model: str
    framework: str
    batch_size: int
    intra_threads: int
    inter_threads: int = 1
    epochs: int = 1
    steps_per_epoch: int | None = None  # None: a full pass over the training images
    dataset: str = "digits"
    lr: float = 0.01
    momentum: float = 0.9
    image_size: int | None = None  # None: 32 (the digits' resized size)
    synthetic_samples: int = 2048  # training images of the synthetic set (test: a quarter)
    warmup_steps: int = 5
    seed: int = 0
    device: str = "cpu"
    runtime: str | None = None
    profile_steps: int = 0
    kind = "train"
    precision = "fp32"
    weight_policy = "random"  # training starts from the framework's own initialisation

    @property
    def policy(self) -> MeasurementPolicy:
        """Training runs a fixed number of steps: the verdict judges only their spread."""
        return MeasurementPolicy(warmup_iters=self.warmup_steps, min_time_s=0.0, min_iters=1,
                                 max_time_s=86_400.0)

    def key(self) -> tuple:
        return (self.model, self.framework, self.runtime, self.batch_size, self.intra_threads,
                self.inter_threads, self.dataset, self.image_size, self.device)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainSpec":
        return cls(**d)

    def train_samples(self) -> int:
        return DIGITS_TRAIN if self.dataset == "digits" else self.synthetic_samples

    def steps_in_epoch(self) -> int:
        full = self.train_samples() // self.batch_size
        return min(full, self.steps_per_epoch) if self.steps_per_epoch else full

    def validate(self, cores: int | None = None) -> "TrainSpec":
        cores = cores or logical_cores()
        if self.framework not in TRAIN_RUNTIMES:
            raise UserError(f"framework: {self.framework!r} cannot train here; allowed: "
                            f"{', '.join(TRAIN_RUNTIMES)}", field="framework")
        if self.model not in CATALOG:
            raise UserError(f"model: unknown {self.model!r}; allowed: {', '.join(CATALOG)}",
                            field="model")
        runtime = self.runtime or TRAIN_RUNTIMES[self.framework][0]
        if runtime not in TRAIN_RUNTIMES[self.framework]:
            raise UserError(f"runtime: {self.framework} does not train with {runtime!r}; "
                            f"allowed: {', '.join(TRAIN_RUNTIMES[self.framework])}",
                            field="runtime")
        _choice("dataset", self.dataset, tuple(DATASETS))
        _int_range("batch_size", self.batch_size, *TRAIN_BATCH_RANGE)
        for name in ("intra_threads", "inter_threads"):
            _int_range(name, getattr(self, name), 1, cores,
                       hint=f" (this machine has {cores} logical cores)")
        _int_range("epochs", self.epochs, *EPOCH_RANGE)
        if self.steps_per_epoch is not None:
            _int_range("steps_per_epoch", self.steps_per_epoch, *STEPS_RANGE)
        _float_range("lr", self.lr, 1e-8, 10.0)
        _float_range("momentum", self.momentum, 0.0, 0.999)
        _int_range("warmup_steps", self.warmup_steps, 0, 100)
        _int_range("seed", self.seed, 0, 2**31 - 1)
        _int_range("profile_steps", self.profile_steps, *PROFILE_RANGE)
        _choice("device", self.device, DEVICES)
        if self.device == "cuda" and self.framework == "tensorflow":
            raise UserError("device: cuda is not available for tensorflow here (the project "
                            "installs tensorflow-cpu); allowed: cpu", field="device")
        if runtime == "libtorch":
            if self.device != "cpu":
                raise UserError("device: the LibTorch trainer is built against libtorch_cpu; "
                                "allowed: cpu", field="device")
            if self.profile_steps:
                raise UserError("profile_steps: the LibTorch trainer runs outside "
                                "torch.profiler's sight; allowed: 0 (profile the eager "
                                "runtime instead)", field="profile_steps")
        size = 32 if self.image_size is None else self.image_size
        if self.dataset == "digits" and size != 32:
            raise UserError(f"image_size: the digits set is resized to 32 px; allowed: 32 "
                            f"(use --dataset synthetic for {size} px)", field="image_size")
        _int_range("image_size", size, *IMAGE_RANGE)
        if self.dataset == "synthetic":
            _int_range("synthetic_samples", self.synthetic_samples, *SYNTHETIC_RANGE)
        out = replace(self, image_size=size, runtime=runtime)
        if out.train_samples() < out.batch_size:
            raise UserError(f"batch_size: {self.batch_size} is larger than the "
                            f"{out.train_samples()} training images; allowed: integer "
                            f"1..{out.train_samples()}", field="batch_size")
        return out


def expand_train(models, frameworks, batch_sizes, threads, *, runtimes=None,
                 **common) -> list[TrainSpec]:
    """Validated training specs, grouped like expand_sweep (framework, then threads).
    runtimes: each applies to the frameworks that train with it (default: the first)."""
    for name, values in (("model", models), ("framework", frameworks),
                         ("batch_size", batch_sizes), ("threads", threads)):
        if not values:
            raise UserError(f"{name}: pick at least one value", field=name)
    for f in _unique(frameworks):
        if f not in TRAIN_RUNTIMES:
            TrainSpec(models[0], f, 1, 1).validate()  # refused, naming the allowed ones
    per_fw = {f: [r for r in _unique(runtimes or ()) if r in TRAIN_RUNTIMES[f]]
              or [TRAIN_RUNTIMES[f][0]] for f in _unique(frameworks)}
    for r in _unique(runtimes or ()):
        if not any(r in TRAIN_RUNTIMES[f] for f in _unique(frameworks)):
            allowed = "; ".join(f"{f}: {', '.join(TRAIN_RUNTIMES[f])}"
                                for f in _unique(frameworks))
            raise UserError(f"runtime: {r!r} does not train any of "
                            f"{', '.join(frameworks)}; allowed: {allowed}", field="runtime")
    return [TrainSpec(model=m, framework=f, batch_size=b, intra_threads=t, runtime=rt,
                      **common).validate()
            for f in _unique(frameworks) for t in _unique(threads) for m in _unique(models)
            for rt in per_fw[f] for b in _unique(batch_sizes)]



# -- data loading -----------------------------------------------------------------------------

LOAD_COUNT_RANGE = (8, 100_000)
LOAD_SIZE_RANGE = (16, 4096)
WORKERS_RANGE = (0, 64)


@dataclass(frozen=True)
class LoadSpec:
    """One data-loading run: read, decode and normalise batches of images from disk.

    A generated, deterministic image set (engine.dataload) is read in a fixed order,
    cycling epochs; each timed iteration delivers one batch, fully materialised. The first
    batch is checked against the ground truth before anything is timed.
    """

    fmt: str
    decoder: str
    normalize: str
    pipeline: str
    batch_size: int
    workers: int = 0
    intra_threads: int = 1
    count: int = 256
    image_size: int = 256
    seed: int = 0
    policy: MeasurementPolicy = field(default_factory=MeasurementPolicy)
    inter_threads = 1
    kind = "dataload"
    device = "cpu"
    precision = None
    weight_policy = None
    profile_steps = 0

    @property
    def model(self) -> str:  # the runs table's model column: what is loaded
        return self.fmt

    @property
    def framework(self) -> str:
        from engine.dataload import framework_of
        return framework_of(self.decoder, self.normalize, self.pipeline)

    @property
    def runtime(self) -> str:  # the implementation: the Compare columns
        return f"{self.pipeline}:{self.decoder}+{self.normalize}"

    @property
    def dataset(self) -> str:
        return f"{self.fmt}-{self.count}x{self.image_size}px-seed{self.seed}"

    def key(self) -> tuple:
        return (self.fmt, self.runtime, self.batch_size, self.workers, self.intra_threads,
                self.count, self.image_size)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "LoadSpec":
        d = dict(d)
        d["policy"] = MeasurementPolicy(**d.get("policy", {}))
        return cls(**d)

    def validate(self, cores: int | None = None) -> "LoadSpec":
        from engine.dataload import DECODERS, FORMATS, NORMALIZERS, PIPELINES, incompatibility

        cores = cores or logical_cores()
        _choice("format", self.fmt, tuple(FORMATS))
        _choice("decoder", self.decoder, tuple(DECODERS))
        _choice("normalize", self.normalize, tuple(NORMALIZERS))
        _choice("pipeline", self.pipeline, tuple(PIPELINES))
        why = incompatibility(self.fmt, self.decoder, self.normalize, self.pipeline)
        if why:
            raise UserError(f"decoder: {self.runtime} cannot load {self.fmt}: {why}",
                            field="decoder")
        _int_range("batch_size", self.batch_size, *BATCH_RANGE)
        _int_range("workers", self.workers, *WORKERS_RANGE)
        if self.pipeline == "loop" and self.workers:
            raise UserError("workers: the loop pipeline runs in the calling thread; allowed: "
                            "0 (use torch_dataloader or tf_data for parallel workers)",
                            field="workers")
        _int_range("intra_threads", self.intra_threads, 1, cores,
                   hint=f" (this machine has {cores} logical cores)")
        _int_range("count", self.count, *LOAD_COUNT_RANGE)
        _int_range("image_size", self.image_size, *LOAD_SIZE_RANGE)
        _int_range("seed", self.seed, 0, 2**31 - 1)
        if self.batch_size > self.count:
            raise UserError(f"batch_size: {self.batch_size} is larger than the {self.count} "
                            f"images; allowed: integer 1..{self.count}", field="batch_size")
        return replace(self, policy=self.policy.validate())


def expand_load(formats, decoders, normalizers, pipelines, batch_sizes, workers, threads,
                **common) -> tuple[list[LoadSpec], list[str]]:
    """(specs, skipped): every runnable combination, validated, and a line for each one
    that cannot run (a decoder that cannot read the format, workers for the plain loop),
    so the user sees why a column is missing. None runnable is an error."""
    from engine.dataload import DECODERS, FORMATS, NORMALIZERS, PIPELINES, incompatibility

    specs, skipped = [], []
    for name, values, allowed in (("format", formats, FORMATS), ("decoder", decoders, DECODERS),
                                  ("normalize", normalizers, NORMALIZERS),
                                  ("pipeline", pipelines, PIPELINES),
                                  ("batch_size", batch_sizes, None), ("workers", workers, None),
                                  ("threads", threads, None)):
        if not values:
            raise UserError(f"{name}: pick at least one value", field=name)
        for v in values if allowed else ():  # an unknown name is refused, never skipped
            _choice(name, v, tuple(allowed))
    for fmt in _unique(formats):
        for p in _unique(pipelines):
            for d in _unique(decoders):
                for n in _unique(normalizers):
                    why = incompatibility(fmt, d, n, p)
                    if why:
                        skipped.append(f"{p}:{d}+{n} on {fmt}: {why}")
                        continue
                    for t in _unique(threads):
                        for w in _unique(workers):
                            if p == "loop" and w:
                                continue  # the loop has no workers: measured once, at 0
                            for b in _unique(batch_sizes):
                                specs.append(LoadSpec(fmt, d, n, p, b, workers=w,
                                                      intra_threads=t, **common).validate())
    if not specs:
        raise UserError("decoder: no combination of the chosen formats, decoders, "
                        "normalisations and pipelines can run: " + "; ".join(skipped),
                        field="decoder")
    # Grouped by worker process (framework, threads) so imports are paid once per group.
    specs.sort(key=lambda s: (s.framework, s.intra_threads))
    return specs, skipped


SPEC_TYPES = {"inference": RunSpec, "train": TrainSpec, "dataload": LoadSpec}


def spec_from_dict(kind: str, d: dict):
    """The spec a worker receives, rebuilt from its dict by kind."""
    return SPEC_TYPES[kind].from_dict(d)
