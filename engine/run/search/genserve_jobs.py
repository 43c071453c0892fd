"""Serving a language model's searches as dashboard jobs (issue 38): the max-rate search under
the TTFT and TPOT bounds (GenMaxRateRequest), the closed-loop concurrency sweep
(GenUsersRequest) and the tuner (GenTuneRequest), each a GenServeRequest that wraps the
stored search (engine/run/search/gen_max_rate.py's stored_gen_max_rate and
stored_concurrency, gen_autotune.py's stored_gen_tune). The Deploy page queues them and
`python -m engine genserve-search / genserve-users / genserve-tune` builds the same request
and runs the same `stored`, so there is one search, not a second one.

Everything a request takes is checked in expand() before anything runs (UserError naming the
field and its range); every test a search may run is validated there too. A job's sweep
carries its request in its command (replays.GEN_RATE_COMMAND, GEN_USERS_COMMAND or
GEN_TUNE_COMMAND, then the fields as JSON, bounds resolved from the preset), so what it found
is read back by replaying the pure search over the stored tests
(engine/run/search/gen_replays.py): any reader of the database sees the conclusion the job
printed, and the report can state the command that reproduces it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Callable

from engine.core.errors import UserError
from engine.core.limits import (MARGIN_RANGE, QPS_PRECISION_RANGE, QPS_PROBES_RANGE,
                                SEARCH_QUERIES_RANGE, choice, float_range, int_range,
                                logical_cores)
from engine.run.jobs.genserve_request import GenServeRequest
from engine.run.search.autotune import DEFAULT_TUNE_MARGIN, OBJECTIVES, PRUNE_FACTOR, TOP_N
from engine.run.search.gen_autotune import (GenCandidate, default_candidate, gen_candidates,
                                            stored_gen_tune)
from engine.run.search.gen_max_rate import (GEN_MAX_PROBE_S, GEN_QUERIES, RISE_STOP,
                                            figures_of, gen_rate_range, stored_concurrency,
                                            stored_gen_max_rate)
from engine.run.search.max_qps import DEFAULT_QPS_PRECISION, DEFAULT_QPS_PROBES
from engine.run.search.replays import GEN_RATE_COMMAND, GEN_TUNE_COMMAND, GEN_USERS_COMMAND
from engine.scenarios.genserve.engines import ENGINE_NAMES, ENGINES, REFUSED
from engine.scenarios.genserve.request import GenServeJob
from engine.scenarios.genserve.spec import MAX_SEQS_RANGE, REQUESTS_RANGE, USERS_RANGE

__all__ = ["GenMaxRateRequest", "GenUsersRequest", "GenTuneRequest", "SEARCH_TIMEOUT_S",
           "TUNE_PRECISIONS", "user_counts"]

# a probe's longest test and the margin for the engine's load and compile
SEARCH_TIMEOUT_S = GEN_MAX_PROBE_S + 1800.0
TUNE_PRECISIONS = tuple(dict.fromkeys(p for e in ENGINES for p in e.precisions))


def _noop(*_a) -> None:
    return None


@dataclass(frozen=True)
class _GenSearch(GenServeRequest):
    """What the three share: the test's fields (model, engine, lengths, bounds, limits) as
    the Deploy form and the CLI fill them, recorded with the bounds resolved."""

    def _fields(self) -> dict:
        preset, ttft, tpot = self.bounds()
        return {"model": self.model, "engine": self.engine, "precision": self.precision,
                "threads": self.threads, "max_num_seqs": self.max_num_seqs,
                "kv_blocks": self.kv_blocks, "max_batched_tokens": self.max_batched_tokens,
                "prompt_len": self.prompt_len, "output_len": self.output_len,
                "preset": preset, "ttft_bound_ms": ttft, "tpot_bound_ms": tpot,
                "samples": self.samples, "gen_seed": self.gen_seed}

    def _base(self, scenario: str, **given):
        """The one spec the search varies, validated (GenServeJob's expansion)."""
        [spec], _ = GenServeJob._expand(replace(self, scenarios=(scenario,), **given))
        return spec

    def _progress(self, on_event, on_stored):
        """The queue's on_event(notice, step) and on_stored, numbering the search's tests."""
        count = [1]

        def event(ev):
            on_event(ev, count[0])

        def stored(rec):
            count[0] += 1
            on_stored(rec)
        return event, stored


@dataclass(frozen=True)
class GenMaxRateRequest(_GenSearch):
    """The highest request rate whose LoadGen Server test keeps p99 TTFT and p99 TPOT within
    the bounds. target_qps: the first probe (None: an Offline test of the same engine gives
    the estimate and the flat-out figure)."""

    search_queries: int = GEN_QUERIES
    qps_precision: float = DEFAULT_QPS_PRECISION
    max_probes: int = DEFAULT_QPS_PROBES
    timeout_s: float = SEARCH_TIMEOUT_S

    def _expand(self):
        int_range("search_queries", self.search_queries, *SEARCH_QUERIES_RANGE,
                  hint=" (the fewest LoadGen's early stopping judges a p99 on)")
        float_range("qps_precision", self.qps_precision, *QPS_PRECISION_RANGE)
        int_range("max_probes", self.max_probes, *QPS_PROBES_RANGE)
        _, ttft, _ = self.bounds()
        lo, hi = gen_rate_range(self.search_queries, ttft)
        if self.target_qps is not None and not lo <= self.target_qps <= hi:
            raise UserError(f"target_qps: {self.target_qps:g} req/s is out of range for "
                            f"{self.search_queries} requests a probe (at most "
                            f"{GEN_MAX_PROBE_S:g} s, at least 20 TTFT bounds); allowed: "
                            f"{lo:.3g}..{hi:.3g}", field="target_qps")
        base = self._base("server", target_qps=self.target_qps or 1.0,
                          query_count=self.search_queries)
        return [base] * (self.max_probes + 1), []  # the most tests: Offline + the probes

    def command(self) -> str:
        return f"{GEN_RATE_COMMAND} " + json.dumps({
            **self._fields(), "target_qps": self.target_qps,
            "search_queries": self.search_queries, "qps_precision": self.qps_precision,
            "max_probes": self.max_probes})

    def label(self) -> str:
        _, ttft, tpot = self.bounds()
        return (f"max-rate search {self.model} {self.engine}, TTFT {ttft:g} ms / TPOT "
                f"{tpot:g} ms")

    def stored(self, specs, *, db, runner, on_start=_noop, on_stored=_noop, on_event=None):
        """stored_gen_max_rate on specs[0] (expand's): (sweep id, the search, the Offline
        test or None, where the estimate came from)."""
        return stored_gen_max_rate(
            specs[0], db=db, runner=runner, command=self.command(),
            start_qps=self.target_qps, query_count=self.search_queries,
            precision=self.qps_precision, max_probes=self.max_probes, on_start=on_start,
            on_stored=on_stored, on_event=on_event)

    def run(self, specs, *, db, runner, seed: int, on_start, on_stored, on_event,
            on_plan=lambda step: None, on_stop: Callable[[str], None] = lambda why: None,
            command: str | None = None) -> str:
        from engine.present.genserve_search_text import rate_summary

        event, stored = self._progress(on_event, on_stored)
        _, res, _, _ = self.stored(specs, db=db, runner=runner, on_start=on_start,
                                   on_stored=stored, on_event=event)
        on_stop(res.stop_reason)
        base = specs[0]
        return rate_summary(res, figures_of, base.ttft_bound_ms, base.tpot_bound_ms)


def user_counts(cap: int) -> list[int]:
    """1, 2, 4, ... up to cap: the points a concurrency sweep may run."""
    out, n = [], 1
    while n <= cap:
        out.append(n)
        n *= 2
    return out


@dataclass(frozen=True)
class GenUsersRequest(_GenSearch):
    """Closed loops of 1, 2, 4, ... users until output tokens/s rose by under RISE_STOP (or
    the next count passes max_users). min_query_count: the requests a point sends at least
    (4 x its users at least)."""

    min_query_count: int = 16
    max_users: int = 64

    def _expand(self):
        int_range("max_users", self.max_users, *USERS_RANGE)
        int_range("min_query_count", self.min_query_count, *REQUESTS_RANGE)
        base = self._base("closed-loop", users=(1,))
        # every point it may run, checked now (sequences, requests per user)
        return [replace(base, users=u, min_query_count=max(base.min_query_count, 4 * u)
                        ).validate(self.cores) for u in user_counts(self.max_users)], []

    def command(self) -> str:
        return f"{GEN_USERS_COMMAND} " + json.dumps({
            **self._fields(), "min_query_count": self.min_query_count,
            "max_users": self.max_users, "rise_stop": RISE_STOP})

    def label(self) -> str:
        return (f"concurrency sweep {self.model} {self.engine} seqs{self.max_num_seqs}, up "
                f"to {self.max_users} users")

    def stored(self, specs, *, db, runner, on_start=_noop, on_stored=_noop, on_event=None):
        """stored_concurrency from specs[0] (1 user): (sweep id, the sweep's points)."""
        return stored_concurrency(specs[0], db=db, runner=runner, command=self.command(),
                                  cap=self.max_users, on_start=on_start,
                                  on_stored=on_stored, on_event=on_event)

    def run(self, specs, *, db, runner, seed: int, on_start, on_stored, on_event,
            on_plan=lambda step: None, on_stop: Callable[[str], None] = lambda why: None,
            command: str | None = None) -> str:
        from engine.present.genserve_search_text import concurrency_summary

        event, stored = self._progress(on_event, on_stored)
        _, c = self.stored(specs, db=db, runner=runner, on_start=on_start, on_stored=stored,
                           on_event=event)
        on_stop(c.stop_reason)
        return concurrency_summary(c, figures_of)


@dataclass(frozen=True)
class GenTuneRequest(_GenSearch):
    """Engine x precision x max sequences x threads under both bounds, for the most
    requests/s or the least USD per 1 M output tokens on machine_shape; the default (eager,
    fp32, one request at a time) confirmed too. thread_choices, replica_choices: empty, the
    form's threads and replicas (candidates whose threads x replicas pass the cores are not
    tried)."""

    engines: tuple[str, ...] = ("eager", "openvino_genai_cb")
    precisions: tuple[str, ...] = ("fp32",)
    seqs: tuple[int, ...] = (1, 2, 4, 8)
    thread_choices: tuple[int, ...] = ()
    replica_choices: tuple[int, ...] = ()
    objective: str = "qps"
    closed_requests: int = 16
    search_queries: int = GEN_QUERIES
    machine_shape: str | None = None
    margin: float = DEFAULT_TUNE_MARGIN
    timeout_s: float = SEARCH_TIMEOUT_S

    def candidates(self) -> list[GenCandidate]:
        return gen_candidates(self.engines, self.precisions, self.seqs,
                              self.thread_choices or (self.threads,),
                              self.replica_choices or (self.replicas,), cores=self.cores)

    def _check(self) -> None:
        cores = self.cores or logical_cores()
        for e in self.engines:
            if e not in ENGINE_NAMES:
                why = f" does not serve here: {REFUSED[e]}" if e in REFUSED else " is unknown"
                raise UserError(f"engines: {e}{why}; allowed: {', '.join(ENGINE_NAMES)}",
                                field="engines")
        for p in self.precisions:
            choice("precisions", p, TUNE_PRECISIONS)
        for n in self.seqs:
            int_range("seqs", n, *MAX_SEQS_RANGE)
        for t in self.thread_choices:
            int_range("threads", t, 1, cores, hint=f" (this machine has {cores} logical "
                                                   "cores)")
        for r in self.replica_choices:
            int_range("replicas", r, 1, cores, hint=f" (this machine has {cores} logical "
                                                    "cores)")
        choice("objective", self.objective, OBJECTIVES)
        float_range("margin", self.margin, *MARGIN_RANGE)
        int_range("closed_requests", self.closed_requests, *REQUESTS_RANGE)
        int_range("search_queries", self.search_queries, *SEARCH_QUERIES_RANGE,
                  hint=" (the fewest LoadGen's early stopping judges a p99 on)")
        if self.objective == "cost" and not self.machine_shape:
            raise UserError("machine_shape: the cost objective prices a shape; allowed: "
                            "--machine-shape NAME as `python -m engine prices list` prints "
                            "it", field="machine_shape")
        if not self.candidates():
            raise UserError("engines: no engine x precision of these runs here; allowed: "
                            "eager fp32/bf16, openvino_genai_cb fp32/bf16/int8/int4",
                            field="engines")

    def _expand(self):
        self._check()
        base = self._base("closed-loop", users=(1,), min_query_count=self.closed_requests)
        specs = []
        for c in [*self.candidates(), default_candidate(self.candidates())]:
            specs.append(replace(  # each candidate's closed loop, as stored_gen_tune runs it
                base, runtime=c.runtime, precision=c.precision, max_num_seqs=c.max_num_seqs,
                intra_threads=c.threads, replicas=c.replicas, kv_blocks=0,
                max_batched_tokens=0, users=c.max_num_seqs,
                min_query_count=max(self.closed_requests, 2 * c.max_num_seqs)
            ).validate(self.cores))
        return [base, *specs], []

    def command(self) -> str:
        cands = self.candidates()
        return f"{GEN_TUNE_COMMAND} " + json.dumps({
            **self._fields(), "objective": self.objective,
            "machine_shape": self.machine_shape, "margin": self.margin,
            "closed_requests": self.closed_requests, "search_queries": self.search_queries,
            "top_n": TOP_N, "prune_factor": PRUNE_FACTOR,
            "engines": list(self.engines), "precisions": list(self.precisions),
            "seqs": list(self.seqs), "thread_choices": list(self.thread_choices),
            "candidates": [_cand(c) for c in cands],
            "default": _cand(default_candidate(cands))})

    def label(self) -> str:
        return (f"tune serving {self.model}: {self.objective}, {len(self.candidates())} "
                "candidates")

    def machine(self, db):
        """The catalog's Machine of machine_shape (None: none named)."""
        if not self.machine_shape:
            return None
        from engine.analysis.cost import resolve_shape
        from store.db import open_db
        from store.prices import effective_catalog

        # read-write, as the dashboard's own handle is (this runs in its job thread)
        with open_db(db) as con:
            catalog, _ = effective_catalog(con)
        return resolve_shape(self.machine_shape, catalog)

    def stored(self, specs, *, db, runner, on_start=_noop, on_stored=_noop, on_event=None):
        """stored_gen_tune from specs[0]: (sweep id, the tuning, the default candidate)."""
        return stored_gen_tune(
            specs[0], self.candidates(), db=db, runner=runner, command=self.command(),
            objective=self.objective, machine=self.machine(db),
            closed_requests=self.closed_requests, query_count=self.search_queries,
            margin=self.margin, on_start=on_start, on_stored=on_stored, on_event=on_event)

    def run(self, specs, *, db, runner, seed: int, on_start, on_stored, on_event,
            on_plan=lambda step: None, on_stop: Callable[[str], None] = lambda why: None,
            command: str | None = None) -> str:
        from engine.present.genserve_search_text import tuning_summary

        event, stored = self._progress(on_event, on_stored)
        _, t, _ = self.stored(specs, db=db, runner=runner, on_start=on_start,
                              on_stored=stored, on_event=event)
        on_stop(t.stop_reason)
        return tuning_summary(t, specs[0].ttft_bound_ms, specs[0].tpot_bound_ms)


def _cand(c: GenCandidate) -> list:
    # positional, as GenCandidate(*fields) reads it back
    return [c.runtime, c.precision, c.max_num_seqs, c.threads, c.replicas]
