"""The machine's ceilings, parent side (issue 28 part 1): one worker of Assign mode CALIBRATE
per thread count, pinned and threaded as an inference run of that many threads is
(engine/run/process/executors.py), its Calibrated stored per machine and thread count
(store/calibrations.py). `python -m engine calibrate` and the Run page's job both call
`run_calibrations`; `CalibrateRequest` is the job the dashboard's queue runs."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable

from engine.core.budget import RoundBudget
from engine.core.calibration import CalibrationPlan
from engine.core.errors import UserError
from engine.scenarios.inference.spec import RunSpec
from engine.core.limits import logical_cores
from engine.core.protocol import CALIBRATE, Calibrated, Failed, RunOrder
from engine.run.process.records import new_id
from engine.run.process.drive import Pool
from engine.run.process.executors import LocalProcesses
from engine.run.process.machine import git_commit, system_info
from engine.run.jobs.requests import Request
from engine.scenarios import INFERENCE

__all__ = ["calibrate", "run_calibrations", "calibration_line", "CalibrateRequest",
           "CALIBRATION_TIMEOUT_S"]

# A default calibration takes about 10-15 s at 2 threads here; one thread on a slow
# machine several times that. Past this, the worker is killed and nothing is stored.
CALIBRATION_TIMEOUT_S = 600.0


def _spec(threads: int) -> RunSpec:
    """The inference spec whose worker a calibration's is: same threads, pinning, env."""
    return RunSpec("calibration", "torch", 1, threads, runtime="eager")


def calibrate(plan: CalibrationPlan, *, timeout_s: float = CALIBRATION_TIMEOUT_S,
              python: str = sys.executable, cancel: threading.Event | None = None,
              executor: LocalProcesses | None = None) -> Calibrated | Failed:
    """One calibration in a worker of its own; Failed with why for a worker that errs, ends
    or runs past timeout_s."""
    spec, rid = _spec(plan.threads), new_id()
    executor = executor or LocalProcesses(python)
    handle = executor.start([RunOrder(rid, spec.to_dict())], spec, None, mode=CALIBRATE,
                            calibration=plan.to_dict())
    got: list = []
    with Pool(clock=time.monotonic, poll_s=0.2, cancel=cancel or threading.Event()) as pool:
        w = pool.start(handle, [(rid, spec)])
        pool.renew(timeout_s)
        pool.drive(lambda w, ev: isinstance(ev, (Calibrated, Failed)) and got.append(ev),
                   until=lambda: bool(got) or w.ended)
        pool.close(kill=True)
    if got:
        return got[0]
    return Failed(rid, "killed", "the calibrating worker ended without an answer "
                  f"(cancelled, or past {timeout_s:.0f} s)")


def calibration_line(cal: Calibrated) -> str:
    """One line per calibration: its ceilings, as the CLI and the job panel say them."""
    bf16 = (f"bf16 {max(cal.bf16_gflops):,.0f} GFLOP/s" if cal.bf16_gflops
            else f"bf16 absent ({cal.bf16_absent})")
    return (f"{cal.threads} threads: GEMM fp32 {max(cal.fp32_gflops):,.0f} GFLOP/s, {bf16}, "
            f"triad {max(cal.triad_gbs):,.1f} GB/s ({sum(cal.seconds.values()):.1f} s measured)")


def run_calibrations(threads, *, db, plan: CalibrationPlan | None = None,
                     on_done: Callable[[Calibrated | Failed], None] = lambda c: None,
                     cancel: threading.Event | None = None,
                     python: str = sys.executable) -> list[Calibrated | Failed]:
    """Calibrate at each thread count, one after another, storing each as it ends.
    UserError naming the field before anything runs for a thread count out of range."""
    from store.calibrations import save_calibration
    from store.db import open_db

    cores = logical_cores()
    plans = [replace(plan or CalibrationPlan(1), threads=t).validate(cores) for t in threads]
    out = []
    for p in plans:
        if cancel is not None and cancel.is_set():
            break
        got = calibrate(p, cancel=cancel, python=python)
        if isinstance(got, Calibrated):
            with open_db(db) as con:
                save_calibration(con, got, p, system_info(), git_commit())
        on_done(got)
        out.append(got)
    return out


@dataclass(frozen=True)
class _Calibrating:
    """What the job queue holds as a calibration's runner: its executor (released after
    the job like any runner's) and the job's cancel event."""

    executor: LocalProcesses
    cancel: threading.Event | None
    width = 1  # one machine, as a Runner's


@dataclass(frozen=True)
class CalibrateRequest(Request):
    """The Run page's "calibrate this machine" job: the default plan at these threads."""

    scenario = INFERENCE
    threads: tuple[int, ...]
    rounds: int = 1  # one pass; kept so the queue counts it as it counts the others
    seed: int | None = None
    timeout_s: float = CALIBRATION_TIMEOUT_S
    memory_cap_bytes: int | None = None
    sizes: tuple[int, ...] = field(default_factory=lambda: CalibrationPlan(1).sizes)

    def _expand(self):
        if not self.threads:
            raise UserError("threads: pick at least one thread count", field="threads")
        for t in self.threads:
            CalibrationPlan(t, sizes=self.sizes).validate(logical_cores())
        return [_spec(t) for t in self.threads], []

    def budget(self):
        return RoundBudget.fixed(1)

    def label(self) -> str:
        return f"calibration at {', '.join(map(str, self.threads))} threads"

    def runner(self, *, db, cancel=None, **options):
        return _Calibrating(LocalProcesses(), cancel)

    def run(self, specs, *, db, runner, seed, on_start, on_stored, on_event,
            on_plan=lambda step: None, on_stop=lambda why: None, command="dashboard") -> str:
        done = run_calibrations(self.threads, db=db, cancel=runner.cancel,
                                plan=CalibrationPlan(1, sizes=self.sizes))
        lines = [calibration_line(c) if isinstance(c, Calibrated)
                 else f"failed: {c.reason}" for c in done]
        return "calibrated: " + "; ".join(lines) if lines else "cancelled"
