"""The jobs a user asks for, on the parent side: a request expands into a scenario's specs,
says how many rounds it may take, builds the Runner that runs it and runs it as one stored
sweep. The Run page and the CLI build the same request and call the same `run`; a serving
test's is engine/run/jobs/serve_request.py, and a batch search (engine/run/search/
batch_search.py) is a request too.

engine/scenarios/ describes the kinds of work and imports nothing from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, ClassVar

from engine.core.budget import RoundBudget, default_max_rounds
from engine.core.cluster import check_profile_on_cluster, parse_placement
from engine.scenarios.dataload.spec import expand_load
from engine.core.errors import UserError
from engine.scenarios.inference.expand import (check_contention_here, expand_sweep,
                                               left_out_splits, with_contention)
from engine.core.limits import (DEFAULT_ROUNDS, DEFAULT_VERDICT_MARGIN, ROUNDS_RANGE,
                                int_range, require_values)
from engine.core.model_source import ModelSource
from engine.core.policy import MeasurementPolicy
from engine.core.runtimes import NO_OPTIONS, RuntimeOptions
from engine.scenarios.training.spec import expand_train
from engine.run.process.runner import Runner
from engine.scenarios import DATA_LOADING, INFERENCE, TRAINING, Scenario

__all__ = ["Request", "SweepRequest", "TrainRequest", "LoadRequest", "local_runner",
           "stored_closed_loop", "EXECUTORS", "check_where", "models_label"]


def local_runner(*, timeout_s: float, memory_cap_bytes: int | None, db,
                 shape: str | None = None, **options) -> Runner:
    """The one place a Runner on this machine is built, for the Run page's jobs and the
    CLI alike: `shape` (or $BENCH_MACHINE_SHAPE) is checked against `db`'s price catalog
    now, before anything runs. options: Runner's (cancel, process_per_run, ...)."""
    from store.prices import machine_shape

    return Runner(timeout_s=timeout_s, memory_cap_bytes=memory_cap_bytes,
                  **{"machine_shape": machine_shape(shape, db), **options})


def stored_closed_loop(db, suts) -> float | None:
    """The most samples/s an ok closed-loop run did on this machine among (SUT, max batch)
    pairs (store.queries.closed_loop_best each): what a target rate is judged reachable by.
    None: none stored, or no database yet."""
    from pathlib import Path

    from engine.run.process.machine import system_info
    from store.db import open_db
    from store.queries import closed_loop_best

    if str(db) == ":memory:" or not Path(db).exists():
        return None
    system_id = system_info()["system_id"]
    # Read-write, as the dashboard's own handle is: DuckDB refuses a read-only connection
    # to a file this process already holds read-write (the job queue checks from there).
    with open_db(db) as con:
        figures = [closed_loop_best(con, sut, batch, system_id=system_id)
                   for sut, batch in suts]
    return max((f for f in figures if f), default=None)


class Request:
    """A dashboard job that expands into specs of one scenario; a mixin for frozen
    dataclasses with `rounds` and `seed` fields. Subclasses implement _expand()."""

    scenario: ClassVar[Scenario]
    # Where the job runs: this machine. A request that may run on the Ray cluster has a
    # field of this name instead ("local" or "ray": SweepRequest, TuneRequest), which the
    # job queue reads to build its runner there.
    executor = "local"

    def expand(self) -> tuple[list, list[str]]:
        """(specs, skipped): what runs, validated, and a line for each combination that
        cannot run; UserError naming the field before anything is queued."""
        int_range("rounds", self.rounds, *ROUNDS_RANGE)
        specs, skipped = self._expand()
        self.budget().validate(specs)
        return specs, skipped

    def budget(self):
        """How many rounds: exactly `rounds` unless the request asks for rounds until
        decided (an inference sweep's max_rounds and time_budget_s)."""
        return RoundBudget.fixed(self.rounds)

    def _expand(self) -> tuple[list, list[str]]:
        raise NotImplementedError

    def specs(self) -> list:
        return self.expand()[0]

    def check_stored(self, specs: list, *, db) -> None:
        """Refusals that depend on what the store holds (UserError naming the field), after
        expand() and before anything is queued or run: the job queue's submit and the CLI
        call it. None by default."""

    def same_work(self, other) -> bool:
        """Equal but for the seed: launching it twice would measure the same thing twice."""
        return type(other) is type(self) and replace(self, seed=None) == replace(other, seed=None)

    def runner(self, *, db, shape: str | None = None, **options) -> Runner:
        """This machine's Runner for the request (a cluster's: engine/run/cluster/join.py)."""
        return local_runner(timeout_s=self.timeout_s, memory_cap_bytes=self.memory_cap_bytes,
                            db=db, shape=shape, **options)

    def run(self, specs: list, *, db, runner, seed: int, on_start, on_stored, on_event,
            on_plan=lambda step: None, on_stop: Callable[[str], None] = lambda why: None,
            command: str = "dashboard") -> str:
        """Run the job's specs as one stored sweep; returns its conclusion: why no further
        round ran ("stopped: every contest decided after 4 rounds"; empty when cancelled).
        Its figures are its stored runs. A search overrides this. on_plan(step) before each
        round (engine.run.jobs.sweep.RoundPlan); on_stop(why) as the sweep stops; command: what
        launched it, kept with the sweep."""
        from engine.run.jobs.sweep import run_sweep  # sweep -> runner -> ...: not at import time

        stopped = []

        def stop(why):
            stopped.append(why)
            on_stop(why)
        run_sweep(specs, db=db, rounds=self.budget(), seed=seed, runner=runner,
                  command=command, on_start=on_start, on_stored=on_stored,
                  on_event=on_event, on_plan=on_plan, on_stop=stop)
        return f"stopped: {stopped[0]}" if stopped else ""

    def label(self) -> str:
        """A short description of the job for the queue on the Run page."""
        raise NotImplementedError


def models_label(models, frameworks) -> str:
    """'resnet18, mobilenet_v3_small × torch': a sweep's label, its models by frameworks."""
    return f"{', '.join(models)} × {', '.join(frameworks)}"


EXECUTORS = ("local", "ray")


def check_where(executor: str, placements) -> None:
    """A known executor, and placements (shape=NAME or node=ID) only on the cluster."""
    if executor not in EXECUTORS:
        raise UserError(f"executor: {executor!r} is not known; allowed: "
                        f"{', '.join(EXECUTORS)}", field="executor")
    if executor == "local" and placements:
        raise UserError("placement: only with the ray executor; allowed on this machine: "
                        "none", field="placement")
    for p in placements:
        parse_placement(p)


@dataclass(frozen=True)
class SweepRequest(Request):
    """An inference sweep (engine.scenarios.inference.spec.RunSpec) as a dashboard job."""

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


@dataclass(frozen=True)
class TrainRequest(Request):
    """A training sweep (engine.scenarios.training.spec.TrainSpec) as a dashboard job."""

    scenario = TRAINING

    models: tuple[str, ...]
    frameworks: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    threads: tuple[int, ...]
    epochs: int = 1
    steps_per_epoch: int | None = None
    dataset: str = "digits"
    lr: float = 0.01
    momentum: float = 0.9
    inter_threads: int = 1
    image_size: int | None = None
    synthetic_samples: int = 2048
    warmup_steps: int = 5
    data_seed: int = 0  # the model's initialisation and the data's order (TrainSpec.seed)
    profile_steps: int = 0
    runtimes: tuple[str, ...] = ()  # empty: each framework's default
    rounds: int = 1
    seed: int | None = None
    timeout_s: float = 3600.0
    memory_cap_bytes: int | None = None

    def label(self) -> str:
        return models_label(self.models, self.frameworks)

    def _expand(self):
        return expand_train(list(self.models), list(self.frameworks), list(self.batch_sizes),
                            list(self.threads), runtimes=list(self.runtimes) or None,
                            epochs=self.epochs, steps_per_epoch=self.steps_per_epoch,
                            dataset=self.dataset, lr=self.lr, momentum=self.momentum,
                            inter_threads=self.inter_threads, image_size=self.image_size,
                            synthetic_samples=self.synthetic_samples,
                            warmup_steps=self.warmup_steps, seed=self.data_seed,
                            profile_steps=self.profile_steps), []


@dataclass(frozen=True)
class LoadRequest(Request):
    """A data-loading sweep (engine.scenarios.dataload.spec.LoadSpec) as a dashboard job."""

    scenario = DATA_LOADING

    formats: tuple[str, ...]
    decoders: tuple[str, ...]
    normalizers: tuple[str, ...]
    pipelines: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    workers: tuple[int, ...]
    threads: tuple[int, ...]
    count: int = 256
    image_size: int = 256
    data_seed: int = 0  # the generated images (LoadSpec.seed)
    policy: MeasurementPolicy = field(default_factory=MeasurementPolicy)
    rounds: int = 1
    seed: int | None = None
    timeout_s: float = 1800.0
    memory_cap_bytes: int | None = None

    def _expand(self):
        return expand_load(list(self.formats), list(self.decoders), list(self.normalizers),
                           list(self.pipelines), list(self.batch_sizes), list(self.workers),
                           list(self.threads), count=self.count, image_size=self.image_size,
                           seed=self.data_seed, policy=self.policy)

    def label(self) -> str:
        return (f"{', '.join(self.formats)} × {', '.join(self.decoders)} × "
                f"{', '.join(self.pipelines)}")
