"""The jobs a user asks for, on the parent side: a request expands into a scenario's specs,
says how many rounds it may take, builds the Runner that runs it and runs it as one stored
sweep. A kind's request is its job (fields, expansion, label: engine/scenarios/<kind>/
request.py) made a `Request` here, `class SweepRequest(SweepJob, Request)`. The Run page
and the CLI build the same request and call the same `run`; a serving test's is
engine/run/jobs/serve_request.py, and a batch search (engine/run/search/batch_search.py)
is a request too.

engine/scenarios/ describes the kinds of work and imports nothing from here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, ClassVar

from engine.core.budget import RoundBudget
from engine.core.limits import ROUNDS_RANGE, int_range
from engine.run.process.runner import Runner
from engine.scenarios import Scenario
from engine.scenarios.dataload.request import LoadJob
from engine.scenarios.inference.request import SweepJob
from engine.scenarios.training.request import TrainJob

__all__ = ["Request", "SweepRequest", "TrainRequest", "LoadRequest", "local_runner",
           "stored_closed_loop"]


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


@dataclass(frozen=True)
class SweepRequest(SweepJob, Request):
    """An inference sweep as a job: its fields and expansion are the kind's
    (engine/scenarios/inference/request.py), how it is queued, run and stored the Request's."""


@dataclass(frozen=True)
class TrainRequest(TrainJob, Request):
    """A training sweep as a job (engine/scenarios/training/request.py)."""


@dataclass(frozen=True)
class LoadRequest(LoadJob, Request):
    """A data-loading sweep as a job (engine/scenarios/dataload/request.py)."""
