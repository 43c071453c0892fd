"""Serving's own tables (issue 27), declared as data: LoadGen's word on each test that ran
(serving_results, one row a run) and its logs, gzipped (loadgen_logs, one row a log).

These are the tables migration m012_serving created, column for column (store/db.py keeps
that migration as history; tests/test_kinds.py checks the declaration against it), now
written and read through the registry like any kind's (engine.scenarios.tables).
"""

from __future__ import annotations

import json

from engine.scenarios.tables import Column, KindTable

__all__ = ["SERVING_RESULTS", "LOADGEN_LOGS", "TABLES", "LOG_FORMAT", "table_rows"]

# How a LoadGen log is kept: its text, gzipped
LOG_FORMAT = "text-gzip"

SERVING_RESULTS = KindTable("serving_results", (
    Column("run_id", "VARCHAR"), Column("scenario", "VARCHAR", not_null=True),
    Column("result", "VARCHAR"), Column("failed_rules", "JSON", not_null=True),
    Column("recommendations", "JSON", not_null=True),
    Column("early_stopping", "JSON", not_null=True),
    Column("percentiles_ns", "JSON", not_null=True), Column("figures", "JSON", not_null=True),
    Column("query_count", "BIGINT"), Column("samples_per_query", "BIGINT"),
    Column("summary", "JSON", not_null=True)))

LOADGEN_LOGS = KindTable("loadgen_logs", (
    Column("run_id", "VARCHAR", not_null=True), Column("name", "VARCHAR", not_null=True),
    Column("bytes", "BIGINT", not_null=True), Column("format", "VARCHAR", not_null=True),
    Column("data", "BLOB", not_null=True)), key=("run_id", "name"))

TABLES = (SERVING_RESULTS, LOADGEN_LOGS)


def table_rows(rec) -> dict[str, list[dict]]:
    """A stored serving run's rows: LoadGen's summary as parsed (only where its test ran)
    and each log it kept."""
    s = rec.serving
    results = [] if s is None else [{
        "run_id": rec.run_id, "scenario": (rec.extra or {}).get("scenario", ""),
        "result": s.get("result"), "failed_rules": json.dumps(s.get("failed_rules", [])),
        "recommendations": json.dumps(s.get("recommendations", [])),
        "early_stopping": json.dumps(s.get("early_stopping", {})),
        "percentiles_ns": json.dumps(s.get("percentiles_ns", {})),
        "figures": json.dumps(s.get("figures", {})), "query_count": s.get("query_count"),
        "samples_per_query": s.get("samples_per_query"), "summary": json.dumps(s)}]
    logs = [{"run_id": rec.run_id, "name": name, "bytes": size, "format": LOG_FORMAT,
             "data": data} for name, size, data in rec.loadgen_logs]
    return {SERVING_RESULTS.name: results, LOADGEN_LOGS.name: logs}
