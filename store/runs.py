"""Writes and named queries for runs, samples, systems and model facts."""

from __future__ import annotations

import importlib.metadata
import json
from dataclasses import fields
from datetime import datetime, timezone

import pandas as pd

from engine.core.record import RunRecord
from engine.scenarios import SCENARIOS
from engine.scenarios.serving.table import LOG_FORMAT
from store.kinds import save_kind_rows

__all__ = ["train_epochs", "train_steps", "profile_ops", "profile_trace", "EPOCH_COLUMNS",
           "save_record", "save_sweep", "sweep_rule", "extend_sweep", "restate_sweep", "sweep_rounds", "list_sweeps", "run_exists", "known_model_stats", "reference_flops", "list_runs", "run_samples",
           "model_info", "save_model_stats", "framework_version", "RUN_COLUMNS",
           "serving_result", "loadgen_log", "LOG_FORMAT",
           "SYSTEM_COLUMNS"]

_JSON_FIELDS = ("versions", "threads_effective", "env", "extra", "numerics")
# RunRecord fields kept in tables of their own, not in `runs`
_SAMPLE_FIELDS = ("warmup_ns", "samples_ns", "epochs", "step_losses", "profile_ops", "trace_gz",
                  "node_system", "serving", "loadgen_logs", "kind_rows")
EPOCH_COLUMNS = ["epoch", "steps", "samples", "wall_s", "samples_per_s", "train_loss",
                 "train_acc", "test_loss", "test_acc", "eval_s"]
PROFILE_COLUMNS = ["op", "device", "calls", "self_ms", "total_ms"]
RUN_COLUMNS = [f.name for f in fields(RunRecord) if f.name not in _SAMPLE_FIELDS]
SYSTEM_COLUMNS = ["system_id", "hostname", "cpu_model", "physical_cores", "logical_cores",
                  "usable_cores", "sockets", "memory_bytes", "accelerator",
                  "accelerator_count", "accelerator_driver", "os", "platform", "python"]
# Installed distributions that carry each framework (model_info is keyed by their version,
# read from package metadata so the dashboard and CLI never import a framework to know it).
FRAMEWORK_PACKAGES = {"torch": ("torch",), "tensorflow": ("tensorflow", "tensorflow-cpu"),
                      "selftest": ("numpy",)}


def framework_version(framework: str) -> str | None:
    for dist in FRAMEWORK_PACKAGES.get(framework, ()):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _utc_naive(value):
    """Timestamps are stored as naive UTC."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(timezone.utc).replace(tzinfo=None)
    return value


def _row(record: RunRecord) -> list:
    out = []
    for name in RUN_COLUMNS:
        v = getattr(record, name)
        if name in _JSON_FIELDS:
            v = json.dumps(v or {}, sort_keys=True)
        out.append(_utc_naive(v))
    return out


_INSERT_RUN = (f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) "
               f"VALUES ({', '.join('?' * len(RUN_COLUMNS))})")
_INSERT_SYSTEM = (f"INSERT INTO systems ({', '.join(SYSTEM_COLUMNS)}, first_seen) "
                  f"VALUES ({', '.join('?' * (len(SYSTEM_COLUMNS) + 1))}) "
                  "ON CONFLICT (system_id) DO NOTHING")
_INSERT_SAMPLES = ("INSERT INTO samples (run_id, phase, idx, latency_ns) "
                   "SELECT ?, ?, unnest(range(?)), unnest(?::BIGINT[])")


def save_record(con, record: RunRecord, system: dict | None = None) -> None:
    """One transaction per finished run: its row, its raw samples, its machine, and the
    model facts it measured. A crash loses at most the run being written."""
    con.execute("BEGIN TRANSACTION")
    try:
        if system and system.get("system_id"):
            con.execute(_INSERT_SYSTEM, [system.get(c) for c in SYSTEM_COLUMNS]
                        + [_utc_naive(record.started_at)])
        con.execute(_INSERT_RUN, _row(record))
        for phase, values in (("warmup", record.warmup_ns), ("measure", record.samples_ns)):
            if values:
                con.execute(_INSERT_SAMPLES, [record.run_id, phase, len(values), list(values)])
        _save_extras(con, record)
        # Only a scenario that measures catalog models records their counts (training
        # models end in a 10-way head: their counts are not the catalog's).
        if (record.source == "engine" and SCENARIOS[record.kind].counts_model_stats
                and record.model_format is None  # a user's model is no catalog fact
                and record.params is not None
                and record.flops_per_sample is not None
                and framework_version(record.framework)):
            save_model_stats(con, record.model, record.framework, record.image_size,
                             {k: getattr(record, k) for k in
                              ("params", "params_trainable", "flops_per_sample", "flops_method")})
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _save_extras(con, record: RunRecord) -> None:
    """Epochs, per-step losses, the profile of a run and its kind's own tables' rows, in
    the same transaction."""
    for e in record.epochs:
        con.execute(f"INSERT INTO train_epochs (run_id, {', '.join(EPOCH_COLUMNS)}) "
                    f"VALUES ({', '.join('?' * (len(EPOCH_COLUMNS) + 1))})",
                    [record.run_id] + [e.get(c) for c in EPOCH_COLUMNS])
    if record.step_losses:
        con.execute("INSERT INTO train_steps SELECT ?, unnest(range(?)), unnest(?::DOUBLE[])",
                    [record.run_id, len(record.step_losses), list(record.step_losses)])
    for rank, op in enumerate(record.profile_ops, start=1):
        con.execute(f"INSERT INTO profile_ops (run_id, rank, {', '.join(PROFILE_COLUMNS)}) "
                    f"VALUES (?, ?, {', '.join('?' * len(PROFILE_COLUMNS))})",
                    [record.run_id, rank] + [op.get(c) for c in PROFILE_COLUMNS])
    save_kind_rows(con, SCENARIOS[record.kind], record)  # its kind's own tables
    if record.trace_gz:
        con.execute("INSERT INTO profile_traces VALUES (?, ?, ?, ?)",
                    [record.run_id, "chrome-trace-json-gzip", len(record.trace_gz),
                     record.trace_gz])


def serving_result(con, run_id: str) -> dict | None:
    """A serving run's LoadGen summary as parse_summary read it (with query_count and
    samples_per_query), or None when its test never ran."""
    rows = con.execute("SELECT summary FROM serving_results WHERE run_id = ?",
                       [run_id]).fetchall()
    return json.loads(rows[0][0]) if rows else None


def loadgen_log(con, run_id: str, name: str) -> str | None:
    """One of a serving run's LoadGen logs (mlperf_log_summary.txt, mlperf_log_detail.txt)
    as text, or None."""
    import gzip

    rows = con.execute("SELECT data FROM loadgen_logs WHERE run_id = ? AND name = ?",
                       [run_id, name]).fetchall()
    return gzip.decompress(bytes(rows[0][0])).decode() if rows else None


def train_epochs(con, run_ids: list[str]) -> pd.DataFrame:
    """Per-epoch figures of training runs, with each run's configuration beside them."""
    return con.execute(
        "SELECT r.run_id, r.sweep_id, r.round_no, r.model, r.framework, r.runtime, "
        "r.batch_size, r.intra_threads, r.dataset, r.status, e.* EXCLUDE (run_id) "
        "FROM train_epochs e JOIN runs r USING (run_id) WHERE list_contains(?, run_id) "
        "ORDER BY r.framework, r.run_id, e.epoch", [list(run_ids)]).df()


def train_steps(con, run_ids: list[str]) -> pd.DataFrame:
    return con.execute(
        "SELECT s.run_id, r.framework, r.model, r.batch_size, s.step, s.loss "
        "FROM train_steps s JOIN runs r USING (run_id) WHERE list_contains(?, run_id) "
        "ORDER BY s.run_id, s.step", [list(run_ids)]).df()


def profile_ops(con, run_id: str) -> pd.DataFrame:
    return con.execute(f"SELECT rank, {', '.join(PROFILE_COLUMNS)} FROM profile_ops "
                       "WHERE run_id = ? ORDER BY rank", [run_id]).df()


def profile_trace(con, run_id: str) -> bytes | None:
    rows = con.execute("SELECT data FROM profile_traces WHERE run_id = ?", [run_id]).fetchall()
    return bytes(rows[0][0]) if rows else None


def save_model_stats(con, model: str, framework: str, image_size: int, stats: dict) -> None:
    con.execute("INSERT INTO model_info VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [model, framework, image_size, framework_version(framework), stats["params"],
                 stats["params_trainable"], stats["flops_per_sample"], stats["flops_method"],
                 datetime.now(timezone.utc).replace(tzinfo=None)])


def run_exists(con, run_id: str) -> bool:
    return bool(con.execute("SELECT count(*) FROM runs WHERE run_id = ?", [run_id]).fetchall()[0][0])


def known_model_stats(con, model: str, framework: str, image_size: int,
                      framework_version: str) -> dict | None:
    """Params and FLOPs a worker already counted for this model, size and version."""
    rows = con.execute(
        "SELECT params, params_trainable, flops_per_sample, flops_method FROM model_info "
        "WHERE model = ? AND framework = ? AND image_size = ? AND framework_version = ? "
        "AND flops_per_sample IS NOT NULL",
        [model, framework, image_size, framework_version]).fetchall()
    if not rows:
        return None
    p, pt, f, m = rows[0]
    return {"params": p, "params_trainable": pt, "flops_per_sample": f, "flops_method": m}


def reference_flops(con, model: str, image_size: int, framework: str) -> int | None:
    """The newest FLOP count of this model and size by the reference framework's counter:
    the one count every framework's GFLOP/s is computed on."""
    rows = con.execute(
        "SELECT flops_per_sample FROM model_info WHERE model = ? AND image_size = ? "
        "AND framework = ? AND flops_per_sample IS NOT NULL ORDER BY measured_at DESC LIMIT 1",
        [model, image_size, framework]).fetchall()
    return rows[0][0] if rows else None


def model_info(con) -> pd.DataFrame:
    """The newest counted facts per (model, framework) at each image size."""
    return con.execute(
        "SELECT model, framework, image_size, framework_version, params, params_trainable, "
        "flops_per_sample, flops_method FROM model_info "
        "QUALIFY row_number() OVER (PARTITION BY model, framework, image_size "
        "ORDER BY measured_at DESC) = 1 ORDER BY model, framework, image_size").df()


def list_runs(con, *, limit: int = 50, sweep_id: str | None = None,
              status: str | None = None) -> pd.DataFrame:
    return con.execute(
        "SELECT run_id, sweep_id, started_at, kind, model, framework, runtime, batch_size, "
        "intra_threads, inter_threads, workers, dataset, image_size, device, status, reason, validity, "
        "validity_reason, iterations, median_ms, p90_ms, p99_ms, iqr_ms, throughput, "
        "gflops_per_s, peak_rss_bytes, model_peak_bytes, params, flops_per_sample FROM runs "
        "WHERE (? IS NULL OR sweep_id = ?) AND (? IS NULL OR status = ?) "
        "ORDER BY started_at DESC NULLS LAST, run_id LIMIT ?",
        [sweep_id, sweep_id, status, status, limit]).df()


def run_samples(con, run_id: str) -> pd.DataFrame:
    return con.execute("SELECT phase, idx, latency_ns FROM samples WHERE run_id = ? "
                       "ORDER BY phase DESC, idx", [run_id]).df()


def save_sweep(con, sweep_id: str, *, rounds: int, seed: int, plan: list[list[str]],
               configurations: int, command: str | None = None,
               rule: dict | None = None) -> None:
    """plan: per round, the run order as configuration labels (kept to verify alternation).
    rule: min_rounds, max_rounds, margin and alpha the verdicts are judged by."""
    rule = rule or {}
    con.execute("INSERT INTO sweeps (sweep_id, created_at, rounds, seed, configurations, plan, "
                "command, min_rounds, max_rounds, margin, alpha) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [sweep_id, datetime.now(timezone.utc).replace(tzinfo=None), rounds, seed,
                 configurations, json.dumps(plan), command, rule.get("min_rounds"),
                 rule.get("max_rounds"), rule.get("margin"), rule.get("alpha")])


def sweep_rule(con, sweep_id: str) -> dict | None:
    """The rule a sweep's verdicts are judged by (min_rounds, max_rounds, margin, alpha), or
    None for a sweep stored before it was kept (or an unknown id)."""
    rows = con.execute("SELECT min_rounds, max_rounds, margin, alpha FROM sweeps "
                       "WHERE sweep_id = ? AND min_rounds IS NOT NULL", [sweep_id]).fetchall()
    return dict(zip(("min_rounds", "max_rounds", "margin", "alpha"), rows[0])) if rows else None


def extend_sweep(con, sweep_id: str, *, rounds: int, plan: list[list[str]]) -> None:
    """A sweep that ran past its minimum rounds: how many ran, and every round's order."""
    con.execute("UPDATE sweeps SET rounds = ?, plan = ? WHERE sweep_id = ?",
                [rounds, json.dumps(plan), sweep_id])


def restate_sweep(con, sweep_id: str, command: str) -> None:
    """A search's command once it is complete: its query count, chosen from an estimate the
    search measured after its sweep opened (engine/run/search/query_choice.py), so that the command
    names the search that ran."""
    con.execute("UPDATE sweeps SET command = ? WHERE sweep_id = ?", [command, sweep_id])


def list_sweeps(con, *, with_runs_only: bool = False, kind: str | None = None) -> pd.DataFrame:
    """Newest first, with run counts and the models each sweep covered. with_runs_only:
    only sweeps with at least one successful run (something to compare); kind: only
    sweeps of inference, train or dataload runs."""
    return con.execute(
        "SELECT s.sweep_id, s.created_at, s.rounds, s.seed, s.configurations, "
        "any_value(r.kind) AS kind, s.command, "
        "count(r.run_id) AS runs, count(*) FILTER (WHERE r.status = 'ok') AS ok, "
        "list(DISTINCT r.model ORDER BY r.model) FILTER (WHERE r.model IS NOT NULL) AS models "
        "FROM sweeps s LEFT JOIN runs r USING (sweep_id) "
        "GROUP BY s.sweep_id, s.created_at, s.rounds, s.seed, s.configurations, s.command "
        "HAVING (NOT ? OR count(*) FILTER (WHERE r.status = 'ok') > 0) "
        "AND (?::VARCHAR IS NULL OR any_value(r.kind) = ?) "
        "ORDER BY s.created_at DESC",
        [with_runs_only, kind, kind]).df()


def sweep_rounds(con, sweep_id: str) -> list[dict]:
    """One row per run of a sweep: its configuration, round and per-round figures."""
    cur = con.execute(
        "SELECT run_id, round_no, model, framework, runtime, batch_size, intra_threads, "
        "inter_threads, precision, image_size, device, system_id, status, validity, "
        "median_ms, iqr_ms, throughput, iterations, p99_ms, started_at, model_sha256, replicas, "
        "machine_shape, coalesce(contention, 'none') AS contention, wait_policy, "
        "extra->'interference' AS interference, "
        "(extra->>'replica')::INTEGER AS replica FROM runs WHERE sweep_id = ? "
        "ORDER BY round_no, started_at", [sweep_id])
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, row)) for row in cur.fetchall()]
    for r in rows:
        if isinstance(r["interference"], str):
            r["interference"] = json.loads(r["interference"])
    return rows
