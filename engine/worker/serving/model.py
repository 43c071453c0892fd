"""A serving test's model ready to answer (engine/worker/serving/body.py's, or a replica's:
engine/worker/serving/replica.py): built as inference builds it, checked, a step per batch size
the scenario calls, warm."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from engine.scenarios.serving.spec import MULTI_STREAM_SAMPLES
from engine.worker.inference.body import Models, inputs_named

__all__ = ["Warmed", "warm_model", "batch_sizes", "WARM_CALLS"]

# Warm-up calls of every batch size the SUT may make, before the test: the first call of
# a shape (allocators, a compiling runtime's trace) never lands in LoadGen's figures.
WARM_CALLS = 3


def batch_sizes(spec) -> list[int]:
    """Every batch the SUT may call the model with in this scenario."""
    if spec.scenario == "single-stream":
        return [1]
    if spec.scenario == "multi-stream":
        return [MULTI_STREAM_SAMPLES]
    return list(range(1, spec.batch_size + 1))


@dataclass
class Warmed:
    """A model ready to serve: a step per batch size the scenario calls, its first call's
    time, the warm calls LoadGen's schedule is sized on, and its counts."""
    steps: dict
    first_s: float
    warm: list
    stats: object  # engine.worker.backends.base.ModelStats


def warm_model(models: Models, spec, known, progress) -> Warmed:
    """The SUT's model built (or reused), checked against what its file declares, prepared
    (its output checked against the reference), each batch size's step made and warmed:
    here, or in a replica process of its own (engine/worker/serving/replica.py)."""
    sut = spec.sut
    models.ensure(sut, progress)
    models.check_declared(sut)
    progress("prepare", 0)
    backend = models.backend
    with inputs_named(sut):
        backend.prepare(sut)
    stats = models.stats(sut, known)
    with backend.context():
        steps = {n: backend.make_step(replace(sut, batch_size=n)) for n in batch_sizes(spec)}
        progress("warmup", 0)
        t = time.perf_counter()
        with inputs_named(sut):
            steps[max(steps)]()
        first_s = time.perf_counter() - t
        warm = _warm(steps, spec)
    # The device peak is LoadGen's test's: every shape's first call (cuDNN's algorithm
    # search) and warm-up are done.
    backend.reset_device_peak()
    return Warmed(steps, first_s, warm, stats)


def _warm(steps: dict, spec) -> list[int]:
    """Each size's first calls, then the scenario's own call timed (the batch a query
    makes: 1 for Server's single arrivals, max batch for Offline), which sizes LoadGen's
    schedule."""
    for step in steps.values():
        for _ in range(WARM_CALLS):
            step()
    size = 1 if spec.scenario == "server" else max(steps)
    step, times = steps[size], []
    deadline = time.perf_counter() + spec.sut.policy.warmup_max_s
    for _ in range(max(1, spec.sut.policy.warmup_iters)):
        t = time.perf_counter_ns()
        step()
        times.append(time.perf_counter_ns() - t)
        if time.perf_counter() > deadline:
            break
    return times
