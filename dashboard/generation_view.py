"""Generation runs on the pages (issue 37): the switch between inference and text generation
(Compare, Cost), a generation sweep compared (TTFT, TPOT and output tokens/s against prompt
length and batch, the table of every configuration with its failures, the contests' sentences
and the glossary), and one generation run's figures and per-token timeline (Results).

Streamlit glue: the frames and sentences are engine/present/generation_frames.py's, the
charts generation_charts.py's, the queries store/generation.py's.
"""

from __future__ import annotations

import streamlit as st

from dashboard.link_state import PageLink
from dashboard.report_panel import report_section
from dashboard.session import read
from engine.present.generation_charts import metric_vs, timeline_chart
from engine.present.generation_frames import (METRIC_COLUMNS, config_frame, glossary_frame,
                                              run_figures, sweep_labels, timeline_frame,
                                              verdict_lines)
from engine.present.generation_report import build_generation_report
from engine.present.tables import rule_line, sentence
from store.generation import (generation_contests, generation_runs, generation_sweeps,
                              token_timeline)

__all__ = ["WORK", "work_switch", "compare_generation", "generation_run_detail", "glossary"]

WORK = {"inference": "Inference", "generate": "Text generation"}
_FIG = st.column_config.NumberColumn
TABLE_COLUMNS = {
    "contender": st.column_config.TextColumn("runtime"),
    "prompt_len": st.column_config.NumberColumn("prompt"),
    "output_len": st.column_config.NumberColumn("output"),
    "batch_size": st.column_config.NumberColumn("batch"),
    "intra_threads": st.column_config.NumberColumn("threads"),
    **{f"{m}_p{p}_ms": _FIG(f"{m.upper()} p{p} [ms]", format="%.3f")
       for m in ("ttft", "tpot", "itl", "e2e") for p in (50, 90, 99)},
    "prefill_tok_s": _FIG("prefill tok/s", format="%.0f"),
    "decode_tok_s": _FIG("decode tok/s", format="%.1f"),
    "output_tok_s": _FIG("output tok/s", format="%.1f"),
    "agreement": _FIG("agreement", format="percent",
                      help="share of greedy tokens equal to PyTorch eager fp32's on the same "
                           "prompts (the lowest over the ok rounds)"),
    "reason": st.column_config.TextColumn("reason (a round that did not count)",
                                          width="large")}


def work_switch(link: PageLink, has_inference: bool) -> bool:
    """True when the page is to show text generation: a radio (and ?work=) shown only once a
    generation sweep is stored; generation by default where no inference run is."""
    if read(generation_sweeps).empty:
        return False
    options = list(WORK)
    link.choice("work", "work", options)
    work = st.radio("Work", options, format_func=WORK.get, horizontal=True, key="work",
                    **link.initial("work", index=0 if has_inference else 1))
    link.put("work", work, default="inference")
    return work == "generate"


def glossary() -> None:
    with st.expander("Glossary: our TTFT, TPOT, ITL, E2E and tokens/s in other tools' names"):
        st.dataframe(glossary_frame(), hide_index=True, key="gen_glossary")
        st.caption("Prompts are random token ids (no tokenizer in the timed path); outputs "
                   "are exactly the asked length, end-of-sequence ignored; greedy decoding.")


def _pick(where, label: str, param: str, key: str, options: list, link: PageLink):
    link.choice(param, key, options)
    value = where.selectbox(label, options, key=key, **link.initial(key))
    link.put(param, value)
    return value


def compare_generation(link: PageLink) -> None:
    """A generation sweep compared; finishes the page's link."""
    sweeps = read(generation_sweeps)
    labels = sweep_labels(sweeps)
    link.choice("sweep", "gen_sweep", list(labels), prefix_ok=True)
    sweep_id = st.selectbox("Generation sweep", list(labels), format_func=labels.get,
                            key="gen_sweep", **link.initial("gen_sweep"))
    link.put("sweep", sweep_id)
    runs = read(generation_runs, sweep_id)
    configs = config_frame(runs)
    ok = configs[configs.output_tok_s.notna()]
    if ok.empty:
        st.info("No configuration of this sweep has an ok round: every run failed or was "
                "ruled invalid (reasons in the table below).", icon=":material/info:")
    else:
        c1, c2, c3, c4 = st.columns(4)
        model = _pick(c1, "Model", "model", "cg_model", sorted(ok.model.unique()), link)
        at = ok[ok.model == model]
        out = _pick(c2, "Output length", "output", "cg_output",
                    sorted(int(v) for v in at.output_len.unique()), link)
        threads = _pick(c3, "Threads", "threads", "cg_threads",
                        sorted(int(v) for v in at.intra_threads.unique()), link)
        link.choice("metric", "cg_metric", list(METRIC_COLUMNS))
        metric = c4.radio("Metric", list(METRIC_COLUMNS), key="cg_metric",
                          **link.initial("cg_metric"))
        link.put("metric", metric)
        at = at[(at.output_len == out) & (at.intra_threads == threads)]
        g1, g2 = st.columns(2)
        batch = _pick(g1, "Batch (for the prompt-length chart)", "batch", "cg_batch",
                      sorted(int(v) for v in at.batch_size.unique()), link)
        prompt = _pick(g2, "Prompt length (for the batch chart)", "prompt", "cg_prompt",
                       sorted(int(v) for v in at.prompt_len.unique()), link)
        fixed = {"model": model, "output_len": out, "intra_threads": threads}
        g1.plotly_chart(metric_vs(configs, metric, "prompt_len",
                                  {**fixed, "batch_size": batch}), key="cg_vs_prompt")
        g2.plotly_chart(metric_vs(configs, metric, "batch_size",
                                  {**fixed, "prompt_len": prompt}), key="cg_vs_batch")
    st.subheader("Every configuration")
    st.dataframe(configs, hide_index=True, width="stretch", key="gen_table",
                 column_config=TABLE_COLUMNS)
    st.caption("Medians over each configuration's ok rounds of its runs' percentiles (each "
               "over that run's timed calls). status counts its rounds; a round that failed "
               "or whose tokens disagreed with the reference (invalid) is never averaged in, "
               "and its reason is shown.")
    rule, contests = read(generation_contests, sweep_id)
    lines = verdict_lines(contests)
    if lines:
        st.subheader("Verdicts per metric")
        for line in lines:
            st.markdown(f"- {line}")
        st.caption(sentence(rule_line(rule)))
    glossary()
    report_section(sweep_id, build=build_generation_report, prefix="gen_")
    link.finish()


def generation_run_detail(run: dict) -> None:
    """One generation run's figures, agreement and per-token timeline."""
    rows = read(generation_runs, run["sweep_id"])
    rows = rows[rows.run_id == run["run_id"]]
    if rows.empty:
        return
    r = rows.iloc[0].to_dict()
    st.markdown(f"**Generation**: prompt {r['prompt_len']} tokens, {r['output_len']} out, "
                f"batch {r['batch_size']}; timed by {r.get('timing_source') or 'unknown'}")
    figures = run_figures(r)
    for col, (name, value, why) in zip(st.columns(len(figures) or 1), figures):
        col.metric(name, value, help=why)
    timeline = read(token_timeline, run["run_id"])
    if timeline.empty:
        return
    reps = sorted(int(v) for v in timeline.rep.unique())
    rep = st.selectbox("Timed call", reps, key="gen_rep",
                       format_func=lambda v: f"call {v + 1} of {len(reps)}")
    frame = timeline_frame(timeline, rep)
    if (frame.reading == "ttft_call").all():
        st.caption("This runtime generates in one call: no per-token readings, only its "
                   "first token's time from a separate one-token call.")
    st.plotly_chart(timeline_chart(frame), key="gen_timeline")
    with st.expander("Readings of this call"):
        st.dataframe(frame, hide_index=True, key="gen_readings")
