"""What the Deploy page shows of its searches (issue 27): the max-QPS search's probes as a
table and its cost at the bound as rows labelled measured or estimate, and the autotuner's
Pareto front as a table and a chart (p99 against QPS, cost as colour). Pure: searches and
figures in (engine.run.search.max_qps's QpsSearch, engine.run.search.autotune's Tuning,
engine.analysis.serving_cost's ServingCost), DataFrames and figures out."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from engine.core.early_stopping import held_text, probe_counts

__all__ = ["probe_frame", "query_count_note", "PROBE_COLUMNS", "cost_frame", "lower_bound_note",
           "front_points",
           "front_frame", "pareto_figure", "fleet_frame", "models_frame", "pruned_frame"]


# Who counted what: LoadGen counts a query over the bound from its scheduled issue time
# (its detail log's result_overlatency_query_count), as its early stopping judges it.
OVER_COLUMN = "over the bound (LoadGen's count)"
ALLOWED_COLUMN = "allowed over (early stopping)"
PROBE_COLUMNS = ["target QPS", "status", "LoadGen", "failed rules", "completed samples/s",
                 "p99 ms", "queries", OVER_COLUMN, ALLOWED_COLUMN, "held to", "max"]


def probe_frame(search, p99_ms) -> pd.DataFrame:
    """One row per probe, in probe order: target, status, LoadGen's verdict and failed rules,
    completed samples/s, the p99 LoadGen judged, the queries it ran, how many LoadGen
    counted over the bound, how many its early stopping allowed and the percentile that
    holds the bound to ('max' where none may be over), and the max marked."""
    rows = []
    for q, rec in search.probes:
        s = rec.serving or {}
        n, over, allowed = probe_counts(s)
        rows.append({"target QPS": q, "status": rec.status, "LoadGen": s.get("result") or "",
                     "failed rules": ", ".join(r.lower() for r in s.get("failed_rules") or ()),
                     "completed samples/s": (s.get("figures") or {}).get(
                         "completed_samples_per_s"),
                     "p99 ms": p99_ms(rec), "queries": n, OVER_COLUMN: over,
                     ALLOWED_COLUMN: allowed, "held to": held_text(n),
                     "max": "max" if search.best is not None and rec is search.best else ""})
    return pd.DataFrame(rows, columns=PROBE_COLUMNS)


def query_count_note(search) -> str | None:
    """What a reader must know of a search's query counts: None when every probe ran the
    count it fixed; else that its probes ran varying counts (stored before a search fixed
    one) and so were held to varying percentiles, or that a probe's count differs."""
    counts = [n for n in (probe_counts(rec.serving)[0] for _, rec in search.probes) if n]
    if search.query_count is not None and all(n == search.query_count for n in counts):
        return None
    if not counts:
        return ("Its probes' query counts were not stored: how strict early stopping was "
                "cannot be told.")
    lo, hi = min(counts), max(counts)
    what = ("This search was stored before a search fixed its query count" if
            search.query_count is None else
            f"Some probes did not run the search's {search.query_count:,} queries")
    if lo == hi:
        return f"{what}; its probes each ran {lo:,} queries, held to {held_text(lo)}."
    return (f"{what}: its probes ran {lo:,} to {hi:,} queries, held from {held_text(lo)} to "
            f"{held_text(hi)} by early stopping: a probe of more queries (a faster rate, "
            "under a fixed duration) was held to a looser percentile.")


def _basis(fig) -> str:
    return ("estimate: " + fig.assumption.removeprefix("estimate: ") if fig.estimate
            else "measured")


LOWER_BOUND = "the max QPS is a lower bound"


def lower_bound_note(per_million: float | None) -> str:
    """What a cost from a max QPS that is a lower bound (VALID at the highest target its
    search tests) is: 'at most $0.0123 per 1 M: the max QPS is a lower bound'."""
    if per_million is None:
        return ""
    return f"at most ${per_million:.3g} per 1 M: {LOWER_BOUND}"


def cost_frame(c, bound_ms: float, lower_bound: bool = False) -> pd.DataFrame:
    """Within the bound and flat out: samples/s a machine, USD per 1 M, and for the target
    rate the machines and the monthly bill; each row says measured or estimate and why.
    lower_bound: the max QPS is at least its figure, so the row within the bound is at most
    its cost, machines and bill (its `figure` says so beside them)."""
    rows = [{"": f"within p99 {bound_ms:g} ms", "samples/s a machine": c.at_bound.throughput,
             "USD per 1 M": c.per_million_at_bound,
             "figure": lower_bound_note(c.per_million_at_bound) if lower_bound else "",
             "machines": c.machines, "USD a month": c.monthly, "basis": _basis(c.at_bound)}]
    if c.flat_out is not None:
        rows.append({"": "flat out (no bound)", "samples/s a machine": c.flat_out.throughput,
                     "USD per 1 M": c.per_million_flat_out, "figure": "",
                     "machines": c.machines_flat_out, "USD a month": c.monthly_flat_out,
                     "basis": _basis(c.flat_out)})
    df = pd.DataFrame(rows)
    return df if lower_bound else df.drop(columns="figure")


def front_points(t) -> list[tuple[str, float, float | None, float | None, str]]:
    """The Pareto front as (configuration, max QPS, p99 ms, USD per 1 M or None, role), role
    'winner', 'default' or ''."""
    return [(x.candidate.label(), x.qps, x.p99_ms, x.cost,
             "winner" if x is t.winner else "default" if x is t.default else "")
            for x in t.front]


def front_frame(t) -> pd.DataFrame:
    """The front's table, each cost with its basis: measured on the shape's whole machine,
    or the estimate's assumption."""
    df = pd.DataFrame(front_points(t), columns=["configuration", "max QPS", "p99 ms",
                                                "USD per 1 M", "role"])
    df["cost basis"] = [_cost_basis(x) for x in t.front]
    return df


def _capped(x) -> bool:
    """A confirmation VALID at the highest target its search tests: its max is a lower
    bound, so its cost per 1 M is an upper bound."""
    return x.search is not None and getattr(x.search, "capped", False)


def _cost_basis(x) -> str:
    """A confirmation's cost basis: measured on the shape, or the estimate's assumption; an
    upper bound said first."""
    if x.cost is None:
        return ""
    basis = x.cost_note or "measured on the shape"
    return f"{lower_bound_note(x.cost)}; {basis}" if _capped(x) else basis


def pruned_frame(t) -> pd.DataFrame:
    return pd.DataFrame([(c.label(), why) for c, why in t.pruned],
                        columns=["configuration", "why pruned"])


def pareto_figure(t, *, shape: str | None = None) -> go.Figure:
    """Every confirmed configuration's p99 against its max QPS (grey), the front over them
    (a line, cost as colour where priced), the winner and the default named, the bound
    drawn."""
    fig = go.Figure()
    measured = [x for x in (*t.confirmed, t.default) if x.qps is not None]
    fig.add_trace(go.Scatter(x=[x.qps for x in measured], y=[x.p99_ms for x in measured],
                             mode="markers", name="confirmed", marker={"color": "lightgrey",
                                                                       "size": 9},
                             text=[x.candidate.label() for x in measured],
                             hovertemplate="%{text}<br>%{x:,.1f} QPS, p99 %{y:.3f} ms"
                                           "<extra></extra>"))
    pts = sorted(front_points(t), key=lambda p: p[1])
    costs = [p[3] for p in pts]
    priced = all(c is not None for c in costs) and bool(costs)
    marker = {"size": 13}
    if priced:
        marker.update(color=costs, colorscale="Viridis", showscale=True,
                      colorbar={"title": f"USD per 1 M{f' ({shape})' if shape else ''}"})
    fig.add_trace(go.Scatter(x=[p[1] for p in pts], y=[p[2] for p in pts],
                             mode="lines+markers+text", name="Pareto front", marker=marker,
                             text=[p[4] for p in pts], textposition="top center",
                             customdata=[p[0] for p in pts],
                             hovertemplate="%{customdata}<br>%{x:,.1f} QPS, p99 %{y:.3f} ms"
                                           "<extra></extra>"))
    fig.add_hline(y=t.bound_ms, line_dash="dash", annotation_text=f"bound {t.bound_ms:g} ms")
    fig.update_layout(title="Pareto front: p99 low, QPS high" + (", cost low" if priced
                                                                 else ""),
                      xaxis_title="max QPS under the bound", yaxis_title="p99 [ms]",
                      height=420, margin={"t": 50, "b": 40})
    return fig


def _winner_cells(t) -> tuple:
    """A tuning's winner as a side-by-side row ends: its label, max QPS and p99 under the
    bound, cost per 1 M and its basis (t None: not tuned)."""
    w = t.winner if t is not None else None
    if w is None:
        return ("none met it", None, None, None, "")
    return (w.candidate.label(), w.qps, w.p99_ms, w.cost, _cost_basis(w))


_WINNER_COLUMNS = ["winner", "max QPS", "p99 ms", "USD per 1 M", "cost basis"]


def models_frame(rows) -> pd.DataFrame:
    """One launch's models side by side: (model, node shape or None, Tuning) each; the node
    kind column only for a launch tuned across a fleet."""
    df = pd.DataFrame([(model, node or "", *_winner_cells(t)) for model, node, t in rows],
                      columns=["model", "node kind", *_WINNER_COLUMNS])
    return df if any(node for _, node, _ in rows) else df.drop(columns="node kind")


def fleet_frame(results) -> pd.DataFrame:
    """A fleet tuning's node kinds side by side (engine.run.search.fleet_tune.NodeTuning each):
    the shape, the cores its candidates fit, its winner, max QPS and p99 under the bound,
    the cost per 1 M on that shape and its basis."""
    return pd.DataFrame([(r.shape or r.label, r.cores, *_winner_cells(r.tuning))
                         for r in results], columns=["shape", "cores", *_WINNER_COLUMNS])
