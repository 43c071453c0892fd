"""A fleet tuning on the Deploy page (issue 27 part 3): the same tuning on each node kind of
a Ray cluster, each node's stored in a sweep of its own that names the fleet. Every node's
tuning is replayed from its stored probes (engine.run.serving_jobs.replay_tune), each priced
on its own shape, and shown side by side: each one's winner, the cheapest per 1 M at the
bound and the cheapest per provider (engine.run.fleet_tune.fleet_best). Streamlit glue;
the table is engine/present/search_view's, the sentences engine/present/tune_text's."""

from __future__ import annotations

import streamlit as st

from dashboard.session import read
from engine.present.search_view import fleet_frame
from engine.present.tune_text import fleet_lines
from engine.run.fleet_tune import NodeTuning, fleet_best
from engine.run.serving_jobs import TUNE_COMMAND, replay_tune, request_fields, tune_price
from store.serving import search_probes, search_sweeps

__all__ = ["fleet_section"]


def fleet_section(fleet: str, catalog) -> None:
    sweeps = read(search_sweeps, TUNE_COMMAND)
    results = []
    for r in sweeps.itertuples():
        fields = request_fields(r.command)
        if fields.get("fleet") != fleet or not fields.get("candidates"):
            continue
        shape = fields.get("shape")
        t = replay_tune(fields, list(read(search_probes, r.sweep_id).itertuples()),
                        tune_price(None, shape, catalog))
        results.append(NodeTuning(shape, int(fields.get("cores") or 0),
                                  shape or "an unpriced node", r.sweep_id, t))
    results.sort(key=lambda n: n.shape or "")
    best = fleet_best(results, {m.shape: m.provider for m in catalog}.get)
    st.markdown(f"**Every node kind of this fleet tuning ({len(results)})**: each tuned on "
                "its own cores and priced on its own shape")
    st.dataframe(fleet_frame(results), hide_index=True, key="sv_fleet_table",
                 column_config={"USD per 1 M": st.column_config.NumberColumn(format="$%.4f")})
    for line in fleet_lines(results, best)[len(results) + 1:]:
        st.caption(line)
