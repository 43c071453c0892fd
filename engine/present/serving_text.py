"""What the Deploy page says about serving runs (MLPerf LoadGen tests, issue 27): the plan
of a launch, each stored test's label, LoadGen's verdict with a reason per failed rule, the
headline figures and percentiles, and the latency distribution of the raw per-query
samples. Built from store/serving.py's frames and LoadGen's parsed summary
(engine.scenarios.serving.loadgen.parse_summary); no Streamlit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from engine.core.early_stopping import held_text, probe_counts
from engine.scenarios.serving.spec import LOADGEN_SCENARIO, SCENARIO_PERCENTILE, early_stopping_note

__all__ = ["SCENARIO_HELP", "scenario_label", "serve_plan", "run_label", "verdict_text",
           "failed_rule_reasons", "headline", "percentile_table", "latency_distribution",
           "loadgen_column"]

SCENARIO_HELP = {
    "single-stream": "one sample a query, the next sent when the last is answered; judged "
                     "on p90 (the bound is reported against it)",
    "multi-stream": "8 samples a query, one model call of batch 8; judged on p99",
    "server": "Poisson arrivals at the target QPS, judged on p99 under the bound; a dynamic "
              "batcher sends queued queries in batches of at most max batch, waiting at "
              "most max wait",
    "offline": "every sample in one query, run in batches of max batch; samples/s",
}
HISTOGRAM_BINS = 60
TAIL_PERCENTILE = 99.9  # the chart's x axis ends here; the queries beyond are counted


def scenario_label(name: str) -> str:
    """'server' -> 'Server' (LoadGen's name)."""
    return LOADGEN_SCENARIO.get(name, name)


def serve_plan(request, specs: list) -> str:
    """What Launch will run: the test, what it is judged on, and its minimum duration."""
    spec = specs[0]
    threads = f"{spec.intra_threads} thread(s)"
    if spec.replicas > 1:
        threads = (f"{spec.replicas} replicas of {threads} each, on cores of their own, "
                   "behind one queue")
    parts = [f"**LoadGen {scenario_label(spec.scenario)} test** of {spec.model} "
             f"({spec.framework}, {spec.runtime}), {threads}"]
    if spec.scenario == "server":
        parts.append(f"Poisson arrivals at {spec.target_qps:g} QPS, p99 bound "
                     f"{spec.bound_ms:g} ms, batches of at most {spec.batch_size} waiting at "
                     f"most {spec.max_wait_ms:g} ms")
    elif spec.scenario == "single-stream" and spec.bound_ms:
        parts.append(f"p90 reported against {spec.bound_ms:g} ms")
    elif spec.scenario == "offline":
        parts.append(f"batches of {spec.batch_size}")
    preset = " (MLPerf's official minimum)" if spec.official else ""
    parts.append(f"at least {spec.min_duration_s:g} s{preset} and {spec.min_query_count} "
                 "queries, plus the model's load and warm-up")
    note = early_stopping_note(spec.scenario, spec.min_query_count)
    return "; ".join(parts) + "." + (f" Note: {note}." if note else "")


def run_label(row) -> str:
    """A stored test as the run picker names it."""
    when = pd.Timestamp(row.started_at).strftime("%Y-%m-%d %H:%M:%S")
    result = (row.summary or {}).get("result") or row.status
    replicas = getattr(row, "replicas", 1) or 1
    return (f"{when} · {scenario_label(row.scenario)} · {row.model} {row.framework} "
            f"({row.runtime}) t{row.intra_threads}{f' x{replicas}' if replicas > 1 else ''}"
            f" · {result}")


def loadgen_column(runs: pd.DataFrame) -> pd.Series:
    """LoadGen's word per run for the table: VALID, INVALID, or the run's status when the
    test never gave one (error, timeout, ...)."""
    return pd.Series([(s or {}).get("result") or status
                      for s, status in zip(runs["summary"], runs["status"])],
                     index=runs.index)


def verdict_text(row) -> tuple[bool, str]:
    """(valid, the sentence): LoadGen's VALID/INVALID, or why the test gave no result."""
    s = row.summary or {}
    result = s.get("result")
    if result == "VALID":
        return True, "LoadGen: **VALID** - every rule of the test is satisfied."
    if result:
        return False, f"LoadGen: **{result}** - the figures below cannot be claimed."
    return False, f"No LoadGen result: the run ended **{row.status}** - {row.reason}"


def _ms(ns) -> str:
    """A latency as people read it: µs under a millisecond, else ms."""
    ms = ns / 1e6
    return f"{ms * 1000:,.1f} µs" if ms < 1 else f"{ms:,.2f} ms"


def failed_rule_reasons(row) -> list[str]:
    """A line per rule LoadGen failed (as its summary names it), with the reason in our
    words from the run's own figures, then LoadGen's recommendations and its early-stopping
    lines when that rule failed."""
    s = row.summary or {}
    figures, pcts = s.get("figures", {}), s.get("percentiles_ns", {})
    pct = SCENARIO_PERCENTILE.get(row.scenario)
    judged = pcts.get(f"{pct:g}") if pct is not None else None
    lines = []
    for rule in s.get("failed_rules", []):
        if rule == "Min duration":
            why = (f"the test ran shorter than its minimum duration "
                   f"({(row.min_duration_s or 0):g} s)"
                   + (": the one query was sized on too low a target QPS"
                      if row.scenario == "offline" else ""))
        elif rule == "Min queries":
            why = f"fewer queries than its minimum ({row.min_query_count})"
        elif rule == "Performance constraints":
            bound = figures.get("target_latency_ns")
            why = (f"the p{pct:g} latency ({_ms(judged)}) is over the bound "
                   f"({_ms(bound)}): the system cannot answer {figures.get('target_qps', 0):g}"
                   " QPS within it" if judged is not None and bound else
                   "the latency constraint of the scenario is not met")
        elif rule == "Early stopping":
            why = ("too few queries within the bound for LoadGen to claim the percentile "
                   "with confidence")
            n, over, allowed = probe_counts(s)
            if over is not None and allowed is not None:
                why += f": {over:,} of {n:,} over the bound, {allowed:,} allowed"
            if s.get("early_stopping_lines"):
                why += " (" + "; ".join(x.rstrip(".") for x in s["early_stopping_lines"]) + ")"
        else:
            why = "not satisfied"
        lines.append(f"**{rule}** not satisfied: {why}.")
    lines += [f"LoadGen recommends: {r.rstrip('.')}." for r in s.get("recommendations", [])]
    return lines


def headline(row) -> list[tuple[str, str, str]]:
    """(label, value, help) for the metrics row: throughput as LoadGen reports it for the
    scenario, the judged percentile against the bound, the early-stopping estimate and the
    query count."""
    s = row.summary or {}
    figures, pcts, early = s.get("figures", {}), s.get("percentiles_ns", {}), \
        s.get("early_stopping", {})
    out = []
    if row.scenario == "server":
        out.append(("samples/s", f"{figures.get('completed_samples_per_s', 0):,.1f}",
                    f"completed samples per second at a target of "
                    f"{figures.get('target_qps', 0):g} QPS (scheduled: "
                    f"{figures.get('scheduled_samples_per_s', 0):,.1f})"))
    elif row.scenario == "offline":
        out.append(("samples/s", f"{figures.get('samples_per_s', 0):,.1f}",
                    "samples per second over the one query"))
    elif "qps_with_loadgen_overhead" in figures:
        out.append(("QPS", f"{figures['qps_with_loadgen_overhead']:,.1f}",
                    f"with LoadGen's overhead; without it "
                    f"{figures.get('qps_without_loadgen_overhead', 0):,.1f}"))
    pct = SCENARIO_PERCENTILE.get(row.scenario)
    if pct is not None and f"{pct:g}" in pcts:
        bound = (figures.get("target_latency_ns") or 0) / 1e6 or row.bound_ms
        note = "LoadGen's judged percentile"
        if bound and bound == bound:
            within = pcts[f"{pct:g}"] / 1e6 <= bound
            note += f"; {'within' if within else 'over'} the {bound:g} ms bound"
        out.append((f"p{pct:g} latency", _ms(pcts[f"{pct:g}"]), note))
    if pct is not None and f"{pct:g}" in early:
        out.append((f"early-stopping p{pct:g}", _ms(early[f"{pct:g}"]),
                    "LoadGen's estimate of the percentile that the number of queries run "
                    "supports with confidence"))
    if s.get("query_count") is not None:
        out.append(("queries", f"{s['query_count']:,}",
                    f"{s.get('samples_per_query') or 1} sample(s) a query"))
    n, over, allowed = probe_counts(s)
    if row.scenario == "server" and over is not None:  # kept since the max-QPS fix
        out.append(("over the bound", f"{over:,} of {n:,}",
                    f"LoadGen's count (latency from each query's scheduled issue); its early "
                    f"stopping allows {'none' if allowed is None else f'{allowed:,}'} of "
                    f"{n:,} ({held_text(n)})"))
    return out


def percentile_table(summary: dict | None) -> pd.DataFrame:
    """LoadGen's latency percentiles (and min, mean, max) in ms."""
    s = summary or {}
    figures = s.get("figures", {})
    rows = [(f"p{k}", v / 1e6) for k, v in sorted(s.get("percentiles_ns", {}).items(),
                                                     key=lambda kv: float(kv[0]))]
    rows += [(name, figures[key] / 1e6) for name, key in (
        ("min", "min_latency_ns"), ("mean", "mean_latency_ns"), ("max", "max_latency_ns"))
        if key in figures]
    return pd.DataFrame(rows, columns=["latency", "ms"])


def latency_distribution(samples_ns, *, title: str, percentile: float | None = None,
                         bound_ms: float | None = None) -> go.Figure:
    """A histogram of every query's latency (the raw samples, ms), up to the p99.9 (the
    queries beyond are counted in the title), with p50, the judged percentile and the bound
    marked."""
    ms = np.asarray(samples_ns, dtype=float) / 1e6
    fig = go.Figure()
    if ms.size == 0:
        fig.update_layout(title=f"{title}: no per-query latency stored")
        return fig
    hi = float(np.percentile(ms, TAIL_PERCENTILE))
    if bound_ms and bound_ms <= 2 * hi:
        hi = max(hi, bound_ms)
    lo = float(ms.min())
    counts, edges = np.histogram(ms, bins=HISTOGRAM_BINS, range=(lo, hi if hi > lo else lo + 1e-6))
    centres = (edges[:-1] + edges[1:]) / 2
    fig.add_bar(x=centres, y=counts, width=np.diff(edges), name="queries",
                marker_color="#4c78a8", hovertemplate="%{x:.4f} ms: %{y} queries<extra></extra>")
    beyond = int((ms > hi).sum())
    marks = [("p50", float(np.percentile(ms, 50)), "#555")]
    if percentile is not None and percentile != 50:
        marks.append((f"p{percentile:g}", float(np.percentile(ms, percentile)), "#e45756"))
    if bound_ms and bound_ms <= hi:
        marks.append(("bound", bound_ms, "#000"))
    for name, x, colour in marks:
        fig.add_vline(x=x, line_dash="dash", line_color=colour,
                      annotation_text=f"{name} {x:.3f} ms", annotation_position="top")
    tail = (f" · {beyond} queries beyond p{TAIL_PERCENTILE:g} not drawn (max {ms.max():.3f} ms)"
            if beyond else "")
    off = (f" · bound {bound_ms:g} ms off the chart" if bound_ms and bound_ms > hi else "")
    fig.update_layout(title=f"{title}: {ms.size:,} queries{tail}{off}",
                      xaxis_title="latency per query [ms]", yaxis_title="queries",
                      bargap=0, showlegend=False, height=380,
                      margin=dict(l=40, r=20, t=70, b=40))
    return fig
