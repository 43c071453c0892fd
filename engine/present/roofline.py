"""The machine's ceilings as the pages, the CLI and the report show them (issue 28 parts 1
and 2): the calibrations table beside the theoretical peak, the roofline chart, and the
sentences that say what the figures are. Pure: DataFrames in, DataFrames, text and Plotly
figures out."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from engine.analysis.roofline import FLOPS_NOTE, INTENSITY_NOTE, Ceilings, intensity, with_peak
from engine.core.calibration import GEMM_BF16, GEMM_FP32, TRIAD, theoretical_peak
from engine.present.charts import _LAYOUT, colour_map

__all__ = ["ceiling_table", "ceiling_lines", "roofline_chart", "roofline_frame", "pct_text",
           "CEILING_LABELS", "ROOFLINE_CAPTION", "PEAK_CAPTION"]

CEILING_LABELS = {GEMM_FP32: "GEMM fp32", GEMM_BF16: "GEMM bf16", TRIAD: "triad bandwidth"}
ROOFLINE_CAPTION = f"{FLOPS_NOTE}. {INTENSITY_NOTE}."
PEAK_CAPTION = ("% of peak: the run's GFLOP/s over the calibrated GEMM peak of its precision, "
                "at its thread count on its machine (python -m engine calibrate); empty where "
                "that machine was not calibrated at that thread count, never another's peak")


def _raw(row: dict) -> str:
    """Each size's best (GEMM) or each repeat (triad), as the reader checks the peak."""
    if row["kind"] == TRIAD:
        figures = row.get("repeat_figures")
        return "repeats: " + ", ".join(f"{x:.1f}" for x in figures) if figures is not None else ""
    sizes, best = row.get("sizes"), row.get("size_best")
    if sizes is None or best is None:
        return ""
    return ", ".join(f"{int(n)}: {b:,.0f}" for n, b in zip(sizes, best))


def _present(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def ceiling_table(latest: pd.DataFrame) -> pd.DataFrame:
    """One row per machine, thread count and ceiling: measured figure, the theoretical
    peak (None: unknown, with why in its basis), the date, and the raw per-size figures."""
    rows = []
    for r in latest.to_dict("records"):
        cores = int(r["cores"]) if _present(r.get("cores")) else None
        flags = (r.get("cpu_flags") or "").split(",")
        mhz = r.get("cpu_mhz") if _present(r.get("cpu_mhz")) else None
        theory = theoretical_peak(r["kind"], min(cores, int(r["threads"])) if cores else None,
                                  mhz, r.get("mhz_source"), flags)
        measured = r["figure"] if _present(r.get("figure")) else None
        rows.append({
            "machine": r.get("hostname") or r["system_id"], "threads": int(r["threads"]),
            "ceiling": CEILING_LABELS[r["kind"]], "measured": measured, "unit": r["unit"],
            "of_theoretical": (100 * measured / theory.figure
                               if measured and theory.figure else None),
            "theoretical": theory.figure,
            "basis": (r.get("absent_reason") or "") if measured is None else theory.how,
            "measured_at": r["measured_at"], "per_size": _raw(r),
            "seconds": r.get("seconds")})
    return pd.DataFrame(rows, columns=["machine", "threads", "ceiling", "measured", "unit",
                                       "of_theoretical", "theoretical", "basis",
                                       "measured_at", "per_size", "seconds"])


def ceiling_lines(table: pd.DataFrame) -> list[str]:
    """The table as plain lines, for the CLI."""
    out = []
    for r in table.to_dict("records"):
        got = (f"{r['measured']:,.1f} {r['unit']}" if _present(r["measured"])
               else f"absent: {r['basis']}")
        theory = (f"theoretical {r['theoretical']:,.0f} {r['unit']} "
                  f"({r['of_theoretical']:.0f} % of it; {r['basis']})"
                  if _present(r["theoretical"]) and _present(r["measured"])
                  else ("theoretical unknown" + (f" ({r['basis']})" if _present(r["measured"])
                                                 else "")))
        out.append(f"{r['machine']} {r['threads']} threads {r['ceiling']}: {got}; {theory}; "
                   f"measured {pd.Timestamp(r['measured_at']):%Y-%m-%d %H:%M} UTC")
    return out


def roofline_frame(points: pd.DataFrame, ceilings: Ceilings) -> pd.DataFrame:
    """store.calibrations.roofline_points with intensity, peak and % of peak added."""
    out = with_peak(points, ceilings)
    out["intensity"] = [intensity(r.flops_per_sample, r.batch_size, r.params, r.image_size,
                                  r.precision, model=r.model) for r in points.itertuples()]
    return out


def pct_text(pct) -> str:
    return f"{pct:.1f} % of measured peak" if _present(pct) else "no measured peak"


def roofline_chart(frame: pd.DataFrame, ceilings: Ceilings, system_id, threads: int
                   ) -> go.Figure | None:
    """Log-log: the calibrated GEMM ceilings of this machine and thread count, the triad
    bandwidth slope, and one point per model x runtime x batch (roofline_frame's rows at
    these threads). None when there is nothing to draw."""
    d = frame[(frame.threads == threads) & frame.intensity.notna()
              & frame.gflops_per_s.notna()]
    if d.empty:
        return None
    fig = go.Figure()
    lo, hi = d.intensity.min() / 4, d.intensity.max() * 4
    bw = ceilings.bandwidth(system_id, threads)
    xs = [lo * (hi / lo) ** (i / 60) for i in range(61)]
    for kind, dash in ((GEMM_FP32, "solid"), (GEMM_BF16, "dash")):
        row = ceilings.get(system_id, threads, kind)
        peak = row["figure"] if row is not None and _present(row["figure"]) else None
        if peak is None:
            continue
        ys = [min(peak, bw * x) if bw else peak for x in xs]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color="black", dash=dash),
                                 name=f"{CEILING_LABELS[kind]} {peak:,.0f} GFLOP/s"
                                      + (f" / triad {bw:,.1f} GB/s" if bw else "")))
    if bw and not len(fig.data):  # bandwidth alone: the slope with no flat roof
        fig.add_trace(go.Scatter(x=xs, y=[bw * x for x in xs], mode="lines",
                                 line=dict(color="black"), name=f"triad {bw:,.1f} GB/s"))
    colours = colour_map(frame.contender)
    for contender, g in d.groupby("contender"):
        fig.add_trace(go.Scatter(
            x=g.intensity, y=g.gflops_per_s, mode="markers+text", name=contender,
            text=[f"{m} b{b}" for m, b in zip(g.model, g.batch_size)], textposition="top center",
            marker=dict(size=11, color=colours[contender]),
            hovertemplate="%{text}<br>%{x:.1f} FLOP/byte (upper bound)<br>%{y:.1f} GFLOP/s"))
    fig.update_layout(**_LAYOUT, title=f"Roofline at {threads} threads")
    fig.update_xaxes(type="log", title="arithmetic intensity [FLOP/byte] (bytes: a lower "
                                       "bound, so an upper bound)")
    fig.update_yaxes(type="log", title="achieved [GFLOP/s]")
    fig.add_annotation(text="FLOPs: the per-model count every run's GFLOP/s uses; bytes: "
                            "params + input once per call", xref="paper", yref="paper",
                       x=0, y=1.06, showarrow=False, font=dict(size=11))
    return fig
