"""The Deploy page's stored searches of serving a language model (issue 38), read back from
the store by replaying each search over its sweep's stored tests
(engine/run/search/gen_replays.py), so viewer mode shows them too:

- a max-rate search (?gs_search=<sweep id or unique prefix>): the max rate under both
  bounds with the goodput there, its probes, why it stopped, and what a token costs: USD
  per 1 M output and input tokens at the max and flat out (its Offline test), the chosen
  shape's and the cheapest per provider, and the monthly bill for a target of output
  tokens/s or requests/s (?gs_bill=tok_s|rps, ?gs_target=) in whole machines, measured or
  estimate and its assumption beside each figure (engine/analysis/genserve_cost.py);
- a concurrency sweep (?gs_users=): its points and the Pareto chart;
- a tuning (?gs_tuning=): the recommendation, its gain over the default, every candidate
  with its outcome, the pruned ones with why and the Pareto front.

Streamlit glue; the words are engine/present/genserve_search_text.py's, the chart
engine/present/genserve_charts.py's, the queries store/genserve.py's and store/serving.py's.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.fleet_view import stale_warning
from dashboard.link_state import PageLink
from dashboard.numbers import Numbers
from dashboard.report_panel import report_section
from dashboard.session import read
from engine.analysis.cost import resolve_shape
from engine.analysis.genserve_cost import cheapest_per_provider, token_serving_rows
from engine.core.errors import UserError
from engine.core.limits import SERVE_RATE_RANGE
from engine.present.genserve_charts import pareto_chart
from engine.run.search.gen_report import build_genserve_report
from engine.present.genserve_search_text import (BOUNDS_TEXT, concurrency_rows,
                                                 concurrency_summary, cost_rows, front_rows,
                                                 probe_rows, pruned_rows, rate_summary,
                                                 reproduce_command, tuning_rows,
                                                 tuning_summary)
from engine.present.genserve_text import pareto_frame
from engine.run.search.gen_max_rate import figures_of
from engine.run.search.gen_replays import (estimate_source, gen_probes, replay_gen_rate,
                                           replay_gen_tune, replay_users, token_rates)
from engine.run.search.replays import (GEN_RATE_COMMAND, GEN_TUNE_COMMAND,
                                       GEN_USERS_COMMAND, request_fields)
from store.genserve import sweep_tests
from store.prices import effective_catalog
from store.serving import search_sweeps

__all__ = ["gen_search_results", "BILLS"]

BILLS = {"tok_s": "output tokens/s", "rps": "requests/s"}
_DEFAULT_TARGET = {"tok_s": 1000.0, "rps": 10.0}
_USD = st.column_config.NumberColumn(format="$%.4f")


def gen_search_results(link: PageLink, machine) -> None:
    """The three kinds of stored search, each picked by its sweep (in the link)."""
    st.header("Stored searches of language-model serving")
    st.caption(f"Replayed from their stored tests: {BOUNDS_TEXT}.")
    st.subheader("Max rate under the TTFT and TPOT bounds")
    _rate(link, machine)
    st.subheader("Concurrency sweeps")
    _users(link)
    st.subheader("Tunings")
    _tune(link)


def _picker(link: PageLink, param: str, prefix: str, key: str, what: str):
    """(sweep id, its command's fields, its tests as GenProbes) of the search shown, newest
    first (?param= a sweep id or a unique prefix of one); None when none is stored."""
    sweeps = read(search_sweeps, prefix)
    if sweeps.empty:
        st.info(f"No {what} stored yet.", icon=":material/info:")
        return None
    labels = {}
    for r in sweeps.itertuples():
        f = request_fields(r.command)
        labels[r.sweep_id] = (f"{r.created_at:%Y-%m-%d %H:%M} · {f.get('model', '?')} on "
                              f"{f.get('engine', '?')} · {r.runs} tests · {r.sweep_id[:8]}")
    ids = list(labels)
    link.choice(param, key, ids, prefix_ok=True, field="sweep")
    sid = st.selectbox(what.capitalize(), ids, key=key, format_func=labels.get,
                       **link.initial(key))
    link.put(param, sid, default=ids[0])
    fields = request_fields(sweeps[sweeps.sweep_id == sid].command.iloc[0])
    return sid, fields, read(sweep_tests, sid)


def _footer(sid: str, prefix: str, fields: dict, key: str) -> None:
    st.caption("Reproduce in a terminal: `" + reproduce_command(prefix, fields) + "`")
    report_section(sid, build=build_genserve_report, prefix=key)


def _rate(link: PageLink, machine) -> None:
    picked = _picker(link, "gs_search", GEN_RATE_COMMAND, "gs_search_sweep",
                     "max-rate search")
    if picked is None:
        return
    sid, fields, tests = picked
    res, offline = replay_gen_rate(fields, gen_probes(tests))
    ttft, tpot = fields["ttft_bound_ms"], fields["tpot_bound_ms"]
    g = figures_of(res.best)
    c = st.columns(4)
    c[0].metric("max rate", f"{'≥ ' * res.capped}{res.max_qps:.3g} req/s"
                if res.max_qps is not None else "none VALID")
    c[1].metric("goodput there", f"{g['goodput_req_s']:.3g} req/s" if g else "-",
                help="requests within both bounds per second of the test's span")
    c[2].metric("output tok/s there", f"{g['output_tok_s']:,.1f}" if g else "-")
    c[3].metric("probes", len(res.probes))
    (st.success if res.max_qps is not None else st.error)(
        rate_summary(res, figures_of, ttft, tpot))
    st.caption(f"Estimate from {estimate_source(fields)}. Stopped: {res.stop_reason}.")
    st.dataframe(pd.DataFrame(probe_rows(res, figures_of)), hide_index=True,
                 key="gs_search_probes")
    if res.best is not None:
        _cost(link, res, offline, machine)
    _footer(sid, GEN_RATE_COMMAND, fields, "gs_search_")


def _cost(link: PageLink, res, offline, machine) -> None:
    """USD per 1 M tokens at the max and flat out on the chosen shape and the cheapest per
    provider, and the bill for a target in whole machines."""
    st.markdown("**What a token costs** (whole machines, the price catalog the Cost page "
                "reads)")
    c1, c2 = st.columns(2)
    options = list(BILLS)
    link.choice("gs_bill", "gs_bill", options)
    bill = c1.radio("Bill for a target of", options, format_func=BILLS.get, horizontal=True,
                    key="gs_bill", **link.initial("gs_bill", index=0))
    link.put("gs_bill", bill, default=options[0])
    errors: dict[str, str] = {}
    target = Numbers(errors).linked(link, "gs_target", c2, f"Target {BILLS[bill]}",
                                    "gs_target", "target", *SERVE_RATE_RANGE,
                                    default=_DEFAULT_TARGET[bill])
    for message in errors.values():
        st.error(message, icon=":material/error:")
    catalog, _ = read(effective_catalog)
    rows = token_serving_rows(catalog, token_rates(res.best, offline),
                              target_tok_s=target if bill == "tok_s" and not errors else None,
                              target_rps=target if bill == "rps" and not errors else None)
    chosen = [r for r in rows if machine is not None and r["shape"] == machine.shape]
    shown = cost_rows(chosen, cheapest_per_provider(rows), res.capped)
    if not shown:
        st.warning("Not priced: a figure from this machine carries over to no shape of the "
                   "catalog.", icon=":material/warning:")
        return
    if machine is not None and not chosen:
        st.caption(f"Not priced on {machine.label}: a figure from this machine does not "
                   "carry over to it.")
    st.dataframe(pd.DataFrame(shown), hide_index=True, key="gs_search_cost", column_config={
        "USD/h": _USD, "$/1M out at max": _USD, "$/1M in at max": _USD,
        "$/1M out flat out": _USD, "$/1M in flat out": _USD,
        "USD a month": st.column_config.NumberColumn(format="$%.0f")})
    st.caption("Per 1 M input tokens counts the same machine-hours per prompt token: not to "
               "be added to the output figure. Flat out: the search's Offline test (no "
               "bound)" + ("" if offline is not None else "; none stored: no flat-out "
                           "figure") + ".")
    stale_warning([m for m in catalog if m.shape in {r["shape"] for r in shown}])


def _users(link: PageLink) -> None:
    picked = _picker(link, "gs_users", GEN_USERS_COMMAND, "gs_users_sweep",
                     "concurrency sweep")
    if picked is None:
        return
    sid, fields, tests = picked
    c = replay_users(fields, gen_probes(tests))
    st.markdown(concurrency_summary(c, figures_of))
    st.dataframe(pd.DataFrame(concurrency_rows(c.points, figures_of, c.front)),
                 hide_index=True, key="gs_users_points")
    points = pareto_frame(tests)
    if len(points) >= 2:
        st.plotly_chart(pareto_chart(points, f"{fields['model']} on {fields['engine']}, "
                                             f"prompt {fields['prompt_len']}, output "
                                             f"{fields['output_len']}"),
                        key="gs_users_chart")
    _footer(sid, GEN_USERS_COMMAND, fields, "gs_users_")


def tuning_machine(fields: dict, catalog):
    """The catalog's Machine of the tuning's recorded shape, or None (none recorded, or
    gone from the catalog: its costs are then not shown)."""
    if not fields.get("machine_shape"):
        return None
    try:
        return resolve_shape(fields["machine_shape"], catalog)
    except UserError:
        return None


def _tune(link: PageLink) -> None:
    picked = _picker(link, "gs_tuning", GEN_TUNE_COMMAND, "gs_tuning_sweep", "tuning")
    if picked is None:
        return
    sid, fields, tests = picked
    catalog, _ = read(effective_catalog)
    machine = tuning_machine(fields, catalog)
    if fields.get("machine_shape") and machine is None:
        st.warning(f"{fields['machine_shape']} is no longer in the price catalog: costs are "
                   "not shown.", icon=":material/warning:")
    t = replay_gen_tune(fields, gen_probes(tests), machine)
    (st.success if t.winner is not None else st.error)(
        tuning_summary(t, fields["ttft_bound_ms"], fields["tpot_bound_ms"]))
    if t.gain_pct is not None:
        st.metric("gain over the default", f"{t.gain_pct:+,.1f} %",
                  help=f"default: {t.default.candidate.label()}; "
                       + ("more requests/s" if t.objective == "qps" else "cheaper per 1 M"))
    st.dataframe(pd.DataFrame(tuning_rows(t)), hide_index=True, key="gs_tuning_rows")
    if t.pruned:
        st.markdown(f"**Pruned ({len(t.pruned)})**")
        st.dataframe(pd.DataFrame(pruned_rows(t)), hide_index=True, key="gs_tuning_pruned")
    if t.front:
        st.markdown("**Pareto front** (no other confirmation beats it on p99, requests/s "
                    "and cost)" + (f", priced on {machine.label}" if machine else ""))
        st.dataframe(pd.DataFrame(front_rows(t)), hide_index=True, key="gs_tuning_front")
    if machine is not None:
        stale_warning([machine])
    _footer(sid, GEN_TUNE_COMMAND, fields, "gs_tuning_")
