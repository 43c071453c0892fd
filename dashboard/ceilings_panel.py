"""The machine's ceilings on the pages (issue 28 parts 1 and 2): the System page's table of
calibrations beside the theoretical peak, Results' "% of measured peak" column, Compare's
ceilings table and roofline, and the Run page's offer to calibrate a machine a sweep would
run on uncalibrated (a CalibrateRequest through the job queue). Figures come from
engine/present/roofline.py; this only draws them."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.job_forms import Plan
from dashboard.session import read
from engine.analysis.roofline import Ceilings, with_peak
from engine.present.roofline import (PEAK_CAPTION, ROOFLINE_CAPTION, ceiling_table,
                                     roofline_chart, roofline_frame)
from engine.run.jobs.calibrate import CalibrateRequest
from store.calibrations import latest_calibrations, roofline_points, run_figures

__all__ = ["system_ceilings", "peak_columns", "PEAK_COLUMNS", "compare_ceilings",
           "calibrate_offer"]

PEAK_COLUMNS = {
    "gflops_per_s": st.column_config.NumberColumn(
        "GFLOP/s", format="%.1f", help="FLOPs per model and image size x batch, per second"),
    "pct_of_peak": st.column_config.NumberColumn(
        "% of measured peak", format="%.1f %%", help=PEAK_CAPTION)}


def _ceilings() -> Ceilings:
    return Ceilings(read(latest_calibrations))


def system_ceilings() -> None:
    """Per machine and thread count: GEMM fp32 / bf16 GFLOP/s and triad GB/s with the
    date, beside the theoretical peak or "unknown"."""
    st.subheader("Measured ceilings")
    table = ceiling_table(read(latest_calibrations))
    if table.empty:
        st.info("No machine is calibrated yet: `python -m engine calibrate` (about 20 s at 2 "
                "threads), or the Run page offers it before a sweep.", icon=":material/info:")
        return
    table["theoretical"] = table.theoretical.map(lambda x: "unknown" if pd.isna(x)
                                                 else f"{x:,.0f}")
    st.dataframe(table, hide_index=True, key="ceilings", column_config={
        "measured": st.column_config.NumberColumn("measured", format="%.1f"),
        "of_theoretical": st.column_config.NumberColumn("% of theoretical", format="%.0f %%"),
        "measured_at": st.column_config.DatetimeColumn("measured (UTC)",
                                                       format="YYYY-MM-DD HH:mm"),
        "per_size": st.column_config.TextColumn(
            "raw: best per size / each repeat", width="large"),
        "seconds": st.column_config.NumberColumn("took [s]", format="%.1f")})
    st.caption("GEMM: a square torch.matmul sweep, 2 n³ FLOPs a call, each size's best of "
               "its repeats, the peak the largest of them. Triad: a = b + s·c on fp64 arrays "
               "at least 4x the last-level cache, 24 bytes an element as STREAM counts them. "
               "Theoretical: cores x clock x FLOP/cycle from the CPU flags, with the "
               "FMA-unit count assumed as the basis says; a VM's clock is nominal at best.")


def peak_columns(table: pd.DataFrame) -> pd.DataFrame:
    """Results' table with each run's GFLOP/s and % of its measured peak."""
    if table.empty:
        return table.assign(gflops_per_s=None, pct_of_peak=None)
    figures = with_peak(read(run_figures, tuple(table.run_id)), _ceilings())
    return table.merge(figures[["run_id", "gflops_per_s", "pct_of_peak"]], on="run_id",
                       how="left")


def compare_ceilings(models, sweep_id, setting, threads: int) -> None:
    """Achieved GFLOP/s and % of measured peak per configuration, and the roofline at the
    chosen thread count."""
    st.subheader("Against the machine's ceilings")
    ceilings = _ceilings()
    frame = roofline_frame(read(roofline_points, tuple(models), sweep_id, setting), ceilings)
    if frame.empty:
        st.caption("No run of this setting has a FLOP count: nothing to hold against a peak.")
        return
    st.dataframe(frame[["model", "contender", "batch_size", "threads", "gflops_per_s",
                        "pct_of_peak", "intensity", "peak_note"]],
                 hide_index=True, key="ceiling_table", column_config={
                     **PEAK_COLUMNS, "batch_size": st.column_config.NumberColumn("batch"),
                     "intensity": st.column_config.NumberColumn(
                         "FLOP/byte (upper bound)", format="%.1f"),
                     "peak_note": st.column_config.TextColumn("peak", width="medium")})
    st.caption(PEAK_CAPTION + ".")
    at = frame[frame.threads == threads]
    system_id = at.system_id.mode().iloc[0] if not at.empty else None
    if system_id is None or not ceilings.get(system_id, threads, "gemm_fp32"):
        st.caption(f"No roofline: this machine is not calibrated at {threads} threads "
                   "(`python -m engine calibrate`, or the Run page's offer).")
        return
    fig = roofline_chart(frame, ceilings, system_id, threads)
    if fig is not None:
        st.plotly_chart(fig, key="roofline")
    st.caption(ROOFLINE_CAPTION)


def calibrate_offer(launcher, system_id: str, threads) -> None:
    """A notice and a button when this machine has no calibration at a sweep's threads."""
    ceilings = _ceilings()
    missing = tuple(sorted(t for t in set(threads)
                           if not ceilings.get(system_id, t, "gemm_fp32")))
    if not missing:
        return
    st.info(f"This machine has no measured ceilings at {', '.join(map(str, missing))} "
            "threads: without them Results, Compare and the report show no \"% of measured "
            "peak\". A calibration takes about 20 s per thread count.",
            icon=":material/speed:")
    request = CalibrateRequest(threads=missing)
    launcher.button("Calibrate this machine", "calibrate", Plan(request, request.specs()),
                    "Calibration", False)
