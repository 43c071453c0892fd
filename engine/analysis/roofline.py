"""Every run against the machine's measured ceilings (issue 28 part 2): % of the calibrated
GEMM peak and the roofline's arithmetic intensity. Pure functions over plain values and
DataFrames (the calibrations store/calibrations.latest_calibrations reads).

A run is held against the ceiling of its own precision, measured at its own thread count
on its own machine (systems row). A run at a thread count that machine was not calibrated
at gets no percentage, and the note says which thread counts were: a 2-thread peak is no
ceiling for a 1-thread run, so nothing is mixed silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from engine.core.calibration import TRIAD, gemm_kind
from engine.core.catalog import input_values

__all__ = ["Ceilings", "Peak", "peak_for", "percent_of_peak", "with_peak", "min_bytes",
           "intensity", "BYTES_PER_VALUE", "INTENSITY_NOTE", "FLOPS_NOTE"]

BYTES_PER_VALUE = {"fp32": 4, "bf16": 2, "fp16": 2, "int8": 1}
FLOPS_NOTE = ("FLOPs: the count per model and image size every run's GFLOP/s already uses "
              "(flops_per_sample x batch per call)")
INTENSITY_NOTE = ("arithmetic intensity = FLOPs / bytes, bytes counted as a lower bound: the "
                  "parameters and the input read once per call (outputs and activations "
                  "left out). Real traffic is larger, so each point's true intensity lies at "
                  "or left of where it is drawn")


@dataclass(frozen=True)
class Peak:
    """The ceiling a run is held against, or None with why (note)."""

    figure: float | None
    note: str
    threads: int | None = None
    measured_at: object = None


class Ceilings:
    """The newest calibration per (machine, threads, kind), from latest_calibrations."""

    def __init__(self, frame: pd.DataFrame | None):
        self.rows: dict[tuple, dict] = {}
        if frame is not None and not frame.empty:
            for r in frame.to_dict("records"):
                self.rows[(r["system_id"], int(r["threads"]), r["kind"])] = r

    def threads_of(self, system_id) -> list[int]:
        return sorted({t for s, t, _ in self.rows if s == system_id})

    def get(self, system_id, threads, kind) -> dict | None:
        return self.rows.get((system_id, int(threads), kind))

    def bandwidth(self, system_id, threads) -> float | None:
        row = self.get(system_id, threads, TRIAD)
        return _finite(row["figure"]) if row else None

    def __bool__(self) -> bool:
        return bool(self.rows)


def _finite(x) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def peak_for(ceilings: Ceilings, system_id, threads, precision: str) -> Peak:
    """The GEMM ceiling of this precision at exactly this machine and thread count."""
    kind = gemm_kind(precision)
    if kind is None:
        return Peak(None, f"no GEMM ceiling is measured for {precision}")
    if not isinstance(system_id, str) or not system_id:
        return Peak(None, "the run names no machine")
    if _finite(threads) is None:  # an imported run may name none
        return Peak(None, "the run names no thread count")
    row = ceilings.get(system_id, threads, kind)
    if row is None:
        known = ceilings.threads_of(system_id)
        if not known:
            return Peak(None, "this machine is not calibrated (python -m engine calibrate)")
        return Peak(None, f"not calibrated at {threads} threads (calibrated at "
                          f"{', '.join(map(str, known))}): none shown rather than mixed")
    figure = _finite(row["figure"])
    if figure is None:
        return Peak(None, f"{kind} absent: {row.get('absent_reason') or 'not measured'}")
    return Peak(figure, f"{kind} at {int(threads)} threads", int(threads), row.get("measured_at"))


def percent_of_peak(gflops, peak: Peak) -> float | None:
    """Achieved GFLOP/s as % of the peak; None where either is missing."""
    g = _finite(gflops)
    if g is None or peak.figure is None or peak.figure <= 0:
        return None
    return 100.0 * g / peak.figure


def with_peak(frame: pd.DataFrame, ceilings: Ceilings) -> pd.DataFrame:
    """frame (system_id, threads, precision, gflops_per_s per row) with peak_gflops,
    pct_of_peak and peak_note added."""
    out = frame.copy()
    peaks = [peak_for(ceilings, r.system_id, r.threads, r.precision)
             for r in frame.itertuples()]
    out["peak_gflops"] = [p.figure for p in peaks]
    out["pct_of_peak"] = [percent_of_peak(g, p) for g, p in zip(frame["gflops_per_s"], peaks)]
    out["peak_note"] = [p.note for p in peaks]
    return out


def min_bytes(params, batch_size, image_size, precision: str, channels: int = 3,
              model: str | None = None) -> float | None:
    """A lower bound of the bytes one call moves: the parameters and the input, once each.
    model: a catalog token model's input is its ids and mask (2 x the sequence length held
    in image_size, catalog.input_values), each counted at the precision's bytes too."""
    per = BYTES_PER_VALUE.get(precision)
    p, b, s = _finite(params), _finite(batch_size), _finite(image_size)
    if per is None or p is None or b is None or s is None:
        return None
    values = input_values(model, s) if model is not None else None
    return per * (p + b * (channels * s * s if values is None else values))


def intensity(flops_per_sample, batch_size, params, image_size, precision: str,
              model: str | None = None) -> float | None:
    """FLOPs per byte of one call, over min_bytes: an upper bound of the true intensity."""
    f, b = _finite(flops_per_sample), _finite(batch_size)
    nbytes = min_bytes(params, batch_size, image_size, precision, model=model)
    if f is None or b is None or not nbytes:
        return None
    return f * b / nbytes


