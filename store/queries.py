"""Named, parameterised queries for the dashboard pages. Aggregates run in DuckDB."""

from __future__ import annotations

import json
import types

import pandas as pd

from engine.analysis.stats import P99_MIN_SAMPLES
from engine.scenarios import DATA_LOADING, INFERENCE, TRAINING
from store.states import states_version  # m016: the board reads marks and changes

__all__ = ["serve_closed_loop", "data_version", "filter_options", "results_table", "run_detail", "config_summary", "comparable_models",
           "config_samples", "overview", "latest_latency", "closed_loop_best", "closed_loop_known", "framework_gflops_per_thread",
           "flops_for", "machine_throughput", "runtime_costs",
           "train_runs", "load_summary", "settings", "SETTING_COLUMNS", "QUIET", "setting_sql", "setting_params",
           "load_failures"]

# A configuration of R replicas is a contender of its own: "torch (eager) x2 replicas",
# as engine.analysis.compare.contender_name names it.
# And torch with OpenMP's passive wait policy is one too: "torch (eager) OMP passive".
_PASSIVE = "CASE WHEN {p}wait_policy = 'passive' THEN ' OMP passive' ELSE '' END"
_REPLICAS = ("CASE WHEN {p}replicas > 1 THEN ' x' || {p}replicas || ' replicas' ELSE '' END "
             "|| " + _PASSIVE)
# A run as the machine runs it alone with its frameworks' defaults: no neighbour of ours,
# torch's default wait policy. What an estimate or another scenario's figure is taken from.
QUIET = "coalesce({p}contention, 'none') = 'none' AND coalesce({p}wait_policy, '') = ''"


# What a figure must never blend: runs differing in any of these are different settings.
# The machine is its systems row and its catalog shape: the nodes of a one-host test
# cluster share a systems row but stand for different shapes ('' where none was named).
SETTING_COLUMNS = ("device", "precision", "inter_threads", "system_id", "machine_shape",
                   "contention")
_SETTING_EXPR = {"machine_shape": "coalesce({p}machine_shape, '')",
                 "contention": "coalesce({p}contention, 'none')"}


def setting_sql(prefix: str = "", columns: tuple = SETTING_COLUMNS) -> str:
    """A filter on one setting (a tuple in SETTING_COLUMNS order, or None: every setting,
    for queries that group by them); columns: the leading ones to filter on."""
    return " AND ".join(
        f"(?::VARCHAR IS NULL OR "
        f"{_SETTING_EXPR.get(c, '{p}' + c).format(p=prefix)}::VARCHAR = ?)"
        for c in columns)


def setting_params(setting, n: int = len(SETTING_COLUMNS)) -> list:
    """A shorter tuple (a link from before the shape was a setting) leaves the rest open."""
    values = [None] * len(SETTING_COLUMNS) if setting is None else \
        [None if v is None else str(v) for v in setting]
    values += [None] * (len(SETTING_COLUMNS) - len(values))
    return [x for v in values[:n] for x in (v, v)]


def settings(con, kind: str, sweep_id: str | None = None) -> pd.DataFrame:
    """The settings (device, precision, inter-op threads, machine, neighbour) of a kind's ok
    runs, most runs first (a dedicated machine before a neighbour's): what a page lets the
    user pick, so no figure blends two."""
    return con.execute(
        "SELECT r.device, r.precision, r.inter_threads, r.system_id, "
        "coalesce(r.contention, 'none') AS contention, "
        "any_value(y.cpu_model) AS cpu_model, any_value(y.hostname) AS hostname, "
        "any_value(y.usable_cores) AS cores, count(*) AS runs, max(r.started_at) AS newest, "
        "coalesce(r.machine_shape, '') AS machine_shape, "
        "any_value(r.machine_shape) AS shape "  # the catalog shape, where a run was told it
        "FROM runs r LEFT JOIN systems y USING (system_id) "
        "WHERE r.status = 'ok' AND r.kind = ? AND (?::VARCHAR IS NULL OR r.sweep_id = ?) "
        "GROUP BY r.device, r.precision, r.inter_threads, r.system_id, "
        "coalesce(r.machine_shape, ''), coalesce(r.contention, 'none') "
        "ORDER BY coalesce(r.contention, 'none') != 'none', runs DESC, newest DESC",
        [kind, sweep_id, sweep_id]).df()


def data_version(con) -> tuple:
    """A cheap fingerprint of everything the pages read: it changes with every stored run
    (rows are only ever added), sweep, counted model, imported price and migration, so a
    cached query keyed on it is never stale, whichever process wrote."""
    base = con.execute(
        "SELECT (SELECT count(*) FROM runs), (SELECT max(ended_at) FROM runs), "
        "(SELECT count(*) FROM sweeps), (SELECT count(*) FROM model_info), "
        "(SELECT max(measured_at) FROM model_info), (SELECT count(*) FROM price_updates), "
        "(SELECT max(imported_at) FROM price_updates), "
        "(SELECT count(*) FROM migrations)").fetchall()[0]
    # and every calibration (m013), where the table exists: a viewer opens a file unmigrated
    return base + (con.execute("SELECT count(*) FROM calibrations").fetchall()[0] if con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'calibrations'"
    ).fetchall()[0][0] else ()) + states_version(con)


def filter_options(con, kind: str | None = None) -> dict:
    """Distinct values to filter by; kind narrows to inference, train or dataload runs."""
    def distinct(col):
        return [r[0] for r in con.execute(
            f"SELECT DISTINCT {col} FROM runs WHERE {col} IS NOT NULL "
            "AND (?::VARCHAR IS NULL OR kind = ?) ORDER BY 1", [kind, kind]).fetchall()]
    return {c: distinct(c) for c in ("model", "framework", "status", "kind")}  # fixed names


def results_table(con, *, models=None, frameworks=None, statuses=None, kinds=None,
                  limit: int = 10_000) -> pd.DataFrame:
    return con.execute(
        "SELECT run_id, started_at, kind, model, framework, runtime, precision, batch_size, "
        "intra_threads AS threads, image_size, round_no AS round, "
        # beside our neighbour, or torch waiting passively: shown, never mistaken for quiet
        "trim(CASE coalesce(contention, 'none') WHEN 'none' THEN '' WHEN 'onoff' THEN "
        "'on/off neighbour' ELSE contention || ' neighbour' END || "
        + _PASSIVE.format(p="") + ") AS setting, status, validity, "
        "median_ms AS p50_ms, p90_ms, p99_ms, CASE WHEN p99_ms IS NOT NULL AND iterations < ? THEN "
        "'low: ' || iterations || ' samples' ELSE '' END AS p99_confidence, "
        "throughput, peak_rss_bytes / 1048576.0 AS peak_rss_mib, "
        "model_peak_bytes / 1048576.0 AS model_peak_mib, "
        # issue 28: the energy figure and, beside it, its source or why it is absent
        "energy_j_per_sample, CASE WHEN energy_source IS NOT NULL THEN energy_source "
        "WHEN energy_absent IS NOT NULL THEN 'absent: ' || energy_absent ELSE '' END "
        "AS energy_source, "
        "coalesce(reason, '') AS reason, sweep_id FROM runs "
        "WHERE (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], model)) "
        "AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], framework)) "
        "AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], status)) "
        "AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], kind)) "
        "ORDER BY started_at DESC NULLS LAST, run_id LIMIT ?",
        [P99_MIN_SAMPLES, models, models, frameworks, frameworks, statuses, statuses, kinds,
         kinds, limit]).df()


def run_detail(con, run_id: str) -> dict | None:
    cur = con.execute(
        "SELECT r.*, to_json(y) AS system, (SELECT list(s.latency_ns ORDER BY s.idx) FROM "
        "samples s WHERE s.run_id = r.run_id AND s.phase = 'measure') AS samples_ns FROM runs r "
        "LEFT JOIN systems y ON y.system_id = r.system_id WHERE r.run_id = ?", [run_id])
    names, rows = [d[0] for d in cur.description], cur.fetchall()
    if not rows:
        return None
    out = dict(zip(names, rows[0]))
    for k in ("versions", "threads_effective", "env", "extra", "numerics", "system"):
        if isinstance(out.get(k), str):
            out[k] = json.loads(out[k])
    return out


_SUMMARY = """
WITH sel AS (
    SELECT run_id, model, framework, runtime, batch_size, intra_threads, image_size,
           median_ms, throughput, validity, device, precision, inter_threads, system_id,
           machine_shape, model_sha256, replicas, wait_policy
    FROM runs
    WHERE status = 'ok' AND kind = ? AND list_contains(?::VARCHAR[], model)
      AND (?::VARCHAR IS NULL OR sweep_id = ?) AND {setting}),
q AS (
    SELECT s.run_id,
           quantile_cont(s.latency_ns, [0.10, 0.25, 0.75, 0.90]) AS qs
    FROM samples s JOIN sel USING (run_id) WHERE s.phase = 'measure' GROUP BY s.run_id)
SELECT model, framework, runtime,
       framework || ' (' || runtime || ')' || {replicas} AS contender,
       batch_size, intra_threads AS threads, image_size, count(*) AS runs,
       median(median_ms) AS p50_ms, median(qs[1]) / 1e6 AS p10_ms,
       median(qs[2]) / 1e6 AS q1_ms, median(qs[3]) / 1e6 AS q3_ms,
       median(qs[4]) / 1e6 AS p90_ms, min(median_ms) AS min_p50_ms,
       max(median_ms) AS max_p50_ms,
       median(throughput) AS throughput,
       count(*) FILTER (WHERE validity = 'noisy') AS noisy_runs
FROM sel JOIN q USING (run_id)
GROUP BY model, framework, runtime, batch_size, intra_threads, image_size, device, precision,
         inter_threads, system_id, machine_shape, model_sha256, replicas, wait_policy
ORDER BY model, contender, threads, batch_size
""".format(setting=setting_sql(), replicas=_REPLICAS.format(p=""))


def comparable_models(con, sweep_id: str | None = None) -> list[str]:
    """Models with an ok inference run that has samples: exactly the models config_summary
    can summarise, without computing its quantiles."""
    return [r[0] for r in con.execute(
        "SELECT DISTINCT model FROM runs r WHERE status = 'ok' AND kind = ? "
        "AND (?::VARCHAR IS NULL OR sweep_id = ?) AND EXISTS (SELECT 1 FROM samples s "
        "WHERE s.run_id = r.run_id AND s.phase = 'measure') ORDER BY model",
        [INFERENCE.kind, sweep_id, sweep_id]).fetchall()]


def config_summary(con, models: list[str], sweep_id: str | None = None,
                   setting: tuple | None = None) -> pd.DataFrame:
    """One row per configuration of one setting (settings()): the median over its ok runs
    (rounds) of each run's own p50, quantiles and throughput, and the min-max of run
    medians. Grouped by the setting's columns too, so none is ever blended."""
    return con.execute(_SUMMARY, [INFERENCE.kind, models, sweep_id, sweep_id,
                                  *setting_params(setting)]).df()


def config_samples(con, models: list[str], batch_size: int, threads: int,
                   sweep_id: str | None = None, per_run: int = 500,
                   setting: tuple | None = None) -> pd.DataFrame:
    """Raw latencies (ms) of the chosen configurations, at most per_run from each run."""
    return con.execute(
        "SELECT r.model, r.framework || ' (' || r.runtime || ')' || " + _REPLICAS.format(p="r.")
        + " AS contender, "
        "s.latency_ns / 1e6 AS latency_ms FROM samples s JOIN runs r USING (run_id) "
        "WHERE r.status = 'ok' AND r.kind = ? AND s.phase = 'measure' AND s.idx < ? "
        "AND list_contains(?::VARCHAR[], r.model) AND r.batch_size = ? "
        "AND r.intra_threads = ? AND (?::VARCHAR IS NULL OR r.sweep_id = ?) AND "
        + setting_sql("r."),
        [INFERENCE.kind, per_run, models, batch_size, threads, sweep_id, sweep_id,
         *setting_params(setting)]).df()


def overview(con) -> dict:
    tables = ("runs", "samples", "systems", "sweeps", "model_info")
    counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in tables}
    status = dict(con.execute("SELECT status, count(*) FROM runs GROUP BY 1 ORDER BY 1")
                  .fetchall())
    migrations = [r[0] for r in con.execute("SELECT name FROM migrations ORDER BY name")
                  .fetchall()]
    systems = con.execute("SELECT * FROM systems ORDER BY first_seen DESC").df()
    return {"counts": counts, "status": status, "migrations": migrations,
            "systems": systems}


def latest_latency(con, spec) -> float | None:
    """Seconds: the newest ok median for this exact configuration (for estimates)."""
    rows = con.execute(
        "SELECT median_ms FROM runs WHERE status = 'ok' AND kind = ? "
        "AND model = ? AND framework = ? AND runtime = ? AND precision = ? "
        "AND batch_size = ? AND intra_threads = ? AND image_size IS NOT DISTINCT FROM ? "
        "AND coalesce(contention, 'none') = ? AND coalesce(wait_policy, '') = ? "
        "ORDER BY started_at DESC LIMIT 1",
        [INFERENCE.kind, spec.model, spec.framework, spec.runtime, spec.precision,
         spec.batch_size,
         spec.intra_threads, spec.image_size, spec.contention, spec.wait_policy]).fetchall()
    return rows[0][0] / 1000 if rows else None


def closed_loop_best(con, spec, max_batch: int, system_id: str | None = None) -> float | None:
    """Samples/s: the best ok closed-loop inference run of this SUT's configuration (model,
    framework, runtime, precision, image size, threads; batch up to max_batch, one replica,
    no neighbour; on the machine system_id names, None: any), the estimate a max-QPS search
    starts from; None when there is none."""
    rows = con.execute(
        "SELECT max(throughput) FROM runs WHERE status = 'ok' AND kind = ? "
        "AND model = ? AND framework = ? AND runtime = ? AND precision = ? "
        "AND batch_size <= ? AND intra_threads = ? AND image_size IS NOT DISTINCT FROM ? "
        "AND coalesce(contention, 'none') = 'none' AND coalesce(replicas, 1) = 1 "
        "AND (? IS NULL OR system_id = ?)",
        [INFERENCE.kind, spec.model, spec.framework, spec.runtime, spec.precision,
         max_batch, spec.intra_threads, spec.image_size, system_id, system_id]).fetchall()
    return rows[0][0] if rows and rows[0][0] else None


def serve_closed_loop(con, model: str, framework: str, runtime: str, precision: str,
                      threads: int, image_size: int | None, max_batch: int,
                      system_id: str) -> float | None:
    """closed_loop_best of a Server test's SUT on this machine, by plain values (the
    dashboard's cached reads take hashable arguments)."""
    sut = types.SimpleNamespace(model=model, framework=framework, runtime=runtime,
                                precision=precision, intra_threads=threads,
                                image_size=image_size)
    return closed_loop_best(con, sut, max_batch, system_id=system_id)


def closed_loop_known(con, spec, system_id: str) -> dict | None:
    """The latest ok closed-loop inference run of exactly this configuration (model,
    framework, runtime, precision, image size, batch, threads, replicas; no neighbour, a
    catalog model) on this machine (system_id): what an autotuner's probe would measure
    again. A dict of its run_id, throughput, p99_ms, threads_per_core, cores_used,
    machine_shape and hypervisor (its host a VM; None: not recorded); None when none."""
    rows = con.execute(
        "SELECT run_id, throughput, p99_ms, threads_per_core, TRY_CAST(extra->>'cores_used' "
        "AS INTEGER), machine_shape, TRY_CAST(extra->>'hypervisor' AS BOOLEAN) FROM runs "
        "WHERE status = 'ok' AND kind = ? AND model = ? AND framework = ? AND runtime = ? "
        "AND precision = ? AND batch_size = ? AND intra_threads = ? "
        "AND image_size IS NOT DISTINCT FROM ? AND system_id = ? AND throughput > 0 "
        "AND coalesce(contention, 'none') = 'none' AND coalesce(replicas, 1) = ? "
        "ORDER BY started_at DESC LIMIT 1",
        [INFERENCE.kind, spec.model, spec.framework, spec.runtime, spec.precision,
         spec.batch_size, spec.intra_threads, spec.image_size, system_id,
         getattr(spec, "replicas", 1) or 1]).fetchall()
    if not rows:
        return None
    keys = ("run_id", "throughput", "p99_ms", "threads_per_core", "cores_used",
            "machine_shape", "hypervisor")
    return dict(zip(keys, rows[0]))


def framework_gflops_per_thread(con, framework: str) -> float | None:
    rows = con.execute(
        "SELECT median(gflops_per_s / intra_threads) FROM runs WHERE status = 'ok' "
        "AND kind = ? AND framework = ? AND gflops_per_s IS NOT NULL "
        f"AND {QUIET.format(p='')} "  # neither our neighbour's runs nor passive waits
        "AND model_format IS NULL",  # a user's tiny net would skew the catalog's estimate
        [INFERENCE.kind, framework]).fetchall()
    return rows[0][0] if rows and rows[0][0] else None


def flops_for(con, model: str, framework: str, image_size: int) -> int | None:
    rows = con.execute(
        "SELECT flops_per_sample FROM model_info WHERE model = ? AND framework = ? "
        "AND image_size = ? AND flops_per_sample IS NOT NULL LIMIT 1",
        [model, framework, image_size]).fetchall()
    return rows[0][0] if rows else None


# The machine a run's throughput belongs to; a run recorded before m007 has no threads per
# core of its own, and its systems row's logical / physical cores gives the same ratio.
_THREADS_PER_CORE = "coalesce(r.threads_per_core, y.logical_cores // nullif(y.physical_cores, 0))"
_OF_SELECTED = ("(?::VARCHAR IS NULL OR (r.system_id::VARCHAR = ? AND "
                "(?::VARCHAR IS NULL OR coalesce(r.machine_shape, '') = ?)))")


def machine_throughput(con, kind: str, setting: tuple | None,
                       sweep_id: str | None = None) -> pd.DataFrame:
    """What the Cost and Training pages price, for one device, precision and inter-op
    thread count (the setting's first three columns): per configuration, intra-op threads,
    replicas, catalog shape and machine (system), the median throughput and p99 over its ok
    runs (with p99_samples, the fewest samples any of those p99s came from). Rows of the
    setting's own machine are marked `selected` (what estimates scale
    from); other machines' rows come only where runs name their catalog shape (what
    "measured on <shape>" shows). Grouped by shape and system (and the model file), so two
    machines' runs are never averaged into one figure."""
    system = None if setting is None or setting[3] is None else str(setting[3])
    shape = None if setting is None or len(setting) < 5 else str(setting[4] or "")
    selected = [system, system, shape, shape]
    return con.execute(
        "SELECT r.model, r.framework, r.runtime, r.framework || ' (' || r.runtime || ')' || "
        + _PASSIVE.format(p="r.") + " AS contender, "
        "r.batch_size, r.image_size, r.dataset, r.intra_threads AS threads, "
        "coalesce(r.replicas, 1) AS replicas, r.machine_shape, r.system_id, "
        f"{_THREADS_PER_CORE} AS threads_per_core, {_OF_SELECTED} AS selected, "
        "median(r.throughput) AS throughput, median(r.p99_ms) AS p99_ms, count(*) AS runs, "
        # the fewest timed samples behind a run's p99: under P99_MIN_SAMPLES it is flagged
        "min(r.iterations) AS p99_samples, "
        "max((r.extra->>'cores_used')::INTEGER) AS cores_used, "  # counted by the worker
        "bool_or((r.extra->>'hypervisor')::BOOLEAN) AS hypervisor, "  # a guest (NULL: unsaid)
        "any_value(y.cpu_model) AS cpu_model, any_value(y.usable_cores) AS host_vcpus, "
        "any_value(y.platform) AS platform, "
        "any_value((r.extra->>'steps_per_epoch')::INTEGER * r.batch_size) AS samples_per_epoch "
        "FROM runs r LEFT JOIN systems y USING (system_id) "
        "WHERE r.status = 'ok' AND r.kind = ? AND r.throughput IS NOT NULL "
        "AND r.source = 'engine' AND (?::VARCHAR IS NULL OR r.sweep_id = ?) "
        # a machine is priced from runs on it alone, never beside our neighbour
        "AND coalesce(r.contention, 'none') = 'none' AND "
        + setting_sql("r.", SETTING_COLUMNS[:3])
        + f" AND ({_OF_SELECTED} OR r.machine_shape IS NOT NULL) "
        "GROUP BY r.model, r.framework, r.runtime, r.batch_size, r.image_size, r.dataset, "
        "r.intra_threads, coalesce(r.replicas, 1), r.machine_shape, r.system_id, "
        f"{_THREADS_PER_CORE}, r.device, r.precision, r.inter_threads, r.model_sha256, "
        "r.wait_policy "
        "ORDER BY r.model, contender, r.batch_size, r.machine_shape NULLS FIRST, r.system_id, "
        "threads, replicas",
        [*selected, kind, sweep_id, sweep_id, *setting_params(setting, 3),
         *selected]).df()


def runtime_costs(con, models: list[str], sweep_id: str | None = None,
                  setting: tuple | None = None) -> pd.DataFrame:
    """One-time costs next to steady state, per configuration: model build, runtime
    preparation (trace, export, compile), first forward, and p50 (medians over ok runs)."""
    return con.execute(
        "SELECT model, framework || ' (' || runtime || ')' || " + _REPLICAS.format(p="")
        + " AS contender, batch_size, "
        "intra_threads AS threads, median(load_s) AS build_s, median(prepare_s) AS prepare_s, "
        "median(first_forward_s) AS first_forward_s, median(median_ms) AS p50_ms, "
        "count(*) AS runs FROM runs WHERE status = 'ok' AND kind = ? "
        "AND list_contains(?::VARCHAR[], model) AND (?::VARCHAR IS NULL OR sweep_id = ?) "
        "AND " + setting_sql() +
        " GROUP BY model, framework, runtime, batch_size, intra_threads, device, precision, "
        "inter_threads, system_id, machine_shape, model_sha256, replicas, wait_policy "
        "ORDER BY model, batch_size, threads, p50_ms",
        [INFERENCE.kind, models, sweep_id, sweep_id, *setting_params(setting)]).df()


def train_runs(con, sweep_id: str | None) -> pd.DataFrame:
    """Training runs (of one sweep, or all), with their optimiser settings (bn_momentum:
    BatchNorm's, torch's convention, NaN for runs from before it was matched) and last
    epoch."""
    return con.execute(
        "SELECT r.run_id, r.sweep_id, r.round_no, r.started_at, r.model, r.framework, "
        "r.runtime, r.batch_size, r.intra_threads, r.dataset, r.status, r.validity, "
        "coalesce(r.reason, '') AS reason, r.throughput, r.median_ms AS step_p50_ms, "
        "r.p90_ms AS step_p90_ms, r.peak_rss_bytes / 1048576.0 AS peak_rss_mib, "
        "r.extra->>'lr' AS lr, r.extra->>'momentum' AS momentum, "
        "(r.extra->>'bn_momentum')::DOUBLE AS bn_momentum, "
        "(r.extra->>'epochs')::INTEGER AS epochs, "
        "(r.extra->>'steps_per_epoch')::INTEGER AS steps_per_epoch, "
        "e.test_acc AS final_test_acc, e.test_loss AS final_test_loss, "
        "e.train_loss AS final_train_loss "
        "FROM runs r LEFT JOIN train_epochs e ON e.run_id = r.run_id AND e.epoch = "
        "(SELECT max(epoch) FROM train_epochs x WHERE x.run_id = r.run_id) "
        "WHERE r.kind = ? AND (?::VARCHAR IS NULL OR r.sweep_id = ?) "
        "ORDER BY r.framework, r.model, r.batch_size, r.intra_threads, r.round_no",
        [TRAINING.kind, sweep_id, sweep_id]).df()


def inference_for_training(con, sweep_id: str | None,
                           setting: tuple | None = None) -> pd.DataFrame:
    """Per successful training configuration of the selection, the inference latency of the
    same model, framework, runtime, batch size, threads, image size, device, inter-op threads and
    machine at fp32: the median
    over its stored ok inference runs, or NULL (runs = 0) where none was measured."""
    return con.execute(
        "SELECT t.model, t.framework, t.runtime, t.batch_size, t.intra_threads AS threads, "
        "t.image_size, median(i.median_ms) AS p50_ms, median(i.p99_ms) AS p99_ms, "
        "CASE WHEN min(i.iterations) < ? THEN 'low: ' || min(i.iterations) || ' samples' "
        "ELSE '' END AS p99_confidence, "
        "median(i.throughput) AS throughput, count(i.run_id) AS runs "
        "FROM (SELECT DISTINCT model, framework, runtime, batch_size, intra_threads, "
        "      image_size, device, inter_threads, system_id, machine_shape FROM runs "
        "      WHERE kind = ? AND status = 'ok' "
        "      AND (?::VARCHAR IS NULL OR sweep_id = ?) AND " + setting_sql() + ") t "
        "LEFT JOIN runs i ON i.kind = ? AND i.status = 'ok' "
        "AND i.precision = 'fp32' AND i.model = t.model AND i.framework = t.framework "
        "AND i.runtime = t.runtime AND i.batch_size = t.batch_size "
        "AND i.intra_threads = t.intra_threads AND i.image_size = t.image_size "
        "AND i.device = t.device AND i.inter_threads = t.inter_threads "
        "AND i.system_id IS NOT DISTINCT FROM t.system_id "
        "AND i.machine_shape IS NOT DISTINCT FROM t.machine_shape "
        f"AND {QUIET.format(p='i.')} "
        "GROUP BY ALL ORDER BY t.model, t.framework, t.runtime, t.batch_size, threads",
        [P99_MIN_SAMPLES, TRAINING.kind, sweep_id, sweep_id, *setting_params(setting),
         INFERENCE.kind]).df()


_LOAD_SUMMARY = """
SELECT model AS format, runtime AS implementation, batch_size, workers,
       intra_threads AS threads, image_size, count(*) AS runs,
       median(median_ms) AS ms_per_batch, min(median_ms) AS min_ms, max(median_ms) AS max_ms,
       median(iqr_ms) AS iqr_ms, median(throughput) AS images_per_s,
       median(throughput) / batch_size AS batches_per_s,
       count(*) FILTER (WHERE validity = 'noisy') AS noisy_runs
FROM runs
WHERE kind = ? AND status = 'ok' AND (?::VARCHAR IS NULL OR sweep_id = ?) AND {setting}
GROUP BY model, runtime, batch_size, workers, intra_threads, image_size, device, precision,
         inter_threads, system_id, coalesce(machine_shape, ''), coalesce(contention, 'none')
ORDER BY format, workers, threads, batch_size, implementation
""".format(setting=setting_sql())


def load_summary(con, sweep_id: str | None, setting: tuple | None = None) -> pd.DataFrame:
    """Data-loading configurations of one setting (settings(); None: every setting, still
    grouped by it, so two machines' runs never blend): the median over their ok runs
    (rounds) of each run's p50 ms per batch, and of its throughput, images over the total
    measured time (the stored `throughput`, as inference's), with batches/s from it."""
    return con.execute(_LOAD_SUMMARY, [DATA_LOADING.kind, sweep_id, sweep_id,
                                       *setting_params(setting)]).df()


def load_failures(con, sweep_id: str | None) -> pd.DataFrame:
    return con.execute(
        "SELECT model AS format, runtime AS implementation, batch_size, workers, "
        "intra_threads AS threads, status, reason FROM runs "
        "WHERE kind = ? AND status != 'ok' AND (?::VARCHAR IS NULL OR sweep_id = ?) "
        "ORDER BY started_at", [DATA_LOADING.kind, sweep_id, sweep_id]).df()
