"""Named queries for serving a language model (issue 38, kind `genserve`): the stored tests
with their figures and LoadGen's word (every test, or a sweep's: a max-rate search's probes,
a concurrency sweep's points), one test's requests as stored (raw ns, for the histograms)
and its LoadGen logs (decompressed, for download).

What a test was asked for is read from the run's extra (config_extra), so a failed test,
which has no genserve_results row, still has its scenario, lengths, bounds and users. The
kind is a bound parameter like every value; the tables are genserve's own
(engine/scenarios/genserve/table.py).
"""

from __future__ import annotations

import gzip
import json

import pandas as pd

from engine.scenarios import GENSERVING

__all__ = ["genserve_tests", "sweep_tests", "has_genserve", "genserve_requests",
           "genserve_log_sizes", "genserve_log"]

_ASKED = ("r.extra->>'scenario' AS scenario, "
          "(r.extra->>'prompt_len')::INTEGER AS prompt_len, "
          "(r.extra->>'output_len')::INTEGER AS output_len, "
          "(r.extra->>'ttft_bound_ms')::DOUBLE AS ttft_bound_ms, "
          "(r.extra->>'tpot_bound_ms')::DOUBLE AS tpot_bound_ms, "
          "(r.extra->>'target_qps')::DOUBLE AS target_qps, "
          "(r.extra->>'users')::INTEGER AS users, "
          "(r.extra->>'query_count')::BIGINT AS query_count, "
          "coalesce(r.extra->>'preset', '') AS preset, "
          "coalesce(r.extra->>'engine', r.runtime) AS engine_label, "
          "coalesce(r.extra->>'batching', '') AS batching")
_FIGURES = ("g.requests, g.span_s, g.requests_per_s, g.output_tok_s, g.input_tok_s, "
            "g.good_requests, g.good_share, g.goodput_req_s, g.ttft_over, g.tpot_over, "
            "g.user_tok_s, g.ttft_p50_ms, g.ttft_p90_ms, g.ttft_p99_ms, g.tpot_p50_ms, "
            "g.tpot_p90_ms, g.tpot_p99_ms, g.e2e_p50_ms, g.e2e_p90_ms, g.e2e_p99_ms, "
            "g.loadgen_result, g.failed_rules, g.loadgen_errors, g.loadgen_ttft_p99_ms, "
            "g.loadgen_tpot_p99_ms, g.loadgen_tok_s, g.ignored, g.build_s, g.agreement, "
            "g.engine_settings, g.engine_stats")
_SELECT = ("SELECT r.run_id, r.sweep_id, r.started_at, r.model, r.runtime, r.precision, "
           "r.intra_threads, r.replicas, r.batch_size AS max_num_seqs, r.status, "
           "coalesce(r.reason, '') AS reason, r.p99_ms, r.throughput, r.threads_per_core, "
           "r.machine_shape, (r.extra->>'cores_used')::BIGINT AS cores_used, "
           "(r.extra->>'hypervisor')::BOOLEAN AS hypervisor, " + _ASKED + ", " + _FIGURES + " "
           "FROM runs r LEFT JOIN genserve_results g USING (run_id) WHERE r.kind = ? ")


def _decoded(df: pd.DataFrame) -> pd.DataFrame:
    """JSON columns as Python values (a list of failed rules, dicts of settings)."""
    for col in ("failed_rules", "engine_settings", "engine_stats"):
        df[col] = [json.loads(v) if isinstance(v, str) else None for v in df[col]]
    return df


def genserve_tests(con, model: str | None = None, engine: str | None = None,
                   scenario: str | None = None) -> pd.DataFrame:
    """Every stored genserve test, newest first, optionally of one model, engine (runtime)
    and scenario: what it was asked for, its status and reason, its figures (NULL for a
    test that measured nothing) and LoadGen's result, failed rules and errors."""
    return _decoded(con.execute(
        _SELECT + "AND (?::VARCHAR IS NULL OR r.model = ?) "
        "AND (?::VARCHAR IS NULL OR r.runtime = ?) "
        "AND (?::VARCHAR IS NULL OR r.extra->>'scenario' = ?) "
        "ORDER BY r.started_at DESC, r.run_id",
        [GENSERVING.kind, model, model, engine, engine, scenario, scenario]).df())


def sweep_tests(con, sweep_id: str) -> pd.DataFrame:
    """One sweep's genserve tests in the order they ran (a search's probes, a concurrency
    sweep's points), with genserve_tests' columns and what pricing and a search's replay
    read (the run's p99 and throughput, threads per core, cores used, VM flag, shape)."""
    return _decoded(con.execute(_SELECT + "AND r.sweep_id = ? ORDER BY r.started_at, r.run_id",
                                [GENSERVING.kind, sweep_id]).df())


def has_genserve(con) -> bool:
    """Whether any genserve test is stored (the Deploy page's Work switch shows then)."""
    return con.execute("SELECT count(*) FROM runs WHERE kind = ?",
                       [GENSERVING.kind]).fetchone()[0] > 0


def genserve_requests(con, run_id: str) -> pd.DataFrame:
    """One test's requests as stored: seq, the prompt (sample_index), its output tokens and
    the ns (since the test's start, the SUT's clock) of its issue, first token and
    completion. Figures are derived from these (engine/scenarios/genserve/metrics.py)."""
    return con.execute(
        "SELECT seq, sample_index, n_tokens, issue_ns, first_ns, done_ns "
        "FROM genserve_requests WHERE run_id = ? ORDER BY seq", [run_id]).df()


def genserve_log_sizes(con, run_id: str) -> dict[str, int]:
    """The LoadGen logs a test kept: name -> size in bytes, uncompressed (none for a closed
    loop, which LoadGen does not run)."""
    return dict(con.execute("SELECT name, bytes FROM genserve_logs WHERE run_id = ? "
                            "ORDER BY name DESC", [run_id]).fetchall())


def genserve_log(con, run_id: str, name: str) -> str | None:
    """One LoadGen log of a test (mlperf_log_summary.txt, mlperf_log_detail.txt) as text,
    or None."""
    row = con.execute("SELECT format, data FROM genserve_logs WHERE run_id = ? AND name = ?",
                      [run_id, name]).fetchone()
    if row is None:
        return None
    data = bytes(row[1])
    # text-gzip is the one format written (table.LOG_FORMAT); anything else is kept raw
    return (gzip.decompress(data) if row[0] == "text-gzip" else data).decode()
