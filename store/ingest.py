"""Export runs to Parquet, CSV or JSON, and import them back; import PerfZero summaries.

An exported row is a run's columns plus its machine (`system`, an object) and its raw
samples (`warmup_ns`, `samples_ns`, lists of integers). Parquet keeps lists natively; CSV
and JSON carry objects and lists as JSON text / JSON values, so every format reads back to
the same rows.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import fields
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from engine.core.errors import UserError
from engine.core.record import STATUSES, RunRecord
from engine.scenarios import KINDS, Scenario
from store.kinds import kind_rows
from store.runs import (EPOCH_COLUMNS, PROFILE_COLUMNS, RUN_COLUMNS, SYSTEM_COLUMNS, run_exists,
                        save_record)

__all__ = ["export_runs", "export_bytes", "import_file", "run_rows", "FORMATS", "EXPORT_TAG",
           "PERFZERO_HARNESS", "PERFZERO_METRICS", "PERFZERO_FLAGS", "PERFZERO_EXTRAS"]

FORMATS = ("parquet", "csv", "json")
EXPORT_TAG = "dl-bench-dashboard/runs"
EXPORT_VERSION = 1
_EXTRA_COLS = ("epochs", "step_losses", "profile_ops")  # training and profile side tables
# A kind's own tables ({table: [row]}, RunRecord.kind_rows): generation's figures and raw
# per-token readings (issue 37), so an export carries them and an import writes them back.
# Serving's tables are not among them: its record carries them in fields of its own.
_KIND_COL = "kind_rows"
# The kinds whose own tables travel in an export: those whose rows come from the record's
# kind_rows (Scenario.table_rows' default), so import writes them back as they were. A kind
# that derives its rows from other record fields (serving: LoadGen's parsed summary and
# logs) gets them back from those fields on import, and would otherwise write them twice.
_CARRIED = tuple(s for s in KINDS if s.tables and type(s).table_rows is Scenario.table_rows)
_JSON_COLS = ("versions", "threads_effective", "env", "extra", "numerics", "system",
              *_EXTRA_COLS, _KIND_COL)
_LIST_COLS = ("warmup_ns", "samples_ns")
_TIME_COLS = ("started_at", "ended_at")

_EXPORT_SQL = f"""
    SELECT {', '.join('r.' + c for c in RUN_COLUMNS)},
           CASE WHEN y.system_id IS NULL THEN NULL ELSE
             json_object({', '.join(f"'{c}', y.{c}" for c in SYSTEM_COLUMNS)}) END AS system,
           coalesce(s.warmup_ns, []::BIGINT[]) AS warmup_ns,
           coalesce(s.samples_ns, []::BIGINT[]) AS samples_ns,
           (SELECT to_json(list(struct_pack({', '.join(f"{c} := e.{c}" for c in EPOCH_COLUMNS)})
                                ORDER BY e.epoch))
            FROM train_epochs e WHERE e.run_id = r.run_id HAVING count(*) > 0) AS epochs,
           (SELECT to_json(list(t.loss ORDER BY t.step)) FROM train_steps t
            WHERE t.run_id = r.run_id HAVING count(*) > 0) AS step_losses,
           (SELECT to_json(list(struct_pack({', '.join(f"{c} := p.{c}" for c in PROFILE_COLUMNS)})
                                ORDER BY p.rank))
            FROM profile_ops p WHERE p.run_id = r.run_id HAVING count(*) > 0) AS profile_ops
    FROM runs r
    LEFT JOIN systems y ON y.system_id = r.system_id
    LEFT JOIN (SELECT run_id,
                      list(latency_ns ORDER BY idx) FILTER (WHERE phase = 'warmup') AS warmup_ns,
                      list(latency_ns ORDER BY idx) FILTER (WHERE phase = 'measure') AS samples_ns
               FROM samples GROUP BY run_id) s ON s.run_id = r.run_id
    WHERE (? IS NULL OR r.sweep_id = ?)
      AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], r.run_id))
    ORDER BY r.started_at NULLS LAST, r.run_id
"""


def _export_frame(con, sweep_id=None, run_ids=None) -> pd.DataFrame:
    df = con.execute(_EXPORT_SQL, [sweep_id, sweep_id, run_ids, run_ids]).df()
    return df.assign(**{_KIND_COL: _kind_rows(con, df)})


def _kind_rows(con, df: pd.DataFrame) -> list:
    """Per exported run, its kind's own tables' rows as JSON text (None where its kind has
    none that travel)."""
    found: dict[str, dict] = {}
    for scenario in _CARRIED if len(df) else ():
        ids = df.run_id[df.kind == scenario.kind].tolist()
        for table in scenario.tables if ids else ():
            rows = kind_rows(con, table, ids).astype(object)
            for rec in rows.where(rows.notna(), None).to_dict("records"):
                rec = {k: (v.item() if hasattr(v, "item") else v) for k, v in rec.items()}
                found.setdefault(rec["run_id"], {}).setdefault(table.name, []).append(rec)
    return [json.dumps(found[r]) if r in found else None for r in df.run_id]


def run_rows(con, sweep_id: str | None = None, run_ids: list[str] | None = None) -> list[dict]:
    """The chosen runs as exported rows (plain values, machine and raw samples included):
    what every writer, ours and the other tools' formats, starts from."""
    return _rows(_export_frame(con, sweep_id, run_ids))


def _rows(df: pd.DataFrame) -> list[dict]:
    """Plain Python values: None for missing, ISO strings for times, lists for samples."""
    out = []
    for rec in df.to_dict("records"):
        row = {}
        for k, v in rec.items():
            if k in _LIST_COLS:
                v = [int(x) for x in v] if v is not None else []
            elif k in _TIME_COLS:
                v = None if v is None or pd.isna(v) else pd.Timestamp(v).isoformat()
            elif k in _JSON_COLS:
                v = json.loads(v) if isinstance(v, str) else v
            elif v is not None and not isinstance(v, (list, dict)) and pd.isna(v):
                v = None
            elif hasattr(v, "item"):
                v = v.item()
            row[k] = v
        out.append(row)
    return out


def export_bytes(con, fmts: tuple[str, ...], run_ids: list[str]) -> dict[str, bytes]:
    """The chosen runs as one file's bytes per format (for download buttons): the runs and
    their raw samples are read once, however many formats are written."""
    import tempfile

    rows = _rows(_export_frame(con, None, run_ids))
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in fmts:
            path = Path(tmp) / f"runs.{fmt}"
            _write(rows, path, fmt)
            out[fmt] = path.read_bytes()
    return out


def export_runs(con, path: str | Path, fmt: str, sweep_id: str | None = None,
                run_ids: list[str] | None = None) -> int:
    """Write runs (with machine and raw samples) to path; return the number of runs."""
    _check_format(fmt)
    rows = _rows(_export_frame(con, sweep_id, run_ids))
    _write(rows, Path(path), fmt)
    return len(rows)


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise UserError(f"format: {fmt!r} is not supported; allowed: {', '.join(FORMATS)}",
                        field="format")


def _write(rows: list[dict], path: Path, fmt: str) -> None:
    _check_format(fmt)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "json":
        doc = {"format": EXPORT_TAG, "version": EXPORT_VERSION,
               "exported_at": datetime.now(timezone.utc).isoformat(), "runs": rows}
        path.write_text(json.dumps(doc, indent=1))
    elif fmt == "csv":
        flat = [{k: json.dumps(v) if k in _JSON_COLS + _LIST_COLS else v
                 for k, v in r.items()} for r in rows]
        pd.DataFrame(flat, columns=RUN_COLUMNS + ["system", *_LIST_COLS, *_EXTRA_COLS,
                                                  _KIND_COL]).to_csv(path, index=False)
    else:
        flat = [{k: json.dumps(v) if k in _JSON_COLS else v for k, v in r.items()}
                for r in rows]
        table = pa.Table.from_pylist(flat, schema=_parquet_schema()) if flat else \
            _parquet_schema().empty_table()
        meta = {b"format": EXPORT_TAG.encode(), b"version": str(EXPORT_VERSION).encode()}
        pq.write_table(table.replace_schema_metadata(meta), path)


def _parquet_schema() -> pa.Schema:
    types = {f.name: f.type for f in fields(RunRecord)}
    cols = []
    for name in RUN_COLUMNS + ["system", *_LIST_COLS, *_EXTRA_COLS, _KIND_COL]:
        t = str(types.get(name, "str"))
        if name in _LIST_COLS:
            typ = pa.list_(pa.int64())
        elif name in _TIME_COLS or name in _JSON_COLS or t.startswith("str"):
            typ = pa.string()
        elif t.startswith("int"):
            typ = pa.int64()
        elif t.startswith("float"):
            typ = pa.float64()
        else:
            typ = pa.string()
        cols.append(pa.field(name, typ))
    return pa.schema(cols)


# -- import ---------------------------------------------------------------------------------

def import_file(con, path: str | Path) -> tuple[int, int, str]:
    """Read our export (any format) or PerfZero summary JSON; return (imported, skipped,
    kind). Runs already present (same run_id) are skipped, so importing twice is safe."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"file: {path} does not exist", field="file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            table = pq.read_table(path)
            rows = [{k: (json.loads(v) if k in _JSON_COLS and isinstance(v, str) else v)
                     for k, v in r.items()} for r in table.to_pylist()]
            kind = "export (parquet)"
        elif suffix == ".csv":
            df = pd.read_csv(path, dtype=object, keep_default_na=False, na_values=[""])
            rows = [{k: _csv_value(k, v) for k, v in r.items()} for r in df.to_dict("records")]
            kind = "export (csv)"
        else:
            rows, kind = _json_rows(path)
    except UserError:
        raise
    except Exception as exc:  # a malformed file is the user's to fix: say which and why
        raise UserError(f"file: {path} could not be read as an export or a PerfZero "
                        f"summary: {type(exc).__name__}: {exc}", field="file") from exc
    records = [_to_record(r, path) for r in rows]
    imported = skipped = 0
    for rec, system in records:
        if run_exists(con, rec.run_id):
            skipped += 1
            continue
        save_record(con, rec, system)
        imported += 1
    return imported, skipped, kind


def _csv_value(k, v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if k in _JSON_COLS or k in _LIST_COLS:
        return json.loads(v)
    return v


def _json_rows(path: Path) -> tuple[list[dict], str]:
    text = path.read_text()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        doc = [json.loads(line) for line in text.splitlines() if line.strip()]  # JSON lines
    if isinstance(doc, dict) and doc.get("format") == EXPORT_TAG:
        if doc.get("version") != EXPORT_VERSION:
            raise UserError(f"file: {path} is export version {doc.get('version')}; this "
                            f"version reads {EXPORT_VERSION}", field="file")
        return doc["runs"], "export (json)"
    items = doc if isinstance(doc, list) else [doc]
    if items and all(isinstance(d, dict) and "benchmark_result" in d for d in items):
        return [_from_perfzero(d) for d in items], "PerfZero summary"
    raise UserError(f"file: {path} is neither our export (format {EXPORT_TAG!r}) nor a "
                    "PerfZero summary (objects with benchmark_result)", field="file")


# Our PerfZero summaries (store/export.py) name this harness in benchmark_info: the
# fields below are then read back as ours; any other harness is read as PerfZero's own.
PERFZERO_HARNESS = "dl-bench-dashboard"
# benchmark_result.metrics names and the run column each carries. exp_per_second is the name
# TensorFlow's PerfZero benchmarks report throughput under; latencies are per call, in ms.
PERFZERO_METRICS = (
    ("exp_per_second", "throughput"), ("latency_median_ms", "median_ms"),
    ("latency_mean_ms", "mean_ms"), ("latency_p90_ms", "p90_ms"), ("latency_p95_ms", "p95_ms"),
    ("latency_p99_ms", "p99_ms"), ("latency_min_ms", "min_ms"), ("latency_max_ms", "max_ms"),
    ("latency_std_ms", "std_ms"), ("latency_iqr_ms", "iqr_ms"), ("latency_cv", "cv"),
    ("iterations", "iterations"), ("gflops_per_second", "gflops_per_s"),
    ("params", "params"), ("params_trainable", "params_trainable"),
    ("flops_per_sample", "flops_per_sample"), ("import_s", "import_s"), ("load_s", "load_s"),
    ("first_forward_s", "first_forward_s"), ("prepare_s", "prepare_s"),
    ("warmup_s", "warmup_s"), ("rss_before_bytes", "rss_before_bytes"),
    ("device_peak_bytes", "device_peak_bytes"))
# What a run was asked to do: benchmark_info.flags (PerfZero's record of a run's settings).
PERFZERO_FLAGS = ("model", "framework", "runtime", "batch_size", "intra_threads",
                  "inter_threads", "precision", "image_size", "device", "weight_policy",
                  "warmup_iters", "min_time_s", "min_iters", "max_time_s", "timeout_s",
                  "memory_cap_bytes")
# How it ended, where PerfZero has no field: benchmark_result.extras.
PERFZERO_EXTRAS = ("run_id", "status", "reason", "exit_code", "signal", "validity",
                   "validity_reason", "stop_reason", "round_no", "peak_rss_method",
                   "flops_method")
_OUR_SYSTEM_KEYS = ("system_id", "usable_cores", "memory_bytes", "os", "python")


def _from_perfzero(d: dict) -> dict:
    """Map one PerfZero summary onto a run row; what has no column goes to extra. A summary
    we wrote (harness PERFZERO_HARNESS) also gives back its settings, run id, status, reason,
    package versions and machine, so it reads back to the run it was written from."""
    result, fw = d.get("benchmark_result") or {}, d.get("ml_framework_info") or {}
    info, sysi = d.get("benchmark_info") or {}, d.get("system_info") or {}
    proc = d.get("process_info") or {}
    name = result.get("name") or "unnamed"
    exec_id = str(d.get("execution_id") or "")
    ok = bool(result.get("succeeded")) and not info.get("has_exception", False)
    metrics = {m.get("name"): m.get("value") for m in result.get("metrics") or []}
    throughput = next((metrics[k] for k in ("exp_per_second", "examples_per_second",
                                            "throughput") if k in metrics), None)
    figures = {col: metrics[key] for key, col in PERFZERO_METRICS
               if isinstance(metrics.get(key), (int, float))
               and not isinstance(metrics.get(key), bool)}
    wall = result.get("wall_time")
    ours = info.get("harness_name") == PERFZERO_HARNESS
    system = {
        "hostname": sysi.get("hostname"), "cpu_model": sysi.get("cpu_model"),
        "physical_cores": sysi.get("physical_cpu_count"),
        "logical_cores": sysi.get("logical_cpu_count"), "usable_cores": None,
        "sockets": sysi.get("cpu_socket_count"), "memory_bytes": None,
        "accelerator": sysi.get("accelerator_model"),
        "accelerator_count": sysi.get("accelerator_count"),
        "accelerator_driver": sysi.get("accelerator_driver_version"),
        "os": None, "platform": sysi.get("platform_name"), "python": None}
    if ours and sysi.get("system_id"):
        # Our machine keeps its id, so its runs group with the same machine's other runs.
        system.update({k: sysi.get(k) for k in _OUR_SYSTEM_KEYS})
    else:
        system["system_id"] = "pz-" + hashlib.sha256(
            json.dumps(system, sort_keys=True).encode()).hexdigest()[:13]
    ts = d.get("execution_timestamp")
    row = {
        "run_id": "pz-" + hashlib.sha256(f"{exec_id}/{name}/{ts}".encode()).hexdigest()[:29],
        "sweep_id": exec_id or None, "model": name, "framework": fw.get("name") or "unknown",
        "runtime": "perfzero", "status": "ok" if ok else "error",
        "reason": "" if ok else "PerfZero reported succeeded=false or an exception",
        "started_at": datetime.fromtimestamp(ts, timezone.utc).isoformat() if ts else None,
        "measured_s": wall if isinstance(wall, (int, float)) and wall >= 0 else None,
        **figures,
        "throughput": throughput, "peak_rss_bytes": proc.get("max_rss"),
        "peak_rss_method": "PerfZero process_info.max_rss" if proc.get("max_rss") else None,
        "system_id": system["system_id"], "system": system,
        "versions": {fw.get("name") or "framework": fw.get("version"),
                     "build_version": fw.get("build_version"),
                     "build_label": fw.get("build_label")},
        "source": "perfzero",
        "extra": {"metrics": result.get("metrics") or [], "extras": result.get("extras"),
                  "trial_id": result.get("trial_id"), "benchmark_info": info,
                  "process_info": proc, "execution_timestamp": ts},
    }
    if ours:
        flags, ext = info.get("flags") or {}, result.get("extras") or {}
        row.update({k: flags.get(k) for k in PERFZERO_FLAGS if k in flags})
        row.update({k: ext.get(k) for k in PERFZERO_EXTRAS if k in ext})
        row["versions"] = {k: (v or {}).get("version")
                           for k, v in (info.get("site_package_info") or {}).items()}
        row["env"] = info.get("env_vars") or {}
        row["git_commit"] = (info.get("harness_info") or {}).get("hash")
        if exec_id == row["run_id"]:  # written for a run outside any sweep
            row["sweep_id"] = None
    return row


def _to_record(row: dict, path: Path) -> tuple[RunRecord, dict | None]:
    types = {f.name: str(f.type) for f in fields(RunRecord)}
    missing = [c for c in ("run_id", "model", "framework", "runtime", "status") if not row.get(c)]
    if missing:
        raise UserError(f"file: {path} has a row without {', '.join(missing)}", field="file")
    if row["status"] not in STATUSES:
        raise UserError(f"file: {path} row {row['run_id']}: status {row['status']!r}; "
                        f"allowed: {', '.join(STATUSES)}", field="file")
    kwargs = {}
    for name, t in types.items():
        if name not in row:
            continue
        v = row[name]
        if v is None:
            kwargs[name] = None if "None" in t else _default(name)
        elif name in _TIME_COLS:
            ts = pd.Timestamp(v)
            kwargs[name] = (ts.tz_convert("UTC") if ts.tzinfo else ts.tz_localize("UTC")).to_pydatetime()
        elif name in _LIST_COLS:
            kwargs[name] = tuple(int(x) for x in v)
        elif name in ("versions", "threads_effective", "env", "extra", "numerics"):
            kwargs[name] = v if isinstance(v, dict) else json.loads(v)
        elif name in _EXTRA_COLS:
            v = json.loads(v) if isinstance(v, str) else v
            kwargs[name] = tuple(v) if isinstance(v, (list, tuple)) else ()  # NaN: none
        elif name == _KIND_COL:
            v = json.loads(v) if isinstance(v, str) else v
            kwargs[name] = v if isinstance(v, dict) else None  # NaN: none
        elif t.startswith("int"):
            kwargs[name] = int(float(v)) if isinstance(v, str) else int(v)  # CSV: "3.0"
        elif t.startswith("float"):
            kwargs[name] = float(v)
        else:
            kwargs[name] = str(v)
    base = {f.name: None for f in fields(RunRecord) if f.name in
            ("sweep_id", "batch_size", "intra_threads", "inter_threads", "precision",
             "image_size", "device", "weight_policy", "warmup_iters", "min_time_s",
             "min_iters", "max_time_s")}
    system = row.get("system")
    if isinstance(system, str):
        system = json.loads(system)
    return RunRecord(**{**base, **kwargs}), system


def _default(name):
    return {"reason": "", "stderr_tail": "", "validity_reason": "", "source": "import",
            "versions": {}, "threads_effective": {}, "env": {}, "extra": {}, "numerics": {},
            "warmup_ns": (), "samples_ns": (), "epochs": (), "step_losses": (),
            "profile_ops": ()}.get(name)
