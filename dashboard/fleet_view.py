"""Tunings shown side by side on the Deploy page (issue 27 parts 3 and 5), each stored in a
sweep of its own and replayed from its stored probes (engine.run.search.replays.replay_tune):
- a fleet tuning: the same tuning on each node kind of a Ray cluster, the sweep naming the
  fleet; each priced on its own shape: each one's winner, the cheapest per 1 M at the bound
  and the cheapest per provider (engine.run.search.fleet_tune.fleet_best);
- one launch's models: each model tuned alone, the sweeps naming the launch's group.
Streamlit glue; the tables are engine/present/search_view's, the sentences
engine/present/tune_text's. A stale price a cost used (over 6 months old) is named with
where to check it (`stale_warning`, for this page's searches too)."""

from __future__ import annotations

from datetime import date

import streamlit as st

from dashboard.session import read
from engine.present.cost_text import stale_note
from engine.present.search_view import fleet_frame, models_frame
from engine.present.tune_text import fleet_best_lines, models_lines
from engine.run.search.fleet_tune import NodeTuning, fleet_best
from engine.run.search.replays import TUNE_COMMAND, replay_tune, request_fields
from engine.run.search.serving_jobs import tune_price
from store.serving import search_probes, search_sweeps

__all__ = ["fleet_section", "group_section", "stale_warning"]


def stale_warning(machines) -> None:
    """The stale prices among those a search's or tuning's cost used, and where to check
    them (a price's age is judged on the day the page is read)."""
    if said := stale_note(machines, date.today()):
        st.warning(said, icon=":material/schedule:")


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
    for line in fleet_best_lines(best):
        st.caption(line)
    priced = {r.shape for r in results if r.tuning is not None and r.tuning.winner is not None
              and r.tuning.winner.cost is not None}
    stale_warning([m for m in catalog if m.shape in priced])


def group_section(group: str, catalog, shape: str | None) -> None:
    """Every model of the launch that tuned this one, in the order tuned (a fleet's: each
    node kind's row); priced on `shape`, the page's machine, as the tuning shown is."""
    rows, local = [], []
    for r in reversed(list(read(search_sweeps, TUNE_COMMAND).itertuples())):  # oldest first
        fields = request_fields(r.command)
        if fields.get("group") != group or not fields.get("candidates"):
            continue
        node = fields.get("shape") if fields.get("fleet") else None
        t = replay_tune(fields, list(read(search_probes, r.sweep_id).itertuples()),
                        tune_price(None, node or shape, catalog))
        rows.append((fields.get("model", "?"), node, t))
        if not fields.get("fleet"):
            local.append((fields.get("model", "?"), t))
    st.markdown(f"**Every model of this launch ({len(rows)})**: each tuned alone, with the "
                "same bound, objective and search space")
    st.dataframe(models_frame(rows), hide_index=True, key="sv_models_table",
                 column_config={"USD per 1 M": st.column_config.NumberColumn(format="$%.4f")})
    if len(local) > 1:
        st.caption(models_lines(local, shape)[-1])
