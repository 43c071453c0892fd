"""What an inference sweep asks for, as the Run page and `python -m engine run` fill it,
and its expansion into RunSpecs (expand.py), checked against where it runs.

A job's fields and its expansion, framework- and runner-free; engine/run/jobs/requests.py makes it a
`Request` (SweepRequest(Job, Request): how it is queued, run and stored as a sweep), since starting
workers is engine/run's and engine/scenarios/ may not import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from engine.core.budget import RoundBudget, default_max_rounds
from engine.core.cluster import check_profile_on_cluster, check_where
from engine.core.limits import DEFAULT_ROUNDS, DEFAULT_VERDICT_MARGIN, require_values
from engine.core.model_source import ModelSource
from engine.core.policy import MeasurementPolicy
from engine.core.runtimes import NO_OPTIONS, RuntimeOptions
from engine.scenarios.base import models_label
from engine.scenarios.inference.expand import (check_contention_here, expand_sweep,
                                               left_out_splits, with_contention)
from engine.scenarios.inference.hooks import INFERENCE

__all__ = ["SweepJob"]


@dataclass(frozen=True)
class SweepJob:
    """An inference sweep (engine.scenarios.inference.spec.RunSpec) as a dashboard job:
    its fields and their expansion (SweepRequest runs it)."""

    scenario = INFERENCE

    models: tuple[str, ...]
    frameworks: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    threads: tuple[int, ...]
    image_size: int | None = None
    precision: str = "fp32"
    # runtime options by name (engine.core.runtimes: OpenVINO's ov_hint), each handed to the
    # runtimes that have it
    options: RuntimeOptions = NO_OPTIONS
    device: str = "cpu"
    inter_threads: int = 1
    weight_policy: str = "bn_calibrated"
    policy: MeasurementPolicy = field(default_factory=MeasurementPolicy)
    rounds: int = DEFAULT_ROUNDS
    max_rounds: int | None = None  # None: default_max_rounds(rounds)
    time_budget_s: float | None = None
    margin: float = DEFAULT_VERDICT_MARGIN  # a verdict's practical margin (a fraction)
    # every configuration also beside a controlled neighbour (steady, on/off), torch also
    # with OpenMP's passive wait policy (engine.scenarios.inference.expand.with_contention)
    contention: bool = False
    seed: int | None = None
    timeout_s: float = 600.0
    memory_cap_bytes: int | None = None
    runtimes: tuple[str, ...] = ()  # empty: each framework's default runtime
    profile_steps: int = 0  # >0: profile this many iterations after each timed pass
    user_model: ModelSource | None = None  # a user's model (models = its name), issue #14
    # R identical workers per configuration, each with its threads on cores of its own,
    # timed over one window; splits (threads x replicas) over `cores` are left out
    replicas: tuple[int, ...] = (1,)
    # an A/A test: every configuration twice, the copy in a worker of its own
    # (RunSpec.replica), after the originals so each worker's group stays contiguous
    aa_test: bool = False
    # where it runs, issue 15: "local" (this machine) or "ray" (the cluster at
    # $BENCH_RAY_ADDRESS, engine/run/cluster/join.py) on the nodes `placements` name, each
    # shape=NAME or node=ID; none: one node of every kind (a fleet sweep)
    executor: str = "local"
    placements: tuple[str, ...] = ()
    # the cores each configuration's threads x replicas must fit: None, this machine's
    # logical cores; a cluster request carries its nodes' (NodeKinds.cores), and its job
    # checks them again against the nodes it gets
    cores: int | None = None
    tf32: bool = False  # TF32 for fp32 CUDA matmuls and convolutions (RunSpec.tf32)

    def budget(self) -> RoundBudget:
        return RoundBudget(self.rounds, default_max_rounds(self.rounds)
                           if self.max_rounds is None else self.max_rounds,
                           self.time_budget_s, self.margin)

    def _expand(self):
        self.check_where()
        require_values(replicas=self.replicas)
        specs = expand_sweep(list(self.models), list(self.frameworks), list(self.batch_sizes),
                             list(self.threads), inter_threads=self.inter_threads,
                             precision=self.precision, image_size=self.image_size,
                             device=self.device, weight_policy=self.weight_policy, policy=self.policy,
                             runtimes=list(self.runtimes) or None,
                             profile_steps=self.profile_steps,
                             user_model=self.user_model, replicas=list(self.replicas),
                             cores=self.cores, tf32=self.tf32,
                             options=self.options)
        if self.aa_test:
            specs = specs + [replace(s, replica=1) for s in specs]
        if self.contention:
            specs = with_contention(specs)
        return specs, left_out_splits(self.threads, self.replicas, self.cores)

    def check_where(self) -> None:
        """Refuse what the executor cannot run, before a cluster is joined."""
        check_where(self.executor, self.placements)
        if self.executor == "ray":
            check_profile_on_cluster(self.profile_steps)
            check_contention_here(self.contention)

    def where(self) -> str:
        """Where the sweep runs, in words (empty on this machine)."""
        if self.executor != "ray":
            return ""
        kinds = [p.partition("=")[2] for p in self.placements]
        return ("on " + ", ".join(kinds)) if kinds else "on every node kind"

    def label(self) -> str:
        where = self.where()
        return models_label(self.models, self.frameworks) + (f", {where}" if where else "")

    @classmethod
    def covering(cls, configs: list[dict]) -> list:
        """Inference sweeps that measure these configurations (dicts with model, framework,
        runtime, batch_size, threads, image_size), one per image size: each sweep is the
        cross product of what its configurations use, so it may measure a few more."""
        by_size: dict[int, list[dict]] = {}
        for c in configs:
            by_size.setdefault(int(c["image_size"]), []).append(c)

        def values(rows, key, cast=str):
            return tuple(sorted({cast(r[key]) for r in rows}))
        return [cls(models=values(rows, "model"), frameworks=values(rows, "framework"),
                    batch_sizes=values(rows, "batch_size", int),
                    threads=values(rows, "threads", int), image_size=size,
                    runtimes=values(rows, "runtime"))
                for size, rows in sorted(by_size.items())]
