"""Where a sweep's wall time went (issue 39): the share spent timing iterations, and what
its workers spent on each phase before that (import, build, prepare, first call, warm-up).

Timed iterations never overlap (a round's contenders are timed in alternating blocks, one
worker at a time), so their sum is a share of the wall time. The phases before them run in
workers that start side by side, so their sums are each worker's own seconds, which may
overlap one another: said so wherever they are shown. A worker pays its import once, and a
model it reuses for another batch size is built once, however many runs it makes: each is
counted once (`worker_of` names a run's worker within its round). A forked worker
imports nothing itself; its fork server's import (`extra.fork_server_import_s`, on the
runs of the worker that waited for it) is counted as that worker's. A catalog model's
BatchNorm calibration, which its record keeps out of `load_s` (`extra.calibrate_s`), is
counted in its build.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

__all__ = ["PHASES", "EXTRAS", "TimeSplit", "time_split"]

# (name as shown, the record's field): in the order a worker goes through them
PHASES = (("import", "import_s"), ("build", "load_s"), ("prepare", "prepare_s"),
          ("first call", "first_forward_s"), ("warm-up", "warmup_s"))
# The record's extra keys the split reads: whoever keeps runs for a split keeps these
EXTRAS = ("model_reused", "fork_server_import_s", "calibrate_s")


@dataclass(frozen=True)
class TimeSplit:
    wall_s: float
    measuring_s: float  # timed iterations, summed over runs
    phases: tuple[tuple[str, float], ...]  # PHASES' names, summed over workers once each
    runs: int

    @property
    def measuring_share(self) -> float:
        return self.measuring_s / self.wall_s if self.wall_s > 0 else 0.0


def _get(r, field):
    v = r.get(field) if isinstance(r, dict) else getattr(r, field, None)
    return v or 0.0


def time_split(records: Iterable, wall_s: float,
               worker_of: Callable[[object], tuple]) -> TimeSplit:
    """The split of `records` (RunRecords, or dicts with the same fields and `extra`) over
    `wall_s` seconds; worker_of(record) -> the key of the worker it ran in (with its round)."""
    records = list(records)
    totals = dict.fromkeys((name for name, _ in PHASES), 0.0)
    imported, built = set(), set()
    for r in records:
        worker = worker_of(r)
        extra = (r.get("extra") if isinstance(r, dict) else getattr(r, "extra", None)) or {}
        for name, field in PHASES:
            if name == "import":
                if worker in imported:
                    continue
                imported.add(worker)
                # a forked worker's import is ~0; the fork server's, once per sweep, is
                # counted with the worker that waited for it
                totals[name] += extra.get("fork_server_import_s") or 0.0
            if name == "build":  # a reused model's build time is its first run's
                if extra.get("model_reused") and worker in built:
                    continue
                built.add(worker)
                # the catalog weights' calibration, kept out of load_s (engine.worker.weights)
                totals[name] += extra.get("calibrate_s") or 0.0
            totals[name] += _get(r, field)
    measuring = sum(_get(r, "measured_s") for r in records)
    return TimeSplit(wall_s, measuring, tuple(totals.items()), len(records))
