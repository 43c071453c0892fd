"""Run a sweep end to end: plan its rounds, record it, run each round, store each run.

One driver for every front end (the CLI, the dashboard's job queue, bench/sweep.py), so a
sweep started anywhere is stored the same way: the sweep row first (its rounds, seed and
plan), then one transaction per finished run, opening the database per write so another
process (the dashboard) is never locked out for the length of a sweep.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from dataclasses import dataclass

from engine.analysis.compare import Contest, aggregate, contender_name, contests
from engine.analysis.sequential import EQUIVALENT, WINNER, VerdictRule
from engine.run.process.records import FLOP_FRAMEWORK, new_id, one_flop_count
from engine.run.jobs.rounds import plan_rounds
from engine.run.process.runner import Runner
from engine.run.process.machine import system_info
from engine.scenarios import scenario_of
from engine.core.budget import RoundBudget, round_floor_s
from engine.scenarios.inference.spec import RunSpec
from engine.core.record import RunRecord

__all__ = ["run_sweep", "open_sweep", "plan_labels", "StoredSweep", "next_round", "RoundPlan",
           "config_key", "verdict_rule", "settled", "judged"]


def plan_labels(plan: list[list[RunSpec]]) -> list[list[str]]:
    # Only inference specs have A/A replicas; training and data-loading specs have none.
    return [[f"{s.model}/{s.framework}/{s.runtime}/b{s.batch_size}/t{s.intra_threads}"
             f"/i{s.inter_threads}/{_input(s)}"
             + (f"/#{s.replica + 1}" if getattr(s, "replica", 0) else "")
             for s in specs] for specs in plan]


def _input(spec) -> str:
    """What a run is fed, in its label: a generation spec has no image, and its prompt and
    output lengths are what tell its runs apart ("Nonepx" told nothing)."""
    if getattr(spec, "prompt_len", None) is not None:
        return f"p{spec.prompt_len}/o{spec.output_len}"
    return f"{spec.image_size}px"


@dataclass(frozen=True)
class StoredSweep:
    """A sweep's row, written: its id; store(record) saves a record with this machine's
    provenance (then calls on_stored); known_stats(spec) reads the params and FLOPs the
    store already holds, for Runner.run."""

    sweep_id: str
    store: Callable[[RunRecord], None]
    known_stats: Callable[[RunSpec], dict | None]
    extend: Callable[[int, list], None] = lambda rounds, plan: None  # rounds run, their order
    restate: Callable[[str], None] = lambda command: None  # its command, once complete


def verdict_rule(budget: RoundBudget) -> VerdictRule:
    """The rule a sweep's contests are judged by: looks at its minimum through its max
    rounds, and its margin."""
    return VerdictRule.of(budget.rounds, budget.max_rounds, budget.margin)


def open_sweep(db: Path, *, command: str, rounds: int = 1, seed: int = 0,
               plan: list | None = None, configurations: int = 0,
               on_stored: Callable[[RunRecord], None] = lambda rec: None,
               budget: RoundBudget | None = None) -> StoredSweep:
    """Create the sweep's row (with the rule its verdicts are judged by, when it has a
    budget). Every way of running (sweep, batch search, CLI, dashboard) stores through
    what this returns."""
    from store.db import open_db
    from store.runs import (extend_sweep, framework_version, known_model_stats,
                            reference_flops, restate_sweep, save_record, save_sweep)

    sweep_id = new_id()
    with open_db(db) as con:  # fails here, before any run, if the file is busy or bad
        rule = verdict_rule(budget) if budget is not None else None
        save_sweep(con, sweep_id, rounds=rounds, seed=seed, plan=plan or [],
                   configurations=configurations, command=command,
                   rule=rule and {"min_rounds": budget.rounds, "max_rounds": budget.max_rounds,
                                  "margin": rule.margin, "alpha": rule.plan.alpha})
    system = system_info()

    def known(spec: RunSpec):
        if not scenario_of(spec).counts_model_stats or getattr(spec, "user_model", None):
            return None  # a user's model is counted by its worker, every time
        with open_db(db) as con:
            return known_model_stats(con, spec.model, spec.framework, spec.image_size,
                                     framework_version(spec.framework) or "")

    def store(rec: RunRecord):
        with open_db(db) as con:
            if scenario_of(rec).counts_model_stats:
                rec = one_flop_count(rec, reference_flops(con, rec.model, rec.image_size,
                                                          FLOP_FRAMEWORK))
            save_record(con, rec, rec.node_system or system)  # a node's own systems row
        on_stored(rec)

    def extend(rounds: int, labels: list):
        with open_db(db) as con:
            extend_sweep(con, sweep_id, rounds=rounds, plan=labels)

    def restate(text: str):
        with open_db(db) as con:
            restate_sweep(con, sweep_id, text)

    return StoredSweep(sweep_id, store, known, extend, restate)


def config_key(spec) -> tuple:
    """The ConfigResult.key a spec's runs aggregate under, as its scenario groups it
    (Scenario.contest_fields): a spec, or a record of one."""
    d = scenario_of(spec).contest_fields(spec)
    return (d["model"], d["image_size"], d["batch_size"], d["intra_threads"],
            d.get("contention") or "none", contender_name(d))


def judged(records: list[RunRecord], specs: list, rule: VerdictRule) -> list[Contest]:
    """Every contest of the sweep's records under the rule, each family of its scenario's
    (Scenario.contest_rows: inference's latency; generation's TTFT, TPOT and tokens/s)
    aggregated and judged on its own."""
    scenario = scenario_of(specs[0])
    return [c for rows in scenario.contest_rows(records)
            for c in contests(aggregate(rows), rule)[1]]


@dataclass(frozen=True)
class RoundPlan:
    """What the driver decided before a round: its number, its specs, and why."""

    round_no: int
    specs: list
    why: str  # "minimum" or "N undecided configurations"


def next_round(records: list[RunRecord], specs: list, budget: RoundBudget, done: int,
               elapsed_s: float, seed: int) -> tuple[RoundPlan | None, str]:
    """After `done` rounds: (the next round to run, or None, and why). Up to the minimum
    every spec runs; past it only the configurations of contests another round could still
    decide (each contest's `more` under the budget's rule, over every family of contests
    its scenario judges: `judged`), while rounds and the time budget last. The time a round
    will take is predicted from what the same configurations took in the last round (their
    runs' wall time) plus a framework start per worker group."""
    if done < budget.rounds:
        return RoundPlan(done + 1, plan_rounds(specs, done + 1, seed)[done], "minimum"), ""
    if not scenario_of(specs[0]).decides_contests:
        return None, f"{done} rounds run"
    rows = judged(records, specs, verdict_rule(budget))
    # Another round could decide these configurations (compare.undecided's keys): a key
    # names its machine (a fleet's "@shape") or model file where runs differ in it; a spec
    # does not, and runs on every machine of the sweep. A configuration undecided in two
    # families (TTFT and TPOT) counts once.
    keys = {(*c.row, name) for c in rows for name in c.more}
    if not keys:
        if not any(c.comparisons for c in rows):
            return None, f"{done} rounds run; no two contenders side by side to decide between"
        return None, settled(rows, done)
    if done >= budget.max_rounds:
        return None, f"max_rounds ({budget.max_rounds}) reached with {len(keys)} " \
                     "configurations undecided"
    wanted = {(*c.row, c.cells[name].spec_contender) for c in rows for name in c.more}
    more = [s for s in specs if config_key(s) in wanted]
    if budget.time_budget_s is not None:
        took = _last_round_s(records, more, done)
        if elapsed_s + took > budget.time_budget_s:
            return None, (f"time budget ({budget.time_budget_s:g} s) would be exceeded: "
                          f"{elapsed_s:.0f} s spent, another round takes about {took:.0f} s")
    order = plan_rounds(more, done + 1, seed)[done]
    return RoundPlan(done + 1, order, f"{len(more)} undecided configurations"), ""


def settled(rows, done: int) -> str:
    """Why no contest needs another round, counting its comparisons by outcome."""
    cmps = [c for row in rows for c in row.comparisons.values()]
    winners = sum(c.state == WINNER for c in cmps)
    same = sum(c.state == EQUIVALENT for c in cmps)
    futile = len(cmps) - winners - same
    if not futile and not same:
        return f"every contest decided after {done} rounds"
    parts = [f"{winners} with a winner"] if winners else []
    if same:
        parts.append(f"{same} equivalent within ±{100 * cmps[0].rule.margin:g} %")
    if futile:
        parts.append(f"{futile} not decidable within {cmps[0].rule.plan.last} rounds at "
                     "their spread")
    return f"every contest settled after {done} rounds: " + ", ".join(parts)


def _last_round_s(records: list[RunRecord], specs: list, done: int) -> float:
    """The wall time these configurations' runs took in the last round: the length of the
    union of their [started, ended] spans (interleaved contenders' runs overlap, and the
    time counts once), plus a framework start per worker group."""
    wanted = {config_key(s) for s in specs}
    total = round_floor_s(specs) - sum(s.policy.min_time_s for s in specs)  # starts only
    spans = sorted((r.started_at, r.ended_at) for r in records
                   if r.round_no == done and r.ended_at and r.started_at
                   and config_key(r) in wanted)
    end = None
    for start, stop in spans:
        if end is not None and start < end:  # overlaps what was counted: only the rest
            start = end
        if stop > start:
            total += (stop - start).total_seconds()
        end = max(end, stop) if end is not None else stop
    return total


def run_sweep(specs: list[RunSpec], *, db: Path, rounds: int | RoundBudget, seed: int,
              runner: Runner, command: str,
              on_start: Callable[[str], None] = lambda sweep_id: None,
              on_round: Callable[[int], None] = lambda r: None,
              on_stored: Callable[[RunRecord], None] = lambda rec: None,
              on_event: Callable[[dict, int], None] = lambda ev, r: None,
              on_plan: Callable[[RoundPlan], None] = lambda plan: None,
              on_stop: Callable[[str], None] = lambda why: None,
              clock: Callable[[], float] = time.monotonic) -> list[RunRecord]:
    """Run the minimum rounds, then rounds until decided (RoundBudget); an int is that many
    rounds exactly. Stops between runs when runner.cancel is set; returns the records of
    this sweep. on_stop(why) says why no further round ran."""
    budget = rounds if isinstance(rounds, RoundBudget) else RoundBudget.fixed(rounds)
    t0 = clock()
    plan = plan_rounds(specs, budget.rounds, seed)
    sweep = open_sweep(db, command=command, rounds=budget.rounds, seed=seed,
                       plan=plan_labels(plan), configurations=len(specs),
                       on_stored=on_stored,
                       budget=budget if scenario_of(specs[0]).decides_contests else None)
    on_start(sweep.sweep_id)
    records: list[RunRecord] = []
    done, labels = 0, plan_labels(plan)
    while not runner.cancel.is_set():
        step, why = next_round(records, specs, budget, done, clock() - t0, seed)
        if step is None:
            on_stop(why)
            break
        on_plan(step)
        on_round(step.round_no)
        r = step.round_no
        records += runner.run(step.specs, on_record=sweep.store, sweep_id=sweep.sweep_id,
                              round_no=r, on_event=lambda ev, r=r: on_event(ev, r),
                              known_stats=sweep.known_stats)
        done = r
        if r > budget.rounds:  # an extra round: the sweep's row says how many ran, in order
            labels += plan_labels([step.specs])
            sweep.extend(r, labels)
    return records
