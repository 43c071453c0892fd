"""Plotly figures for the dashboard: pure functions, DataFrame in, Figure out.

Units in every axis title; one colour per contender across all charts; sized and fonted
to stay legible in a screenshot pasted into a slide.
"""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from engine.analysis.break_even import Step, cost_vertices
from engine.core.catalog import sample_noun

__all__ = ["latency_vs_batch", "throughput_vs_batch", "scaling_vs_threads", "latency_box",
           "speedup_heatmap", "sample_histogram", "iteration_trace", "colour_map",
           "search_probes", "cost_bars", "fleet_bars", "break_even_chart", "memory_note"]

_PALETTE = px.colors.qualitative.D3
# Legend under the plot: above it, it collides with the title in narrow columns.
_LAYOUT = dict(template="plotly_white", font=dict(size=14), height=460,
               legend=dict(orientation="h", yanchor="top", y=-0.2, x=0, title_text=""),
               margin=dict(l=70, r=20, t=60, b=110))


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def colour_map(contenders) -> dict:
    return {c: _PALETTE[i % len(_PALETTE)] for i, c in enumerate(sorted(set(contenders)))}


def _rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def latency_vs_batch(df: pd.DataFrame, threads: int, band=("p10_ms", "p90_ms")) -> go.Figure:
    """p50 per batch size per contender, with a band (p10-p90 by default, or q1-q3)."""
    d = df[df.threads == threads].sort_values("batch_size")
    colours = colour_map(df.contender)
    fig = go.Figure()
    for (model, contender), g in d.groupby(["model", "contender"], sort=True):
        name = f"{contender} · {model}" if d.model.nunique() > 1 else contender
        c = colours[contender]
        fig.add_trace(go.Scatter(
            x=list(g.batch_size) + list(g.batch_size[::-1]),
            y=list(g[band[1]]) + list(g[band[0]][::-1]), fill="toself", mode="lines",
            fillcolor=_rgba(c, 0.18), line=dict(width=0), hoverinfo="skip",
            showlegend=False, legendgroup=name))
        # Error bars carry the band too, so it shows even for a single batch size.
        fig.add_trace(go.Scatter(
            x=g.batch_size, y=g.p50_ms, mode="lines+markers", name=name,
            line=dict(color=c, width=3), legendgroup=name,
            error_y=dict(type="data", symmetric=False, array=g[band[1]] - g.p50_ms,
                         arrayminus=g.p50_ms - g[band[0]], thickness=1.5, width=6),
            hovertemplate="batch %{x}<br>p50 %{y:.2f} ms<extra>" + name + "</extra>"))
    lo, hi = ("p10", "p90") if band[0] == "p10_ms" else ("p25", "p75")
    fig.update_layout(**_LAYOUT, title=f"Latency vs batch size ({_n(threads, 'thread')}; "
                                       f"band {lo}-{hi})")
    fig.update_xaxes(title=f"batch size [{sample_noun(df.model.unique())}]", type="log",
                     tickvals=sorted(d.batch_size.unique()))
    fig.update_yaxes(title="latency per batch [ms]")
    return fig


def throughput_vs_batch(df: pd.DataFrame, threads: int) -> go.Figure:
    d = df[df.threads == threads].sort_values("batch_size")
    fig = px.line(d, x="batch_size", y="throughput", color="contender", markers=True,
                  line_dash="model" if d.model.nunique() > 1 else None,
                  color_discrete_map=colour_map(df.contender))
    noun = sample_noun(df.model.unique())  # a token model's sample is one sequence
    fig.update_layout(**_LAYOUT, title=f"Throughput vs batch size ({_n(threads, 'thread')})")
    fig.update_xaxes(title=f"batch size [{noun}]", type="log",
                     tickvals=sorted(d.batch_size.unique()))
    fig.update_yaxes(title=f"throughput [{noun}/s]")
    return fig


def scaling_vs_threads(df: pd.DataFrame, batch: int) -> tuple[go.Figure, pd.DataFrame]:
    """Throughput vs threads with the ideal linear line from each contender's 1-thread
    figure, and the scaling efficiency (throughput_n / (n x throughput_1))."""
    d = df[df.batch_size == batch].sort_values("threads")
    rate = f"throughput [{sample_noun(df.model.unique())}/s]"
    colours = colour_map(df.contender)
    fig = go.Figure()
    eff_rows = []
    for (model, contender), g in d.groupby(["model", "contender"], sort=True):
        name = f"{contender} · {model}" if d.model.nunique() > 1 else contender
        c = colours[contender]
        fig.add_trace(go.Scatter(x=g.threads, y=g.throughput, mode="lines+markers", name=name,
                                 line=dict(color=c, width=3)))
        base = g[g.threads == g.threads.min()].iloc[0]
        per_thread = base.throughput / base.threads
        fig.add_trace(go.Scatter(x=g.threads, y=g.threads * per_thread, mode="lines",
                                 name=f"ideal · {name}", line=dict(color=c, dash="dot"),
                                 showlegend=True))
        for row in g.itertuples():
            eff_rows.append({"model": model, "contender": contender, "threads": row.threads,
                             rate: row.throughput,
                             "scaling efficiency": row.throughput / (row.threads * per_thread)})
    fig.update_layout(**_LAYOUT, title=f"Throughput vs threads (batch {batch}); dotted: "
                                       "ideal linear scaling")
    fig.update_xaxes(title="intra-op threads", dtick=1)
    fig.update_yaxes(title=rate)
    return fig, pd.DataFrame(eff_rows)


def latency_box(samples: pd.DataFrame, shape: str = "box") -> go.Figure:
    """shape: "box" or "violin"."""
    colours = colour_map(samples.contender)
    maker = px.violin if shape == "violin" else px.box
    fig = maker(samples, x="contender", y="latency_ms", color="contender",
                facet_col="model" if samples.model.nunique() > 1 else None,
                color_discrete_map=colours, points=False)
    fig.update_layout(**_LAYOUT, title="Latency distribution (raw samples)", showlegend=False)
    fig.update_yaxes(title="latency per batch [ms]")
    fig.update_xaxes(title="")
    return fig


def speedup_heatmap(df: pd.DataFrame, model: str, a: str, b: str) -> go.Figure | None:
    """p50(B) / p50(A): above 1 means A is faster, over batch size x threads."""
    d = df[df.model == model]
    pa = d[d.contender == a].set_index(["batch_size", "threads"]).p50_ms
    pb = d[d.contender == b].set_index(["batch_size", "threads"]).p50_ms
    ratio = (pb / pa).dropna()
    if ratio.empty:
        return None
    grid = ratio.unstack("threads").sort_index()
    fig = go.Figure(go.Heatmap(
        z=grid.values, x=[str(t) for t in grid.columns], y=[str(b_) for b_ in grid.index],
        colorscale="RdBu", zmid=1.0, text=[[f"{v:.2f}x" if v == v else "" for v in row]
                                          for row in grid.values],
        texttemplate="%{text}", colorbar=dict(title="speed-up")))
    fig.update_layout(**_LAYOUT, title=f"Speed-up of {a} over {b} · {model}<br>"
                                       f"<sup>p50({b}) / p50({a}); above 1: {a} is faster"
                                       "</sup>")
    fig.update_xaxes(title="intra-op threads")
    fig.update_yaxes(title=f"batch size [{sample_noun([model])}]")
    return fig


def sample_histogram(samples: pd.DataFrame, unit: str = "batch") -> go.Figure:
    """unit: what one sample times (a batch; a training step)."""
    d = samples[samples.phase == "measure"]
    fig = px.histogram(d, x=d.latency_ns / 1e6, nbins=min(80, max(10, len(d) // 4)))
    fig.update_layout(**_LAYOUT, title="Raw timed samples", showlegend=False)
    fig.update_xaxes(title=f"time per {unit} [ms]")
    fig.update_yaxes(title="iterations")
    return fig


def iteration_trace(samples: pd.DataFrame, unit: str = "iteration") -> go.Figure:
    """Every iteration in order: warm-up first (its own colour), then the timed ones."""
    warm = samples[samples.phase == "warmup"].sort_values("idx")
    timed = samples[samples.phase == "measure"].sort_values("idx")
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=list(range(len(warm))), y=warm.latency_ns / 1e6,
                             mode="markers+lines", name="warm-up",
                             line=dict(color="#ff7f0e")))
    fig.add_trace(go.Scatter(x=[len(warm) + i for i in range(len(timed))],
                             y=timed.latency_ns / 1e6, mode="markers+lines", name="timed",
                             line=dict(color="#1f77b4")))
    fig.update_layout(**_LAYOUT, title=f"Time per {unit} (warm-up, then timed)")
    fig.update_xaxes(title=unit)
    fig.update_yaxes(title="latency [ms]")
    return fig


PROVIDER_COLOURS = {"OCI": "#c74634", "AWS": "#ff9900", "GCP": "#4285f4", "Azure": "#008ad7",
                    "custom": "#555555"}


def memory_note(rows: list[dict]) -> dict[str, str]:
    """Per machine label, " · 64 GB" where the machines compared differ in memory (their
    prices include it, so a cheaper bar may be a smaller machine); nothing where they do
    not, or a machine's memory is not known (a price entered by hand)."""
    sizes = {r["machine"]: r.get("memory_gb") or 0 for r in rows}
    if len({v for v in sizes.values() if v}) < 2:
        return {}
    return {k: f" · {v:g} GB" for k, v in sizes.items() if v}


def cost_bars(rows: list[dict], value: str, title: str, axis: str) -> go.Figure:
    """Bars coloured by provider; estimates hatched, with the assumption in the hover and
    noted under the chart; each bar's memory beside its figure where the machines differ."""
    d = pd.DataFrame(rows).sort_values(value)
    memory = memory_note(rows)
    fig = go.Figure()
    for provider, g in d.groupby("provider", sort=False):
        fig.add_trace(go.Bar(
            x=g[value], y=g["machine"], orientation="h", name=provider,
            marker=dict(color=PROVIDER_COLOURS.get(provider, "#777777"),
                        pattern=dict(shape=["/" if e else "" for e in g.estimate])),
            text=[f"${v:,.2f}" + (" (est.)" if e else "") + memory.get(m, "")
                  for v, e, m in zip(g[value], g.estimate, g["machine"])],
            textposition="auto", customdata=g["assumption"],
            hovertemplate="%{y}<br>%{x:$,.4f}<br>%{customdata}<extra></extra>"))
    # The assumptions behind hatched bars are in each bar's hover and, on the page, in a
    # caption under the chart: inside the figure they collide with axes in narrow columns.
    fig.update_layout(**{**_LAYOUT, "height": max(320, 34 * len(d) + 170)},
                      title=title + (" (hatched: estimate)" if d.estimate.any() else ""),
                      barmode="group")
    fig.update_xaxes(title=axis, rangemode="tozero")
    fig.update_yaxes(title="", automargin=True, categoryorder="total descending")
    return fig


def fleet_bars(fleet: list[dict], rate: float, vcpus: int) -> go.Figure:
    """Monthly cost of serving `rate` samples/s per machine type
    (analysis.cost_machines.fleet_rows), each bar labelled with its total, the number of
    machines it takes and their memory (the providers' machines of one vCPU count differ
    in memory, and their prices with it)."""
    fig = cost_bars([{**r, "monthly_total": r["total"]} for r in fleet], "monthly_total",
                    f"Monthly cost for {rate:g} samples/s (≈{vcpus}-vCPU machines)",
                    "USD per month")
    machines, memory = {r["machine"]: r["machines"] for r in fleet}, memory_note(fleet)
    for trace in fig.data:
        trace.text = [f"${t:,.0f} · {_n(machines[y], 'machine')}{memory.get(y, '')}"
                      for t, y in zip(trace.x, trace.y)]
    return fig


def break_even_chart(a_label: str, b_label: str, steps: list[Step], hours: float) -> go.Figure:
    """Monthly cost against request rate for two choices, drawn from
    engine.analysis.break_even's steps: each trace's vertices are exactly the rates where
    its fleet grows (no sampled grid that could miss a narrow step), the same steps the
    text's change points come from."""
    fig = go.Figure()
    for which, label, colour in ((0, a_label, "#1f77b4"), (1, b_label, "#d62728")):
        xs, ys = cost_vertices(steps, which, hours)
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines", line=dict(shape="hv", width=3, color=colour),
            name=label, hovertemplate="above %{x:,.6g} samples/s: $%{y:,.2f} a month"
                                      "<extra></extra>"))
    fig.update_layout(**_LAYOUT, title="Break-even: monthly cost vs request rate (each step "
                                       "is one more machine)")
    fig.update_xaxes(title="request rate [samples/s]", rangemode="tozero")
    fig.update_yaxes(title="monthly cost [USD]", rangemode="tozero")
    return fig


def search_probes(probes: list[dict], p99_bound_ms: float | None = None) -> go.Figure:
    """An optimal-batch search: throughput per probed batch (bars), p99 latency (line, right
    axis), the bound as a dotted line; failed probes (out of memory) marked at zero."""
    d = pd.DataFrame(probes).sort_values("batch_size")
    ok = d[d.status == "ok"]
    bad = d[d.status != "ok"]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=ok.batch_size.astype(str), y=ok.throughput, name="throughput",
                         marker_color="#1f77b4"))
    if not bad.empty:
        fig.add_trace(go.Bar(x=bad.batch_size.astype(str), y=[0] * len(bad), name="failed",
                             text=bad.status, textposition="outside", marker_color="#d62728"))
    fig.add_trace(go.Scatter(x=ok.batch_size.astype(str), y=ok.p99_ms, name="p99 latency",
                             yaxis="y2", mode="lines+markers", line=dict(color="#ff7f0e")))
    if p99_bound_ms is not None:
        fig.add_trace(go.Scatter(x=d.batch_size.astype(str), y=[p99_bound_ms] * len(d),
                                 yaxis="y2", mode="lines", name="p99 bound",
                                 line=dict(color="#ff7f0e", dash="dot")))
    fig.update_layout(**_LAYOUT, title="Batch-size search: every probe",
                      yaxis=dict(title="throughput [samples/s]"),
                      yaxis2=dict(title="p99 latency [ms]", overlaying="y", side="right"))
    fig.update_xaxes(title="batch size [samples]", type="category",
                     categoryorder="array", categoryarray=[str(b) for b in d.batch_size])
    return fig
