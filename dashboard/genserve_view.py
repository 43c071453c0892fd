"""The Deploy page's generation mode (issue 38): the Work switch (?work=generate, drawn once a
genserve test is stored), the stored tests (filters by model, engine and scenario; table;
picker, ?run=<id or unique prefix>), the chosen test's verdict, figures beside LoadGen's,
every request's TTFT and TPOT with the bound drawn as a rule, its sweep (a concurrency
sweep's Pareto of tokens/s per user against per machine; a max-rate search's probes) and
LoadGen's logs to download.

Streamlit glue: words and frames are engine/present/genserve_text.py's, charts
genserve_charts.py's, queries store/genserve.py's. Everything here reads; the launch form is
dashboard/genserve_form.py's.
"""

from __future__ import annotations

import streamlit as st

from dashboard.generation_view import WORK
from dashboard.link_state import PageLink
from dashboard.session import read
from engine.present.genserve_charts import pareto_chart, request_histogram
from engine.present.genserve_text import (LOWER_BOUNDS, figures_frame, glossary_frame,
                                          headline, max_rate_sentence, pareto_frame,
                                          pareto_sentence, probes_frame, request_frame,
                                          scenario_label, test_label, verdict)
from store.genserve import (genserve_log, genserve_log_sizes, genserve_requests,
                            genserve_tests, has_genserve, sweep_tests)

__all__ = ["work_switch", "deploy_generation", "LOGS"]

LOGS = {"mlperf_log_summary.txt": "summary", "mlperf_log_detail.txt": "detail"}
_ANY = "any"
_NUM = st.column_config.NumberColumn
TABLE_COLUMNS = {
    "started_at": st.column_config.DatetimeColumn("started"),
    "runtime": st.column_config.TextColumn("engine"),
    "max_num_seqs": _NUM("max seqs"), "intra_threads": _NUM("threads"),
    "prompt_len": _NUM("prompt"), "output_len": _NUM("output"),
    "target_qps": _NUM("target req/s", format="%g"),
    "loadgen_result": st.column_config.TextColumn("LoadGen"),
    "requests_per_s": _NUM("req/s", format="%.3g"),
    "output_tok_s": _NUM("output tok/s", format="%.1f"),
    "user_tok_s": _NUM("tok/s per user", format="%.1f"),
    "goodput_req_s": _NUM("goodput req/s", format="%.3g"),
    "ttft_p99_ms": _NUM("TTFT p99 [ms]", format="%.1f"),
    "tpot_p99_ms": _NUM("TPOT p99 [ms]", format="%.2f"),
    "reason": st.column_config.TextColumn("reason", width="large")}


def work_switch(link: PageLink) -> bool:
    """True when the page is to show serving a language model: a radio (and ?work=),
    inference by default. Always drawn: the generation mode's form launches the first test."""
    options = list(WORK)
    link.choice("work", "work", options)
    work = st.radio("Work", options, format_func=WORK.get, horizontal=True, key="work",
                    **link.initial("work", index=0))
    link.put("work", work, default="inference")
    return work == "generate"


def _filter(where, label: str, param: str, values, link: PageLink):
    options = [_ANY, *sorted(v for v in set(values) if v)]
    link.choice(param, f"gs_{param}", options)
    value = where.selectbox(label, options, key=f"gs_{param}",
                            format_func=lambda v: scenario_label(v) if param == "scenario"
                            and v != _ANY else v, **link.initial(f"gs_{param}"))
    link.put(param, value, default=_ANY)
    return None if value == _ANY else value


def deploy_generation(link: PageLink) -> None:
    """Stored genserve tests and the chosen one; finishes the page's link."""
    st.header("Stored serving tests of language models")
    if not read(has_genserve):
        link.finish()
        st.info("No serving test of a language model is stored yet: launch one above, or "
                "`python -m engine genserve --model tiny_llama --scenarios closed-loop "
                "offline --prompt-len 16 --output-len 8`.", icon=":material/info:")
        return
    every = read(genserve_tests)
    c1, c2, c3 = st.columns(3)
    model = _filter(c1, "Model", "model", every.model, link)
    engine = _filter(c2, "Engine", "engine", every.runtime, link)
    scenario = _filter(c3, "Scenario", "scenario", every.scenario, link)
    tests = read(genserve_tests, model, engine, scenario)
    if tests.empty:
        link.finish()
        st.info("No stored test matches these filters.", icon=":material/info:")
        return
    shown = tests.assign(scenario=tests.scenario.map(scenario_label))
    st.dataframe(shown, hide_index=True, width="stretch", key="gs_table",
                 column_config=TABLE_COLUMNS, column_order=[
                     "started_at", "scenario", "model", "runtime", "precision",
                     "max_num_seqs", "intra_threads", "prompt_len", "output_len", "users",
                     "target_qps", "status", "loadgen_result", "requests_per_s",
                     "output_tok_s", "user_tok_s", "goodput_req_s", "ttft_p99_ms",
                     "tpot_p99_ms", "reason"])
    ids = tests.run_id.tolist()
    labels = {r["run_id"]: test_label(r) for r in tests.to_dict("records")}
    link.choice("run", "gs_run", ids, prefix_ok=True)
    run_id = st.selectbox("Test", ids, key="gs_run", format_func=labels.get,
                          **link.initial("gs_run"))
    link.put("run", run_id)
    row = tests[tests.run_id == run_id].iloc[0].to_dict()
    test_detail(row)
    sweep_section(row)
    with st.expander("Glossary: what each figure means"):
        st.dataframe(glossary_frame(), hide_index=True, key="gs_glossary")
    link.finish("Link to this view", caption="Opens the Deploy page's text-generation view "
                                             "with this test shown; nothing runs.")


def test_detail(row: dict) -> None:
    state, text = verdict(row)
    show = {"ok": st.success, "invalid": st.error}.get(state, st.warning)
    show(text, icon=":material/check_circle:" if state == "ok" else ":material/cancel:")
    if not row.get("requests"):
        return
    for col, (label, value, why) in zip(st.columns(5), headline(row)):
        col.metric(label, value, help=why)
    st.caption(f"Asked for: {scenario_label(row['scenario'])}, {row['engine_label']} "
               f"(max {row['max_num_seqs']} sequences), {row['precision']}, "
               f"{row['intra_threads']} threads, prompt {row['prompt_len']} and output "
               f"{row['output_len']} tokens, bounds TTFT {row['ttft_bound_ms']:g} ms and TPOT "
               f"{row['tpot_bound_ms']:g} ms ({row['preset'] or 'custom'}).")
    st.dataframe(figures_frame(row), hide_index=True, key="gs_figures", column_config={
        "ours": _NUM("ours (SUT)", format="%.4g"),
        "LoadGen": _NUM("LoadGen's", format="%.4g")})
    st.caption(LOWER_BOUNDS)
    requests = request_frame(read(genserve_requests, row["run_id"]))
    g1, g2 = st.columns(2)
    for where, metric in ((g1, "ttft"), (g2, "tpot")):
        where.plotly_chart(request_histogram(
            requests[f"{metric}_ms"], metric=metric.upper(),
            bound_ms=row[f"{metric}_bound_ms"], title=f"{metric.upper()} per request"),
            key=f"gs_hist_{metric}")
    _logs(row["run_id"])


def sweep_section(row: dict) -> None:
    """The chosen test's sweep: its concurrency Pareto, or its Server probes."""
    tests = read(sweep_tests, row["sweep_id"])
    points = pareto_frame(tests)
    if len(points) >= 2:
        st.subheader("Concurrency: tokens/s per user against tokens/s per machine")
        st.plotly_chart(pareto_chart(points, f"{row['model']} on {row['runtime']}, prompt "
                                             f"{row['prompt_len']}, output "
                                             f"{row['output_len']} (this test's sweep)"),
                        key="gs_pareto")
        st.markdown(pareto_sentence(points))
    said = max_rate_sentence(tests)
    if said:
        st.subheader("Server tests of this sweep (a max-rate search's probes)")
        st.markdown(said)
        st.dataframe(probes_frame(tests), hide_index=True, key="gs_probes")


def _logs(run_id: str) -> None:
    sizes = read(genserve_log_sizes, run_id)
    if not sizes:
        st.caption("No LoadGen logs: a closed loop is ours, LoadGen does not run it.")
        return
    summary = read(genserve_log, run_id, "mlperf_log_summary.txt")
    if summary:
        with st.expander("LoadGen's summary log (mlperf_log_summary.txt)"):
            st.code(summary, language=None)
    for col, (name, what) in zip(st.columns(len(LOGS)), LOGS.items()):
        if name in sizes:
            col.download_button(f"Download the {what} log ({sizes[name] / 1024:,.1f} KiB)",
                                read(genserve_log, run_id, name) or "",
                                f"{run_id[:8]}-{name}", "text/plain", key=f"gs_dl_{what}")

