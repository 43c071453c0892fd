"""The Cost page for text generation (issue 37): USD per 1 M output tokens and per 1 M input
tokens of one generation configuration on every catalog shape, measured there or estimated
as the page does for inference (engine/analysis/generation_cost.py over cost_machines), with
the like-for-like caveat beside each figure. Streamlit glue; the query is
store/generation_views.py's.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.link_state import PageLink
from dashboard.numbers import Numbers
from dashboard.session import read
from engine.analysis.cost import HOURS_PER_MONTH, default_shape, monthly_cost
from engine.analysis.cost_machines import priced_shapes
from engine.analysis.generation_cost import token_bases, token_cost_rows
from engine.present.charts import cost_bars
from engine.present.cost_text import source_caption
from engine.present.frames import setting_choices
from engine.present.links import encode_setting
from engine.scenarios import GENERATION
from store.generation_views import generation_throughput
from store.queries import settings

__all__ = ["cost_generation", "NOT_ADDITIVE"]

NOT_ADDITIVE = ("Per 1 M output tokens: the whole call (prefill included) over its output "
                "tokens, from output tokens/s = batch × output / E2E. Per 1 M input tokens: "
                "the prompt's processing alone, from prefill tokens/s = batch × prompt / TTFT. "
                "Do not add them: the output figure already pays for its prompts' prefill.")


def _pick(where, label: str, param: str, key: str, options: list, link: PageLink):
    link.choice(param, key, options)
    value = where.selectbox(label, options, key=key, **link.initial(key))
    link.put(param, value)
    return value


def cost_generation(link: PageLink, catalog: list) -> None:
    """The page's generation view; finishes the page's link."""
    choices, labels = setting_choices(read(settings, GENERATION.kind))
    if not choices:
        link.finish()
        st.info("No successful generation run yet: launch one on the **Run** page (Generate "
                "text).", icon=":material/info:")
        return
    link.choice("setting", "gen_setting", choices, encode=encode_setting)
    setting = st.selectbox("Measured setting (device · precision · inter-op threads · "
                           "machine)", choices, format_func=labels.get, key="gen_setting",
                           **link.initial("gen_setting"))
    link.put("setting", setting, encode_setting)
    link.number("hours", "hours", 1.0, 744.0)
    number = Numbers({})
    hours = number(st, "Hours per month", "hours", "hours", 1.0, 744.0,
                   default=float(HOURS_PER_MONTH))
    number.stop_if_refused()
    link.put("hours", hours, lambda v: f"{v:g}", default=float(HOURS_PER_MONTH))
    rows = read(generation_throughput, setting)
    if rows.empty:
        link.finish()
        st.info("No ok generation run of this setting has tokens/s to price.")
        return
    c = st.columns(5)
    model = _pick(c[0], "Model", "model", "gc_model", sorted(rows.model.unique()), link)
    rows = rows[rows.model == model]
    contender = _pick(c[1], "Runtime", "fw", "gc_contender", sorted(rows.contender.unique()),
                      link)
    rows = rows[rows.contender == contender]
    for i, (label, col, param) in enumerate((("Prompt length", "prompt_len", "prompt"),
                                             ("Output length", "output_len", "output"),
                                             ("Batch", "batch_size", "batch")), start=2):
        value = _pick(c[i], label, param, f"gc_{param}",
                      sorted(int(v) for v in rows[col].unique()), link)
        rows = rows[rows[col] == value]
    records = rows.to_dict("records")
    out_basis, _ = token_bases(records)
    if said := source_caption(out_basis):
        st.caption(said.replace("samples/s", "output tokens/s"))
    shapes = priced_shapes(catalog, set(out_basis.shapes))
    table = token_cost_rows(shapes, records)
    if not table:
        link.finish()
        st.info(f"{contender} has no figure to price on any catalog shape (an Arm shape "
                "needs a run on it).", icon=":material/info:")
        return
    by_label = {r["machine"]: r for r in table}
    names = list(by_label)
    link.choice("shape", "gc_shape", names)
    shown = st.selectbox("Shape", names, key="gc_shape", **link.initial(
        "gc_shape", index=default_shape([m for m in shapes if m.label in by_label])))
    link.put("shape", shown)
    r = by_label[shown]
    k = st.columns(4)
    how = " (estimate)" if r["estimate"] else " (measured)"
    k[0].metric("output tokens/s on this machine" + how, f"{r['output_tok_s']:,.1f}",
                help=r["assumption"])
    k[1].metric("USD per 1 M output tokens", f"${r['usd_per_m_output']:,.4f}")
    k[2].metric("USD per 1 M input tokens", f"${r['usd_per_m_input']:,.4f}")
    k[3].metric(f"monthly cost ({hours:g} h)",
                f"${monthly_cost(r['usd_per_hour'], hours=hours):,.2f}")
    st.caption(f"Like for like: {r['caveat']}.")
    st.caption(NOT_ADDITIVE)
    g1, g2 = st.columns(2)
    what = f"{model}, {contender}, prompt {rows.prompt_len.iloc[0]}, output " \
           f"{rows.output_len.iloc[0]}, batch {rows.batch_size.iloc[0]}"
    g1.plotly_chart(cost_bars(table, "usd_per_m_output", f"Per 1 M output tokens — {what}",
                              "USD per 1 M output tokens"), key="gc_output_bars")
    g2.plotly_chart(cost_bars(table, "usd_per_m_input", f"Per 1 M input tokens — {what}",
                              "USD per 1 M input tokens"), key="gc_input_bars")
    st.dataframe(pd.DataFrame(table)[["machine", "vcpus", "cores", "usd_per_hour",
                                      "output_tok_s", "input_tok_s", "usd_per_m_output",
                                      "usd_per_m_input", "estimate", "caveat"]],
                 hide_index=True, width="stretch", key="gc_table", column_config={
                     "usd_per_hour": st.column_config.NumberColumn("USD/hour", format="$%.4f"),
                     "output_tok_s": st.column_config.NumberColumn("output tok/s",
                                                                   format="%.1f"),
                     "input_tok_s": st.column_config.NumberColumn("input (prefill) tok/s",
                                                                  format="%.0f"),
                     "usd_per_m_output": st.column_config.NumberColumn(
                         "USD per 1 M output", format="$%.4f"),
                     "usd_per_m_input": st.column_config.NumberColumn(
                         "USD per 1 M input", format="$%.4f"),
                     "caveat": st.column_config.TextColumn("like for like", width="large")})
    link.finish()
