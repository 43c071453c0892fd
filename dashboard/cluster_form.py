"""The Run page's executor choice (issue 15): this machine, or the Ray cluster the server
is configured with ($BENCH_RAY_ADDRESS, else $RAY_ADDRESS; engine/run/cluster/join.py), and on
the cluster which node kinds. Streamlit glue: the nodes are listed by
engine.run.cluster.join.list_nodes, cached briefly, and a cluster that cannot be reached is a
message on the page, never an exception.

Without an address nothing renders and the sweep runs here. The choice only exists for a
session that may launch (the Run page stops in viewer mode before calling this, and a
read-only session gets no choice: it cannot launch, so the server does not join for it).
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from dashboard.offered import offered
from engine.present.links import md_escape
from engine.run.cluster.join import NodeKinds, cluster_address, list_nodes
from engine.core.errors import UserError

__all__ = ["Where", "executor_choice", "NODES_TTL_S"]

# Nodes join and leave rarely; listing them is a round trip to the head per rerun.
NODES_TTL_S = 15.0
EXECUTOR_LABELS = {"local": "this machine", "ray": "Ray cluster at {address}"}


@dataclass(frozen=True)
class Where:
    """Where the sweep runs: SweepRequest's executor, placements and cores (None: this
    machine's), and on how many node kinds at once. `error` (a sentence naming `field`) is
    for the page to show; it disables the launch."""

    executor: str = "local"
    placements: tuple[str, ...] = ()
    cores: int | None = None
    width: int = 1
    error: str = ""
    field: str = "executor"


@st.cache_data(ttl=NODES_TTL_S, show_spinner="Asking the Ray cluster for its nodes…")
def _nodes(address: str) -> NodeKinds:
    return list_nodes(address)


def executor_choice(can_write: bool) -> Where:
    """The executor radio and, on the cluster, the node kinds (none picked: every kind at
    once, a fleet sweep). Renders nothing without a configured address, nor for a session
    that may not launch (it would only make this server join the cluster). A cluster that
    cannot be listed, or a choice no live node answers, comes back as Where.error."""
    address = cluster_address()
    if not address or not can_write:
        return Where()
    executor = st.radio("Run on", list(EXECUTOR_LABELS), key="executor", horizontal=True,
                        **offered("executor", "executor", EXECUTOR_LABELS),
                        format_func=lambda e: md_escape(EXECUTOR_LABELS[e].format(
                            address=address)),
                        help="the cluster's nodes run the same workers as this machine; "
                             "the runs are stored here, each with the node and its shape")
    if executor == "local":
        return Where()
    kinds = _nodes(address)
    if kinds.error:
        return Where("ray", error=kinds.error, field="address")
    shapes = st.multiselect(
        "Node kinds", list(kinds.shapes), key="node_kinds", format_func=kinds.describe,
        **offered("node_kinds", "node_kinds", kinds.shapes),
        placeholder="all: one node of every kind at once (a fleet sweep)",
        help="the shapes of the cluster's live nodes (each node's shape:NAME resource); "
             "several: the sweep on each, rounds interleaved across them")
    # every kind picked is the fleet: one spelling for one sweep (a duplicate is refused)
    placements = (() if set(shapes) == set(kinds.shapes)
                  else tuple(f"shape={s}" for s in shapes))
    try:
        cores = kinds.cores(placements)
    except UserError as exc:
        return Where("ray", placements, error=str(exc), field=exc.field or "placement")
    if kinds.untagged and not placements:
        st.caption(f"{kinds.untagged} node(s) without a shape:NAME resource are left out: "
                   "their runs could not be priced")
    return Where("ray", placements, cores, width=len(placements) or len(kinds.shapes))
