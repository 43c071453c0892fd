"""The highest request rate a language-model server takes while LoadGen's p99 TTFT and p99
TPOT both stay within their bounds (issue 38), its goodput there, and the closed-loop
concurrency sweep whose points make the Pareto of tokens/s per user against tokens/s per
machine.

The max-rate search is serving's (engine/run/search/max_qps.find_max_qps, the stop rule in
one place) over LoadGen Server tests in token-latency mode: a probe is ok only when LoadGen
says VALID (both bounds, early stopping on each) and counted no error. Every probe runs the
same number of requests (`query_count`, at least the 459 LoadGen's early stopping needs
for a p99 with none over), so every probe is held to the same strictness, and the targets
span what runs them within GEN_MAX_PROBE_S (a CPU serves a language model at a fraction of
a request a second: serving's 300 s would start above it) and over SPAN_BOUNDS TTFT bounds
(what a backlog of an unsustainable rate pushes past first). The estimate is a rate given,
else an Offline test of the same engine (its requests/s).

The concurrency sweep runs closed loops of 1, 2, 4, ... users (doubling) until output
tokens/s rose by under RISE_STOP over the previous point (or the user count reaches the
cap); each point is one stored test.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from engine.core.record import RunRecord
from engine.run.search.max_qps import (DEFAULT_QPS_PRECISION, DEFAULT_QPS_PROBES, QpsSearch,
                                       find_max_qps)
from engine.run.search.query_choice import SPAN_BOUNDS
from engine.scenarios.genserve.table import GENSERVE_RESULTS

__all__ = ["GEN_MAX_PROBE_S", "gen_rate_range", "stored_gen_max_rate", "figures_of",
           "search_in", "stored_runs", "ttft_view", "Concurrency", "sweep_users",
           "stored_concurrency", "RISE_STOP", "GEN_QUERIES", "pareto_points"]

GEN_MAX_PROBE_S = 1800.0
GEN_QUERIES = 459  # LoadGen's early stopping: p99 judged with none over at 459 requests
RISE_STOP = 0.05  # the concurrency sweep stops when tokens/s rose by less than this


def gen_rate_range(query_count: int, ttft_bound_ms: float) -> tuple[float, float]:
    """The targets a probe of query_count requests may run: within GEN_MAX_PROBE_S, and
    spanning at least SPAN_BOUNDS TTFT bounds."""
    return (query_count / GEN_MAX_PROBE_S,
            query_count / (SPAN_BOUNDS * ttft_bound_ms / 1000))


def figures_of(rec: RunRecord | None) -> dict:
    """A stored test's genserve_results row ({} for none)."""
    if rec is None:
        return {}
    return ((rec.kind_rows or {}).get(GENSERVE_RESULTS.name) or [{}])[0]


def ttft_view(res: QpsSearch) -> QpsSearch:
    """The search with each probe's p99 read as its p99 TTFT (LoadGen's, else ours), the
    latency the probes are bounded on, so that what serving's tuner ranks and draws by a
    confirmation's p99 (its Pareto front) is the bounded one, not the E2E of a request."""
    def ttft(rec):
        if rec is None:
            return None
        g = figures_of(rec)
        p99 = g.get("loadgen_ttft_p99_ms") or g.get("ttft_p99_ms")
        return replace(rec, p99_ms=p99) if p99 is not None else rec
    return replace(res, probes=tuple((q, ttft(r)) for q, r in res.probes), best=ttft(res.best))


def stored_runs(db, runner, *, command: str, on_start, on_stored, on_event):
    """(the sweep opened for a search, run(spec) -> its stored record): what every search
    of this kind (max rate, users, tuning) runs its tests through, one sweep each."""
    from engine.run.jobs.sweep import open_sweep

    sweep = open_sweep(db, command=command, on_stored=on_stored)
    on_start(sweep.sweep_id)

    def run(spec) -> RunRecord:
        [rec] = runner.run([spec], on_record=sweep.store, sweep_id=sweep.sweep_id,
                           on_event=on_event, known_stats=sweep.known_stats)
        return rec
    return sweep, run


def stored_gen_max_rate(base, *, db, runner, command: str, start_qps: float | None = None,
                        query_count: int = GEN_QUERIES,
                        precision: float = DEFAULT_QPS_PRECISION,
                        max_probes: int = DEFAULT_QPS_PROBES,
                        on_start: Callable[[str], None] = lambda sweep_id: None,
                        on_stored: Callable[[RunRecord], None] = lambda rec: None,
                        on_event=None) -> tuple[str, QpsSearch, RunRecord | None, str]:
    """(sweep id, the search, the Offline estimate's run or None, where the estimate came
    from). base: a validated Server GenServeSpec (its target and count replaced per probe)."""
    sweep, run = stored_runs(db, runner, command=command, on_start=on_start,
                             on_stored=on_stored, on_event=on_event)
    offline, why = None, "the target given"
    if start_qps is None:
        offline = run(replace(base, scenario="offline", target_qps=None,
                              query_count=None).validate())
        rate = figures_of(offline).get("requests_per_s")
        if offline.status != "ok" or not rate:
            return sweep.sweep_id, QpsSearch((), None, None, (None, None), (
                f"the Offline test that gives the estimate ended {offline.status}: "
                f"{offline.reason[:160]}"), query_count=query_count), offline, ""
        start_qps, why = rate, "the Offline test's requests/s"
    res = search_in(base, run, start_qps=start_qps, query_count=query_count,
                    precision=precision, max_probes=max_probes)
    return sweep.sweep_id, res, offline, why


def search_in(base, run: Callable, *, start_qps: float, query_count: int = GEN_QUERIES,
              precision: float = DEFAULT_QPS_PRECISION,
              max_probes: int = DEFAULT_QPS_PROBES) -> QpsSearch:
    """find_max_qps over Server tests of base (target and count replaced per probe), each
    run by run(spec) -> its stored record; the start clamped into the probes' range."""
    lo, hi = gen_rate_range(query_count, base.ttft_bound_ms)
    probe_base = replace(base, scenario="server", query_count=query_count)
    return find_max_qps(lambda q: run(replace(probe_base, target_qps=q).validate()),
                        start_qps=min(max(start_qps, lo), hi), precision=precision,
                        max_probes=max_probes, query_count=query_count,
                        bound_ms=base.ttft_bound_ms, qps_range=(lo, hi))


@dataclass(frozen=True)
class Concurrency:
    points: tuple[tuple[int, RunRecord], ...]  # (users, its test) in order
    stop_reason: str
    front: tuple[int, ...]  # the users of the Pareto front's points


def pareto_points(points) -> tuple[int, ...]:
    """The users whose (tokens/s per user, tokens/s per machine) no other point beats on
    both (each point's own figures; a failed test is not a point)."""
    from engine.analysis.pareto import pareto_front

    ok = [(u, figures_of(r)) for u, r in points if r.status == "ok" and figures_of(r)]
    def neg(v):  # the front is of values to minimise: both are better higher
        return -v if v is not None else None

    front = pareto_front(ok, key=lambda p: (neg(p[1].get("user_tok_s")),
                                            neg(p[1].get("output_tok_s"))))
    return tuple(u for u, _ in front)


def sweep_users(probe: Callable[[int], RunRecord], *, cap: int,
                rise_stop: float = RISE_STOP) -> Concurrency:
    """Closed loops of 1, 2, 4, ... users (probe(users) -> its test) until output tokens/s
    rose by under rise_stop, a test failed, or the next count would pass `cap`. Pure but
    for what probe does."""
    points: list[tuple[int, RunRecord]] = []
    users, last, reason = 1, None, ""
    while True:
        rec = probe(users)
        points.append((users, rec))
        tok_s = figures_of(rec).get("output_tok_s")
        if rec.status != "ok" or not tok_s:
            reason = f"the test of {users} users ended {rec.status}: {rec.reason[:120]}"
            break
        if last is not None and tok_s < last * (1 + rise_stop):
            reason = (f"output tokens/s rose {tok_s / last - 1:+.1%} from {users // 2} to "
                      f"{users} users, under {rise_stop:.0%}: saturated")
            break
        if users * 2 > cap:
            reason = f"{users * 2} users would pass the cap of {cap}"
            break
        last, users = tok_s, users * 2
    return Concurrency(tuple(points), reason, pareto_points(points))


def stored_concurrency(base, *, db, runner, command: str, cap: int,
                       on_start: Callable[[str], None] = lambda sweep_id: None,
                       on_stored: Callable[[RunRecord], None] = lambda rec: None,
                       on_event=None) -> tuple[str, Concurrency]:
    """sweep_users on stored closed-loop tests, one sweep. base: a validated closed-loop
    GenServeSpec; each point sends max(its min_query_count, 4 x users) requests."""
    from engine.run.jobs.sweep import open_sweep

    sweep, run = stored_runs(db, runner, command=command, on_start=on_start,
                             on_stored=on_stored, on_event=on_event)

    def probe(users: int) -> RunRecord:
        return run(replace(base, users=users,
                           min_query_count=max(base.min_query_count, 4 * users)).validate())

    return sweep.sweep_id, sweep_users(probe, cap=cap)
