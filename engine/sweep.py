"""Run a sweep end to end: plan its rounds, record it, run each round, store each run.

One driver for every front end (the CLI, the dashboard's job queue, bench/sweep.py), so a
sweep started anywhere is stored the same way: the sweep row first (its rounds, seed and
plan), then one transaction per finished run, opening the database per write so another
process (the dashboard) is never locked out for the length of a sweep.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from engine.record import RunRecord
from engine.rounds import plan_rounds
from engine.runner import Runner, new_id
from engine.spec import RunSpec
from engine.system import system_info

__all__ = ["run_sweep", "open_sweep", "plan_labels"]


def plan_labels(plan: list[list[RunSpec]]) -> list[list[str]]:
    return [[f"{s.model}/{s.framework}/{s.runtime}/b{s.batch_size}/t{s.intra_threads}"
             f"/i{s.inter_threads}/{s.image_size}px" for s in specs] for specs in plan]


def open_sweep(db: Path, runner: Runner, *, command: str, rounds: int = 1, seed: int = 0,
               plan: list | None = None, configurations: int = 0,
               on_stored: Callable[[RunRecord], None] = lambda rec: None
               ) -> tuple[str, Callable[[RunRecord], None]]:
    """Create the sweep's row and point the runner at the params and FLOPs already stored;
    returns (sweep_id, store), where store saves a record with this machine's provenance
    and then calls on_stored. Every way of running (sweep, batch search, CLI, dashboard)
    stores through this."""
    from store.db import open_db
    from store.runs import framework_version, known_model_stats, save_record, save_sweep

    sweep_id = new_id()
    with open_db(db) as con:  # fails here, before any run, if the file is busy or bad
        save_sweep(con, sweep_id, rounds=rounds, seed=seed, plan=plan or [],
                   configurations=configurations, command=command)
    system = system_info()

    def known(spec: RunSpec):
        if spec.kind != "inference":  # only inference workers count params and FLOPs
            return None
        with open_db(db) as con:
            return known_model_stats(con, spec.model, spec.framework, spec.image_size,
                                     framework_version(spec.framework) or "")

    def store(rec: RunRecord):
        with open_db(db) as con:
            save_record(con, rec, system)
        on_stored(rec)

    runner.known_stats = known
    return sweep_id, store


def run_sweep(specs: list[RunSpec], *, db: Path, rounds: int, seed: int, runner: Runner,
              command: str, on_start: Callable[[str], None] = lambda sweep_id: None,
              on_round: Callable[[int], None] = lambda r: None,
              on_stored: Callable[[RunRecord], None] = lambda rec: None,
              on_event: Callable[[dict, int], None] = lambda ev, r: None) -> list[RunRecord]:
    """Stops between runs when runner.cancel is set; returns the records of this sweep."""
    plan = plan_rounds(specs, rounds, seed)
    sweep_id, store = open_sweep(db, runner, command=command, rounds=rounds, seed=seed,
                                 plan=plan_labels(plan), configurations=len(specs),
                                 on_stored=on_stored)
    on_start(sweep_id)
    records: list[RunRecord] = []
    for r, round_specs in enumerate(plan, start=1):
        if runner.cancel.is_set():
            break
        on_round(r)
        records += runner.run(round_specs, on_record=store, sweep_id=sweep_id, round_no=r,
                              on_event=lambda ev, r=r: on_event(ev, r))
    return records
