"""The Deploy page's stored serving runs: the table of LoadGen tests, and one test picked
(from the table or a link, ?run=<id prefix>): LoadGen's verdict with a reason per failed
rule, its figures, the latency distribution of every query, its percentiles, its summary
log shown and both logs to download. Streamlit glue; the sentences and the chart are
engine/present/serving_text.py's, the queries store/serving.py's and store/runs.py's."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.link_state import PageLink
from dashboard.session import read
from engine.scenarios.serving.spec import SCENARIO_PERCENTILE
from engine.present.serving_text import (failed_rule_reasons, headline, latency_distribution,
                                         loadgen_column, percentile_table, run_label,
                                         scenario_label, verdict_text)
from store.runs import loadgen_log, run_samples
from store.serving import loadgen_log_sizes

__all__ = ["runs_table", "run_picker", "run_detail", "LOGS"]

LOGS = {"mlperf_log_summary.txt": "summary", "mlperf_log_detail.txt": "detail"}


def runs_table(runs: pd.DataFrame) -> None:
    shown = runs.assign(loadgen=loadgen_column(runs),
                        scenario=runs.scenario.map(scenario_label))
    st.dataframe(shown, hide_index=True, width="stretch", key="sv_runs_table",
                 column_order=["started_at", "scenario", "model", "framework", "runtime",
                               "intra_threads", "replicas", "batch_size", "loadgen",
                               "throughput",
                               "p90_ms", "p99_ms", "iterations", "status"],
                 column_config={
                     "started_at": st.column_config.DatetimeColumn("started"),
                     "intra_threads": st.column_config.NumberColumn("threads"),
                     "batch_size": st.column_config.NumberColumn("max batch"),
                     "loadgen": st.column_config.TextColumn("LoadGen"),
                     "throughput": st.column_config.NumberColumn("samples/s", format="%.1f"),
                     "p90_ms": st.column_config.NumberColumn("p90 [ms]", format="%.3f"),
                     "p99_ms": st.column_config.NumberColumn("p99 [ms]", format="%.3f"),
                     "iterations": st.column_config.NumberColumn("latencies")})


def run_picker(link: PageLink, runs: pd.DataFrame):
    """The test shown (newest first; a link's ?run= by id or unique prefix): its row."""
    ids = runs.run_id.tolist()
    labels = {r.run_id: run_label(r) for r in runs.itertuples()}
    link.choice("run", "sv_run", ids, prefix_ok=True)
    run_id = st.selectbox("Test", ids, key="sv_run", format_func=labels.get,
                          **link.initial("sv_run"))
    link.put("run", run_id)
    return next(runs[runs.run_id == run_id].itertuples())


def run_detail(row) -> None:
    valid, text = verdict_text(row)
    reasons = failed_rule_reasons(row)
    body = text + ("\n\n" + "\n".join(f"- {line}" for line in reasons) if reasons else "")
    if valid:
        st.success(body, icon=":material/check_circle:")
    else:
        st.error(body, icon=":material/cancel:")
    metrics = headline(row)
    for col, (label, value, why) in zip(st.columns(max(len(metrics), 1)), metrics):
        col.metric(label, value, help=why)
    asked = [f"scenario {scenario_label(row.scenario)}", f"max batch {row.batch_size}"]
    for name, value, unit in (("bound", row.bound_ms, " ms"), ("target", row.target_qps, " QPS"),
                              ("max wait", row.max_wait_ms, " ms"),
                              ("min duration", row.min_duration_s, " s")):
        if value is not None and value == value:
            asked.append(f"{name} {value:g}{unit}")
    if row.preset:
        asked.append(f"preset {row.preset}")
    st.caption("Asked for: " + ", ".join(asked) + ".")
    if row.summary is None:
        return
    samples = read(run_samples, row.run_id)
    measured = samples[samples.phase == "measure"].latency_ns
    c1, c2 = st.columns([3, 1])
    c1.plotly_chart(latency_distribution(
        measured, title=f"{scenario_label(row.scenario)} latency per query",
        percentile=SCENARIO_PERCENTILE.get(row.scenario),
        bound_ms=row.bound_ms if row.bound_ms == row.bound_ms else None), key="sv_latency")
    c1.caption("Each query's latency as the system under test timed it (from LoadGen's "
               "IssueQuery call to its answer; Offline: each sample of its one query). "
               "LoadGen's own percentiles, beside it, count from each query's scheduled "
               "issue time.")
    c2.dataframe(percentile_table(row.summary), hide_index=True, key="sv_percentiles",
                 column_config={"ms": st.column_config.NumberColumn("LoadGen [ms]",
                                                                    format="%.4f")})
    _logs(row.run_id)


def _logs(run_id: str) -> None:
    sizes = read(loadgen_log_sizes, run_id)
    if not sizes:
        return
    summary = read(loadgen_log, run_id, "mlperf_log_summary.txt")
    if summary:
        with st.expander("LoadGen's summary log (mlperf_log_summary.txt)"):
            st.code(summary, language=None)
    cols = st.columns(len(LOGS))
    for col, (name, what) in zip(cols, LOGS.items()):
        if name in sizes:
            col.download_button(f"Download the {what} log ({sizes[name] / 1024:,.1f} KiB)",
                                read(loadgen_log, run_id, name) or "",
                                f"{run_id[:8]}-{name}", "text/plain", key=f"sv_dl_{what}")
