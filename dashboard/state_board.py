"""The History page's board: a group's every configuration's state at a glance, worst first,
filterable, each opening its evidence; people's marks, shown to everyone and offered as
forms only to a session that may launch; the group's Atom feed as an address to subscribe
to. Streamlit only: the tables are engine/present/board.py's, the reads and writes
store/states.py's (which refuses a mark to a session that may not launch, whatever the
page drew), the judging engine/analysis/state_timeline.py's."""

from __future__ import annotations

import streamlit as st

from dashboard.link_state import PageLink
from dashboard.session import database, read, read_on
from engine.analysis.states import (ACKNOWLEDGED, DISTRIBUTION_CHANGE, IGNORED, StatePolicy)
from engine.core.errors import UserError
from engine.core.limits import MARK_TEXT_MAX
from engine.core.paths import FEEDS_DIR
from engine.present.board import (BOARD_STATES, board_frame, evidence_frame, filter_states,
                                  style_states)
from engine.present.feed import STATIC_ROUTE, feed_name
from engine.present.links import md_escape
from engine.present.states_text import (SWEEP_PREFIX, policy_text, state_line, state_link)
from store.states import (add_mark, group_marks, group_names, group_policy, group_states,
                          group_sweep_ids, withdraw_mark)

__all__ = ["state_board"]

ACTIONS = {"acknowledge": "Acknowledge this state", "ignore": "Ignore this configuration",
           "baseline": "Distribution changes here (a new baseline from a sweep on)"}
SCOPES = {"one": "this configuration", "all": "every configuration of the group"}


def _base_url() -> str:
    """The dashboard's address (this page's, less its own path), for links to views."""
    url = (st.context.url or "").split("?")[0].rstrip("/")
    return url.removesuffix("/history") or url


def state_board(link: PageLink, who) -> None:
    """Draw the board for the group the link or the picker names."""
    st.subheader("Benchmark states")
    groups = read(group_names)
    if not groups:
        st.caption("No group of sweeps yet: `python -m engine watch --link '<a Run page "
                   "link>' --group NAME` runs a saved sweep as the newest of a group, day "
                   "after day, and every configuration's state appears here (docs/CLI.md).")
        return
    link.choice("group", "state_group", groups)
    group = st.selectbox("Group", groups, key="state_group", **link.initial("state_group"))
    link.put("group", group)
    policy = read(group_policy, group) or StatePolicy()
    ids = read(group_sweep_ids, group)
    marks = read(group_marks, group)
    states = read_on((group, policy, tuple(ids), tuple(m.mark_id for m in marks)),
                     group_states, group, policy)
    st.caption(f"{len(ids)} sweeps, newest {md_escape(ids[-1][:SWEEP_PREFIX])}. Policy: "
               f"{policy_text(policy)}")
    _feed(group)

    f1, f2, f3 = st.columns(3)
    models = sorted({s.config.model for s in states})
    frameworks = sorted({s.config.framework for s in states})
    chosen = {}
    for col, param, label, options in ((f1, "state", "States", list(BOARD_STATES)),
                                       (f2, "model", "Models", models),
                                       (f3, "framework", "Frameworks", frameworks)):
        key = f"state_filter_{param}"
        link.choices(param, key, options)
        chosen[param] = col.multiselect(label, options, key=key, placeholder="all",
                                        **link.initial(key, default=[]))
        link.put(param, chosen[param])
    shown = filter_states(states, shown=chosen["state"], models=chosen["model"],
                          frameworks=chosen["framework"])
    counts = {s: sum(x.shown == s for x in states) for s in BOARD_STATES}
    st.caption(" · ".join(f"{n} {s}" for s, n in counts.items() if n)
               + f" · showing {len(shown)} of {len(states)}, worst first")
    st.dataframe(style_states(board_frame(shown)), hide_index=True, width="stretch",
                 key="state_board", column_config={
                     "ratio": st.column_config.NumberColumn(format="%.3fx")})
    if not shown:
        return
    by_label = {s.config.label: s for s in shown}
    link.choice("evidence", "state_evidence", list(by_label))
    label = st.selectbox("Evidence of", list(by_label), key="state_evidence",
                         **link.initial("state_evidence"))
    link.put("evidence", label)
    chosen_state = by_label[label]
    _evidence(chosen_state, policy)
    if who.can_write:
        _mark_form(group, chosen_state, ids, who)
        _withdraw_form(group, marks, {s.key: s.config.label for s in states}, who)
    else:
        st.caption(f"Marks are made by whoever may launch; this session reads them. "
                   f"{who.why_read_only()}")


def _feed(group: str) -> None:
    name = feed_name(group)
    if (FEEDS_DIR / name).is_file():
        url = f"{_base_url()}/{STATIC_ROUTE}/feeds/{name}"
        st.markdown(f":material/rss_feed: [Atom feed of this group's alerts]({url}) "
                    "(subscribe in a feed reader: it is updated by each `watch`)")
    else:
        st.caption("No feed for this group yet: the next `python -m engine watch` of it "
                   "writes one.")


def _evidence(s, policy: StatePolicy) -> None:
    # Markdown: what came from the store (names, a mark's reason) is escaped, so a crafted
    # reason cannot become a link or an image on everyone's page
    st.markdown(f"**{s.shown}** · {md_escape(s.config.label)}")
    st.caption(md_escape(state_line(s)))
    if s.note:
        st.caption(md_escape(s.note))
    if s.points:
        st.dataframe(evidence_frame(s), hide_index=True, width="stretch", key="state_points",
                     column_config={"ratio": st.column_config.NumberColumn(format="%.3fx")})
        st.markdown(f"[Open the newest point's comparison]"
                    f"({state_link(_base_url(), s.sweep_id, s.config.label, s.points, policy)})"
                    " (its baseline sweeps against its sweep, above)")
    if s.environment is not None:
        st.caption(md_escape(f"Environment: machine {', '.join(s.environment.machines)}; "
                             f"framework versions {', '.join(s.environment.versions)}"))


def _write(action, *args, **kwargs) -> bool:
    """A mark written for everyone, or the refusal said; never an exception on the page."""
    try:
        with database().connect() as con:
            action(con, *args, **kwargs)
    except UserError as exc:
        st.error(str(exc), icon=":material/block:")
        return False
    return True


def _who(who, key: str) -> str:
    """Who makes the mark: a signed-in admin is their verified e-mail, not a typed name; a
    session on this machine (the person who started the server) types one."""
    if who.email:
        st.text_input("Who", value=who.email, key=key, disabled=True)
        return who.email
    return st.text_input("Who", key=key, max_chars=MARK_TEXT_MAX)


def _mark_form(group: str, s, ids: list[str], who) -> None:
    # cleared once saved: a reason left in the box invites the same mark twice
    with st.form("state_mark", border=True, clear_on_submit=True):
        st.markdown(f"Mark **{md_escape(s.config.label)}** (shared with everyone who opens "
                    "this page)")
        # No on_change check in a form (Streamlit allows none there): a choice it does not
        # know comes back as the widget's default, and store/states.add_mark checks the rest.
        action = st.radio("Mark", list(ACTIONS), format_func=ACTIONS.get, key="mark_action")
        c1, c2 = st.columns(2)
        sweep = c1.selectbox("From sweep (distribution change)", ids[::-1], key="mark_sweep",
                             format_func=lambda i: i[:SWEEP_PREFIX])
        scope = c2.radio("For", list(SCOPES), format_func=SCOPES.get, key="mark_scope",
                         horizontal=True)
        name = _who(who, "mark_who")
        why = st.text_area("Why", key="mark_why", max_chars=MARK_TEXT_MAX)
        if not st.form_submit_button("Save mark"):
            return
    kind = {"acknowledge": ACKNOWLEDGED, "ignore": IGNORED,
            "baseline": DISTRIBUTION_CHANGE}[action]
    if _write(add_mark, who, group=group, kind=kind, who=name, why=why,
              config_key=None if kind == DISTRIBUTION_CHANGE and scope == "all" else s.key,
              state=s.state if kind == ACKNOWLEDGED else None,
              sweep_id={ACKNOWLEDGED: s.since, DISTRIBUTION_CHANGE: sweep}.get(kind)):
        st.rerun()  # the board again, judged with the new mark


def _withdraw_form(group: str, marks, labels: dict, who) -> None:
    if not marks:
        return
    by_id = {m.mark_id: m for m in marks}

    def describe(mark_id: str) -> str:
        m = by_id[mark_id]
        what = labels.get(m.config_key, "every configuration") if m.config_key else \
            "every configuration"
        return f"{m.kind} · {what} · {m.who}: {m.why}"
    with st.form("state_withdraw", border=True, clear_on_submit=True):
        mark_id = st.selectbox("Marks in force", list(by_id), format_func=describe,
                               key="withdraw_mark")
        name = _who(who, "withdraw_who")
        if st.form_submit_button("Withdraw mark") and _write(withdraw_mark, who, mark_id,
                                                             who=name):
            st.rerun()
