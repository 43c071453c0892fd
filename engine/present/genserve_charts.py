"""The Deploy page's charts of a language-model serving test (issue 38), Plotly as the
page's other charts: a histogram of every request's TTFT or TPOT with the bound drawn as a
rule (the axis reaches the bound however far it is, since the headroom under it is what a
deployment is sized on), and a concurrency sweep's Pareto of tokens/s per user against
output tokens/s per machine, each point labelled with its users and the front joined.

Pure: DataFrames in, figures out (engine/present/genserve_text.py builds the frames).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

__all__ = ["request_histogram", "pareto_chart", "BINS"]

BINS = 40


def request_histogram(values_ms, *, metric: str, bound_ms: float | None,
                      title: str) -> go.Figure:
    """Every request's metric (ms; NaN left out and counted), p50 and p99 marked, and the
    bound a dashed rule with the requests over it counted in the title."""
    ms = np.asarray(values_ms, dtype=float)
    missing = int(np.isnan(ms).sum())
    ms = ms[~np.isnan(ms)]
    fig = go.Figure()
    if ms.size == 0:
        fig.update_layout(title=f"{title}: no request with a {metric}")
        return fig
    lo, hi = float(ms.min()), float(ms.max())
    counts, edges = np.histogram(ms, bins=BINS, range=(lo, hi if hi > lo else lo + 1e-6))
    fig.add_bar(x=(edges[:-1] + edges[1:]) / 2, y=counts, width=np.diff(edges),
                marker_color="#4c78a8", name="requests",
                hovertemplate="%{x:.2f} ms: %{y} requests<extra></extra>")
    for name, x, colour in (("p50", float(np.percentile(ms, 50)), "#555"),
                            ("p99", float(np.percentile(ms, 99)), "#e45756")):
        fig.add_vline(x=x, line_dash="dot", line_color=colour,
                      annotation_text=f"{name} {x:,.1f}", annotation_position="top")
    over = ""
    if bound_ms:
        fig.add_vline(x=bound_ms, line_dash="dash", line_color="#000", line_width=2,
                      annotation_text=f"bound {bound_ms:,g} ms",
                      annotation_position="top left")
        n_over = int((ms > bound_ms).sum())
        over = f" · {n_over} over the bound"
    gap = f" · {missing} without one (under 2 tokens)" if missing else ""
    fig.update_layout(title=f"{title}: {ms.size:,} requests{over}{gap}",
                      xaxis_title=f"{metric} per request [ms]", yaxis_title="requests",
                      xaxis_range=[0, max(hi, bound_ms or 0) * 1.05], bargap=0,
                      showlegend=False, height=360, margin=dict(l=40, r=20, t=70, b=40))
    return fig


def pareto_chart(points, title: str) -> go.Figure:
    """points: pareto_frame's (users, user_tok_s, output_tok_s, front). The front's points
    joined by a line in order of tokens/s per user; the others hollow."""
    fig = go.Figure()
    front = points[points.front].sort_values("user_tok_s")
    off = points[~points.front]
    labels = lambda df: [f"{u} user{'s' if u != 1 else ''}" for u in df.users]  # noqa: E731
    fig.add_scatter(x=front.user_tok_s, y=front.output_tok_s, mode="lines+markers+text",
                    text=labels(front), textposition="top right", name="Pareto front",
                    marker=dict(size=11, color="#e45756"), line=dict(color="#e45756"),
                    hovertemplate="%{text}: %{x:.1f} tok/s per user, %{y:.1f} tok/s per "
                                  "machine<extra></extra>")
    if not off.empty:
        fig.add_scatter(x=off.user_tok_s, y=off.output_tok_s, mode="markers+text",
                        text=labels(off), textposition="bottom right", name="beaten on both",
                        marker=dict(size=10, color="#4c78a8", symbol="circle-open"),
                        hovertemplate="%{text}: %{x:.1f} tok/s per user, %{y:.1f} tok/s "
                                      "per machine<extra></extra>")
    fig.update_layout(title=title, xaxis_title="output tokens/s per user (1 / median TPOT)",
                      yaxis_title="output tokens/s per machine", height=420,
                      margin=dict(l=40, r=20, t=60, b=40),
                      legend=dict(orientation="h", y=-0.2))
    return fig
