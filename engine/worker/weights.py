"""A catalog model's calibrated weights, made once per runner and read by later workers.

A catalog model starts from seeded random weights whose BatchNorm statistics are then
calibrated by a few train-mode passes (the backends' `_calibrate_batchnorm`): a stand-in
for trained weights, since none can be downloaded. Every round's fresh worker used to redo
it, 1.9 s of eager TensorFlow on efficientnet_b0 at 2 threads, for weights identical by
seed. Now the first TensorFlow worker of a runner that builds a model calibrates it and
writes the weights to the runner's folder (`$BENCH_WEIGHTS_DIR`, made by
engine/run/process/executors.LocalProcesses and removed with it); a later worker builds the
same architecture and reads them instead, as a user's program reads trained weights from
a checkpoint. Its per-process lottery is the same so (bench/starts.py --weights,
efficientnet_b0 b1, 10 processes each: centres 21.94 and 21.94 ms, Brown-Forsythe p 0.84 on
the spread). torch's is not, so torch calibrates in every worker (engine/worker/backends/
torch_eager.build_model says why). The calibration is this benchmark's doing, not the
framework's cold start, so its seconds (and the write's) are kept out of the run's build
time, `load_s`, in every round and for both frameworks, and reported apart
(`calibrate_s`), where the sweep's time split counts them.

A file is named by everything its bits depend on: the framework and its version, the
model, input size, weight policy, device and thread count (a reduction's order, hence its
last bits, can follow the threads). It is written under a temporary name and renamed, so a
worker never reads half a file; two workers making the same one at once each write it
whole. Without the variable (a cluster node: the folder is the parent machine's) every
worker calibrates as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Callable

from engine.core.policy import WEIGHTS_ENV

__all__ = ["FROM_FILE", "CALIBRATED", "weights_path", "calibrated"]

FROM_FILE = "file"  # read from the runner's folder, written by an earlier worker
CALIBRATED = "calibrated"  # calibrated in this worker (and written where a folder exists)


def weights_path(framework: str, version: str, spec, suffix: str) -> Path | None:
    """Where the spec's calibrated weights live for this runner, or None without a folder."""
    folder = os.environ.get(WEIGHTS_ENV)
    if not folder:
        return None
    key = json.dumps([framework, version, spec.model, spec.image_size, spec.weight_policy,
                      spec.device, spec.intra_threads])
    name = hashlib.sha256(key.encode()).hexdigest()[:20]
    return Path(folder) / f"{framework}-{spec.model}-{name}{suffix}"


def calibrated(path: Path | None, calibrate: Callable[[], None],
               write: Callable[[Path], None], read: Callable[[Path], None],
               clock: Callable[[], float] = time.perf_counter) -> tuple[str, float]:
    """The model's calibrated weights in place: read from `path` where a worker wrote them,
    else calibrated here and written there (no path: calibrated here, nothing written).
    Returns (FROM_FILE or CALIBRATED, the seconds calibrating and writing took: what the
    caller keeps out of its build time)."""
    if path is not None and path.exists():
        read(path)  # part of the build, as a checkpoint's read is
        return FROM_FILE, 0.0
    t = clock()
    calibrate()
    if path is not None:
        part = path.with_name(f".{path.name}.{os.getpid()}.part")
        try:
            write(part)
            os.replace(part, path)
        except OSError:  # a full or vanished folder: the next worker calibrates again
            part.unlink(missing_ok=True)
    return CALIBRATED, clock() - t
