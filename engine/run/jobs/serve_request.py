"""A serving job (issue 27): one MLPerf LoadGen test per scenario against one model and
runtime, each a stored row, expanded from the Deploy form's or `python -m engine serve`'s
request into ServeSpecs; the searches' requests (engine/run/search/serving_jobs.py) build on
it. Its fields and expansion are the kind's (engine/scenarios/serving/request.py). Refused
before it is queued: a Server target over 10x the store's closed loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.run.jobs.requests import Request, local_runner, stored_closed_loop
from engine.run.process.runner import Runner
from engine.scenarios.serving.request import ServeJob
from engine.scenarios.serving.spec import check_reachable

__all__ = ["ServeRequest", "SERVE_TIMEOUT_MARGIN_S"]


# A serving run's wall-time limit beyond its LoadGen test's minimum duration: the model's
# load, the warm-up of every batch size and LoadGen's drain of late queries.
SERVE_TIMEOUT_MARGIN_S = 600.0


@dataclass(frozen=True)
class ServeRequest(ServeJob, Request):
    """Serving runs as a job: its fields and expansion are the kind's
    (engine/scenarios/serving/request.py); the store's check and its runner are here."""

    def check_stored(self, specs: list, *, db) -> None:
        """A Server target over 10x the store's closed loop of its SUT on this machine
        (engine.scenarios.serving.spec.check_reachable): the Deploy form checks it as it is
        drawn, this again when the test is submitted or the CLI runs it."""
        for spec in specs:
            if spec.scenario == "server":
                check_reachable(spec.target_qps,
                                stored_closed_loop(db, [(spec.sut, spec.batch_size)]),
                                spec.replicas)

    def runner(self, *, db, shape: str | None = None, **options) -> Runner:
        timeout = self.timeout_s or self.duration_s() + SERVE_TIMEOUT_MARGIN_S
        return local_runner(timeout_s=timeout, memory_cap_bytes=self.memory_cap_bytes,
                            db=db, shape=shape, **options)
