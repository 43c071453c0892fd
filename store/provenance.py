"""What a stored sweep ran on and under which rules: its row, machines, software, policy and
configurations. Named queries for the offline report (engine/present/report.py), which must
say where its figures came from without a server to ask."""

from __future__ import annotations

import json

import pandas as pd

__all__ = ["sweep_info", "sweep_systems", "sweep_software", "sweep_policy", "sweep_configs",
           "sweep_energy"]


def sweep_info(con, sweep_id: str) -> dict | None:
    """The sweep's own row: when, how many rounds ran, seed, configurations, command, and
    the verdict rule it kept (min_rounds, max_rounds, margin, alpha: NULL on older
    sweeps; engine.analysis.compare.stored_rule reads them)."""
    cur = con.execute("SELECT sweep_id, created_at, rounds, seed, configurations, command, "
                      "min_rounds, max_rounds, margin, alpha FROM sweeps WHERE sweep_id = ?",
                      [sweep_id])
    names = [d[0] for d in cur.description]
    rows = cur.fetchall()
    return dict(zip(names, rows[0])) if rows else None


def sweep_systems(con, sweep_id: str) -> pd.DataFrame:
    """Every machine the sweep's runs ran on, with how many runs each."""
    return con.execute(
        "SELECT y.system_id, y.hostname, y.cpu_model, y.physical_cores, y.logical_cores, "
        "y.usable_cores, y.sockets, y.memory_bytes, y.accelerator, y.accelerator_count, "
        "y.os, y.platform, y.python, count(*) AS runs "
        "FROM runs r JOIN systems y USING (system_id) WHERE r.sweep_id = ? "
        "GROUP BY ALL ORDER BY runs DESC, y.system_id", [sweep_id]).df()


def sweep_software(con, sweep_id: str) -> list[dict]:
    """Per framework: the package versions its workers reported (merged over runs; a
    package seen at two versions lists both) and the git commits of the harness."""
    rows = con.execute(
        "SELECT framework, versions, git_commit, count(*) AS runs FROM runs "
        "WHERE sweep_id = ? GROUP BY ALL ORDER BY framework, git_commit NULLS LAST",
        [sweep_id]).fetchall()
    out: dict = {}
    for framework, versions, commit, runs in rows:
        entry = out.setdefault(framework, {"framework": framework, "versions": {},
                                           "commits": [], "runs": 0})
        for package, version in sorted(json.loads(versions or "{}").items()):
            seen = entry["versions"].setdefault(package, [])
            if str(version) not in seen:
                seen.append(str(version))
        if commit and commit not in entry["commits"]:
            entry["commits"].append(commit)
        entry["runs"] += runs
    return list(out.values())


def sweep_policy(con, sweep_id: str) -> pd.DataFrame:
    """The measurement policies the sweep's runs used (one row unless they differed)."""
    return con.execute(
        "SELECT warmup_iters, min_time_s, min_iters, max_time_s, count(*) AS runs FROM runs "
        "WHERE sweep_id = ? GROUP BY ALL ORDER BY runs DESC", [sweep_id]).df()


def sweep_energy(con, sweep_id: str) -> pd.DataFrame:
    """Each configuration's energy readings (issue 28), where its runs asked for one: the
    median over its measured runs per source, or the reason it is absent (the latest)."""
    return con.execute(
        "SELECT model, framework, runtime, batch_size, intra_threads, precision, device, "
        "energy_source, median(energy_j_per_sample) AS j_per_sample, "
        "median(energy_kwh_per_million) AS kwh_per_million, count(*) AS runs, "
        "arg_max(energy_absent, started_at) AS absent FROM runs "
        "WHERE sweep_id = ? AND (energy_source IS NOT NULL OR energy_absent IS NOT NULL) "
        "GROUP BY ALL ORDER BY model, framework, runtime, batch_size, intra_threads",
        [sweep_id]).df()


def sweep_configs(con, sweep_id: str) -> pd.DataFrame:
    """Each configuration the sweep ran, in how many rounds, and how many of its runs were
    an A/A test's copies or beside a neighbour: what a command reproducing a sweep launched from the dashboard
    (no command line stored) is rebuilt from."""
    return con.execute(
        "SELECT model, framework, runtime, batch_size, intra_threads, inter_threads, "
        "image_size, precision, device, weight_policy, "
        "count(DISTINCT coalesce(round_no, 1)) AS rounds, "
        "count(*) FILTER (WHERE extra->>'replica' IS NOT NULL) AS replicas, "
        "count(*) FILTER (WHERE coalesce(contention, 'none') != 'none') AS contention_runs "
        "FROM runs WHERE sweep_id = ? "
        "GROUP BY ALL ORDER BY model, framework, runtime, batch_size, intra_threads",
        [sweep_id]).df()


def sweep_user_models(con, sweep_id: str) -> pd.DataFrame:
    """The users' own models the sweep measured (issue #14): name, format, origin, inputs,
    and each distinct SHA-256 and size loaded (NULL where no run got as far as loading)."""
    return con.execute(
        "SELECT model, model_format, model_origin, model_inputs, model_sha256, model_bytes, "
        "count(*) AS runs FROM runs WHERE sweep_id = ? AND model_format IS NOT NULL "
        "GROUP BY ALL ORDER BY model, model_sha256 NULLS LAST", [sweep_id]).df()
