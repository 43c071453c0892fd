"""The highest Server target QPS whose LoadGen run is VALID under a latency bound (issue 27,
part 2).

Start from an estimate (a target given, the closed-loop figure the store already has for
the model's configuration, or an Offline run's samples/s), double while VALID (halve while
not), then bisect between the last VALID and the first missed target until the bracket is
within `precision` of its VALID end. Each probe is one LoadGen Server test (its early
stopping on, as LoadGen always judges Server) stored under the search's sweep, as a batch
search stores its probes. The stop rule is stated once, in `find_max_qps`, a pure function
of the probes' answers: the CLI and the tests drive the same code.

A probe that timed out or ran out of memory did not serve its rate: it counts as a miss,
and the conclusion says so. Any other failure (the model raised, the worker was killed)
says nothing about the bound: the search stops there with the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

from engine.core.limits import (QPS_PRECISION_RANGE, QPS_PROBES_RANGE, SERVE_QPS_RANGE,
                                float_range, int_range)
from engine.core.record import RunRecord

__all__ = ["QpsSearch", "find_max_qps", "stored_max_qps_search", "DEFAULT_QPS_PRECISION",
           "DEFAULT_QPS_PROBES", "MISSED", "loadgen_p99_ms",
           "EARLY_STOPPING_MIN_QUERIES", "StoredProbe", "replay_max_qps", "held_worker"]

DEFAULT_QPS_PRECISION = 0.05
# Doubling from an estimate within 1/8..8x of the answer takes 3-4 probes, bisecting to
# 5 % 4-5 more: 16 leaves room for an estimate far off without running for hours.
DEFAULT_QPS_PROBES = 16
# LoadGen's early stopping judges a Server test's p99 only after enough queries: with none
# over the bound it needs n with 0.99^n <= 0.01 (its 99 % confidence), n = 459 (its
# summary: "Processed 93 queries. Would need to run at least 366 more"). A probe with fewer
# would be INVALID at any rate, and halving the target would only shorten it further, so
# every probe runs at least these many.
EARLY_STOPPING_MIN_QUERIES = math.ceil(math.log(0.01) / math.log(0.99))
# Statuses that mean the rate was not served (LoadGen's INVALID; a test that never drained
# its backlog within the deadline; a backlog that outgrew the memory cap).
MISSED = ("invalid", "timeout", "oom")


@dataclass(frozen=True)
class QpsSearch:
    probes: tuple[tuple[float, RunRecord], ...]  # (target QPS, its run) in probe order
    max_qps: float | None  # the highest target that was VALID; None: none was
    best: RunRecord | None  # that probe's run
    bracket: tuple[float | None, float | None]  # [highest VALID, lowest missed)
    stop_reason: str
    missed_by_failure: tuple[float, ...] = ()  # targets that timed out / ran out of memory

    def summary(self, bound_ms: float) -> str:
        """'max 212 QPS at p99 41 ms under 50 ms; bracket [212, 223) after 7 probes'."""
        n = len(self.probes)
        lo, hi = self.bracket
        bracket = f"[{_q(lo) if lo else '-'}, {_q(hi) if hi else '-'})"
        if self.max_qps is None:
            return (f"no target QPS met the p99 bound of {bound_ms:g} ms; bracket {bracket} "
                    f"after {n} probe{'s' * (n != 1)}")
        p99 = loadgen_p99_ms(self.best)
        at = f" at p99 {p99:,.3g} ms" if p99 is not None else ""
        return (f"max {_q(self.max_qps)} QPS{at} under {bound_ms:g} ms; bracket {bracket} "
                f"after {n} probe{'s' * (n != 1)}")


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
                 max_probes: int = DEFAULT_QPS_PROBES,
                 qps_range: tuple[float, float] = SERVE_QPS_RANGE) -> QpsSearch:
    """probe(target QPS) -> its run (status ok: LoadGen VALID). Pure but for what probe
    does; the stop rule in one place:
    - within precision: highest VALID lo and lowest missed hi with hi - lo <= precision x lo;
    - the probe limit reached (the bracket so far is reported);
    - VALID at the largest target allowed, or missed at the smallest;
    - a probe failed for a reason that is not the load (error, killed)."""
    float_range("precision", precision, *QPS_PRECISION_RANGE)
    int_range("max_probes", max_probes, *QPS_PROBES_RANGE)
    float_range("start_qps", start_qps, *qps_range)
    q_min, q_max = qps_range
    probes: list[tuple[float, RunRecord]] = []
    by_failure: list[float] = []
    lo = hi = None
    best = None
    q, reason = start_qps, ""
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
                reason = f"still VALID at the largest target allowed ({q_max:g} QPS)"
                break
            q = min(2 * q, q_max)
        elif lo is None:  # missed so far: halve
            if q <= q_min:
                reason = f"missed the bound even at the smallest target allowed ({q_min:g} QPS)"
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
    return QpsSearch(tuple(probes), lo, best, (lo, hi), reason, tuple(by_failure))


def stored_max_qps_search(base, *, db, runner, command: str, start_qps: float | None,
                          closed_loop: float | None = None,
                          precision: float = DEFAULT_QPS_PRECISION,
                          max_probes: int = DEFAULT_QPS_PROBES,
                          on_start: Callable[[str], None] = lambda sweep_id: None,
                          on_stored: Callable[[RunRecord], None] = lambda rec: None,
                          on_estimate: Callable[[float, str], None] = lambda q, why: None,
                          on_event=None) -> tuple[str, QpsSearch, RunRecord | None, str]:
    """find_max_qps on real LoadGen Server tests, every run stored under one sweep.
    base: the Server ServeSpec (validated; its target_qps is replaced per probe). The
    estimate: start_qps when given, else closed_loop (the store's figure), else an Offline
    run of the same SUT, stored in the sweep too. Returns (sweep_id, search, the Offline run
    or None, where the estimate came from); a failed Offline run leaves an empty search."""
    from engine.run.sweep import open_sweep

    raised = ""
    if base.min_query_count < EARLY_STOPPING_MIN_QUERIES:
        base = replace(base, min_query_count=EARLY_STOPPING_MIN_QUERIES)
        raised = (f"; min queries raised to {EARLY_STOPPING_MIN_QUERIES} so that LoadGen's "
                  "early stopping can judge p99")
    sweep = open_sweep(db, command=command, on_stored=on_stored)
    on_start(sweep.sweep_id)
    with held_worker(runner) as via:
        return _stored_search(base, via, sweep, raised, start_qps=start_qps,
                              closed_loop=closed_loop, precision=precision,
                              max_probes=max_probes, on_estimate=on_estimate,
                              on_event=on_event)


def held_worker(runner):
    """Every probe of a search in one worker, held warm between probes (engine/run/held.py):
    the framework is imported and the model built once, not once a probe, and the probes
    compared with each other ran in one process. A probe that ends its worker (timeout,
    out of memory) gets a fresh one. A runner that cannot hold a worker runs as it is."""
    import contextlib

    from engine.run.held import HeldWorker
    from engine.run.runner import Runner

    return HeldWorker(runner) if isinstance(runner, Runner) else contextlib.nullcontext(runner)


def _stored_search(base, runner, sweep, raised: str, *, start_qps, closed_loop, precision,
                   max_probes, on_estimate, on_event):
    def run(spec) -> RunRecord:
        [rec] = runner.run([spec], on_record=sweep.store, sweep_id=sweep.sweep_id,
                           on_event=on_event, known_stats=sweep.known_stats)
        return rec

    offline = None
    if start_qps is not None:
        why = "the target given"
    elif closed_loop:
        start_qps, why = closed_loop, "the store's closed-loop figure for this configuration"
    else:
        offline = run(replace(base, scenario="offline", target_qps=None,
                              bound_ms=None).validate())
        if offline.status != "ok" or not offline.throughput:
            return sweep.sweep_id, QpsSearch((), None, None, (None, None), (
                f"the Offline run that gives the estimate ended {offline.status}: "
                f"{offline.reason[:120]}")), offline, ""
        start_qps, why = offline.throughput, "the Offline run's samples/s"
    start_qps = min(max(start_qps, SERVE_QPS_RANGE[0]), SERVE_QPS_RANGE[1])
    on_estimate(start_qps, why)
    res = find_max_qps(lambda q: run(replace(base, target_qps=q).validate()),
                       start_qps=start_qps, precision=precision, max_probes=max_probes)
    return (sweep.sweep_id, replace(res, stop_reason=res.stop_reason + raised), offline,
            why)


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

    @property
    def extra(self) -> dict:  # as a RunRecord keeps it (ClosedFigure.of reads it)
        return {"cores_used": self.cores_used}


CUT_SHORT = "cut short"


def replay_max_qps(probes, *, precision: float = DEFAULT_QPS_PRECISION,
                   max_probes: int = DEFAULT_QPS_PROBES) -> QpsSearch:
    """The search as it ran, from its stored probes in order (a pure function of their
    answers): the same max, bracket and stop reason the job printed, for any reader of the
    store. A search that stopped early (cancelled, its worker gone) says so."""
    probes = list(probes)
    if not probes:
        return QpsSearch((), None, None, (None, None), "no probe stored")
    answers = iter(probes)

    def probe(q: float):
        return next(answers, None) or StoredProbe(q, CUT_SHORT, "no further probe stored")

    res = find_max_qps(probe, start_qps=min(max(probes[0].target_qps, SERVE_QPS_RANGE[0]),
                                            SERVE_QPS_RANGE[1]),
                       precision=precision, max_probes=max_probes)
    if res.probes and res.probes[-1][1].status == CUT_SHORT:
        res = replace(res, probes=res.probes[:-1], stop_reason=(
            f"stopped after {len(res.probes) - 1} probes with no further probe stored "
            "(cancelled, or still running)"))
    return res
