"""The scenario registry: every kind of work the product measures, by its `kind`.

The only place that maps a kind's name to its behaviour; everything shared (runner, sweep
driver, job queue, worker frame, CLI, store) asks `scenario_of(spec)` or `SCENARIOS[kind]`.
Framework-free: the worker body is named by module path and imported only in a worker.
"""

from __future__ import annotations

from engine.scenarios.base import Scenario
from engine.scenarios.dataload.hooks import DATA_LOADING
from engine.scenarios.inference.hooks import INFERENCE
from engine.scenarios.serving.hooks import SERVING
from engine.scenarios.training.hooks import TRAINING

__all__ = ["SCENARIOS", "scenario_of", "Scenario", "INFERENCE", "TRAINING", "DATA_LOADING",
           "SERVING"]

SCENARIOS: dict[str, Scenario] = {s.kind: s for s in (INFERENCE, TRAINING, DATA_LOADING,
                                                      SERVING)}


def scenario_of(spec) -> Scenario:
    """The scenario a spec (or a record, or anything with a `kind`) belongs to."""
    return SCENARIOS[spec.kind]
