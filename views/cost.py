"""Cost: measured throughput turned into cloud prices, OCI vs AWS (and GCP, Azure)."""

from datetime import date

import pandas as pd
import streamlit as st

from engine.analysis.break_even import break_even_steps
from engine.analysis.cost import (HOURS_PER_MONTH, cost_per_million,
                                  cpu_shapes, custom_machine, default_shape, equivalents,
                                  monthly_cost, oci_vs_aws, storage_egress,
                                  storage_egress_rates)
from engine.analysis.cost_machines import (basis, contender_rows, figure, fleet_rows,
                                           machine_rows, machine_vs_machine, priced_shapes)
from engine.analysis.price_age import stale_prices
from engine.core.errors import UserError
from engine.present.charts import break_even_chart, cost_bars, fleet_bars
from engine.present.cost_text import (bars_captions, break_even_defaults, break_even_text,
                                      catalog_frame, claim_text, extras_caption, figure_caption,
                                      not_measured_text, source_caption, sources_caption,
                                      stale_text, versus_frame, versus_missing_text)
from dashboard.generation_cost_view import cost_generation
from dashboard.generation_view import work_switch
from dashboard.link_state import PageLink
from dashboard.numbers import Numbers
from dashboard.offered import offered
from engine.present.links import encode_setting
from dashboard.session import read
from store.prices import effective_catalog
from engine.present.frames import setting_choices
from engine.scenarios import INFERENCE
from store.queries import machine_throughput, settings

title = st.empty()  # named once the Work switch says what is priced
link = PageLink("cost")
catalog, rates = read(effective_catalog)
choices, setting_labels = setting_choices(read(settings, INFERENCE.kind))
if work_switch(link, bool(choices)):  # per 1 M output and input tokens of a generation run
    title.title("Cost of text generation")
    cost_generation(link, catalog)
    st.stop()
title.title("Cost of inference")
link.choice("setting", "setting", choices, encode=encode_setting)
setting = st.selectbox("Measured setting (device · precision · inter-op threads · machine)",
                       choices, format_func=setting_labels.get, key="setting",
                           **link.initial("setting"),
                       help="throughput is priced from one setting at a time: runs on another "
                            "device, precision, inter-op thread count or machine are never "
                            "averaged in; machines whose runs name their catalog shape are "
                            "priced from those runs") if choices else None
measured = read(machine_throughput, INFERENCE.kind, setting)
cpu = cpu_shapes(catalog)
by_label = {m.label: m for m in catalog}

link.put("setting", setting, encode_setting)
link.number("hours", "hours", 1.0, 744.0)
number = Numbers({})  # its own range checks: Streamlit would put the default in place
hours = number(st, "Hours per month", "hours", "hours", 1.0, 744.0,
               default=float(HOURS_PER_MONTH),
               help="730 = 8,760 hours / 12, the providers' own convention")
number.stop_if_refused()

st.subheader("OCI vs AWS: a 16-OCPU OCI machine against the 32-vCPU AWS machines, "
             "per month, at the same memory")
claim = oci_vs_aws(cpu, rates, hours)
st.dataframe(pd.DataFrame(claim["rows"]), hide_index=True, key="claim", column_config={
    "USD/hour": st.column_config.NumberColumn(format="$%.4f"),
    "USD/month": st.column_config.NumberColumn(format="$%.2f")})
if said := claim_text(claim, hours):
    st.markdown(said)
today = date.today()  # a price's age is judged on the day the page is read
if said := stale_text(stale_prices(cpu, today=today), today):  # every x86 shape priced here
    st.warning(said, icon=":material/schedule:")

with st.expander(f"Price catalog ({len(catalog)} machines; sources and dates)"):
    st.dataframe(catalog_frame(catalog), hide_index=True, key="catalog")
    st.caption(sources_caption(catalog))

link.put("hours", hours, lambda v: f"{v:g}")
if measured.empty:
    link.finish()
    st.info("No measured throughput yet: cost per inference needs a successful run. Launch a "
            "sweep on the **Run** page, then come back.", icon=":material/info:")
    st.stop()

st.subheader("Your workload")
c1, c2, c3 = st.columns(3)
link.choice("model", "model", sorted(measured.model.unique()))
model = c1.selectbox("Model", sorted(measured.model.unique()), key="model",
                     **link.initial("model"))
m_rows = measured[measured.model == model]
sizes = sorted(int(x) for x in m_rows.image_size.dropna().unique())
if len(sizes) > 1:  # one figure never takes its best from another input size
    size = c1.selectbox("Image size (px)", sizes, key="image_size",
                        **offered("image_size", "image_size", sizes))
    m_rows = m_rows[m_rows.image_size == size]
link.choice("fw", "contender", sorted(m_rows.contender.unique()))
contender = c2.selectbox("Framework (runtime)", sorted(m_rows.contender.unique()),
                         key="contender", **link.initial("contender"),
                         help="each machine is priced at the split (threads x replicas) that "
                              "served this contender best there")
c_rows = m_rows[m_rows.contender == contender]
link.choice("batch", "batch", sorted(c_rows.batch_size.unique()))
batch = c3.selectbox("Batch size", sorted(c_rows.batch_size.unique()), key="batch",
                     **link.initial("batch"))
link.put("model", model)
link.put("fw", contender)
link.put("batch", batch)
b_all = m_rows[m_rows.batch_size == batch]  # every contender: framework vs framework, B
base = basis(b_all[b_all.contender == contender].to_dict("records"))
if said := source_caption(base):
    st.caption(said)
shapes = priced_shapes(catalog, set(base.shapes))

MODES = ["Pick a shape from the catalog", "Enter a price"]
link.choice("machine", "machine_mode", MODES,
            encode=lambda m: "price" if m == MODES[1] else "shape")
mode = st.radio("Machine", MODES, horizontal=True, key="machine_mode",
                **link.initial("machine_mode"))
if mode == "Enter a price":
    p1, p2 = st.columns(2)
    link.number("price", "custom_price", 0.0001, 1e6)
    link.number("vcpus", "custom_vcpus", 1, 1024, integer=True)
    price = number(p1, "USD per hour", "custom_price", "price", 0.0001, 1e6, default=1.0,
                   format="%.4f")
    vcpus = number(p2, "vCPUs", "custom_vcpus", "vcpus", 1, 1024, default=16, integer=True,
                   help="priced as an x86 machine with SMT: vCPUs / 2 physical cores")
    number.stop_if_refused()
    machine = custom_machine(price, vcpus)
    link.put("machine", "price")
    link.put("price", price, lambda v: f"{v:g}")
    link.put("vcpus", vcpus)
else:
    labels = [m.label for m in shapes]
    link.choice("shape", "shape", labels)
    machine = by_label[st.selectbox("Shape", labels, key="shape",
                                    **link.initial("shape", index=default_shape(shapes)))]
    link.put("shape", machine.label)

proj = figure(base, machine)
if proj is None:
    link.finish()
    st.info(not_measured_text(contender, batch, machine, base), icon=":material/info:")
    st.stop()
k1, k2, k3 = st.columns(3)
k1.metric("throughput on this machine" + (" (estimate)" if proj.estimate else " (measured)"),
          f"{proj.throughput:,.1f} samples/s", help=proj.assumption)
k2.metric("cost per 1 M inferences", f"${cost_per_million(machine.usd_per_hour, proj.throughput):,.4f}")
k3.metric(f"monthly cost ({hours:g} h)", f"${monthly_cost(machine.usd_per_hour, hours=hours):,.2f}")
st.caption(figure_caption(proj, machine))
if said := stale_text(stale_prices([machine], today=today), today):
    st.warning(said, icon=":material/schedule:")

table = machine_rows(shapes + ([machine] if machine.provider == "custom" else []), base,
                     hours=hours)
st.plotly_chart(cost_bars(table, "cost_per_million",
                          f"Cost per 1 M inferences — {model}, {contender}, batch {batch}",
                          "USD per 1 M inferences"), key="cost_by_shape")
for line in bars_captions(table):
    st.caption(line)

g1, g2 = st.columns(2)
fw_rows = contender_rows(b_all.to_dict("records"), machine, hours=hours)
g1.plotly_chart(cost_bars(fw_rows, "cost_per_million",
                          f"Framework vs framework on {machine.shape}",
                          "USD per 1 M inferences"), key="cost_by_framework")

with g2:
    st.markdown("**Serving a target rate**")
    link.number("rate", "rate", 0.1, 1e9)
    rate = number(st, "Target request rate (samples/s)", "rate", "rate", 0.1, 1e9, step=10.0,
                  default=100.0)
    number.stop_if_refused()
    link.put("rate", rate, lambda v: f"{v:g}")
    s1, s2 = st.columns(2)
    storage = s1.number_input("Block storage (GB)", key="storage", min_value=0.0, value=0.0)
    egress = s2.number_input("Egress (GB/month)", key="egress", min_value=0.0, value=0.0,
                             help="OCI: first 10 TB/month free; AWS: first 100 GB free")
with st.container():
    extras = storage_egress(rates, storage_gb=storage, egress_gb=egress)
    fleet_machines = equivalents(catalog, machine.vcpus)
    fleet = fleet_rows(fleet_machines, base, rate, hours=hours, extras=extras)
    if fleet:
        st.plotly_chart(fleet_bars(fleet, rate, machine.vcpus), key="fleet")
    if storage or egress:
        st.caption(extras_caption(extras))
        used = storage_egress_rates(rates, storage_gb=storage, egress_gb=egress)
        if said := stale_text(stale_prices([], used, today=today), today):
            st.warning(said, icon=":material/schedule:")

st.subheader("Machine vs machine: the shapes this was measured on")
versus = machine_vs_machine(catalog, base, rate, hours=hours)
if len(versus) >= 2:
    st.dataframe(versus_frame(versus), hide_index=True, key="versus", column_config={
        "samples/s": st.column_config.NumberColumn(format="%.1f"),
        "USD per 1 M": st.column_config.NumberColumn(format="$%.4f"),
        "USD/month": st.column_config.NumberColumn(f"USD/month at {rate:g}/s",
                                                   format="$%.2f")})
    st.caption("Each shape at the split that served it best, medians over its rounds on one "
               "machine; a shape measured on part of its cores only is scaled to the whole "
               "machine, and its configuration says it is an estimate. A p99 from fewer than "
               "100 samples is marked low confidence (n: the fewest samples of its rounds).")
else:
    st.info(versus_missing_text(versus, contender, batch), icon=":material/info:")

st.subheader("Break-even between two choices")
b1, b2, b3 = st.columns(3)
contenders = sorted(m_rows.contender.unique())
shape_labels = [m.label for m in shapes]
b_contender, b_shape = break_even_defaults(contenders, contender, cpu, shape_labels,
                                           machine.vcpus)
link.choice("b_fw", "b_contender", contenders)
other_contender = b1.selectbox("B: framework (runtime)", contenders, key="b_contender",
                               **link.initial("b_contender", index=b_contender))
link.put("b_fw", other_contender)
link.choice("b_shape", "b_shape", shape_labels)
other_shape = b2.selectbox("B: shape", shape_labels, key="b_shape",
                           **link.initial("b_shape", index=b_shape))
link.put("b_shape", other_shape)
max_rate = b3.number_input("up to (samples/s)", key="b_max", min_value=1.0,
                           value=float(max(rate * 4, 4 * proj.throughput)),
                           help="default: four of A's machines' worth, so the steps show")
b_rows = b_all[b_all.contender == other_contender]
b_tp = figure(basis(b_rows.to_dict("records")), by_label[other_shape])
if b_tp is None:
    st.caption(f"{other_contender} has no figure at batch {batch} on {other_shape}.")
else:
    a = (proj.throughput, machine.usd_per_hour)
    b = (b_tp.throughput, by_label[other_shape].usd_per_hour)
    a_label, b_label = f"A: {contender} on {machine.shape}", f"B: {other_contender} on {other_shape}"
    try:  # one set of steps: the chart's vertices and the text's change points agree
        steps = break_even_steps(a, b, max_rate)
    except UserError as exc:
        st.error(str(exc), icon=":material/error:")
    else:
        st.plotly_chart(break_even_chart(a_label, b_label, steps, hours), key="break_even")
        st.markdown(break_even_text(steps, hours))
    if proj.estimate or b_tp.estimate:
        st.caption("Throughputs projected to these shapes are estimates (see the assumption "
                   "above).")
link.finish()
