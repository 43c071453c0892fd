"""The worker steps that time nothing: a model's params and FLOPs counted (`python -m
engine models`), and what a user's model file declares about its inputs, read before any
launch (the CLI and the Run page fill or check the inputs with it). Each starts a worker of
its own mode (stats, declared) through LocalProcesses and drives it with the same Pool.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable

from engine.scenarios.inference.spec import RunSpec
from engine.core.model_source import DECLARING_FORMATS, ModelSource, fill_inputs
from engine.core.protocol import DeclaredInputs, Failed, RunOrder, Stats
from engine.run.process.drive import Pool
from engine.run.process.executors import LocalProcesses
from engine.run.process.records import new_id
from engine.run.process.runner import worker_groups

__all__ = ["count_model_stats", "read_declared", "model_inputs"]


def count_model_stats(specs: list[RunSpec], *, on_stats: Callable[[Stats | Failed], None],
                      timeout_s: float = 1800.0, python: str = sys.executable) -> None:
    """Build each model in a worker (one per framework) and report params and FLOPs.

    Used by `python -m engine models` to fill the catalog; nothing is timed."""
    for group in worker_groups(specs):
        runs = [(new_id(), s) for s in group]
        handle = LocalProcesses(python).start([RunOrder(rid, s.to_dict()) for rid, s in runs],
                                              group[0], None, mode="stats")
        with Pool(clock=time.monotonic, poll_s=0.2, cancel=threading.Event()) as pool:
            w = pool.start(handle, runs)
            pool.renew(timeout_s)  # past it, what was counted is kept
            pool.drive(lambda w, ev: isinstance(ev, (Stats, Failed)) and on_stats(ev),
                       until=lambda: w.ended)
            pool.close(kill=True)


def read_declared(source: ModelSource, *, timeout_s: float = 120.0,
                  python: str = sys.executable) -> DeclaredInputs:
    """What a user's model file declares about its inputs, read by a worker started for it
    alone (the parent never opens the file; the worker imports no framework and runs
    nothing of it). Its inputs are None where the format declares none read, the file's
    description could not be read, or the worker gave no answer (why says which)."""
    spec = RunSpec(source.name, source.framework or "torch", 1, 1, user_model=source)
    rid = new_id()
    handle = LocalProcesses(python).start([RunOrder(rid, spec.to_dict())], spec, None,
                                          mode="declared")
    got: list = []
    with Pool(clock=time.monotonic, poll_s=0.2, cancel=threading.Event()) as pool:
        w = pool.start(handle, [(rid, spec)])
        pool.renew(timeout_s)
        pool.drive(lambda w, ev: isinstance(ev, (DeclaredInputs, Failed)) and got.append(ev),
                   until=lambda: bool(got) or w.ended)
        pool.close(kill=True)
    if got and isinstance(got[0], DeclaredInputs):
        return got[0]
    why = got[0].reason if got else "the worker reading it ended without an answer"
    return DeclaredInputs(rid, None, why)


def model_inputs(source: ModelSource, batch_sizes, given: str | None = None, *,
                 timeout_s: float = 120.0, **allowed) -> ModelSource:
    """The user's model with its inputs, before anything is launched: what the file declares
    (read by read_declared, for the formats that declare) fills them when none were given and
    checks them when some were (engine.core.model_source.fill_inputs); UserError naming the
    field otherwise."""
    declared = (read_declared(source, timeout_s=timeout_s).inputs
                if source.format in DECLARING_FORMATS and source.path else None)
    return fill_inputs(source, declared, batch_sizes, given, **allowed)
