"""Framework-free definitions every side of the process boundary shares: what to run (one
spec type per kind of work), the measurement policy, the model catalog, the ranges a value
is held to, the result record and the one user-facing error type.

Nothing here imports a deep-learning framework: the dashboard, the CLI, the parent-side
runner and the workers all read these. Names are re-exported here for short imports.
"""

from engine.core.catalog import CATALOG, DIAGNOSTIC_MODELS, FRAMEWORKS, RUNTIMES
from engine.core.dataload import LoadSpec, expand_load
from engine.core.errors import UserError
from engine.core.inference import (BF16_RUNTIMES, CPU_ONLY_RUNTIMES, DEVICES, PRECISIONS,
                                   PROFILED_RUNTIMES, WEIGHT_POLICIES, RunSpec, expand_sweep,
                                   runtimes_for)
from engine.core.limits import (BATCH_RANGE, IMAGE_RANGE, PROFILE_RANGE, ROUNDS_RANGE,
                                logical_cores, parse_int_list)
from engine.core.policy import MeasurementPolicy
from engine.core.training import DATASETS, TRAIN_RUNTIMES, TrainSpec, expand_train

__all__ = ["CATALOG", "DIAGNOSTIC_MODELS", "FRAMEWORKS", "RUNTIMES", "LoadSpec", "expand_load",
           "UserError", "BF16_RUNTIMES", "CPU_ONLY_RUNTIMES", "DEVICES", "PRECISIONS",
           "PROFILED_RUNTIMES", "WEIGHT_POLICIES", "RunSpec", "expand_sweep", "runtimes_for",
           "BATCH_RANGE", "IMAGE_RANGE", "PROFILE_RANGE", "ROUNDS_RANGE", "logical_cores",
           "parse_int_list", "MeasurementPolicy", "DATASETS", "TRAIN_RUNTIMES", "TrainSpec",
           "expand_train"]
