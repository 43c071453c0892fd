"""The machine's measured ceilings (table `calibrations`, m013) and the run figures held
against them: a calibration written as one row per kind, the newest per machine, thread
count and kind read back, and the achieved GFLOP/s of stored runs."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pandas as pd

from engine.core.calibration import (GEMM_BF16, GEMM_FP32, KINDS, PEAK_HOW, TRIAD,
                                     TRIAD_BYTES_PER_ELEMENT, TRIAD_HOW, UNITS, CalibrationPlan)
from engine.core.protocol import Calibrated
from engine.scenarios import INFERENCE
from store.queries import setting_params, setting_sql
from store.runs import SYSTEM_COLUMNS

__all__ = ["save_calibration", "latest_calibrations", "run_figures", "roofline_points",
           "CALIBRATION_COLUMNS"]

CALIBRATION_COLUMNS = [
    "calibration_id", "system_id", "threads", "kind", "figure", "unit", "absent_reason", "how",
    "sizes", "size_best", "repeats", "min_repeat_s", "repeat_figures", "llc_bytes",
    "llc_source", "array_bytes", "bytes_per_element", "cpus", "cores", "cpu_flags", "cpu_mhz",
    "mhz_source", "torch_version", "git_commit", "measured_at", "seconds"]
_INSERT = (f"INSERT INTO calibrations ({', '.join(CALIBRATION_COLUMNS)}) "
           f"VALUES ({', '.join('?' * len(CALIBRATION_COLUMNS))})")
_INSERT_SYSTEM = (f"INSERT INTO systems ({', '.join(SYSTEM_COLUMNS)}, first_seen) "
                  f"VALUES ({', '.join('?' * (len(SYSTEM_COLUMNS) + 1))}) "
                  "ON CONFLICT (system_id) DO NOTHING")


def _rows(cal: Calibrated, plan: CalibrationPlan, system_id: str, commit: str | None,
          at: datetime) -> list[list]:
    m = cal.machine
    common = {"calibration_id": uuid.uuid4().hex, "system_id": system_id,
              "threads": cal.threads, "cpus": list(cal.cpus), "cores": m.get("cores"),
              "cpu_flags": ",".join(m.get("cpu_flags") or ()), "cpu_mhz": m.get("cpu_mhz"),
              "mhz_source": m.get("mhz_source"), "torch_version": cal.versions.get("torch"),
              "git_commit": commit, "measured_at": at, "llc_bytes": cal.llc_bytes,
              "llc_source": cal.llc_source}
    rows = []
    for kind, best in ((GEMM_FP32, cal.fp32_gflops), (GEMM_BF16, cal.bf16_gflops)):
        absent = cal.bf16_absent if kind == GEMM_BF16 else None
        rows.append({**common, "kind": kind, "figure": max(best) if best else None,
                     "unit": UNITS[kind], "absent_reason": absent,
                     "how": None if absent else PEAK_HOW, "sizes": list(cal.sizes),
                     "size_best": list(best) or None, "repeats": cal.repeats,
                     "min_repeat_s": plan.min_repeat_s, "seconds": cal.seconds.get(kind)})
    rows.append({**common, "kind": TRIAD, "figure": max(cal.triad_gbs), "unit": UNITS[TRIAD],
                 "how": TRIAD_HOW, "repeats": len(cal.triad_gbs),
                 "repeat_figures": list(cal.triad_gbs), "array_bytes": cal.triad_array_bytes,
                 "bytes_per_element": TRIAD_BYTES_PER_ELEMENT,
                 "seconds": cal.seconds.get(TRIAD)})
    return [[r.get(c) for c in CALIBRATION_COLUMNS] for r in rows]


def save_calibration(con, cal: Calibrated, plan: CalibrationPlan, system: dict,
                     commit: str | None = None) -> str:
    """One transaction: the machine's systems row (if new) and a row per kind. Returns the
    calibration's id."""
    at = datetime.now(timezone.utc).replace(tzinfo=None)
    rows = _rows(cal, plan, system["system_id"], commit, at)
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(_INSERT_SYSTEM, [system.get(c) for c in SYSTEM_COLUMNS] + [at])
        con.executemany(_INSERT, rows)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return rows[0][0]


def latest_calibrations(con, system_id: str | None = None) -> pd.DataFrame:
    """The newest row per machine, thread count and kind (every machine when system_id is
    None), with the machine's name; threads ascending, kinds in KINDS order. Empty on a database a viewer opened
    read-only before m013 made the table."""
    if not con.execute("SELECT count(*) FROM information_schema.tables "
                       "WHERE table_name = 'calibrations'").fetchall()[0][0]:
        return pd.DataFrame(columns=[*CALIBRATION_COLUMNS, "hostname", "cpu_model"])
    return con.execute(
        "SELECT c.*, y.hostname, y.cpu_model FROM calibrations c "
        "LEFT JOIN systems y USING (system_id) "
        "WHERE (?::VARCHAR IS NULL OR c.system_id = ?) "
        "QUALIFY row_number() OVER (PARTITION BY c.system_id, c.threads, c.kind "
        "ORDER BY c.measured_at DESC, c.calibration_id) = 1 "
        "ORDER BY c.system_id, c.threads, list_position(?::VARCHAR[], c.kind)",
        [system_id, system_id, list(KINDS)]).df()


_FIGURES = ("run_id, system_id, intra_threads AS threads, precision, device, batch_size, "
            "image_size, params, flops_per_sample, flops_method, gflops_per_s")


def run_figures(con, run_ids: list[str]) -> pd.DataFrame:
    """What % of peak needs of each of these runs: machine, threads, precision, GFLOP/s."""
    return con.execute(f"SELECT {_FIGURES} FROM runs WHERE list_contains(?::VARCHAR[], run_id)",
                       [list(run_ids)]).df()


def roofline_points(con, models: list[str], sweep_id: str | None = None,
                    setting: tuple | None = None) -> pd.DataFrame:
    """One row per model x runtime x batch x threads of one setting's ok inference runs:
    the median achieved GFLOP/s over its runs, with what its arithmetic intensity needs."""
    return con.execute(
        "SELECT model, framework, runtime, framework || ' (' || runtime || ')' AS contender, "
        "batch_size, intra_threads AS threads, precision, device, system_id, "
        "any_value(image_size) AS image_size, any_value(params) AS params, "
        "any_value(flops_per_sample) AS flops_per_sample, median(gflops_per_s) AS gflops_per_s, "
        "count(*) AS runs FROM runs WHERE status = 'ok' AND kind = ? "
        "AND list_contains(?::VARCHAR[], model) AND gflops_per_s IS NOT NULL "
        "AND (?::VARCHAR IS NULL OR sweep_id = ?) AND " + setting_sql() + " "
        "GROUP BY ALL ORDER BY model, contender, threads, batch_size",
        [INFERENCE.kind, list(models), sweep_id, sweep_id, *setting_params(setting)]).df()
