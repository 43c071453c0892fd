"""Plotly figures of a generation sweep: a metric (TTFT, TPOT, output tokens/s) against prompt
length at one batch, against batch at one prompt length, and one call's per-token timeline
(prefill then each decode step). DataFrame in, Figure out, in engine/present/charts.py's
style (its layout and one colour per contender); the figures are config_frame's medians over
ok rounds, so a configuration with no ok round has no point.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from engine.present.charts import _LAYOUT, colour_map
from engine.present.generation_frames import METRIC_COLUMNS

__all__ = ["metric_vs", "timeline_chart"]

_AXES = {"prompt_len": "prompt length [tokens]", "batch_size": "batch size [prompts]"}


def metric_vs(configs: pd.DataFrame, metric: str, x: str, fixed: dict) -> go.Figure:
    """metric (a METRIC_COLUMNS name) against x ("prompt_len" or "batch_size"), one line per
    contender, over the rows matching `fixed` ({column: value}: the other axis, the model,
    output length and threads)."""
    col, axis = METRIC_COLUMNS[metric]
    d = configs
    for k, v in fixed.items():
        d = d[d[k] == v]
    d = d[d[col].notna()].sort_values(x)
    colours = colour_map(configs.contender)
    fig = go.Figure()
    for contender, g in d.groupby("contender", sort=True):
        fig.add_trace(go.Scatter(x=g[x], y=g[col], mode="lines+markers", name=contender,
                                 line=dict(color=colours[contender], width=3)))
    other = ", ".join(f"{k.replace('_len', '').replace('_size', '')} {v}"
                      for k, v in fixed.items() if k != "model")
    fig.update_layout(**_LAYOUT, title=f"{metric} vs {_AXES[x].split(' [')[0]} ({other})")
    fig.update_xaxes(title=_AXES[x], type="log", tickvals=sorted(d[x].unique()))
    fig.update_yaxes(title=axis, rangemode="tozero")
    return fig


def timeline_chart(frame: pd.DataFrame) -> go.Figure:
    """One call's readings (generation_frames.timeline_frame): each step's gap as a bar,
    the first (prefill + first token: the TTFT) in its own colour, and the time since the
    call's start as a line on a second axis."""
    first = frame[frame.step == 0]
    rest = frame[frame.step > 0]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=first.step, y=first.gap_ms, name="prefill + first token (TTFT)",
                         marker_color="#d62728"))
    fig.add_trace(go.Bar(x=rest.step, y=rest.gap_ms, name="decode step (gap since the "
                                                          "step before)",
                         marker_color="#1f77b4"))
    fig.add_trace(go.Scatter(x=frame.step, y=frame.ms_since_start, name="ms since the call "
                                                                         "started",
                             mode="lines", yaxis="y2", line=dict(color="#555555")))
    fig.update_layout(**_LAYOUT, title="Per-token timeline of one call",
                      yaxis2=dict(title="ms since start", overlaying="y", side="right",
                                  rangemode="tozero"), bargap=0.1)
    fig.update_xaxes(title="step (0: prefill and the first token)")
    fig.update_yaxes(title="gap [ms]", rangemode="tozero")
    return fig
