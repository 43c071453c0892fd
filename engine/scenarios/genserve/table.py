"""The tables of serving a language model, declared as data: a test's figures and LoadGen's
word on it (genserve_results, one row a test), every request's raw readings
(genserve_requests, one row a request) and LoadGen's logs, gzipped (genserve_logs).

genserve_results' figures are derived from genserve_requests (metrics.py) when the run is
stored; LoadGen's own percentiles (from its scheduled issue times) sit beside them, and the
front's CPU time per output token (LoadGen and our reporting: what serving under test costs
beside the engine's own work, on the same cores).
"""

from __future__ import annotations

import gzip
import json

from engine.scenarios.genserve.messages import GenServeResult
from engine.scenarios.genserve.metrics import PERCENTILES, test_figures
from engine.scenarios.serving.loadgen import detail_value, parse_summary
from engine.scenarios.tables import Column, KindTable

__all__ = ["GENSERVE_RESULTS", "GENSERVE_REQUESTS", "GENSERVE_LOGS", "TABLES", "kind_rows",
           "loadgen_summary", "LOG_FORMAT"]

LOG_FORMAT = "text-gzip"
_PCT = tuple(Column(f"{m}_p{p}_ms", "DOUBLE") for m in ("ttft", "tpot", "e2e")
             for p in PERCENTILES)

GENSERVE_RESULTS = KindTable("genserve_results", (
    Column("run_id", "VARCHAR"), Column("scenario", "VARCHAR", not_null=True),
    Column("prompt_len", "INTEGER", not_null=True),
    Column("output_len", "INTEGER", not_null=True),
    Column("ttft_bound_ms", "DOUBLE"), Column("tpot_bound_ms", "DOUBLE"),
    Column("target_qps", "DOUBLE"), Column("users", "INTEGER"),
    Column("requests", "BIGINT"), Column("span_s", "DOUBLE"),
    Column("requests_per_s", "DOUBLE"), Column("output_tok_s", "DOUBLE"),
    Column("input_tok_s", "DOUBLE"), Column("good_requests", "BIGINT"),
    Column("good_share", "DOUBLE"), Column("goodput_req_s", "DOUBLE"),
    Column("ttft_over", "BIGINT"), Column("tpot_over", "BIGINT"),
    Column("user_tok_s", "DOUBLE"), *_PCT,
    Column("loadgen_result", "VARCHAR"), Column("failed_rules", "JSON"),
    Column("loadgen_errors", "BIGINT"), Column("loadgen_ttft_p99_ms", "DOUBLE"),
    Column("loadgen_tpot_p99_ms", "DOUBLE"), Column("loadgen_tok_s", "DOUBLE"),
    Column("ignored", "BIGINT"), Column("build_s", "DOUBLE"),
    Column("front_cpu_us_per_token", "DOUBLE"),
    Column("agreement", "DOUBLE"), Column("engine_settings", "JSON"),
    Column("engine_stats", "JSON"), Column("summary", "JSON")))

GENSERVE_REQUESTS = KindTable("genserve_requests", (
    Column("run_id", "VARCHAR"), Column("seq", "INTEGER", not_null=True),
    Column("sample_index", "INTEGER", not_null=True),
    Column("n_tokens", "INTEGER", not_null=True), Column("issue_ns", "BIGINT", not_null=True),
    Column("first_ns", "BIGINT", not_null=True), Column("done_ns", "BIGINT", not_null=True)),
    key=("run_id", "seq"))

GENSERVE_LOGS = KindTable("genserve_logs", (
    Column("run_id", "VARCHAR", not_null=True), Column("name", "VARCHAR", not_null=True),
    Column("bytes", "BIGINT", not_null=True), Column("format", "VARCHAR", not_null=True),
    Column("data", "BLOB", not_null=True)), key=("run_id", "name"))

TABLES = (GENSERVE_RESULTS, GENSERVE_REQUESTS, GENSERVE_LOGS)


def loadgen_summary(res: GenServeResult) -> dict:
    """LoadGen's summary parsed, with its detail log's error count ({} where it did not
    run: the closed loop)."""
    if not res.summary_log:
        return {}
    s = parse_summary(res.summary_log)
    errors = detail_value(res.detail_log, "num_errors")
    s["errors"] = errors if errors is not None else s.get("errors")
    return s


def _ms(ns):
    return ns / 1e6 if ns is not None else None


def kind_rows(res: GenServeResult) -> dict[str, list[dict]]:
    """The rows a test adds: its figures with LoadGen's, every request, each log."""
    s = loadgen_summary(res)
    figures = test_figures(res.req_issue_ns, res.req_first_ns, res.req_done_ns,
                           res.req_tokens, prompt_len=res.prompt_len,
                           ttft_bound_ms=res.ttft_bound_ms, tpot_bound_ms=res.tpot_bound_ms)
    fig = s.get("figures", {})
    tok_s = next((fig[k] for k in ("completed_tokens_per_s", "tokens_per_s",
                                   "tps_with_loadgen_overhead") if k in fig), None)
    run = {"run_id": res.run_id, **{k: getattr(res, k) for k in (
        "scenario", "prompt_len", "output_len", "ttft_bound_ms", "tpot_bound_ms",
        "target_qps", "users")}, **figures,
           "loadgen_result": s.get("result"),
           "failed_rules": json.dumps(s.get("failed_rules", [])) if s else None,
           "loadgen_errors": s.get("errors"),
           "loadgen_ttft_p99_ms": _ms(s.get("ttft_percentiles_ns", {}).get("99")),
           "loadgen_tpot_p99_ms": _ms(s.get("tpot_percentiles_ns", {}).get("99")),
           "loadgen_tok_s": tok_s,
           "ignored": (res.engine_stats or {}).get("ignored"), "build_s": res.build_s,
           "front_cpu_us_per_token": (1e6 * res.front_cpu_s / sum(res.req_tokens)
                                      if res.front_cpu_s is not None and sum(res.req_tokens)
                                      else None),
           "agreement": res.agreement,
           "engine_settings": json.dumps(res.engine_settings or {}),
           "engine_stats": json.dumps(res.engine_stats or {}),
           "summary": json.dumps(s) if s else None}
    requests = [{"run_id": res.run_id, "seq": i, "sample_index": int(k), "n_tokens": int(n),
                 "issue_ns": int(a), "first_ns": int(f), "done_ns": int(d)}
                for i, (k, n, a, f, d) in enumerate(zip(
                    res.req_sample, res.req_tokens, res.req_issue_ns, res.req_first_ns,
                    res.req_done_ns))]
    logs = [{"run_id": res.run_id, "name": name, "bytes": len(text.encode()),
             "format": LOG_FORMAT, "data": gzip.compress(text.encode(), 6)}
            for name, text in (("mlperf_log_summary.txt", res.summary_log),
                               ("mlperf_log_detail.txt", res.detail_log)) if text]
    return {GENSERVE_RESULTS.name: [run], GENSERVE_REQUESTS.name: requests,
            GENSERVE_LOGS.name: logs}
