"""Inference: a model's forward pass timed per batch, one runtime at a time."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.protocol import Event, InferenceResult, Progress
from engine.scenarios.base import Request, Scenario, phase_of
from engine.core.budget import RoundBudget, default_max_rounds
from engine.core.cluster import check_profile_on_cluster, parse_placement
from engine.core.errors import UserError
from engine.core.inference import (RunSpec, check_contention_here, expand_sweep,
                                   left_out_splits, with_contention)
from engine.core.limits import DEFAULT_ROUNDS, DEFAULT_VERDICT_MARGIN, require_values
from engine.core.model_source import ModelSource, describe_inputs
from engine.core.policy import MeasurementPolicy

__all__ = ["Inference", "INFERENCE", "SweepRequest"]


class Inference(Scenario):
    kind = RunSpec.kind
    spec_type = RunSpec
    worker_body = "engine.worker.inference"
    title = "Compare"
    sample_unit = "batch"
    counts_model_stats = True
    decides_contests = True

    def record_columns(self, spec) -> dict:
        src = spec.user_model
        common = {"replicas": spec.replicas, "contention": spec.contention,
                  "wait_policy": spec.wait_policy}
        if src is None:
            return common
        # a file's path, or a factory's module:function (its folder is in the command line)
        return {"model_format": src.format, "model_origin": src.factory or src.path,
                "model_inputs": describe_inputs(src.inputs), **common}

    def config_extra(self, spec) -> dict:
        extra = {"profile_steps": spec.profile_steps} if spec.profile_steps else {}
        if spec.replica:
            extra["replica"] = spec.replica
        return extra

    def result_extra(self, res: InferenceResult) -> dict:
        extra = {"model_reused": bool(res.model_reused),
                 "output_rel_diff": res.output_rel_diff,
                 # which call first_forward_s timed: always the first after preparation
                 "first_forward_from": res.first_forward_from}
        if res.replica_throughputs:  # each replica's own figure and the window's skew
            extra.update(replica_throughputs=list(res.replica_throughputs),
                         window_start_skew_ms=res.window_start_skew_ms,
                         window_end_skew_ms=res.window_end_skew_ms)
            if res.window_skew_frac is not None:  # the window every replica covered
                extra.update(window_skew_frac=res.window_skew_frac, window_s=res.window_s)
        if res.interleaved:  # timed alternately with a contest's other contenders
            extra["interleaved"] = res.interleaved
        if res.sequential:  # timed alone, and why
            extra["sequential"] = res.sequential
        return extra

    def throughput(self, spec, res: InferenceResult, samples_ns) -> float | None:
        """Replicas serve at once: the machine's throughput is the sum of theirs over the
        window every replica covered; one worker: the base definition."""
        if res.replica_throughputs:
            return sum(res.replica_throughputs)
        return super().throughput(spec, res, samples_ns)

    def describe_event(self, spec, ev: Event) -> str:
        iters = f" {ev.iters} it" if isinstance(ev, Progress) and ev.iters else ""
        return (f"{spec.model} {spec.framework} b{spec.batch_size} t{spec.intra_threads}: "
                f"{phase_of(ev)}{iters}")

    def figure(self, rec) -> str:
        return (f"p50 {rec.median_ms:.3f} ms, {rec.throughput:,.1f} samples/s, "
                f"{rec.validity}")


INFERENCE = Inference()
EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class SweepRequest(Request):
    """An inference sweep (engine.core.inference.RunSpec) as a dashboard job."""

    scenario = INFERENCE

    models: tuple[str, ...]
    frameworks: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    threads: tuple[int, ...]
    image_size: int | None = None
    precision: str = "fp32"
    inter_threads: int = 1
    weight_policy: str = "bn_calibrated"
    policy: MeasurementPolicy = field(default_factory=MeasurementPolicy)
    rounds: int = DEFAULT_ROUNDS
    max_rounds: int | None = None  # None: default_max_rounds(rounds)
    time_budget_s: float | None = None
    margin: float = DEFAULT_VERDICT_MARGIN  # a verdict's practical margin (a fraction)
    # every configuration also beside a controlled neighbour (steady, on/off), torch also
    # with OpenMP's passive wait policy (engine.core.inference.with_contention)
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
    # where it runs, issue 15: "local" (this machine) or "ray" (the cluster at
    # $BENCH_RAY_ADDRESS, engine/run/cluster.py) on the nodes `placements` name, each
    # shape=NAME or node=ID; none: one node of every kind (a fleet sweep)
    executor: str = "local"
    placements: tuple[str, ...] = ()
    # the cores each configuration's threads x replicas must fit: None, this machine's
    # logical cores; a cluster request carries its nodes' (NodeKinds.cores), and its job
    # checks them again against the nodes it gets
    cores: int | None = None

    def budget(self) -> RoundBudget:
        return RoundBudget(self.rounds, default_max_rounds(self.rounds)
                           if self.max_rounds is None else self.max_rounds,
                           self.time_budget_s, self.margin)

    def _expand(self):
        self._check_where()
        require_values(replicas=self.replicas)
        specs = expand_sweep(list(self.models), list(self.frameworks), list(self.batch_sizes),
                             list(self.threads), inter_threads=self.inter_threads,
                             precision=self.precision, image_size=self.image_size,
                             weight_policy=self.weight_policy, policy=self.policy,
                             runtimes=list(self.runtimes) or None,
                             profile_steps=self.profile_steps,
                             user_model=self.user_model, replicas=list(self.replicas),
                             cores=self.cores)
        if self.contention:
            specs = with_contention(specs)
        return specs, left_out_splits(self.threads, self.replicas, self.cores)

    def _check_where(self) -> None:
        if self.executor not in EXECUTORS:
            raise UserError(f"executor: {self.executor!r} is not known; allowed: "
                            f"{', '.join(EXECUTORS)}", field="executor")
        if self.executor == "local" and self.placements:
            raise UserError("placement: only with the ray executor; allowed on this machine: "
                            "none", field="placement")
        for p in self.placements:
            parse_placement(p)
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
        return super().label() + (f", {where}" if where else "")

    @classmethod
    def covering(cls, configs: list[dict]) -> list["SweepRequest"]:
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
