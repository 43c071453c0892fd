"""The autotuner on real runs (engine/run/search/autotune.py's `autotune`, the search and
its stop rule): a closed-loop probe is an inference run, or the store's figure for that
configuration on this machine read once before the sweep opens (`stored_figures`); a
confirmation is the max-QPS search's LoadGen Server tests in one warm worker; every probe
stored under one sweep. `python -m engine tune` and the Deploy page's tuning both call
`stored_autotune`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from engine.run.search.autotune import (PRUNE_FACTOR, TOP_N, Candidate, ClosedFigure, Tuning,
                                        autotune, closed_by_sut)
from engine.run.search.max_qps import QpsSearch

__all__ = ["stored_autotune", "stored_figures"]


def _sut(model: str, image_size: int | None, c: Candidate, policy=None, replicas: int = 1,
         user_model=None, cores: int | None = None):
    """A candidate's model as inference runs it: one replica (a Server test's SUT), or the
    candidate's replicas (its closed loop: R workers in one window); a catalog model, or
    the user's file (user_model, a ModelSource)."""
    from engine.scenarios.inference.spec import RunSpec

    return RunSpec(model, c.framework, c.max_batch, c.threads, precision=c.precision,
                   image_size=image_size, runtime=c.runtime, replicas=replicas,
                   user_model=user_model,
                   **({"policy": policy} if policy else {})).validate(cores)


def stored_figures(db, candidates: list[Candidate], *, model: str,
                   image_size: int | None) -> dict[Candidate, dict]:
    """The store's closed-loop figure on this machine for each candidate's closed-loop
    configuration that has one (store.queries.closed_loop_known: the latest ok run), read
    once, before a tuning's sweep opens: what the tuner uses instead of a probe, and what a
    dashboard tuning records in its sweep's command for the replay."""
    from pathlib import Path

    from engine.run.process.machine import system_info
    from store.db import open_db
    from store.queries import closed_loop_known

    if str(db) == ":memory:" or not Path(db).exists():
        return {}
    system_id = system_info()["system_id"]
    configurations = list(dict.fromkeys(c.closed_loop() for c in candidates))
    # Read-write, as the dashboard's own handle is: DuckDB refuses a read-only connection
    # to a file this process already holds read-write (a dashboard job reads from there).
    with open_db(db) as con:
        rows = {c: closed_loop_known(con, _sut(model, image_size, c, replicas=c.replicas),
                                     system_id) for c in configurations}
    return {c: row for c, row in rows.items() if row is not None}


def stored_autotune(candidates: list[Candidate], *, default: Candidate, model: str,
                    image_size: int | None, bound_ms: float, objective: str, margin: float,
                    db, runner, command, probe_policy, serve: dict, price,
                    max_probes: int, precision: float, start_qps: float | None = None,
                    known: dict[Candidate, dict] | None = None, user_model=None,
                    cores: int | None = None, here: bool = True, top_n: int = TOP_N,
                    prune_factor: float = PRUNE_FACTOR,
                    on_start: Callable[[str], None] = lambda sweep_id: None,
                    on_stored: Callable = lambda rec: None,
                    on_queries: Callable = lambda choice: None) -> tuple[str, Tuning]:
    """autotune on real runs on this machine, every probe stored under one sweep: a closed-
    loop probe is an inference run with probe_policy, once per closed-loop configuration,
    skipped when the store already held that configuration on this machine as the sweep
    opened (known: stored_figures', read here when not given), a confirmation is
    stored_max_qps_search's probes (LoadGen Server tests with serve's settings: samples,
    seed, query_count, one for every candidate; None: chosen from the fastest survivor's
    closed loop before the first confirmation, with room under the slowest, query_choice.py;
    command(choice) restates the sweep's command with it, on_queries(choice) hears it),
    starting at start_qps when given, else at the candidate's closed-loop samples/s. Every
    spec is validated, and a start_qps over 10x the fastest stored closed loop of the
    candidates refused, before the sweep opens. A user's model file (user_model) is probed
    afresh: the store's figures of a name are not of its bytes. cores: what threads x
    replicas must fit (a cluster node's; None: this machine's); here: False on a cluster
    node, where this machine's stored figures say nothing (probed afresh, and no start rate
    judged by them)."""
    from engine.scenarios.serving.spec import ServeSpec, check_reachable
    from engine.run.search.max_qps import (check_first_target, find_max_qps, first_choice,
                                    held_worker, probe_qps_range)
    from engine.run.search.query_choice import DEFAULT_SEARCH_QUERIES, choose_query_count
    from engine.run.jobs.requests import stored_closed_loop
    from engine.run.jobs.sweep import open_sweep

    def sut(c: Candidate, policy=None, replicas: int = 1):
        return _sut(model, image_size, c, policy, replicas, user_model, cores)

    # the count given, or chosen from a start rate given, or (None) from the fastest
    # survivor's closed loop once the candidates are pruned: one count for every
    # confirmation, so that every candidate is held to one early-stopping strictness
    chosen = [first_choice(start_qps, serve["query_count"], bound_ms)]

    def server(c: Candidate, q: float) -> ServeSpec:
        n = chosen[0].query_count if chosen[0] else DEFAULT_SEARCH_QUERIES  # checks: any
        return ServeSpec(sut(c), "server", replicas=c.replicas, query_count=n,
                         target_qps=q, bound_ms=bound_ms, max_wait_ms=c.max_wait_ms,
                         samples=serve["samples"], seed=serve["seed"]).validate(cores)

    check_first_target(start_qps, serve["query_count"], bound_ms, "start_qps")
    for c in [*candidates, default]:  # every value refused before anything runs
        sut(c, probe_policy, c.replicas), server(c, 1.0)
    fresh = user_model is not None or not here  # the store's figures are not this SUT's
    if start_qps is not None and not fresh:  # a rate no candidate could serve
        check_reachable(start_qps, stored_closed_loop(
            db, [(sut(c), c.max_batch) for c in candidates]),
            max(c.replicas for c in candidates), field="start_qps",
            of="the fastest candidate stored")
    if known is None:
        known = ({} if fresh else
                 stored_figures(db, [*candidates, default], model=model, image_size=image_size))
    say = command if callable(command) else (lambda choice: command)
    sweep = open_sweep(db, command=say(chosen[0]), on_stored=on_stored)
    on_start(sweep.sweep_id)

    def choose_queries(rates: list[float]):
        if chosen[0] is None:  # chosen now, before the first confirmation, and recorded
            chosen[0] = choose_query_count(
                max(rates), bound_ms, lowest_qps=min(rates),
                source="the fastest candidate's closed-loop samples/s")
            sweep.restate(say(chosen[0]))
        on_queries(chosen[0])
        return chosen[0]

    def run(spec):
        [rec] = runner.run([spec], on_record=sweep.store, sweep_id=sweep.sweep_id,
                           known_stats=sweep.known_stats)
        return rec

    # R replicas' closed loop: R workers of the candidate's threads timed in one window,
    # their throughput summed (engine/run/process/replicas.py)
    closed_probe = closed_by_sut(known, lambda c: ClosedFigure.of(
        run(sut(c, probe_policy, c.replicas))))

    def qps_search(c: Candidate, start: float) -> QpsSearch:
        n = chosen[0].query_count
        lo, hi = probe_qps_range(n, bound_ms)
        start = min(max(start_qps or start, lo), hi)
        with held_worker(runner) as via:  # the candidate's probes in one warm worker
            def probe(q: float):
                [rec] = via.run([server(c, q)], on_record=sweep.store,
                                sweep_id=sweep.sweep_id, known_stats=sweep.known_stats)
                return rec
            return replace(find_max_qps(probe, start_qps=start, precision=precision,
                                        max_probes=max_probes, query_count=n,
                                        bound_ms=bound_ms), queries=chosen[0])

    return sweep.sweep_id, autotune(candidates, default=default, closed_probe=closed_probe,
                                    qps_search=qps_search, price=price, bound_ms=bound_ms,
                                    objective=objective, margin=margin, top_n=top_n,
                                    prune_factor=prune_factor, choose_queries=choose_queries)
