"""Compare: frameworks side by side for one or more models, on round-aggregated figures."""

import streamlit as st

from engine.present.charts import (latency_box, latency_vs_batch, scaling_vs_threads,
                                   speedup_heatmap, throughput_vs_batch)
from engine.present.frames import (compare_frame, highlight_cells, raw_frame, setting_choices,
                                   token_frames)
from dashboard.ceilings_panel import compare_ceilings
from dashboard.generation_view import compare_generation, work_switch
from engine.present.precision_text import ERROR_NOTE, precision_table
from dashboard.link_state import PageLink
from engine.present.links import encode_setting
from engine.present.tables import (FIGURES_NOTE, architecture_notes, contention_lines,
                                   noise_lines, round_sweep_labels, row_text, rule_line,
                                   sentence)
from engine.scenarios import INFERENCE
from dashboard.report_panel import report_section
from store.states import group_names
from dashboard.session import read
from store.queries import (comparable_models, config_samples, config_summary, filter_options,
                           runtime_costs, settings)
from store.precision import BASELINE, precision_vs_fp32
from store.runs import list_sweeps
from store.verdicts import sweep_verdicts

st.title("Compare frameworks")
link = PageLink("compare")
options = read(filter_options, kind=INFERENCE.kind)
if work_switch(link, "ok" in options["status"]):  # a generation sweep's own view
    compare_generation(link)
    st.stop()
sweeps = read(list_sweeps, with_runs_only=True, kind=INFERENCE.kind)
if "ok" not in options["status"]:
    st.info("Nothing to compare yet: a comparison needs successful runs of at least one "
            "model. Launch a sweep on the **Run** page with two frameworks, then come back.",
            icon=":material/info:")
    st.stop()

sweep_labels = round_sweep_labels(sweeps, "all stored runs of one setting (no significance "
                                          "test)")
c1, c2 = st.columns([2, 3])
# ?sweep=all: every stored run of one setting; otherwise a sweep id or a unique prefix of one.
link.choice("sweep", "sweep", list(sweep_labels), encode=lambda s: s or "all", prefix_ok=True)
sweep_id = c1.selectbox("Runs", list(sweep_labels), format_func=sweep_labels.get, key="sweep",
                        **link.initial("sweep", index=1 if len(sweep_labels) > 1 else 0))
usable_models = read(comparable_models, sweep_id)
link.choices("models", "models", usable_models)
models = c2.multiselect("Models", usable_models, key="models",
                        **link.initial("models", default=usable_models[:1]))
link.put("sweep", sweep_id or "all")
link.put("models", models)
if not models:
    link.finish()
    st.info("Pick at least one model.")
    st.stop()
choices, setting_labels = setting_choices(read(settings, INFERENCE.kind, sweep_id))
link.choice("setting", "setting", choices, encode=encode_setting)
setting = st.selectbox("Setting (device · precision · inter-op threads · machine)", choices,
                       format_func=setting_labels.get, key="setting", **link.initial("setting"),
                       help="figures never blend settings: runs on another device, precision, "
                            "inter-op thread count or machine are a different setting")
summary = read(config_summary, models, sweep_id, setting)

threads_all = sorted(summary.threads.unique())
batches_all = sorted(summary.batch_size.unique())
k1, k2, k3 = st.columns(3)
link.choice("threads", "threads", threads_all)
link.choice("batch", "batch", batches_all)
link.choice("band", "band", ["p10-p90", "IQR (p25-p75)"], encode=lambda b: b.split(" ")[0])
threads = k1.selectbox("Threads (for the batch charts)", threads_all, key="threads",
                       **link.initial("threads", index=len(threads_all) - 1))
batch = k2.selectbox("Batch size (for threads and distributions)", batches_all, key="batch",
                     **link.initial("batch"))
band = k3.radio("Latency band", ["p10-p90", "IQR (p25-p75)"], horizontal=True, key="band",
                **link.initial("band"))
link.put("setting", setting, encode_setting)
link.put("threads", threads)
link.put("batch", batch)
link.put("band", band.split(" ")[0])
band_cols = ("p10_ms", "p90_ms") if band == "p10-p90" else ("q1_ms", "q3_ms")

st.subheader("Comparison table")
if sweep_id:
    # Verdicts and noise come from the whole sweep (each contest on its own rounds), so the
    # model filter changes which rows show, never what they say.
    verdict = read(sweep_verdicts, sweep_id)
    df, best_cells, rounds, rows = compare_frame(verdict, models=models)
    st.dataframe(highlight_cells(df, best_cells), hide_index=True, width="stretch",
                 key="compare_table")
    st.caption(f"median latency per batch [ms] over up to {rounds} rounds: {FIGURES_NOTE}. "
               "★ best in row · ≈ no decision against the best · = equivalent to the best "
               "within the margin · ? noisy: rounds disagree by over 10 % or a round's "
               "IQR/median or tail was high; noisy rounds are kept · (n status) rounds that "
               "broke a rule or failed, left out. Undecided contests got extra rounds up to "
               "the sweep's budget.")
    # a token model's throughput, as sequences/s and tokens/s, beside its latency
    token_tables = token_frames(verdict, models=models)
    for n, (title, tdf, tbest) in enumerate(token_tables):
        st.markdown(f"**{title[0].upper()}{title[1:]}**")
        st.dataframe(highlight_cells(tdf, tbest), hide_index=True, width="stretch",
                     key=f"token_table_{n}")
    if token_tables:
        st.caption("Drift-adjusted as the latency's figures, with the latency's marks (★ its "
                   "best); a token model's sample is one sequence.")
    with st.expander("Raw figures: each configuration over its own rounds"):
        st.dataframe(raw_frame(rows), hide_index=True, key="raw_rounds")
        st.caption("Geometric mean of each configuration's own round medians and every "
                   "round's median, as measured: decided contenders stop running, so these "
                   "carry the drift of the rounds each ran.")
    for contest in rows:
        for said in contest.sentences:
            st.markdown(f"- {row_text(contest.row)}: {said}")
    if any(c.comparisons for c in rows):
        st.caption(sentence(rule_line(verdict.rule)))
    for model, note in architecture_notes(verdict.results_for(models)):
        st.caption(f"**{model}** across frameworks: {note}")
    noise = verdict.noise
    if noise:
        f1, f2 = st.columns(2)
        f1.metric("measurement noise (what pairing leaves)", f"±{noise.residual_pct:.1f} %",
                  help="the residual of a two-way model on log round medians (configuration "
                       "+ round): the noise a verdict must beat, one standard deviation per "
                       f"configuration and round ({noise.df} degrees of freedom)")
        f2.metric("machine drift between rounds", f"{noise.drift_pct:.1f} %",
                  help="how far the slowest round's shared effect lies from the fastest "
                       "round's: every configuration of a round moved alike, and pairing "
                       "rounds cancels it")
        for line in noise_lines(verdict):
            st.caption(line)
    shared = contention_lines(verdict)
    if shared:  # a sweep with --contention: what a neighbour costs each contender
        st.subheader("Shared versus dedicated")
        st.caption(sentence(shared[0]))
        for line in shared[1:]:
            st.markdown(f"- {line.strip()}")
    # a report for someone without the dashboard, with a group's board if asked
    report_section(sweep_id, groups=read(group_names))
else:
    st.caption("Pick a sweep above to see the round-aggregated table with significance tests.")

g1, g2 = st.columns(2)
g1.plotly_chart(latency_vs_batch(summary, threads, band_cols), key="latency_vs_batch")
g2.plotly_chart(throughput_vs_batch(summary, threads), key="throughput_vs_batch")
g3, g4 = st.columns(2)
fig, eff = scaling_vs_threads(summary, batch)
g3.plotly_chart(fig, key="scaling")
with g4:
    link.choice("dist", "dist_kind", ["box", "violin"])
    shape = st.radio("Distribution", ["box", "violin"], horizontal=True, key="dist_kind",
                     **link.initial("dist_kind"))
    link.put("dist", shape)
    samples = read(config_samples, models, int(batch), int(threads), sweep_id,
                   setting=setting)
    if samples.empty:
        st.caption(f"No successful runs at batch {batch} with {threads} threads.")
    else:
        st.plotly_chart(latency_box(samples, shape), key="distribution")
if not eff.empty:
    st.dataframe(eff, hide_index=True, key="efficiency", column_config={
        "scaling efficiency": st.column_config.NumberColumn(format="percent"),
        **{c: st.column_config.NumberColumn(format="%.1f") for c in eff.columns
           if c.startswith("throughput")}})

contenders = sorted(summary.contender.unique())
if len(contenders) >= 2:
    h1, h2, h3 = st.columns(3)
    link.choice("a", "heat_a", contenders)
    link.choice("b", "heat_b", contenders)
    link.choice("heat_model", "heat_model", models)
    a = h1.selectbox("A", contenders, key="heat_a", **link.initial("heat_a", index=0))
    b = h2.selectbox("B", contenders, key="heat_b", **link.initial("heat_b", index=1))
    m = h3.selectbox("Model", models, key="heat_model", **link.initial("heat_model"))
    link.put("a", a)
    link.put("b", b)
    link.put("heat_model", m)
    heat = speedup_heatmap(summary, m, a, b) if a != b else None
    if heat is not None:
        st.plotly_chart(heat, key="heatmap")
    else:
        st.caption("Pick two different contenders that share configurations.")

reduced = precision_table(read(precision_vs_fp32, models=models, sweep_id=sweep_id))
if not reduced.empty:
    st.subheader("Reduced precision against fp32")
    st.caption(f"Speed-up: {BASELINE}. {ERROR_NOTE}")
    st.dataframe(reduced, hide_index=True, key="precision_table", column_config={
        "p50_ms": st.column_config.NumberColumn("p50 [ms]", format="%.3f"),
        "fp32_p50_ms": st.column_config.NumberColumn("fp32 p50 [ms]", format="%.3f"),
        "vs_fp32": st.column_config.TextColumn("vs fp32", width="large"),
        "output_max_rel": st.column_config.NumberColumn("max rel error", format="%.2e"),
        "output_max_abs": st.column_config.NumberColumn("max abs error", format="%.3g"),
        "top1_agreement": st.column_config.NumberColumn("top-1 agreement", format="%.3f")})

st.subheader("One-time costs next to steady state")
costs = read(runtime_costs, models, sweep_id, setting)
costs = costs[(costs.threads == threads)]
st.caption("What a runtime costs before its first useful answer (model build, trace / export "
           "/ compile, first forward, in seconds) against what it saves per call (p50). "
           "Medians over the successful runs shown.")
st.dataframe(costs, hide_index=True, key="runtime_costs", column_config={
    "build_s": st.column_config.NumberColumn("build [s]", format="%.2f"),
    "prepare_s": st.column_config.NumberColumn("trace/export/compile [s]", format="%.2f"),
    "first_forward_s": st.column_config.NumberColumn("first forward [s]", format="%.3f"),
    "p50_ms": st.column_config.NumberColumn("p50 [ms]", format="%.2f")})
compare_ceilings(models, sweep_id, setting, threads)  # % of measured peak, the roofline
link.finish()
