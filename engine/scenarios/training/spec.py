"""What to run for training: a frozen `TrainSpec` and the expansion of a training sweep."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from engine.core.catalog import IMAGE_MODELS
from engine.core.errors import UserError
from engine.scenarios.inference.spec import DEVICES
from engine.core.limits import (EPOCH_RANGE, IMAGE_RANGE, PROFILE_RANGE, SEED_RANGE,
                                STEPS_RANGE, SYNTHETIC_RANGE, TRAIN_BATCH_RANGE,
                                WARMUP_STEPS_RANGE, choice, float_range, int_range,
                                logical_cores, require_values, unique)
from engine.core.policy import MeasurementPolicy
from engine.core.runtimes import ROWS, row

__all__ = ["TrainSpec", "expand_train", "DATASETS", "TRAIN_RUNTIMES", "DIGITS_TRAIN"]

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
# Derived from the rows that name a trainer (engine.core.runtimes).
TRAIN_RUNTIMES = {f: rts for f in dict.fromkeys(r.framework for r in ROWS)
                  if (rts := tuple(r.name for r in ROWS if r.framework == f and r.trainer))}
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
        if self.model not in IMAGE_MODELS:  # the trainers fit image classifiers
            raise UserError(f"model: {self.model!r} is not an image classifier of the "
                            f"catalog; allowed: {', '.join(IMAGE_MODELS)}", field="model")
        runtime = self.runtime or TRAIN_RUNTIMES[self.framework][0]
        if runtime not in TRAIN_RUNTIMES[self.framework]:
            raise UserError(f"runtime: {self.framework} does not train with {runtime!r}; "
                            f"allowed: {', '.join(TRAIN_RUNTIMES[self.framework])}",
                            field="runtime")
        choice("dataset", self.dataset, tuple(DATASETS))
        int_range("batch_size", self.batch_size, *TRAIN_BATCH_RANGE)
        for name in ("intra_threads", "inter_threads"):
            int_range(name, getattr(self, name), 1, cores,
                       hint=f" (this machine has {cores} logical cores)")
        int_range("epochs", self.epochs, *EPOCH_RANGE)
        if self.steps_per_epoch is not None:
            int_range("steps_per_epoch", self.steps_per_epoch, *STEPS_RANGE)
        float_range("lr", self.lr, 1e-8, 10.0)
        float_range("momentum", self.momentum, 0.0, 0.999)
        int_range("warmup_steps", self.warmup_steps, *WARMUP_STEPS_RANGE)
        int_range("seed", self.seed, *SEED_RANGE)
        int_range("profile_steps", self.profile_steps, *PROFILE_RANGE)
        choice("device", self.device, DEVICES)
        if self.device == "cuda" and self.framework == "tensorflow":
            raise UserError("device: cuda is not available for tensorflow here (the project "
                            "installs tensorflow-cpu); allowed: cpu", field="device")
        if row(self.framework, runtime).cpp_runner:
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
        int_range("image_size", size, *IMAGE_RANGE)
        if self.dataset == "synthetic":
            int_range("synthetic_samples", self.synthetic_samples, *SYNTHETIC_RANGE)
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
    require_values(model=models, framework=frameworks, batch_size=batch_sizes,
                   threads=threads)
    for f in unique(frameworks):
        if f not in TRAIN_RUNTIMES:
            TrainSpec(models[0], f, 1, 1).validate()  # refused, naming the allowed ones
    per_fw = {f: [r for r in unique(runtimes or ()) if r in TRAIN_RUNTIMES[f]]
              or [TRAIN_RUNTIMES[f][0]] for f in unique(frameworks)}
    for r in unique(runtimes or ()):
        if not any(r in TRAIN_RUNTIMES[f] for f in unique(frameworks)):
            allowed = "; ".join(f"{f}: {', '.join(TRAIN_RUNTIMES[f])}"
                                for f in unique(frameworks))
            raise UserError(f"runtime: {r!r} does not train any of "
                            f"{', '.join(frameworks)}; allowed: {allowed}", field="runtime")
    return [TrainSpec(model=m, framework=f, batch_size=b, intra_threads=t, runtime=rt,
                      **common).validate()
            for f in unique(frameworks) for t in unique(threads) for m in unique(models)
            for rt in per_fw[f] for b in unique(batch_sizes)]
