"""Plotly figures for training, data-loading and profiler views: DataFrame in, Figure out.

Same conventions as engine/present/charts.py: units in axis titles, one colour per contender
(framework) across a page, legible in a slide.
"""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from engine.present.charts import _LAYOUT, PROVIDER_COLOURS, colour_map, memory_note

__all__ = ["train_labels", "epoch_time_bars", "samples_per_s_bars", "training_curves",
           "step_loss_chart", "load_bars", "op_bars", "training_cost_bars"]


def train_labels(runs: pd.DataFrame) -> dict:
    """run_id -> a short label: the framework (and runtime), plus whatever else differs
    between the runs shown (model, batch, threads, round), so every line is named."""
    varying = [c for c in ("model", "batch_size", "intra_threads", "round_no")
               if c in runs and runs[c].nunique() > 1]
    fmt = {"model": "{}", "batch_size": "b{}", "intra_threads": "t{}", "round_no": "r{}"}
    out = {}
    for r in runs.itertuples():
        parts = [f"{r.framework} ({r.runtime})"]
        parts += [fmt[c].format(getattr(r, c)) for c in varying]
        out[r.run_id] = " · ".join(parts)
    return out


def _colours(labels: pd.Series, frameworks: pd.Series) -> dict:
    """Colour by framework so torch and TensorFlow keep their colours across charts."""
    by_fw = colour_map(frameworks)
    return {lab: by_fw[fw] for lab, fw in zip(labels, frameworks)}


def epoch_time_bars(epochs: pd.DataFrame, labels: dict) -> go.Figure:
    d = epochs.assign(label=epochs.run_id.map(labels))
    colours = _colours(d.label, d.framework)
    fig = go.Figure()
    for label, g in d.groupby("label", sort=True):
        fig.add_trace(go.Bar(x=g.epoch, y=g.wall_s, name=label, marker_color=colours[label],
                             text=[f"{v:.2f}" for v in g.wall_s], textposition="outside",
                             hovertemplate="epoch %{x}<br>%{y:.3f} s<extra>" + label
                             + "</extra>"))
    fig.update_layout(**_LAYOUT, barmode="group",
                      title="Time per epoch")
    fig.update_xaxes(title="epoch", dtick=1)
    fig.update_yaxes(title="wall time per epoch [s]", rangemode="tozero")
    return fig


def samples_per_s_bars(runs: pd.DataFrame, labels: dict) -> go.Figure:
    d = runs.assign(label=runs.run_id.map(labels)).sort_values("label")
    colours = _colours(d.label, d.framework)
    fig = go.Figure(go.Bar(
        x=d.label, y=d.throughput, marker_color=[colours[x] for x in d.label],
        text=[f"{v:,.1f}" for v in d.throughput], textposition="outside",
        hovertemplate="%{x}<br>%{y:,.1f} samples/s<extra></extra>"))
    fig.update_layout(**_LAYOUT, title="Samples per second (all epochs)", showlegend=False)
    fig.update_yaxes(title="samples per second", rangemode="tozero")
    return fig


def training_curves(epochs: pd.DataFrame, labels: dict, metric: str) -> go.Figure:
    """metric 'loss' or 'acc': train (solid) and test (dashed) per epoch, overlaid."""
    d = epochs.assign(label=epochs.run_id.map(labels))
    colours = _colours(d.label, d.framework)
    fig = go.Figure()
    for label, g in d.groupby("label", sort=True):
        for split, dash in (("train", "solid"), ("test", "dash")):
            y = g[f"{split}_{metric}"] * (100 if metric == "acc" else 1)
            fig.add_trace(go.Scatter(
                x=g.epoch, y=y, mode="lines+markers", name=f"{label} · {split}",
                line=dict(color=colours[label], dash=dash, width=3), legendgroup=label,
                hovertemplate=f"epoch %{{x}}<br>{split} {metric} %{{y:.3f}}<extra>{label}"
                              "</extra>"))
    name = "Loss" if metric == "loss" else "Accuracy"
    fig.update_layout(**_LAYOUT, title=f"{name} per epoch (test dashed)")
    fig.update_xaxes(title="epoch", dtick=1)
    if metric == "acc":
        fig.update_yaxes(title="accuracy [%]", range=[0, 100])
    else:
        losses = d[["train_loss", "test_loss"]].to_numpy().ravel()
        losses = losses[losses > 0]
        # An untrained BatchNorm can put the test loss 100x above the training loss in the
        # first epochs: a log axis keeps both readable.
        log = len(losses) and losses.max() / losses.min() > 30
        fig.update_yaxes(title="cross-entropy per sample" + (" (log)" if log else ""),
                         type="log" if log else "linear")
    return fig


def step_loss_chart(steps: pd.DataFrame, labels: dict, window: int = 10) -> go.Figure:
    """Every step's training loss (faint) and its moving average over `window` steps."""
    d = steps.assign(label=steps.run_id.map(labels))
    colours = _colours(d.label, d.framework)
    fig = go.Figure()
    for label, g in d.groupby("label", sort=True):
        c = colours[label]
        fig.add_trace(go.Scatter(x=g.step, y=g.loss, mode="lines", line=dict(color=c, width=1),
                                 opacity=0.35, showlegend=False, legendgroup=label,
                                 hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=g.step, y=g.loss.rolling(window, min_periods=1).mean(),
                                 mode="lines", name=label, line=dict(color=c, width=3),
                                 legendgroup=label,
                                 hovertemplate="step %{x}<br>loss %{y:.3f}<extra>" + label
                                 + "</extra>"))
    fig.update_layout(**_LAYOUT, title=f"Training loss per step (moving average of {window})")
    fig.update_xaxes(title="step")
    fig.update_yaxes(title="loss", rangemode="tozero")
    return fig


def load_bars(summary: pd.DataFrame, value: str = "ms_per_batch") -> go.Figure:
    """Grouped bars per batch size, one bar per implementation, one panel per
    (workers, threads): the seed's table as a chart."""
    d = summary.assign(group=[f"{w} workers · {t} threads"
                              for w, t in zip(summary.workers, summary.threads)])
    impls = sorted(d.implementation.unique())
    # Up to 13 implementations per format: a 24-colour palette keeps each one distinct.
    colours = {i: px.colors.qualitative.Dark24[n % 24] for n, i in enumerate(impls)}
    groups = sorted(d.group.unique())
    fig = go.Figure()
    for impl, g in d.groupby("implementation", sort=True):
        fig.add_trace(go.Bar(
            x=[g.group, g.batch_size.astype(str).radd("batch ")], y=g[value], name=impl,
            marker_color=colours[impl],
            hovertemplate="%{x}<br>%{y:,.2f}<extra>" + impl + "</extra>"))
    unit = {"ms_per_batch": "ms per batch (median)", "images_per_s": "images per second",
            "batches_per_s": "batches per second"}[value]
    fig.update_layout(**_LAYOUT, barmode="group",
                      title=f"Data loading: {unit}, by batch size within workers and threads")
    fig.update_xaxes(categoryorder="array", categoryarray=groups)
    fig.update_yaxes(title=unit, rangemode="tozero")
    return fig


def op_bars(ops: pd.DataFrame, top: int = 20) -> go.Figure:
    """Top operators by self time, largest on top."""
    d = ops.sort_values("self_ms", ascending=False).head(top).iloc[::-1]
    fig = go.Figure(go.Bar(
        x=d.self_ms, y=d.op, orientation="h", marker_color="#1f77b4",
        text=[f"{v:,.2f} ms" for v in d.self_ms], textposition="outside",
        customdata=d[["calls", "total_ms"]],
        hovertemplate="%{y}<br>self %{x:,.3f} ms<br>calls %{customdata[0]}<br>total "
                      "%{customdata[1]:,.3f} ms<extra></extra>"))
    layout = {**_LAYOUT, "height": max(420, 28 * len(d) + 140),
              "margin": dict(l=20, r=20, t=60, b=60)}
    fig.update_layout(**layout, title=f"Top {len(d)} operators by self time "
                                      "(over the profiled steps)", showlegend=False)
    fig.update_yaxes(automargin=True)
    # Room right of the longest bar for its label.
    fig.update_xaxes(title="self time [ms]", range=[0, float(d.self_ms.max()) * 1.35])
    return fig


def training_cost_bars(rows: list[dict]) -> go.Figure:
    """USD per 1 M training samples: one group of bars per training configuration, one
    bar per machine, coloured by provider; estimates hatched."""
    d = pd.DataFrame(rows)
    d["config"] = d.contender + " · b" + d.batch_size.astype(str)
    if d.model.nunique() > 1:
        d["config"] = d.model + " · " + d.config
    fig = go.Figure()
    memory = memory_note(rows)  # in the legend where the machines differ in memory
    for machine, g in d.groupby("machine", sort=False):
        provider = g.provider.iloc[0]
        fig.add_trace(go.Bar(
            x=g.config, y=g.cost_per_million, name=machine + memory.get(machine, ""),
            marker=dict(color=PROVIDER_COLOURS.get(provider, "#777777"),
                        pattern=dict(shape=["/" if e else "" for e in g.estimate])),
            # Three significant figures: training on small images costs cents per
            # million samples, where two decimals would round $0.028 and $0.034 alike.
            text=[f"${v:,.3g}" if v < 100 else f"${v:,.0f}" for v in g.cost_per_million],
            textposition="auto",
            customdata=g.assumption,
            hovertemplate=f"{machine}<br>%{{x}}<br>%{{y:$,.4f}}<br>%{{customdata}}"
                          "<extra></extra>"))
    fig.update_layout(**_LAYOUT, barmode="group",
                      title="Cost per 1 M training samples" +
                            (" (hatched: estimate)" if d.estimate.any() else ""))
    fig.update_yaxes(title="USD per 1 M training samples", rangemode="tozero")
    fig.update_xaxes(title="")
    return fig
