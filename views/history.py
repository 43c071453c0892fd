"""History: a candidate result set against a baseline, configuration by configuration, and one
configuration's latency over time; above them, the board of a group's benchmark states
(dashboard/state_board.py). The choice lives in the link
(?group=NAME&state=regression&evidence=LABEL&baseline=SWEEP,SWEEP&candidate=SWEEP&
threshold=PERCENT&config=LABEL), so a link reproduces the view for someone else. Several sweeps on a side are the same build measured on
several days: what a verdict needs to tell a slower build from a slower day."""

import streamlit as st

from engine.analysis.regress import (DEFAULT_THRESHOLD, IMPROVEMENT, NO_CHANGE, NOT_COMPARABLE,
                                     REGRESSION, compare_sets)
from engine.analysis.trend import history_points
from engine.present.history import (gate_line, history_chart, rule_text, set_label,
                                    style_verdicts, verdict_frame)
from dashboard.link_state import PageLink
from dashboard.numbers import Numbers
from engine.core.limits import THRESHOLD_RANGE
from dashboard.session import access, read
from dashboard.state_board import state_board
from store.history import config_history, result_sets, selection_runs

st.title("History and regressions")
link = PageLink("history")
sets = read(result_sets)
if sets.empty:
    link.finish()
    st.info("No inference sweeps stored yet: run the same sweep before and after a change "
            "(new framework version, new commit, another machine) on the **Run** page, then "
            "compare the two here.", icon=":material/info:")
    st.stop()

state_board(link, access())
st.subheader("Builds against builds")
labels = {s.sweep_id: set_label(s) for s in sets.itertuples()}
ids = list(labels)  # newest first
lo, hi = 100 * THRESHOLD_RANGE[0], 100 * THRESHOLD_RANGE[1]

c1, c2, c3 = st.columns([5, 5, 2])
link.choices("baseline", "baseline", ids, prefix_ok=True)
baseline = c1.multiselect(
    "Baseline sweeps", ids, format_func=labels.get, key="baseline",
    help="one build; several sweeps of it (other days) measure how far a sweep moves from "
         "day to day, which a verdict across sweeps needs",
    **link.initial("baseline", default=ids[min(1, len(ids) - 1):][:1]))
link.choices("candidate", "candidate", ids, prefix_ok=True)
candidate = c2.multiselect("Candidate sweeps", ids, format_func=labels.get, key="candidate",
                           **link.initial("candidate", default=ids[:1]))
link.number("threshold", "threshold", lo, hi)
number = Numbers({})  # its own range check: Streamlit would put 10 in place of a bad one
threshold_pct = number(c3, "Threshold [%]", "threshold", "threshold", lo, hi, step=1.0,
                       default=100 * DEFAULT_THRESHOLD,
                       help="a change within ± this is no change (asv's default is 10 %)")
number.stop_if_refused()
link.put("baseline", baseline)
link.put("candidate", candidate)
link.put("threshold", threshold_pct, lambda v: f"{v:g}")
if not baseline or not candidate:
    link.finish()
    st.info("Pick at least one baseline and one candidate sweep.")
    st.stop()

base_sel, base_rows = read(selection_runs, ",".join(baseline), "baseline")
cand_sel, cand_rows = read(selection_runs, ",".join(candidate), "candidate")
cmp = compare_sets(base_rows, cand_rows, threshold_pct / 100, baseline=base_sel.label,
                   candidate=cand_sel.label)

m = st.columns(4)
for col, verdict in zip(m, (REGRESSION, IMPROVEMENT, NO_CHANGE, NOT_COMPARABLE)):
    col.metric(verdict, cmp.count(verdict))
st.dataframe(style_verdicts(verdict_frame(cmp)), hide_index=True, width="stretch",
             key="verdicts", column_config={
                 "baseline [ms]": st.column_config.NumberColumn(format="%.4g"),
                 "candidate [ms]": st.column_config.NumberColumn(format="%.4g"),
                 "ratio": st.column_config.NumberColumn(format="%.3fx")})
st.caption(rule_text(cmp) + ". Two sweeps are compared on their means against how far "
           "sweeps of one build move from day to day; another machine or measurement policy "
           "is not comparable.")
st.caption("What `python -m engine compare --baseline ... --candidate ...` would say: "
           + gate_line(cmp)[1])

st.subheader("One configuration over time")
choices = {c.config.label: c.config for c in cmp.changes if c.config.replica is None}
link.choice("config", "config", list(choices))
label = st.selectbox("Configuration", list(choices), key="config", **link.initial("config"))
link.put("config", label)
link.finish()
if label is None:
    st.caption("No configuration to follow.")
    st.stop()
chosen = choices[label]
points = history_points(read(config_history, chosen.values))
if points:
    st.plotly_chart(history_chart(points, f"{chosen.label}: median latency per sweep"),
                    key="history_chart")
    st.caption("Each point: one sweep's geometric mean of round medians, bars min-max over its "
               "rounds; one line per framework versions (and machine, when there are several).")
else:
    st.caption("No successful run of this configuration to plot.")
