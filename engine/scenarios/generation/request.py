"""What a generation sweep asks for, as `python -m engine generate` (and the Run page) fill
it, and its expansion into GenSpecs: models x runtimes x prompt lengths x output lengths x
batches x threads x precisions.

A job's fields and its expansion, framework- and runner-free; engine/run/jobs/
generation_request.py makes it a `Request` (GenRequest(GenJob, Request): how it is queued,
run and stored as a sweep), since starting workers is engine/run's and engine/scenarios/
may not import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.budget import RoundBudget, default_max_rounds
from engine.core.limits import DEFAULT_ROUNDS, DEFAULT_VERDICT_MARGIN
from engine.core.policy import MeasurementPolicy
from engine.core.runtimes import NO_OPTIONS, RuntimeOptions
from engine.scenarios.generation.hooks import GENERATION
from engine.scenarios.generation.spec import GEN_POLICY, expand_generation

__all__ = ["GenJob"]


@dataclass(frozen=True)
class GenJob:
    """A generation sweep (engine.scenarios.generation.spec.GenSpec) as a job: its fields
    and their expansion (GenRequest runs it)."""

    scenario = GENERATION

    models: tuple[str, ...]
    runtimes: tuple[str, ...]
    prompt_lens: tuple[int, ...]
    output_lens: tuple[int, ...]
    batch_sizes: tuple[int, ...] = (1,)
    threads: tuple[int, ...] = (1,)
    precisions: tuple[str, ...] = ("fp32",)
    inter_threads: int = 1
    options: RuntimeOptions = NO_OPTIONS  # runtime options by name, to the runtimes that have it
    gen_seed: int = 0  # the weights and the prompts (GenSpec.seed)
    policy: MeasurementPolicy = field(default_factory=lambda: GEN_POLICY)
    # The minimum rounds (contests need at least 2 for an interval); a contest of any metric
    # still undecided then gets more rounds, for its configurations only, up to max_rounds
    # (None: default_max_rounds(rounds)) and within time_budget_s, as an inference sweep's
    rounds: int = DEFAULT_ROUNDS
    max_rounds: int | None = None
    time_budget_s: float | None = None
    margin: float = DEFAULT_VERDICT_MARGIN  # a verdict's practical margin (a fraction)
    seed: int | None = None  # the rounds' order
    timeout_s: float = 1800.0  # a run's limit: its first call builds, exports or compiles
    memory_cap_bytes: int | None = None

    def label(self) -> str:
        return (f"generate {', '.join(self.models)} × {', '.join(self.runtimes)}: prompt "
                f"{'/'.join(map(str, self.prompt_lens))}, output "
                f"{'/'.join(map(str, self.output_lens))}")

    def budget(self) -> RoundBudget:
        return RoundBudget(self.rounds, default_max_rounds(self.rounds)
                           if self.max_rounds is None else self.max_rounds,
                           self.time_budget_s, self.margin)

    def _expand(self):
        return expand_generation(list(self.models), list(self.runtimes),
                                 list(self.prompt_lens), list(self.output_lens),
                                 list(self.batch_sizes), list(self.threads),
                                 list(self.precisions), options=dict(self.options),
                                 inter_threads=self.inter_threads, seed=self.gen_seed,
                                 policy=self.policy)
