"""Run a sweep end to end: plan its rounds, record it, run each round, store each run.

One driver for every front end (the CLI, the dashboard's job queue, bench/sweep.py), so a
sweep started anywhere is stored the same way: the sweep row first (its rounds, seed and
plan), then one transaction per finished run, opening the database per write so another
process (the dashboard) is never locked out for the length of a sweep.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from dataclasses import dataclass

from engine.run.records import new_id
from engine.run.rounds import plan_rounds
from engine.run.runner import Runner
from engine.run.system import system_info
from engine.scenarios import scenario_of
from engine.spec.inference import RunSpec
from engine.spec.record import RunRecord

__all__ = ["run_sweep", "open_sweep", "plan_labels", "StoredSweep"]


def plan_labels(plan: list[list[RunSpec]]) -> list[list[str]]:
    return [[f"{s.model}/{s.framework}/{s.runtime}/b{s.batch_size}/t{s.intra_threads}"
             f"/i{s.inter_threads}/{s.image_size}px" for s in specs] for specs in plan]


@dataclass(frozen=True)
class StoredSweep:
    """A sweep's row, written: its id; store(record) saves a record with this machine's
    provenance (then calls on_stored); known_stats(spec) reads the params and FLOPs the
    store already holds, for Runner.run."""

    sweep_id: str
    store: Callable[[RunRecord], None]
    known_stats: Callable[[RunSpec], dict | None]


def open_sweep(db: Path, *, command: str, rounds: int = 1, seed: int = 0,
               plan: list | None = None, configurations: int = 0,
               on_stored: Callable[[RunRecord], None] = lambda rec: None) -> StoredSweep:
    """Create the sweep's row. Every way of running (sweep, batch search, CLI, dashboard)
    stores through what this returns."""
    from store.db import open_db
    from store.runs import framework_version, known_model_stats, save_record, save_sweep

    sweep_id = new_id()
    with open_db(db) as con:  # fails here, before any run, if the file is busy or bad
        save_sweep(con, sweep_id, rounds=rounds, seed=seed, plan=plan or [],
                   configurations=configurations, command=command)
    system = system_info()

    def known(spec: RunSpec):
        if not scenario_of(spec).counts_model_stats:
            return None
        with open_db(db) as con:
            return known_model_stats(con, spec.model, spec.framework, spec.image_size,
                                     framework_version(spec.framework) or "")

    def store(rec: RunRecord):
        with open_db(db) as con:
            save_record(con, rec, system)
        on_stored(rec)

    return StoredSweep(sweep_id, store, known)


def run_sweep(specs: list[RunSpec], *, db: Path, rounds: int, seed: int, runner: Runner,
              command: str, on_start: Callable[[str], None] = lambda sweep_id: None,
              on_round: Callable[[int], None] = lambda r: None,
              on_stored: Callable[[RunRecord], None] = lambda rec: None,
              on_event: Callable[[dict, int], None] = lambda ev, r: None) -> list[RunRecord]:
    """Stops between runs when runner.cancel is set; returns the records of this sweep."""
    plan = plan_rounds(specs, rounds, seed)
    sweep = open_sweep(db, command=command, rounds=rounds, seed=seed, plan=plan_labels(plan),
                       configurations=len(specs), on_stored=on_stored)
    on_start(sweep.sweep_id)
    records: list[RunRecord] = []
    for r, round_specs in enumerate(plan, start=1):
        if runner.cancel.is_set():
            break
        on_round(r)
        records += runner.run(round_specs, on_record=sweep.store, sweep_id=sweep.sweep_id,
                              round_no=r, on_event=lambda ev, r=r: on_event(ev, r),
                              known_stats=sweep.known_stats)
    return records
