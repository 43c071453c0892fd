"""Stored-looking searches of serving a language model (issue 38): the three Deploy jobs
(engine/run/search/genserve_jobs.py) run for real through their stored searches and the
store's own writers (open_sweep, save_record), against SeedEngine, a runner that answers
every test from a fixed rule instead of a worker: so each sweep's command, tests and order
are what a real job stores, and the figures are fixed numbers.

The rule (tiny_llama, prompt 16, output 8, standard bounds: TTFT 2,000 ms, TPOT 100 ms):
- Offline: 10 requests issued at 0, one finishing every 500 ms: 2.0 req/s, 16 output tok/s;
- Server at q req/s: 10 requests every 1/q s; VALID (TTFT 50 ms, TPOT 10 ms) up to the
  engine's capacity (CAPACITY), INVALID above it (TTFT 2,500 ms, over the bound);
- closed loop of u users: each user's requests back to back, TTFT and TPOT from CLOSED
  (by engine and sequences; the 8-sequence engine by users, as seeds.records.GS_USERS).

GS_RATE_REQUEST: eager, Offline estimate 2.0 -> probes 2 ok, 4 ok, 8 and 6 INVALID, 5 ok:
max 5 req/s ([5, 6) within its 20 %). GS_USERS_REQUEST: OpenVINO, 8 sequences, 1, 2, 4, 8
users, saturated at 8. GS_TUNE_REQUEST: eager and OpenVINO at 1 and 4 sequences, priced on
c6i.4xlarge: eager pruned (its closed loop 4.17 req/s, 5.65x worse than 4 sequences'), both
OpenVINO candidates VALID at the largest target (11.5 req/s), the default eager at 5.47.
"""

from __future__ import annotations

from dataclasses import replace

from seeds.records import GS_USERS, SYSTEM, gs_summary, gs_test

__all__ = ["SeedEngine", "CAPACITY", "CLOSED", "GS_RATE_REQUEST", "GS_USERS_REQUEST",
           "GS_TUNE_REQUEST", "GS_TUNE_SHAPE", "GS_SEARCH_SWEEPS", "seed_genserve_searches"]

CAPACITY = {("eager", 1): 5.5, ("openvino_genai_cb", 1): 12.0, ("openvino_genai_cb", 4): 12.0,
            ("openvino_genai_cb", 8): 12.0}
CLOSED = {("eager", 1): (100.0, 20.0), ("openvino_genai_cb", 1): (40.0, 5.0),
          ("openvino_genai_cb", 4): (30.0, 20.0)}
GS_TUNE_SHAPE = "c6i.4xlarge"


def _requests(**kw):
    from engine.run.search.genserve_jobs import (GenMaxRateRequest, GenTuneRequest,
                                                 GenUsersRequest)

    common = dict(model="tiny_llama", prompt_len=16, output_len=8, cores=64)
    return (GenMaxRateRequest(scenarios=("server",), qps_precision=0.2, **common),
            GenUsersRequest(scenarios=("closed-loop",), engine="openvino_genai_cb",
                            max_num_seqs=8, min_query_count=4, max_users=16, **common),
            GenTuneRequest(scenarios=("closed-loop",), engines=("eager", "openvino_genai_cb"),
                           seqs=(1, 4), machine_shape=GS_TUNE_SHAPE, **common))


GS_RATE_REQUEST, GS_USERS_REQUEST, GS_TUNE_REQUEST = _requests()


class SeedEngine:
    """A runner (run(specs, on_record, sweep_id, ...) -> records) that answers every test
    from the rule above; tests numbered in order from `prefix`."""

    def __init__(self, prefix: str):
        self.prefix, self.n = prefix, 0

    def run(self, specs, *, on_record, sweep_id, on_event=None, known_stats=None):
        out = []
        for spec in specs:
            self.n += 1
            rec = replace(self._test(spec, f"{self.prefix}-{self.n:02d}"),
                          sweep_id=sweep_id, round_no=1, node_system=SYSTEM)
            on_record(rec)
            out.append(rec)
        return out

    def _test(self, s, run_id: str):
        key = (s.runtime, s.max_num_seqs)
        if s.scenario == "offline":
            done = [500.0 * (i + 1) for i in range(10)]
            return gs_test(s, run_id, [0.0] * 10, [d - 70.0 for d in done], [10.0] * 10,
                           minute=self.n)
        if s.scenario == "server":
            q = s.target_qps
            issue = [1000.0 / q * i for i in range(10)]
            if q <= CAPACITY[key]:
                return gs_test(s, run_id, issue, [50.0] * 10, [10.0] * 10, minute=self.n,
                               summary=gs_summary("VALID", (), 50_000_000, 10_000_000,
                                                  40.0, q, 0))
            return gs_test(s, run_id, issue, [2500.0] * 10, [10.0] * 10, minute=self.n,
                           summary=gs_summary("INVALID", ("Performance constraints",),
                                              2_500_000_000, 10_000_000, 20.0, q, 0))
        ttft, tpot = (GS_USERS[s.users] if s.max_num_seqs == 8 else CLOSED[key])
        e2e = ttft + 7 * tpot
        each = s.min_query_count // s.users
        issue = [k * e2e for _ in range(s.users) for k in range(each)]
        return gs_test(s, run_id, issue, [ttft] * len(issue), [tpot] * len(issue),
                       minute=self.n)


GS_SEARCH_SWEEPS = {"rate": "sweep-gs-rate", "users": "sweep-gs-users",
                    "tune": "sweep-gs-tune"}


def seed_genserve_searches(db_path) -> dict[str, tuple]:
    """The three searches, stored in db_path under GS_SEARCH_SWEEPS' ids: {"rate" |
    "users" | "tune": what the job's stored search returned}. Each job's stored() runs as
    it does on the page; only its sweep (engine.run.jobs.sweep.open_sweep) collects the
    records, which are then written in one connection by the store's writers (save_sweep,
    save_record): a connection opened per test would take seconds."""
    from unittest import mock

    from engine.run.jobs.sweep import StoredSweep
    from store.db import open_db
    from store.runs import save_record, save_sweep

    out, sweeps = {}, []
    for name, request in (("rate", GS_RATE_REQUEST), ("users", GS_USERS_REQUEST),
                          ("tune", GS_TUNE_REQUEST)):
        sweep_id, records, said = GS_SEARCH_SWEEPS[name], [], []

        def opened(db, *, command, on_stored=lambda rec: None, **_):
            said.append(command)

            def store(rec):
                records.append(rec)
                on_stored(rec)
            return StoredSweep(sweep_id, store, lambda spec: None,
                               restate=said.append)
        specs, _ = request.expand()
        with mock.patch("engine.run.jobs.sweep.open_sweep", opened):
            out[name] = request.stored(specs, db=db_path, runner=SeedEngine(f"gs-{name}"))
        sweeps.append((sweep_id, said[-1], records))
    with open_db(db_path) as con:
        for sweep_id, command, records in sweeps:
            save_sweep(con, sweep_id, rounds=1, seed=0, plan=[], configurations=0,
                       command=command)
            for rec in records:
                save_record(con, rec, SYSTEM)
    return out
