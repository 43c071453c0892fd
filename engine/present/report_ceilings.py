"""A report's "against the machine's ceilings" part (issue 28 part 2): each configuration's
achieved GFLOP/s and % of the calibrated peak of its machine, thread count and precision,
and the roofline at the sweep's most threads, gathered as the Compare page shows them."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.analysis.roofline import Ceilings
from engine.present.roofline import (PEAK_CAPTION, ROOFLINE_CAPTION, roofline_chart,
                                     roofline_frame)
from engine.present.values import missing
from store.calibrations import latest_calibrations, roofline_points

__all__ = ["CeilingData", "gather_ceilings", "CEILING_HEADERS", "ceiling_cells"]

CEILING_HEADERS = ["model", "framework (runtime)", "batch", "threads", "GFLOP/s",
                   "% of measured peak", "FLOP/byte (upper bound)", "peak"]


@dataclass(frozen=True)
class CeilingData:
    """rows: roofline_frame's records; figure: the roofline, or None; caption: what the
    figures are (FLOP count, the intensity's bound, which peak)."""

    rows: list[dict] = field(default_factory=list)
    figure: object = None
    caption: str = f"{PEAK_CAPTION}. {ROOFLINE_CAPTION}"


def gather_ceilings(con, sweep_id: str, models: list[str], setting) -> CeilingData:
    if not models:
        return CeilingData()
    ceilings = Ceilings(latest_calibrations(con))
    frame = roofline_frame(roofline_points(con, models, sweep_id, setting), ceilings)
    if frame.empty:
        return CeilingData()
    threads = int(frame.threads.max())
    system_id = frame[frame.threads == threads].system_id.mode().iloc[0]
    fig = (roofline_chart(frame, ceilings, system_id, threads)  # a roofline needs its roof
           if ceilings.get(system_id, threads, "gemm_fp32") else None)
    return CeilingData(frame.to_dict("records"), fig)


def _num(x, fmt: str) -> str:
    return "" if missing(x) else format(x, fmt)


def ceiling_cells(data: CeilingData) -> list[list]:
    """The table's cells, formatted; an empty % says why in the last column."""
    return [[r["model"], r["contender"], r["batch_size"], r["threads"],
             _num(r["gflops_per_s"], ",.1f"), _num(r["pct_of_peak"], ".1f"),
             _num(r["intensity"], ",.1f"), r["peak_note"]] for r in data.rows]
