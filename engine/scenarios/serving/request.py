"""What a serving job asks for, as the Deploy form and `python -m engine serve` fill it, and
its expansion into ServeSpecs: one LoadGen test per scenario, each filled from its
scenario's row (SCENARIO_INPUTS: which takes a bound, a rate, a fixed query batch).

A job's fields and its expansion, framework- and runner-free; engine/run/jobs/
serve_request.py makes it a `Request` (ServeRequest(ServeJob, Request): the store's check
of its target, its runner, how it is queued, run and stored), since starting workers is
engine/run's and engine/scenarios/ may not import it.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.limits import choice, require_values
from engine.core.model_source import ModelSource
from engine.scenarios.inference.spec import RunSpec
from engine.scenarios.serving.hooks import SERVING
from engine.scenarios.serving.spec import (DEFAULT_MIN_DURATION_S, DEFAULT_SAMPLES,
                                           OFFICIAL_MIN_DURATION_S, SCENARIO_INPUTS,
                                           SERVE_SCENARIOS, ServeSpec, default_min_queries)

__all__ = ["ServeJob"]


@dataclass(frozen=True)
class ServeJob:
    """Serving runs (engine.scenarios.serving.spec.ServeSpec): one LoadGen test per scenario,
    each a stored row, against one model and runtime: the fields and their expansion
    (ServeRequest runs it)."""

    scenario = SERVING

    scenarios: tuple[str, ...]
    model: str
    framework: str
    runtime: str | None = None
    threads: int = 1
    inter_threads: int = 1
    image_size: int | None = None
    precision: str = "fp32"
    device: str = "cpu"
    weight_policy: str = "bn_calibrated"
    user_model: ModelSource | None = None
    max_batch: int = 1  # Server's dynamic batcher and Offline's calls
    target_qps: float | None = None
    bound_ms: float | None = None
    max_wait_ms: float = 0.0
    min_duration_s: float | None = None  # None: LoadGen's 10 s, or the official 600 s
    min_query_count: int | None = None  # None: the scenario's (default_min_queries)
    official: bool = False
    samples: int = DEFAULT_SAMPLES
    replicas: int = 1
    loadgen_seed: int = 0
    rounds: int = 1
    seed: int | None = None
    timeout_s: float | None = None  # None: the test's duration plus SERVE_TIMEOUT_MARGIN_S
    memory_cap_bytes: int | None = None
    # what threads x replicas must fit: None, this machine's logical cores; a tuning on a
    # cluster's node kinds validates each node's candidates against that node's
    cores: int | None = None

    def duration_s(self) -> float:
        if self.min_duration_s is not None:
            return self.min_duration_s
        return OFFICIAL_MIN_DURATION_S if self.official else DEFAULT_MIN_DURATION_S

    def _expand(self):
        require_values(scenario=self.scenarios)
        specs = []
        for name in self.scenarios:
            choice("scenario", name, SERVE_SCENARIOS)  # as the spec's validate refuses it
            takes = SCENARIO_INPUTS[name]
            batch = self.max_batch if takes.query_batch is None else takes.query_batch
            sut = RunSpec(self.model, self.framework, batch, self.threads,
                          inter_threads=self.inter_threads, precision=self.precision,
                          image_size=self.image_size, device=self.device,
                          weight_policy=self.weight_policy, runtime=self.runtime,
                          user_model=self.user_model)
            specs.append(ServeSpec(
                sut, name, min_duration_s=self.duration_s(),
                min_query_count=(default_min_queries(name) if self.min_query_count is None
                                 else self.min_query_count),
                target_qps=self.target_qps if takes.rate else None,
                bound_ms=self.bound_ms if takes.bound else None,
                max_wait_ms=self.max_wait_ms, samples=self.samples, replicas=self.replicas,
                seed=self.loadgen_seed, official=self.official).validate(self.cores))
        return specs, []

    def label(self) -> str:
        return f"serve {', '.join(self.scenarios)}: {self.model} {self.framework}"
