"""What to run for inference: a frozen, hashable `RunSpec` (a sweep's expansion into them
is expand.py's).

Every field is checked here, before anything is spawned, and a bad one is refused with a
`UserError` naming the field and the allowed values.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from engine.core.catalog import (CATALOG, CPP_RUNNER_RUNTIMES, DIAGNOSTIC_MODELS, FRAMEWORKS,
                                 RUNTIMES, check_size, runtime_refusal)
from engine.core.errors import UserError
from engine.core.model_source import (ModelSource, check_model_name, check_runtime,
                                      check_trust,
                                      default_runtime, describe_inputs, detect_format,
                                      source_from_dict)
from engine.core.limits import (BATCH_RANGE, IMAGE_RANGE, PROFILE_RANGE, choice, int_range,
                                logical_cores)
from engine.core.policy import MeasurementPolicy
from engine.core.precision import BF16_FLAGS, PRECISIONS, check_precision
from engine.core.runtimes import NO_OPTIONS, OPTIONS, ROWS, RuntimeOptions, row

__all__ = ["RunSpec", "PRECISIONS", "DEVICES", "WEIGHT_POLICIES", "BF16_RUNTIMES",
           "CPU_ONLY_RUNTIMES", "PROFILED_RUNTIMES", "device_choices", "USER_WEIGHTS",
           "CONTENTION_MODES", "WAIT_POLICIES", "CONDITION_LABELS", "user_precisions"]

# Beside a controlled neighbour on one of the run's cores (engine/run/process/neighbour.py): "steady"
# keeps it busy, "onoff" comes and goes; "none" is a dedicated machine. Each is a setting of
# its own, never blended with another.
CONTENTION_MODES = ("none", "steady", "onoff")
CONDITION_LABELS = {"none": "", "steady": "steady neighbour", "onoff": "on/off neighbour"}
# torch's OpenMP threads spin at barriers by default; "passive" (OMP_WAIT_POLICY=PASSIVE)
# makes them sleep, which a busy neighbour's core can make much faster. "": the default.
WAIT_POLICIES = ("", "passive")
# What each runtime runs, on what, and why not the rest: its row (engine.core.runtimes); the
# tables below are derived from the rows. The runtimes that run bf16 on any CPU (a user's
# torch factory may ask for it):
BF16_RUNTIMES = {(r.framework, r.name) for r in ROWS
                 if "bf16" in r.precisions and not r.bf16_needs_flags}
DEVICES = ("cpu", "cuda")
# Runtimes that run on the CPU only, with the reason; TensorFlow as a whole is CPU-only here.
CPU_ONLY_RUNTIMES = {(r.framework, r.name): r.cpu_only for r in ROWS if r.cpu_only}
# bn_calibrated: a few train-mode passes set BatchNorm statistics to those of the input
# distribution, as trained weights would have them; random: the initialiser's values as is.
WEIGHT_POLICIES = ("bn_calibrated", "random")
# A user's model runs with the weights its file or factory gave it, never re-calibrated.
USER_WEIGHTS = "as_given"
# ONNX Runtime, OpenVINO, AOTInductor and the C++ runner execute outside the profilers' sight.
PROFILED_RUNTIMES = {f: rts for f in dict.fromkeys(r.framework for r in ROWS)
                     if (rts := tuple(r.name for r in ROWS if r.framework == f and r.profiled))}


def device_choices(framework: str, runtime: str) -> tuple[str, ...]:
    """The devices a runtime can run on here (TensorFlow is installed CPU-only)."""
    r = row(framework, runtime)
    return DEVICES if r is None else r.devices


@dataclass(frozen=True)
class RunSpec:
    model: str
    framework: str
    batch_size: int
    intra_threads: int
    inter_threads: int = 1
    precision: str = "fp32"
    # None: the model's native size, resolved by validate(). Pixels a side for an image
    # model; for a token model (catalog input_kind "tokens") its sequence length: one
    # field and one stored column for both, labelled by catalog.model_label
    image_size: int | None = None
    device: str = "cpu"
    weight_policy: str = "bn_calibrated"
    policy: MeasurementPolicy = field(default_factory=MeasurementPolicy)
    runtime: str | None = None  # None: the framework's default, resolved by validate()
    # >0: after the timed pass, profile this many more iterations in a separate pass
    profile_steps: int = 0
    # >0: the same configuration again under a second name ("#2"), in a worker of its own:
    # an A/A test, a contest whose true answer is a tie (bench/verdicts.py runs one).
    replica: int = 0
    # A user's own model (issue #14): `model` is then its display name, and the file or
    # factory, its inputs and format come from here. None: a catalog model.
    user_model: ModelSource | None = None
    # >1: this many identical workers at once, each with intra_threads threads on cores of
    # its own, timed over the same window (issue #15): a machine serving many requests runs
    # replicas, not one process with every core.
    replicas: int = 1
    # Issue 24: measured beside a controlled neighbour on one of the run's cores (one of
    # CONTENTION_MODES), and torch's OpenMP wait policy (WAIT_POLICIES).
    contention: str = "none"
    wait_policy: str = ""
    # Issue 28 part 7: TF32 for this fp32 run's CUDA matmuls and convolutions. Off unless
    # asked: an "fp32" figure computed with 10-bit mantissas would not be fp32.
    tf32: bool = False
    # The runtime's own settings (its row's options, e.g. OpenVINO's ov_hint), validated
    # against its row: validate() fills in the defaults and refuses any other name.
    options: RuntimeOptions = NO_OPTIONS
    kind = "inference"  # class constant, not a field: the runs table's `kind`

    def __post_init__(self):
        if not isinstance(self.options, RuntimeOptions):  # a dict given, or read from JSON
            object.__setattr__(self, "options", RuntimeOptions(self.options or {}))

    def key(self) -> tuple:
        """Identity of a configuration (what a comparison groups by): every option any
        runtime has, its default where this runtime has none (the OpenVINO hint's place
        and value as when it was a field of its own)."""
        return (self.model, self.framework, self.runtime, self.batch_size, self.intra_threads,
                self.inter_threads, self.precision, self.image_size, self.device, self.replica,
                self.replicas, self.contention, self.wait_policy, self.tf32,
                *(self.options.get(o.name, o.default) for o in OPTIONS))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunSpec":
        d = dict(d)
        d["policy"] = MeasurementPolicy(**d.get("policy", {}))
        d["user_model"] = source_from_dict(d.get("user_model"))
        # protocol 7 carried the hint as a field: the option of the runtime that has it
        hint = d.pop("ov_hint", None)
        r = row(d.get("framework"), d.get("runtime"))
        if hint is not None and "options" not in d and r is not None and r.options:
            d["options"] = {"ov_hint": hint}
        return cls(**d)

    def validate(self, cores: int | None = None,
                 flags: tuple[str, ...] | None = None) -> "RunSpec":
        """Return the spec with defaults resolved, or raise UserError naming the field.
        flags: the CPU's (engine.core.precision.cpu_flags when None), which bf16 needs."""
        cores = cores or logical_cores()
        int_range("replica", self.replica, 0, 9)
        if self.framework not in FRAMEWORKS:
            raise UserError(f"framework: unknown {self.framework!r}; allowed: "
                            f"{', '.join(f for f in FRAMEWORKS if f != 'selftest')}",
                            field="framework")
        if self.user_model is not None:
            return self._validate_user_model(cores, flags)
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
        self._check_sizes(cores)
        check_precision(self.framework, runtime, self.precision, self.device, flags)
        choice("device", self.device, DEVICES)
        if self.device == "cuda" and self.framework == "tensorflow":
            raise UserError("device: cuda is not available for tensorflow here: the project "
                            "installs tensorflow-cpu; allowed for tensorflow: cpu",
                            field="device")
        if self.device == "cuda" and (self.framework, runtime) in CPU_ONLY_RUNTIMES:
            raise UserError(f"device: cuda is not available for {self.framework} {runtime}: "
                            f"{CPU_ONLY_RUNTIMES[(self.framework, runtime)]}; allowed: cpu",
                            field="device")
        choice("weight_policy", self.weight_policy, WEIGHT_POLICIES)
        size = native if self.image_size is None else self.image_size
        if self.framework == "selftest":
            int_range("image_size", size, *IMAGE_RANGE)
        else:  # a token model's sequence length, a ViT's whole patches, a CNN's pixels
            check_size(self.model, size)
            why = runtime_refusal(self.model, runtime)
            if why:
                ok = [r for r in RUNTIMES[self.framework] if not runtime_refusal(self.model, r)]
                raise UserError(f"runtime: {self.framework} {runtime} does not run "
                                f"{self.model}: {why}; allowed: {', '.join(ok)}",
                                field="runtime")
        int_range("profile_steps", self.profile_steps, *PROFILE_RANGE)
        if self.profile_steps and runtime not in PROFILED_RUNTIMES.get(self.framework, ()):
            raise UserError(f"profile_steps: {self.framework} {runtime} cannot be profiled "
                            f"(the profilers see only in-process torch and TensorFlow ops); "
                            f"allowed: 0, or a runtime among "
                            f"{', '.join(PROFILED_RUNTIMES.get(self.framework, ()))}",
                            field="profile_steps")
        self._check_replicas(runtime)
        self._check_contention()
        self._check_numerics()
        return replace(self, image_size=size, runtime=runtime, policy=self.policy.validate(),
                       options=row(self.framework, runtime).check_options(self.options))

    def _check_sizes(self, cores: int) -> None:
        """Batch size, thread counts, replicas and precision: the same ranges for every
        model."""
        int_range("batch_size", self.batch_size, *BATCH_RANGE)
        for name in ("intra_threads", "inter_threads"):
            int_range(name, getattr(self, name), 1, cores,
                       hint=f" (this machine has {cores} logical cores)")
        int_range("replicas", self.replicas, 1, cores,
                   hint=f" (this machine has {cores} logical cores)")
        if self.replicas * self.intra_threads > cores:
            raise UserError(f"replicas: {self.replicas} replicas x {self.intra_threads} "
                            f"intra_threads = {self.replicas * self.intra_threads} threads; "
                            f"allowed: at most {cores} (this machine's logical cores, one "
                            "core per thread): lower --replicas or --threads",
                            field="replicas")
        choice("precision", self.precision, PRECISIONS)

    def _check_contention(self) -> None:
        choice("contention", self.contention, CONTENTION_MODES)
        choice("wait_policy", self.wait_policy, WAIT_POLICIES)
        if self.wait_policy and self.framework != "torch":
            raise UserError(f"wait_policy: {self.wait_policy!r} sets torch's OpenMP wait "
                            f"policy; {self.framework} has none; allowed for "
                            f"{self.framework}: '' (the default)", field="wait_policy")

    def _check_numerics(self) -> None:
        """TF32 is a math mode of NVIDIA's tensor cores for fp32 work in torch: refused,
        with the reason, wherever it would mean nothing."""
        if not isinstance(self.tf32, bool):
            raise UserError(f"tf32: {self.tf32!r} is not a switch; allowed: true, false",
                            field="tf32")
        if self.tf32 and (self.device != "cuda" or self.framework != "torch"
                          or self.precision != "fp32"):
            where = (f"this run is on {self.device}" if self.device != "cuda" else
                     f"this run is {self.framework}" if self.framework != "torch" else
                     f"this run is {self.precision}")
            raise UserError(f"tf32: TF32 is a CUDA tensor-core mode for torch's fp32 matmuls "
                            f"and convolutions; {where}; allowed here: off", field="tf32")

    def _check_replicas(self, runtime: str) -> None:
        """Replicas start together and time one window: what cannot take part is refused."""
        if self.replicas == 1:
            return
        if self.policy.energy_s:
            raise UserError(f"replicas: {self.replicas} replicas cannot take an energy "
                            "reading: their loops would count each other on the one package "
                            "counter; allowed with energy: 1", field="replicas")
        why = ("the LibTorch runner times itself, outside the replicas' shared window"
               if runtime in CPP_RUNNER_RUNTIMES else
               "replicas share the CPU's cores; one device is not split here"
               if self.device == "cuda" else
               "the profiler's pass is apart from the timed window"
               if self.profile_steps else None)
        if why:
            raise UserError(f"replicas: {self.replicas} replicas cannot run {self.framework} "
                            f"{runtime} on {self.device}"
                            f"{' with profile_steps' if self.profile_steps else ''}: {why}; "
                            "allowed: 1", field="replicas")

    def _validate_user_model(self, cores: int, flags) -> "RunSpec":
        """A user's model: the format decides the framework and the runtimes; it runs with
        the weights it came with (no calibration) on the inputs it describes."""
        src = self.user_model
        check_model_name(src.name)
        if self.model != src.name:
            raise UserError(f"model: {self.model!r} differs from the user model's name "
                            f"{src.name!r}", field="model")
        if src.format == "factory":
            if self.framework not in ("torch", "tensorflow"):
                raise UserError(f"framework: {self.framework!r} cannot run a factory's model; "
                                "allowed: torch, tensorflow", field="framework")
        else:
            if detect_format(src.path) != src.format:
                raise UserError(f"model_file: {src.path} is not a {src.format} file",
                                field="model_file")
            if self.framework != src.framework:
                raise UserError(f"framework: a {src.format} model runs in {src.framework}, "
                                f"not {self.framework}; allowed: {src.framework}",
                                field="framework")
            check_trust(src)  # TorchScript and SavedModel run code: only when the user says
        if not src.inputs:
            raise UserError("input: none given; allowed: --input-shape C,H,W or one or more "
                            "--input NAME:DIMS[:DTYPE]", field="input")
        runtime = self.runtime or default_runtime(src.format, self.framework)
        if runtime not in RUNTIMES[self.framework]:
            raise UserError(f"runtime: {runtime!r} is not available for {self.framework}; "
                            f"allowed: {', '.join(RUNTIMES[self.framework])}", field="runtime")
        check_runtime(src.format, self.framework, runtime)
        if runtime in CPP_RUNNER_RUNTIMES and (len(src.inputs) != 1
                                               or src.inputs[0].dtype != "float32"
                                               or len(src.inputs[0].dims) != 4):
            raise UserError("runtime: the LibTorch C++ runner feeds one float32 N,C,H,W "
                            f"input; this model takes {describe_inputs(src.inputs)}; allowed "
                            "for it: the other runtimes of its format", field="runtime")
        self._check_sizes(cores)
        allowed = user_precisions(src.format, self.framework, runtime)
        if self.precision not in allowed:
            raise UserError(f"precision: a user's model file runs in the precision it was "
                            f"saved in ({self.precision} is not applied to it); "
                            f"{_USER_BF16}; allowed: {', '.join(allowed)}", field="precision")
        check_precision(self.framework, runtime, self.precision, self.device, flags)
        choice("device", self.device, DEVICES)
        if self.device == "cuda" and "cuda" not in device_choices(self.framework, runtime):
            raise UserError(f"device: cuda is not available for {self.framework} {runtime}; "
                            "allowed: cpu", field="device")
        if self.image_size is not None:
            raise UserError("image_size: a user's model takes the input it describes; allowed: "
                            "none (give --input-shape C,H,W instead)", field="image_size")
        int_range("profile_steps", self.profile_steps, *PROFILE_RANGE)
        if self.profile_steps and runtime not in PROFILED_RUNTIMES.get(self.framework, ()):
            raise UserError(f"profile_steps: {self.framework} {runtime} cannot be profiled; "
                            f"allowed: 0, or a runtime among "
                            f"{', '.join(PROFILED_RUNTIMES[self.framework])}",
                            field="profile_steps")
        self._check_replicas(runtime)
        self._check_contention()
        self._check_numerics()
        return replace(self, runtime=runtime, weight_policy=USER_WEIGHTS,
                       policy=self.policy.validate(),
                       options=row(self.framework, runtime).check_options(self.options))


def user_precisions(fmt: str, framework: str, runtime: str) -> tuple[str, ...]:
    """What a runtime applies to a user's model: its row's file precisions (the precision a
    file was saved in, fp32, unless the runtime sets it itself), and bf16 to a factory's
    module on a runtime that casts any module to it."""
    r = row(framework, runtime)
    bf16 = ("bf16",) if fmt == "factory" and (framework, runtime) in BF16_RUNTIMES else ()
    return tuple(dict.fromkeys((*r.file_precisions, *bf16)))


def _words(names) -> str:
    names = list(names)
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else "".join(names)


def _user_bf16() -> str:
    """Where bf16 applies to a user's model, in words, from the rows."""
    factory = [r for r in ROWS if (r.framework, r.name) in BF16_RUNTIMES]
    parts = [f"a {f} factory's model on {_words(r.name for r in factory if r.framework == f)}"
             for f in dict.fromkeys(r.framework for r in factory)]
    parts += [f"any {r.framework} model on {r.name}"
              + (f" where the CPU has {' or '.join(BF16_FLAGS)}" if r.bf16_needs_flags else "")
              for r in ROWS if "bf16" in r.file_precisions]
    return "bf16 applies to " + "; and to ".join(parts)


_USER_BF16 = _user_bf16()
