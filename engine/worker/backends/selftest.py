"""Diagnostic backend: pure Python/NumPy models that exercise the harness itself.

`identity` measures the harness's per-iteration overhead; the fault_* models fail on
purpose, so every failure path of the runner can be shown on any machine.

BENCH_SELFTEST_DELAY_MS in a worker's environment makes `identity` sleep that long per call:
a build made slower on purpose, with the configuration unchanged, so that a regression check
can be shown to catch one through real sweeps. The delay is reported among the run's
versions (`selftest_delay_ms`), so a delayed run never passes for a plain one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import numpy as np

from engine.worker.backends.base import ModelStats, check_close
from engine.scenarios.inference.spec import RunSpec


DELAY_ENV = "BENCH_SELFTEST_DELAY_MS"


def _delay_ms() -> float:
    text = os.environ.get(DELAY_ENV, "").strip()
    if not text:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1000.0:  # a run fails with this reason: the user set it wrong
        raise ValueError(f"{DELAY_ENV}: {text!r} is out of range; allowed: number 0..1000 "
                         "(milliseconds)")
    return value


class Backend:
    prepare_s = 0.0
    first_forward_s = None  # the worker times the first call after preparation
    output_rel_diff = 0.0

    def __init__(self):
        self.model = None

    def versions(self) -> dict:
        # As set, unparsed: a bad value fails the run (make_step), not the worker's start.
        delay = os.environ.get(DELAY_ENV, "").strip()
        return {"numpy": np.__version__, **({"selftest_delay_ms": delay} if delay else {})}

    def effective_threads(self) -> dict:
        return {}

    def load(self, spec: RunSpec) -> None:
        if spec.model == "fault_raise":
            raise ValueError("fault_raise: this diagnostic model fails while loading")
        self.model = spec.model

    def prepare(self, spec: RunSpec) -> None:
        if spec.runtime == "mismatch":  # a runtime whose output is wrong by 50 %
            check_close(np.ones(4), np.full(4, 1.5), "the python reference")

    def model_stats(self, spec: RunSpec, count_flops: bool) -> ModelStats:
        return ModelStats(0, 0, 0 if count_flops else None, "none (diagnostic model)")

    def make_step(self, spec: RunSpec):
        if spec.model == "fault_hang":
            event = threading.Event()
            return lambda: event.wait()  # never set: blocks until the runner's timeout
        if spec.model == "fault_alloc":
            hoard = []

            def grow():
                while True:  # 64 MiB at a time, touched so it is resident
                    hoard.append(np.ones(8 << 20, dtype=np.float64))
            return grow
        if spec.model == "fault_exit":
            return lambda: os.kill(os.getpid(), signal.SIGKILL)
        delay = _delay_ms() / 1000
        if delay:
            return lambda: time.sleep(delay)
        return lambda: None  # identity: nothing but the harness is timed

    def context(self):
        return contextlib.nullcontext()

    def start_device(self, spec: RunSpec) -> None:
        pass  # runs on the CPU only: nothing to start

    def reset_device_peak(self) -> None:
        pass  # runs on the CPU only: no device peak

    def device_peak_bytes(self):
        return None

    def unload(self) -> None:
        self.model = None
