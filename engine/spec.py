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
    "runtimes_for",
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
# bn_calibrated: a few train-mode passes set BatchNorm statistics to those of the input
# distribution, as trained weights would have them; random: the initialiser's values as is.
WEIGHT_POLICIES = ("bn_calibrated", "random")


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
        _choice("weight_policy", self.weight_policy, WEIGHT_POLICIES)
        size = native if self.image_size is None else self.image_size
        _int_range("image_size", size, *IMAGE_RANGE)
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
                 runtimes=None) -> list[RunSpec]:
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
                runtime=rt).validate(cores)
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
