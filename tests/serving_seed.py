"""Serving runs built by hand (no worker, no LoadGen): a VALID SingleStream test and an
INVALID Server test as LoadGen 6.0.17 prints their summaries, stored through the store like
a run the engine finished, for the Deploy page's tests."""

from dataclasses import replace

from engine.scenarios.inference.spec import RunSpec
from engine.scenarios.serving.messages import ServeResult
from engine.scenarios.serving.spec import ServeSpec
from engine.run.process.records import config_extra, record_from_result
from seeds.records import SYSTEM, base_fields

SINGLE_VALID = """================================================
MLPerf Results Summary
================================================
SUT name : PySUT
Scenario : SingleStream
Mode     : PerformanceOnly
90.0th percentile latency (ns) : 2100000
Result is : VALID
  Min duration satisfied : Yes
  Min queries satisfied : Yes
  Early stopping satisfied: Yes
Early Stopping Result:
 * Processed at least 64 queries (400).
 * Would discard 29 highest latency queries.
 * Early stopping 90.0th percentile estimate: 2200000
 * Early stopping 99.0th percentile estimate: 2900000

================================================
Additional Stats
================================================
QPS w/ loadgen overhead         : 480.50
QPS w/o loadgen overhead        : 500.00

Min latency (ns)                : 1500000
Max latency (ns)                : 3000000
Mean latency (ns)               : 2000000
50.00 percentile latency (ns)   : 2000000
90.00 percentile latency (ns)   : 2100000
99.00 percentile latency (ns)   : 2800000

================================================
Test Parameters Used
================================================
samples_per_query : 1
target_qps : 500
target_latency (ns): 0
min_duration (ms): 300
min_query_count : 50
performance_sample_count : 64
"""

SERVER_INVALID = """================================================
MLPerf Results Summary
================================================
SUT name : PySUT
Scenario : Server
Mode     : PerformanceOnly
Completed samples per second    : 450.25
Result is : INVALID
  Performance constraints satisfied : NO
  Min duration satisfied : NO
  Min queries satisfied : Yes
  Early stopping satisfied: NO
Recommendations:
 * Reduce target QPS to improve latency.
 * Increase the target QPS so the loadgen pre-generates more queries.
Early Stopping Result:
 * Run unsuccessful.

================================================
Additional Stats
================================================
Scheduled samples per second : 999.20
Min latency (ns)                : 1000000
Max latency (ns)                : 900000000
Mean latency (ns)               : 300000000
50.00 percentile latency (ns)   : 250000000
90.00 percentile latency (ns)   : 550000000
99.00 percentile latency (ns)   : 604159386

================================================
Test Parameters Used
================================================
target_qps : 1000
target_latency (ns): 15000000
min_duration (ms): 10000
min_query_count : 100
"""


def _detail(count: int, per_query: int = 1, overs: int | None = None) -> str:
    over = ("" if overs is None else  # LoadGen's over count (Server), when it is kept
            f':::MLLOG {{"key": "result_overlatency_query_count", "value": {overs}, '
            '"time_ms": 1.0}\n')
    return (':::MLLOG {"key": "result_validity", "value": "VALID", "time_ms": 1.0}\n'
            f':::MLLOG {{"key": "result_query_count", "value": {count}, "time_ms": 1.0}}\n'
            f':::MLLOG {{"key": "generated_samples_per_query", "value": {per_query}, '
            '"time_ms": 1.0}\n' + over)


def serve_record(run_id: str, spec: ServeSpec, summary: str, samples, minute: int = 0, *,
                 queries: int | None = None, overs: int | None = None):
    """queries: the count LoadGen's detail log gives (None: one a sample); overs: its
    count over the bound (None: a log without it, as stored before it was kept)."""
    spec = spec.validate(cores=64)
    base = {**base_fields(spec, run_id, minute), "kind": spec.kind,
            "extra": config_extra(spec)}
    res = ServeResult(run_id, load_s=0.1, first_forward_s=0.01, warmup_ns=(3_000_000,),
                      samples_ns=tuple(samples), warmup_s=0.01, measured_s=0.5,
                      stop_reason="loadgen", summary_log=summary,
                      detail_log=_detail(queries or len(samples), overs=overs),
                      loadgen_version="6.0.17",
                      queries=len(samples), model_calls=len(samples))
    return record_from_result(base, res, spec)


def seed_serving(db_path, sweep_id="sweep-serve"):
    """A VALID SingleStream test (400 queries around 2 ms, bound 5 ms) and, a minute later
    and in another sweep, an INVALID Server test (1000 QPS, bound 15 ms). Returns their
    run ids (single, server)."""
    from store.db import open_db
    from store.runs import save_record, save_sweep

    single = ServeSpec(RunSpec("identity", "selftest", 1, 1), "single-stream",
                       min_duration_s=0.3, min_query_count=50, bound_ms=5.0)
    server = ServeSpec(RunSpec("resnet18", "torch", 8, 2, image_size=64), "server",
                       target_qps=1000.0, bound_ms=15.0, max_wait_ms=2.0)
    fast = [1_500_000 + (i % 10) * 150_000 for i in range(400)]
    slow = [1_000_000 + i * 2_000_000 for i in range(300)]
    with open_db(db_path) as con:
        for sid in (sweep_id, sweep_id + "-2"):
            save_sweep(con, sid, rounds=1, seed=1, plan=[[]], configurations=1)
        save_record(con, replace(serve_record("serve-single", single, SINGLE_VALID, fast),
                                 sweep_id=sweep_id, round_no=1), SYSTEM)
        save_record(con, replace(serve_record("serve-server", server, SERVER_INVALID, slow,
                                              minute=1),
                                 sweep_id=sweep_id + "-2", round_no=1), SYSTEM)
    return "serve-single", "serve-server"


def seed_closed_loop(db_path, run_id: str, *, per_call_ns: int = 2_427_184, batch: int = 1,
                     threads: int = 1, system_id: str | None = None) -> float:
    """An ok closed-loop run of the selftest identity model at (batch, threads) on the
    machine system_id names (None: this one), each call per_call_ns: batch x 1e9 /
    per_call_ns samples/s (412 at the default). Returns its stored throughput."""
    from engine.run.process.machine import system_info
    from store.db import open_db
    from store.runs import save_record
    from seeds.records import ok_record

    system_id = system_id or system_info()["system_id"]
    rec = ok_record(run_id, samples=(per_call_ns,) * 3, model="identity",
                    framework="selftest", batch_size=batch, intra_threads=threads,
                    image_size=None)
    with open_db(db_path) as con:
        save_record(con, replace(rec, system_id=system_id), {**SYSTEM, "system_id": system_id})
    return rec.throughput
