"""Results: every run, failed ones included; select one for its samples and provenance."""

import streamlit as st

from engine.present.charts import iteration_trace, sample_histogram
from engine.present.charts_workloads import op_bars
from engine.present.precision_text import with_vs_fp32
from engine.present.run_detail import (energy_text, failure_text, profile_caption,
                                       numerics_text, run_metrics, run_provenance,
                                       run_timings, run_title, stderr_tail,
                                       size_label, throughput_label, with_tokens)
from engine.scenarios import GENERATION, SCENARIOS
from engine.present.tables import interference_text, user_model_line
from dashboard.ceilings_panel import PEAK_COLUMNS, peak_columns
from dashboard.generation_view import generation_run_detail
from dashboard.link_state import PageLink
from engine.present.links import MAX_VALUE_LEN, looks_like_path, md_escape, note
from dashboard.session import read
from store.ingest import export_bytes
from store.queries import filter_options, results_table, run_detail
from store.precision import BASELINE, precision_vs_fp32
from store.runs import profile_ops, profile_trace, run_samples

st.title("Results")
link = PageLink("results")
options = read(filter_options)
linked = st.query_params.get("run")  # /results?run=<id>: a link to one run, for sharing
if linked and (len(linked) > MAX_VALUE_LEN or looks_like_path(linked)):
    link.notes.append(note("run", linked, f"a run id (at most {MAX_VALUE_LEN} characters, "
                                          "not a path)"))
    linked = None
if not options["model"]:
    st.info("No runs stored yet. Launch a sweep on the **Run** page (or "
            "`python -m engine run ...` in a terminal); every run, failed ones included, "
            "lands here.", icon=":material/info:")
    st.stop()

c0, c1, c2, c3 = st.columns(4)
for param, key, name in (("kind", "f_kind", "kind"), ("model", "f_model", "model"),
                         ("framework", "f_framework", "framework"),
                         ("status", "f_status", "status")):
    link.choices(param, key, options[name])
kinds = c0.multiselect("Kind", options["kind"], key="f_kind",
                       **link.initial("f_kind"), placeholder="all",
                       help="inference, train or dataload")
models = c1.multiselect("Model / format", options["model"], key="f_model",
                        **link.initial("f_model"), placeholder="all")
frameworks = c2.multiselect("Framework", options["framework"], key="f_framework",
                            **link.initial("f_framework"),
                            placeholder="all")
statuses = c3.multiselect("Status", options["status"], key="f_status",
                          **link.initial("f_status"), placeholder="all")
for param, value in (("kind", kinds), ("model", models), ("framework", frameworks),
                     ("status", statuses)):
    link.put(param, value)
table = read(results_table, models=models or None, frameworks=frameworks or None,
             statuses=statuses or None, kinds=kinds or None)
table = peak_columns(table)  # each run's GFLOP/s against its machine's measured peak
table = with_vs_fp32(table, read(precision_vs_fp32, models=models or None))
table = with_tokens(table)  # token models' tokens/s; no column without one
rate_name, rate_help = throughput_label(table)
st.caption(f"{len(table)} runs · click a column header to sort · select a row for details")
event = st.dataframe(
    table, key="results_table", on_select="rerun", selection_mode="multi-row",
    hide_index=True, width="stretch", height=380,
    column_order=["started_at", "kind", "model", "framework", "runtime", "precision",
                  "batch_size", "threads", "image_size", "round", "setting", "status",
                  "validity", "p50_ms", "vs_fp32", "p90_ms", "p99_ms", "p99_confidence",
                  "throughput", "tokens_per_s", "gflops_per_s", "pct_of_peak", "peak_rss_mib",
                  "model_peak_mib", "energy_j_per_sample", "energy_source", "reason"],
    column_config={
        **PEAK_COLUMNS,
        "started_at": st.column_config.DatetimeColumn("started (UTC)", format="YYYY-MM-DD HH:mm:ss"),
        "batch_size": st.column_config.NumberColumn("batch"),
        "image_size": st.column_config.NumberColumn(size_label(table)),
        "setting": st.column_config.TextColumn(
            "setting", width="medium",
            help="beside which of our neighbours it ran, and torch's wait policy when not the "
                 "default: empty for a quiet run with the defaults"),
        "p50_ms": st.column_config.NumberColumn("p50 [ms]", format="%.3f"),
        "vs_fp32": st.column_config.TextColumn(
            "vs fp32", width="medium",
            help=f"a bf16/int8 run: its speed-up, {BASELINE}; and the share of generated "
                 "inputs whose top-1 class agrees with the fp32 reference's"),
        "p90_ms": st.column_config.NumberColumn("p90 [ms]", format="%.3f"),
        "p99_ms": st.column_config.NumberColumn("p99 [ms]", format="%.3f"),
        "p99_confidence": st.column_config.TextColumn(
            "p99 confidence", help="low: from fewer than 100 samples, p99 is one of the two "
                                   "or three largest samples"),
        "throughput": st.column_config.NumberColumn(rate_name, format="%.1f", help=rate_help),
        "tokens_per_s": st.column_config.NumberColumn(
            "tokens/s", format="%.1f", help="a token model's sequences/s x its sequence "
                                            "length (the size column)"),
        "peak_rss_mib": st.column_config.NumberColumn(
            "process peak [MiB]", format="%.0f",
            help="the peak resident set of the process that ran the model: the worker with "
                 "Python, the framework and the reference; the LibTorch runner alone"),
        "model_peak_mib": st.column_config.NumberColumn(
            "added by the model [MiB]", format="%.1f",
            help="that peak less the same process's resident set before the model was built "
                 "(framework loaded) and less the eager reference kept for the output check: "
                 "comparable across runtimes"),
        "energy_j_per_sample": st.column_config.NumberColumn(
            "energy [J/sample]", format="%.4g",
            help="from a loop of its own after the timed one (run --energy)"),
        "energy_source": st.column_config.TextColumn(
            "energy source", width="medium",
            help="measured (RAPL): CPU package counters, the whole package; measured "
                 "(NVML): the GPU's; absent: why no counter was read. Never an estimate"),
    })
rows = list(event.selection.rows) if event is not None else []
chosen = table.iloc[rows] if rows else table
label = f"{len(rows)} selected runs" if rows else f"all {len(table)} runs shown"
d1, d2 = st.columns([2, 3])
if d1.button(f"Prepare download ({label})", key="prepare_download"):
    st.session_state["download"] = read(export_bytes, ("csv", "parquet"),
                                        chosen.run_id.tolist())
if "download" in st.session_state:
    files = st.session_state["download"]
    d2.download_button("CSV", files["csv"], "runs.csv", "text/csv", key="dl_csv")
    d2.download_button("Parquet", files["parquet"], "runs.parquet",
                       "application/octet-stream", key="dl_parquet")

if len(rows) == 1:
    run_id = table.iloc[rows[0]].run_id
elif linked:
    run_id = linked
else:
    run_id = None
link.put("run", run_id)
link.finish()
if run_id is None:
    st.caption("Select exactly one row to see its raw samples, iteration trace and "
               "provenance.")
    st.stop()
run = read(run_detail, run_id)
samples = read(run_samples, run_id)
ops = read(profile_ops, run_id)
trace = read(profile_trace, run_id) if not ops.empty else None
if run is None:
    st.warning(f"run: no stored run has id {run_id!r}; select one in the table instead.")
    st.stop()
st.caption(f"Link to this run: `?run={run_id}`")
st.subheader(run_title(run))
if run.get("model_format"):  # a user's model: exactly which bytes were measured
    st.caption(user_model_line(run, md_escape))
if failed := failure_text(run):
    st.error(failed)
    if tail := stderr_tail(run):
        st.code(tail, language="text")
if run["validity_reason"]:
    st.warning(f"validity **{run['validity']}**: {run['validity_reason']}")
if run["kind"] == GENERATION.kind:  # its figures and every token's time
    generation_run_detail(run)
if not samples.empty:
    metrics = run_metrics(run)  # a token model's adds tokens/s
    for col, (name, value, why) in zip(st.columns(len(metrics)), metrics):
        col.metric(name, value, help=why)
    seen = (run["extra"] or {}).get("interference")
    if seen:
        st.caption(interference_text(seen))
    for line in (energy_text(run), numerics_text(run)):  # issue 28, where recorded
        if line:
            st.caption(line)
    g1, g2 = st.columns(2)
    scenario = SCENARIOS[run["kind"]]  # a sample is a batch, or a training step
    g1.plotly_chart(sample_histogram(samples, scenario.sample_unit), key="hist")
    g2.plotly_chart(iteration_trace(samples, scenario.step_noun), key="trace")
if not ops.empty:
    st.subheader("Profile")
    st.caption(profile_caption(run, SCENARIOS[run["kind"]].step_noun))
    o1, o2 = st.columns([2, 3])
    o1.dataframe(ops, hide_index=True, width="stretch", height=560, column_config={
        "self_ms": st.column_config.NumberColumn("self [ms]", format="%.3f"),
        "total_ms": st.column_config.NumberColumn("total [ms]", format="%.3f")})
    o2.plotly_chart(op_bars(ops), key="ops")
    if trace:
        st.download_button(f"Chrome trace (.json.gz, {len(trace) / 1024:,.0f} KiB): open in "
                           "Perfetto or chrome://tracing", trace,
                           f"trace-{run_id[:8]}.json.gz", "application/gzip", key="dl_trace")
p1, p2 = st.columns(2)
p1.markdown("**Timings and model**")
p1.json(run_timings(run), expanded=True)
p2.markdown("**Provenance**")
p2.json(run_provenance(run), expanded=False)
