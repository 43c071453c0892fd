"""The highest Server target QPS whose LoadGen run is VALID under a latency bound (issue 27,
part 2).

Start from an estimate (a target given, the closed-loop figure the store already has for
the model's configuration, or an Offline run's samples/s), double while VALID (halve while
not), then bisect between the last VALID and the first missed target until the bracket is
within `precision` of its VALID end. Each probe is one LoadGen Server test (its early
stopping on, as LoadGen always judges Server) stored under the search's sweep, as a batch
search stores its probes. The stop rule is stated once, in `find_max_qps`, a pure function
of the probes' answers: the CLI and the tests drive the same code.

Every probe runs the same number of queries (`query_count`, LoadGen's min_query_count with
no minimum duration): early stopping lets more queries go over the bound the more a test
runs (none up to 661, 2 of 1,000, 33 of 5,000: engine/core/early_stopping.py), so probes of
a fixed duration would hold a fast rate to a looser percentile than a slow one. A probe of
N queries at q QPS runs N / q seconds; the search goes no lower than N / MAX_PROBE_S QPS,
and no higher than N / (SPAN_BOUNDS x the bound): a shorter probe ends before a backlog
grows past the bound, and passes a rate the system cannot sustain. A search that stops at
that end reports its max as a lower bound. Unless the user names N, it is chosen from the
search's estimate before the first Server probe so that the ceiling sits 8x above it
(engine/run/search/query_choice.py), and the stored command then names it, so a replay is the same
search.

A probe that timed out or ran out of memory did not serve its rate: it counts as a miss,
and the conclusion says so. Any other failure (the model raised, the worker was killed)
says nothing about the bound: the search stops there with the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

from engine.core.errors import UserError
from engine.core.limits import (QPS_PRECISION_RANGE, QPS_PROBES_RANGE, SEARCH_QUERIES_RANGE,
                                float_range, int_range)
from engine.core.record import RunRecord
from engine.run.search.query_choice import (DEFAULT_SEARCH_QUERIES, MAX_PROBE_S,
                                            SPAN_BOUNDS, QueryChoice, choose_query_count,
                                            probe_qps_range)

__all__ = ["QpsSearch", "find_max_qps", "stored_max_qps_search", "DEFAULT_QPS_PRECISION",
           "DEFAULT_QPS_PROBES", "MISSED", "loadgen_p99_ms",
           "EARLY_STOPPING_MIN_QUERIES", "StoredProbe", "replay_max_qps", "held_worker",
           "DEFAULT_SEARCH_QUERIES", "MAX_PROBE_S", "SPAN_BOUNDS", "probe_qps_range",
           "check_first_target", "search_timeout_s", "first_choice"]

DEFAULT_QPS_PRECISION = 0.05
# Doubling from an estimate within 1/8..8x of the answer takes 3-4 probes, bisecting to
# 5 % 4-5 more: 16 leaves room for an estimate far off without running for hours.
DEFAULT_QPS_PROBES = 16
# LoadGen's early stopping judges a Server test's p99 only after enough queries: with none
# over the bound it needs n with 0.99^n <= 0.01 (its 99 % confidence), n = 459 (its
# summary: "Processed 93 queries. Would need to run at least 366 more"). A probe with fewer
# would be INVALID at any rate.
EARLY_STOPPING_MIN_QUERIES = math.ceil(math.log(0.01) / math.log(0.99))
# Statuses that mean the rate was not served (LoadGen's INVALID; a test that never drained
# its backlog within the deadline; a backlog that outgrew the memory cap).
MISSED = ("invalid", "timeout", "oom")


def _span(query_count: int, bound_ms: float | None) -> str:
    """Why the targets end where they do, as a refusal and a stop reason say it."""
    bound = f", at least {SPAN_BOUNDS}x the {bound_ms:g} ms bound" if bound_ms else ""
    return f"{query_count:,} queries a probe span at most {MAX_PROBE_S:g} s{bound}"


def first_choice(q: float | None, query_count: int | None,
                 bound_ms: float | None) -> QueryChoice | None:
    """A search's query count as far as it is known before anything runs: the count given,
    else the one chosen from a first target given; None: chosen later, from the estimate."""
    if query_count is not None:
        return QueryChoice(query_count, bound_ms)
    if q is not None and bound_ms:
        return choose_query_count(q, bound_ms, source="the target given")
    return None


def check_first_target(q: float | None, query_count: int | None,
                       bound_ms: float | None = None, field: str = "target_qps") -> None:
    """UserError before a search runs: a query count out of its range, a bound too long for
    a probe to span SPAN_BOUNDS of them within MAX_PROBE_S, a first target (named `field`)
    outside probe_qps_range. query_count None: chosen from the estimate (first_choice)."""
    if query_count is not None:
        int_range("search_queries", query_count, *SEARCH_QUERIES_RANGE)
    longest = MAX_PROBE_S / SPAN_BOUNDS * 1000
    if bound_ms is not None and bound_ms > longest:
        raise UserError(f"bound_ms: {bound_ms:g} ms is too long for a search: a probe spans "
                        f"at least {SPAN_BOUNDS}x the bound, so that a rate over what the "
                        f"system sustains shows, and at most {MAX_PROBE_S:g} s; allowed: "
                        f"up to {longest:g} ms", field="bound_ms")
    if q is None:
        return
    choice = first_choice(q, query_count, bound_ms)
    if choice is None:  # no bound to choose a count for: the spec refuses it
        return
    query_count = choice.query_count
    lo, hi = probe_qps_range(query_count, bound_ms)
    if not lo <= q <= hi:
        raise UserError(f"{field}: {q:,g} QPS is out of range: {_span(query_count, bound_ms)}"
                        f"; allowed: number {_r(lo)}..{_r(hi)}, or "
                        f"{'fewer' if q < lo else 'more'} queries a probe", field=field)


def _r(x: float) -> str:
    """A rate in a range as a refusal states it: 3.333, 1000, 10000000."""
    return f"{x:.4g}" if x < 1000 else f"{x:.0f}"


def search_timeout_s(min_duration_s: float = 0.0) -> float:
    """A search's runner limit: its longest probe (or the Offline estimate's duration) and
    the margin every serving run gets for load, warm-up and drain."""
    from engine.run.jobs.serve_request import SERVE_TIMEOUT_MARGIN_S

    return max(min_duration_s, MAX_PROBE_S) + SERVE_TIMEOUT_MARGIN_S


@dataclass(frozen=True)
class QpsSearch:
    probes: tuple[tuple[float, RunRecord], ...]  # (target QPS, its run) in probe order
    max_qps: float | None  # the highest target that was VALID; None: none was
    best: RunRecord | None  # that probe's run
    bracket: tuple[float | None, float | None]  # [highest VALID, lowest missed)
    stop_reason: str
    missed_by_failure: tuple[float, ...] = ()  # targets that timed out / ran out of memory
    # every probe's queries (None: a search stored before the count was fixed, whose
    # probes ran varying counts and so were held to varying percentiles)
    query_count: int | None = None
    # VALID at the largest target a probe may run: the max is a lower bound
    capped: bool = False
    # how query_count was had: given, or chosen from the estimate (None: not recorded)
    queries: QueryChoice | None = None

    @property
    def p99_ms(self) -> float | None:
        """LoadGen's p99 at the max (its summary's, else the SUT's own); None: no max."""
        return loadgen_p99_ms(self.best)


def _q(qps: float) -> str:
    return f"{qps:,.1f}" if qps < 100 else f"{qps:,.0f}"


def loadgen_p99_ms(rec: RunRecord | None) -> float | None:
    """The p99 latency LoadGen judged (its summary's), else the SUT's own p99."""
    if rec is None:
        return None
    ns = ((rec.serving or {}).get("percentiles_ns") or {}).get("99")
    return ns / 1e6 if ns is not None else rec.p99_ms


def find_max_qps(probe: Callable[[float], RunRecord], *, start_qps: float,
                 precision: float = DEFAULT_QPS_PRECISION,
                 max_probes: int = DEFAULT_QPS_PROBES, query_count: int | None = None,
                 bound_ms: float | None = None,
                 qps_range: tuple[float, float] | None = None) -> QpsSearch:
    """probe(target QPS) -> its run (status ok: LoadGen VALID) of query_count queries under
    bound_ms (the caller's probe runs them; here they set the targets, probe_qps_range, and
    the result's wording). Pure but for what probe does; the stop rule in one place:
    - within precision: highest VALID lo and lowest missed hi with hi - lo <= precision x lo;
    - the probe limit reached (the bracket so far is reported);
    - VALID at the largest target allowed (the max is then a lower bound), or missed at the
      smallest (for query_count queries: the rates that span them over SPAN_BOUNDS bounds
      and within MAX_PROBE_S);
    - a probe failed for a reason that is not the load (error, killed)."""
    float_range("precision", precision, *QPS_PRECISION_RANGE)
    int_range("max_probes", max_probes, *QPS_PROBES_RANGE)
    qps_range = qps_range or probe_qps_range(query_count, bound_ms)
    float_range("start_qps", start_qps, *qps_range)
    q_min, q_max = qps_range
    probes: list[tuple[float, RunRecord]] = []
    by_failure: list[float] = []
    lo = hi = None
    best = None
    q, reason, capped = start_qps, "", False
    why = f": {_span(query_count, bound_ms)}" if query_count else ""
    while True:
        if len(probes) >= max_probes:
            reason = f"probe limit ({max_probes}) reached before the bracket was within " \
                     f"{precision:.1%}"
            break
        rec = probe(q)
        probes.append((q, rec))
        if rec.status == "ok":
            lo, best = q, rec
        elif rec.status in MISSED:
            hi = q
            if rec.status != "invalid":
                by_failure.append(q)
        else:
            reason = (f"the probe at {_q(q)} QPS ended {rec.status}: {rec.reason[:120]}; "
                      "a failure that is not the load's says nothing about the bound")
            break
        if hi is None:  # VALID so far: double
            if q >= q_max:
                reason = (f"still VALID at the largest target allowed ({_r(q_max)} QPS{why}"
                          + ("; more queries a probe reach higher rates)" if why else ")"))
                capped = True
                break
            q = min(2 * q, q_max)
        elif lo is None:  # missed so far: halve
            if q <= q_min:
                reason = (f"missed the bound even at the smallest target allowed ({_r(q_min)} "
                          f"QPS{why}" + ("; fewer queries a probe reach lower rates)" if why
                                         else ")"))
                break
            q = max(q / 2, q_min)
        elif hi - lo <= precision * lo:
            reason = (f"bracket [{_q(lo)}, {_q(hi)}) within {precision:.1%} of its VALID end")
            break
        else:
            q = (lo + hi) / 2
    if by_failure:
        reason += ("; " + ", ".join(_q(x) for x in by_failure) + " QPS timed out or ran out "
                   "of memory: counted as missing the bound")
    return QpsSearch(tuple(probes), lo, best, (lo, hi), reason, tuple(by_failure),
                     query_count, capped)


def stored_max_qps_search(base, *, db, runner, command, start_qps: float | None,
                          closed_loop: float | None = None,
                          precision: float = DEFAULT_QPS_PRECISION,
                          max_probes: int = DEFAULT_QPS_PROBES,
                          query_count: int | None = None,
                          on_start: Callable[[str], None] = lambda sweep_id: None,
                          on_stored: Callable[[RunRecord], None] = lambda rec: None,
                          on_estimate: Callable[..., None] = lambda q, why, choice: None,
                          on_event=None) -> tuple[str, QpsSearch, RunRecord | None, str]:
    """find_max_qps on real LoadGen Server tests of one query count each, every run stored
    under one sweep. query_count: the count given; None: chosen from the estimate before the
    first Server probe (engine/run/search/query_choice.py). command(choice) -> the sweep's command,
    which must state the count (choice: a QueryChoice; None while it is not chosen yet, as
    the sweep opens before an Offline estimate), so that a replay is the same search; the
    sweep's command is restated once it is. base: the Server ServeSpec (validated; its
    target_qps and query count are replaced per probe, its minimum duration is the Offline
    estimate's only). The estimate: start_qps when given (refused before the sweep opens
    when its probe would run past MAX_PROBE_S), else closed_loop (the store's figure), else
    an Offline run of the same SUT, stored in the sweep too. on_estimate(rate, where from,
    the QueryChoice). Returns (sweep_id, search, the Offline run or None, where the
    estimate came from); a failed Offline run leaves an empty search."""
    from engine.run.jobs.sweep import open_sweep

    check_first_target(start_qps, query_count, base.bound_ms)
    choice = first_choice(start_qps, query_count, base.bound_ms)
    if choice is None and closed_loop:
        choice = choose_query_count(closed_loop, base.bound_ms, source=CLOSED_SOURCE)
    say = command if callable(command) else (lambda chosen: command)
    sweep = open_sweep(db, command=say(choice), on_stored=on_stored)
    on_start(sweep.sweep_id)
    with held_worker(runner) as via:
        return _stored_search(base, choice, via, sweep, start_qps=start_qps,
                              closed_loop=closed_loop, precision=precision,
                              max_probes=max_probes, on_estimate=on_estimate,
                              on_event=on_event, restate=lambda c: sweep.restate(say(c)))


CLOSED_SOURCE = "the store's closed-loop figure for this configuration"


def held_worker(runner):
    """Every probe of a search in one worker, held warm between probes (engine/run/process/held.py):
    the framework is imported and the model built once, not once a probe, and the probes
    compared with each other ran in one process. A probe that ends its worker (timeout,
    out of memory) gets a fresh one. A runner that cannot hold a worker runs as it is."""
    import contextlib

    from engine.run.process.held import HeldWorker
    from engine.run.process.runner import Runner

    return HeldWorker(runner) if isinstance(runner, Runner) else contextlib.nullcontext(runner)


def _stored_search(base, choice, runner, sweep, *, start_qps, closed_loop, precision,
                   max_probes, on_estimate, on_event, restate):
    def run(spec) -> RunRecord:
        [rec] = runner.run([spec], on_record=sweep.store, sweep_id=sweep.sweep_id,
                           on_event=on_event, known_stats=sweep.known_stats)
        return rec

    offline = None
    if start_qps is not None:
        why = "the target given"
    elif closed_loop:
        start_qps, why = closed_loop, CLOSED_SOURCE
    else:
        offline = run(replace(base, scenario="offline", target_qps=None, bound_ms=None,
                              query_count=None).validate())
        if offline.status != "ok" or not offline.throughput:
            return sweep.sweep_id, QpsSearch((), None, None, (None, None), (
                f"the Offline run that gives the estimate ended {offline.status}: "
                f"{offline.reason[:120]}"), query_count=choice and choice.query_count,
                queries=choice), offline, ""
        start_qps, why = offline.throughput, "the Offline run's samples/s"
        if choice is None:  # chosen now, before the first Server probe, and recorded
            choice = choose_query_count(start_qps, base.bound_ms, source=why)
            restate(choice)
    n = choice.query_count
    probe_base = replace(base, query_count=n).validate()
    lo, hi = probe_qps_range(n, probe_base.bound_ms)
    start_qps = min(max(start_qps, lo), hi)
    on_estimate(start_qps, why, choice)
    res = find_max_qps(lambda q: run(replace(probe_base, target_qps=q).validate()),
                       start_qps=start_qps, precision=precision, max_probes=max_probes,
                       query_count=n, bound_ms=probe_base.bound_ms)
    return sweep.sweep_id, replace(res, queries=choice), offline, why


@dataclass(frozen=True)
class StoredProbe:
    """What the search reads of a stored probe (store.serving.search_probes' row): the
    fields of a RunRecord that find_max_qps and loadgen_p99_ms look at."""
    target_qps: float
    status: str
    reason: str = ""
    p99_ms: float | None = None
    serving: dict | None = None
    run_id: str = ""
    throughput: float | None = None
    threads_per_core: int | None = None
    machine_shape: str | None = None
    cores_used: int | None = None
    replicas: int = 1
    hypervisor: bool | None = None  # its host a VM (None: not recorded)

    @property
    def extra(self) -> dict:  # as a RunRecord keeps it (ClosedFigure.of reads it)
        return {"cores_used": self.cores_used, "hypervisor": self.hypervisor}


CUT_SHORT = "cut short"


def replay_max_qps(probes, *, precision: float = DEFAULT_QPS_PRECISION,
                   max_probes: int = DEFAULT_QPS_PROBES, query_count: int | None = None,
                   bound_ms: float | None = None,
                   qps_range: tuple[float, float] | None = None) -> QpsSearch:
    """The search as it ran, from its stored probes in order (a pure function of their
    answers): the same max, bracket and stop reason the job printed, for any reader of the
    store. query_count and bound_ms: what the search's command recorded (query_count None:
    stored before a search fixed it; its probes ran varying counts, and the result says
    so). qps_range: the targets the search could try, when its kind has its own (a
    language model's: engine/run/search/gen_max_rate.gen_rate_range); None: serving's.
    A search that stopped early (cancelled, its worker gone) says so."""
    probes = list(probes)
    if not probes:
        return QpsSearch((), None, None, (None, None), "no probe stored",
                         query_count=query_count)
    answers = iter(probes)

    def probe(q: float):
        return next(answers, None) or StoredProbe(q, CUT_SHORT, "no further probe stored")

    lo, hi = qps_range or probe_qps_range(query_count, bound_ms)
    res = find_max_qps(probe, start_qps=min(max(probes[0].target_qps, lo), hi),
                       precision=precision, max_probes=max_probes, query_count=query_count,
                       bound_ms=bound_ms, qps_range=(lo, hi))
    if res.probes and res.probes[-1][1].status == CUT_SHORT:
        res = replace(res, probes=res.probes[:-1], stop_reason=(
            f"stopped after {len(res.probes) - 1} probes with no further probe stored "
            "(cancelled, or still running)"))
    return res
