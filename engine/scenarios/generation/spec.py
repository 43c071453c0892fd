"""What to run for generation: a frozen `GenSpec` (one model, one runtime, one prompt
length x output length x batch) and the expansion of a generation sweep into them.

Every field is checked here, before anything is spawned, and a bad one is refused with a
`UserError` naming the field and the allowed values. A precision a runtime's row refuses
(or bf16 on a CPU without bf16 instructions) is skipped with its reason in a sweep of
several runtimes, and refused when nothing of the sweep would run it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from engine.core.errors import UserError
from engine.core.limits import (SEED_RANGE, choice, int_range, logical_cores, require_values,
                                unique)
from engine.core.policy import MeasurementPolicy
from engine.core.precision import BF16_FLAGS, cpu_flags
from engine.core.runtimes import NO_OPTIONS, RuntimeOptions
from engine.scenarios.generation.models import LANGUAGE_MODELS, language_model
from engine.scenarios.generation.runtimes import GEN_PRECISIONS, gen_row, runtime_names

__all__ = ["GenSpec", "GEN_POLICY", "GEN_BATCH_RANGE", "GEN_DEVICES", "expand_generation",
           "precision_skip"]

GEN_BATCH_RANGE = (1, 64)
GEN_DEVICES = ("cpu",)  # the bodies here generate on the CPU only
# One timed sample is one generate call of output_len tokens, seconds where an inference
# call takes milliseconds: fewer warm-up calls and repetitions than inference's defaults
# (10 and 30), the same 2 s floor, and a ceiling long enough for a 1 B model's 1 K tokens.
GEN_POLICY = MeasurementPolicy(warmup_iters=2, warmup_max_s=1.0, min_time_s=2.0, min_iters=10,
                               max_time_s=600.0)


@dataclass(frozen=True)
class GenSpec:
    """One generation run: greedy decoding of exactly output_len tokens for batch_size
    random prompts of prompt_len tokens (seeded; the end-of-sequence token ignored), every
    call's per-token readings kept."""

    model: str
    framework: str
    runtime: str
    batch_size: int
    prompt_len: int
    output_len: int
    intra_threads: int
    inter_threads: int = 1
    precision: str = "fp32"
    options: RuntimeOptions = NO_OPTIONS
    seed: int = 0  # the weights and the prompts
    device: str = "cpu"
    policy: MeasurementPolicy = field(default_factory=lambda: GEN_POLICY)
    kind = "generate"  # class constants, not fields: the runs table's columns
    image_size = None
    weight_policy = "random"  # seeded random weights (engine/scenarios/generation/models.py)
    profile_steps = 0

    def __post_init__(self):
        if not isinstance(self.options, RuntimeOptions):  # a dict given, or read from JSON
            object.__setattr__(self, "options", RuntimeOptions(self.options or {}))

    def key(self) -> tuple:
        return (self.model, self.framework, self.runtime, self.batch_size, self.prompt_len,
                self.output_len, self.intra_threads, self.inter_threads, self.precision,
                self.device, self.seed, tuple(sorted(self.options.items())))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "GenSpec":
        return cls(**{**d, "policy": MeasurementPolicy(**d["policy"]),
                      "options": RuntimeOptions(d.get("options") or {})})

    @property
    def kv_cache_bytes(self) -> int:
        """The KV cache at the end of a call: every prompt and output token of every row
        (keys and values at the precision's width; int8/int4 runtimes keep theirs in
        their activation precision, counted as fp32)."""
        width = 2 if self.precision == "bf16" else 4
        return (language_model(self.model).kv_bytes_per_token(width) * self.batch_size
                * (self.prompt_len + self.output_len))

    def validate(self, cores: int | None = None) -> "GenSpec":
        cores = cores or logical_cores()
        if self.model not in LANGUAGE_MODELS:
            raise UserError(f"model: unknown {self.model!r}; allowed: "
                            f"{', '.join(LANGUAGE_MODELS)}", field="model")
        row = gen_row(self.runtime)
        if row is None:
            raise UserError(f"runtime: unknown {self.runtime!r}; allowed: "
                            f"{', '.join(runtime_names())}", field="runtime")
        if row.framework != self.framework:
            raise UserError(f"framework: {self.runtime} runs under {row.framework}, not "
                            f"{self.framework!r}; allowed: {row.framework}", field="framework")
        int_range("batch_size", self.batch_size, *GEN_BATCH_RANGE)
        m = language_model(self.model)
        int_range("prompt_len", self.prompt_len, 1, m.max_positions - 2,
                  hint=f" ({self.model} has {m.max_positions} positions)")
        int_range("output_len", self.output_len, 2, m.max_positions - 1,
                  hint=" (TPOT needs a second token)")
        if self.prompt_len + self.output_len > m.max_positions:
            raise UserError(f"output_len: prompt_len + output_len = "
                            f"{self.prompt_len + self.output_len} exceeds {self.model}'s "
                            f"{m.max_positions} positions; allowed: output_len 2.."
                            f"{m.max_positions - self.prompt_len} at prompt_len "
                            f"{self.prompt_len}", field="output_len")
        for name in ("intra_threads", "inter_threads"):
            int_range(name, getattr(self, name), 1, cores,
                      hint=f" (this machine has {cores} logical cores)")
        choice("precision", self.precision, GEN_PRECISIONS)
        why = row.refusal(self.precision)
        if why:
            raise UserError(f"precision: {self.runtime} cannot run {self.precision}: {why}; "
                            f"allowed: {', '.join(row.precisions)}", field="precision")
        int_range("seed", self.seed, *SEED_RANGE)
        choice("device", self.device, GEN_DEVICES)
        self.policy.validate()
        return replace(self, options=row.check_options(self.options))


def precision_skip(runtime: str, precision: str, flags: tuple[str, ...] | None = None) -> str:
    """Why this runtime does not run this precision here ("" when it does): its row's
    refusal, or bf16 on a CPU without bf16 instructions (emulated, slower than fp32)."""
    row = gen_row(runtime)
    if row is None:
        return ""
    why = row.refusal(precision)
    if why or precision != "bf16" or not row.bf16_needs_flags:
        return why
    have = cpu_flags() if flags is None else flags
    if not any(f in have for f in BF16_FLAGS):
        return (f"this CPU has neither {' nor '.join(BF16_FLAGS)}: bf16 would be emulated in "
                "fp32 instructions, slower than fp32")
    return ""


def expand_generation(models, runtimes, prompt_lens, output_lens, batch_sizes, threads,
                      precisions=("fp32",), *, flags: tuple[str, ...] | None = None,
                      cores: int | None = None, options=None,
                      **common) -> tuple[list[GenSpec], list[str]]:
    """(specs, skipped): models x runtimes x prompt lengths x output lengths x batches x
    threads x precisions, validated and ordered by worker group (framework, threads), a
    skipped line ("what: why") for each runtime x precision that cannot run here. Refused
    (UserError) when a field is bad or nothing would run. options: runtime options by name,
    each handed to the runtimes that have it (one no runtime of the sweep has is refused)."""
    require_values(model=models, runtime=runtimes, prompt_len=prompt_lens,
                   output_len=output_lens, batch_size=batch_sizes, threads=threads,
                   precision=precisions)
    for name in unique(runtimes):
        if gen_row(name) is None:
            raise UserError(f"runtime: unknown {name!r}; allowed: "
                            f"{', '.join(runtime_names())}", field="runtime")
    for p in unique(precisions):
        choice("precision", p, GEN_PRECISIONS)
    rows = [gen_row(n) for n in unique(runtimes)]
    options = dict(options or {})
    for name in options:
        if not any(name in (o.name for o in r.options) for r in rows):
            have = sorted({o.name for r in rows for o in r.options})
            raise UserError(f"{name}: no runtime of this sweep has option {name}; allowed: "
                            f"{', '.join(have) or 'none'}", field=name)
    frameworks = list(dict.fromkeys(r.framework for r in rows))
    specs, skipped = [], []
    for fw in frameworks:
        for t in unique(threads):
            for m in unique(models):
                for r in (r for r in rows if r.framework == fw):
                    for prec in unique(precisions):
                        why = precision_skip(r.name, prec, flags)
                        if why:
                            line = f"{r.name} {prec}: {why}"
                            if line not in skipped:
                                skipped.append(line)
                            continue
                        for p in unique(prompt_lens):
                            for n in unique(output_lens):
                                for b in unique(batch_sizes):
                                    own = {o.name: options[o.name]
                                           for o in r.options if o.name in options}
                                    specs.append(GenSpec(
                                        m, fw, r.name, b, p, n, t, precision=prec,
                                        options=RuntimeOptions(own),
                                        **common).validate(cores))
    if not specs:
        raise UserError("precision: nothing of this sweep runs here: "
                        + "; ".join(skipped), field="precision")
    return specs, skipped
