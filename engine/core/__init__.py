"""Framework-free definitions every side of the process boundary shares: the measurement
policy, the model catalog, the runtimes, the ranges a value is held to, the result record
and the one user-facing error type. What to run (one spec type per kind of work) lives with
its kind, in engine/scenarios/<kind>/spec.py.

Nothing here imports a deep-learning framework, nor engine/scenarios: the dashboard, the
CLI, the parent-side runner and the workers all read these. Names are re-exported here for
short imports.
"""

from engine.core.catalog import CATALOG, DIAGNOSTIC_MODELS, FRAMEWORKS, RUNTIMES
from engine.core.errors import UserError
from engine.core.limits import (BATCH_RANGE, IMAGE_RANGE, PROFILE_RANGE, ROUNDS_RANGE,
                                logical_cores, parse_int_list)
from engine.core.policy import MeasurementPolicy

__all__ = ["CATALOG", "DIAGNOSTIC_MODELS", "FRAMEWORKS", "RUNTIMES", "UserError",
           "BATCH_RANGE", "IMAGE_RANGE", "PROFILE_RANGE", "ROUNDS_RANGE", "logical_cores",
           "parse_int_list", "MeasurementPolicy"]
