"""Named queries for serving runs (MLPerf LoadGen tests, issue 27): the Deploy page's list
of stored tests and what one test kept (LoadGen's parsed summary, its logs' names and sizes).
The logs themselves and the summary of one run are store.runs' (loadgen_log,
serving_result)."""

from __future__ import annotations

import json

import pandas as pd

from engine.scenarios import INFERENCE, SERVING

__all__ = ["serving_runs", "loadgen_log_sizes", "search_sweeps", "search_probes",
           "closed_loop_run"]


def serving_runs(con, sweep_id: str | None = None) -> pd.DataFrame:
    """Serving runs (of one sweep, or all), newest first: the SUT's columns, what the test
    was asked for (scenario, bound, target QPS, max wait, minimum duration, preset), its
    status and reason, and LoadGen's parsed summary (a dict; None where the test never ran,
    a failed run)."""
    df = con.execute(
        "SELECT r.run_id, r.sweep_id, r.started_at, r.model, r.framework, r.runtime, "
        "r.batch_size, r.intra_threads, coalesce(r.replicas, 1) AS replicas, r.image_size, "
        "r.status, coalesce(r.reason, '') AS reason, r.throughput, r.median_ms, r.p90_ms, "
        "r.p99_ms, r.iterations, r.extra->>'scenario' AS scenario, "
        "(r.extra->>'bound_ms')::DOUBLE AS bound_ms, "
        "(r.extra->>'target_qps')::DOUBLE AS target_qps, "
        "(r.extra->>'max_wait_ms')::DOUBLE AS max_wait_ms, "
        "(r.extra->>'min_duration_s')::DOUBLE AS min_duration_s, "
        "(r.extra->>'min_query_count')::BIGINT AS min_query_count, "
        "coalesce(r.extra->>'preset', '') AS preset, s.result, s.summary "
        "FROM runs r LEFT JOIN serving_results s USING (run_id) "
        "WHERE r.kind = ? AND (?::VARCHAR IS NULL OR r.sweep_id = ?) "
        "ORDER BY r.started_at DESC, r.run_id",
        [SERVING.kind, sweep_id, sweep_id]).df()
    df["summary"] = [json.loads(s) if isinstance(s, str) else None for s in df["summary"]]
    return df


def loadgen_log_sizes(con, run_id: str) -> dict[str, int]:
    """The LoadGen logs a run kept: name -> size in bytes (uncompressed)."""
    return dict(con.execute("SELECT name, bytes FROM loadgen_logs WHERE run_id = ? "
                            "ORDER BY name DESC", [run_id]).fetchall())


def search_sweeps(con, command_prefix: str) -> pd.DataFrame:
    """The sweeps a dashboard search stored (its command starts with command_prefix, such
    as engine.run.search.replays.MAX_QPS_COMMAND), newest first, with their command and
    how many runs each holds."""
    return con.execute(
        "SELECT s.sweep_id, s.created_at, s.command, count(r.run_id) AS runs "
        "FROM sweeps s LEFT JOIN runs r USING (sweep_id) "
        "WHERE starts_with(coalesce(s.command, ''), ?) "
        "GROUP BY s.sweep_id, s.created_at, s.command "
        "ORDER BY s.created_at DESC, s.sweep_id", [command_prefix]).df()


def search_probes(con, sweep_id: str) -> pd.DataFrame:
    """Every run of one search's sweep in the order it ran (oldest first), of any kind (an
    Offline estimate, closed-loop probes, Server tests), with what pricing it needs: the
    threads per core, the cores its worker was pinned to, whether its host was a VM (the
    x86 `hypervisor` flag) and the shape it ran on."""
    df = con.execute(
        "SELECT r.run_id, r.kind, r.started_at, r.framework, r.runtime, r.precision, "
        "r.batch_size, r.intra_threads, coalesce(r.replicas, 1) AS replicas, r.status, "
        "coalesce(r.reason, '') AS reason, "
        "r.throughput, r.p99_ms, r.threads_per_core, r.machine_shape, "
        "(r.extra->>'cores_used')::BIGINT AS cores_used, r.extra->>'scenario' AS scenario, "
        "(r.extra->>'hypervisor')::BOOLEAN AS hypervisor, "  # a VM's (NULL: not recorded)
        "(r.extra->>'target_qps')::DOUBLE AS target_qps, "
        "(r.extra->>'max_wait_ms')::DOUBLE AS max_wait_ms, s.summary "
        "FROM runs r LEFT JOIN serving_results s USING (run_id) "
        "WHERE r.sweep_id = ? ORDER BY r.started_at, r.run_id", [sweep_id]).df()
    df["summary"] = [json.loads(s) if isinstance(s, str) else None for s in df["summary"]]
    return df


def closed_loop_run(con, spec, max_batch: int,
                    system_id: str) -> tuple[str, float, int] | None:
    """(run id, samples/s, batch) of the best ok closed-loop inference run of this SUT's
    configuration on the machine system_id names: store.queries.closed_loop_best's figure
    on that machine (the same filter: model, framework, runtime, precision, image size,
    threads; batch up to max_batch, one replica, no neighbour), with the run it comes from,
    so a figure built on it can say which. None when there is none."""
    row = con.execute(
        "SELECT run_id, throughput, batch_size FROM runs WHERE status = 'ok' AND kind = ? "
        "AND model = ? AND framework = ? AND runtime = ? AND precision = ? "
        "AND batch_size <= ? AND intra_threads = ? AND image_size IS NOT DISTINCT FROM ? "
        "AND coalesce(contention, 'none') = 'none' AND coalesce(replicas, 1) = 1 "
        "AND system_id = ? AND throughput > 0 "
        "ORDER BY throughput DESC, started_at DESC, run_id LIMIT 1",
        [INFERENCE.kind, spec.model, spec.framework, spec.runtime, spec.precision,
         max_batch, spec.intra_threads, spec.image_size, system_id]).fetchone()
    return (row[0], float(row[1]), int(row[2])) if row else None
