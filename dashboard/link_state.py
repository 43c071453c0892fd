"""A page's selection as its address: link values seed the widgets on a session's first
render, and the page writes its current selection back to st.query_params, so the address
bar (and the "Link to this view" box) reopens the same view for someone else.

Parsing and refusals are engine/present/links.py; this module only moves values between
st.query_params, st.session_state and the page. Widgets keep their own keys: a value from
the link is put in st.session_state[key] before the widget exists, only when the address
is none this page wrote in this session (a link just opened), so a user's later change is
never overwritten by the link. Any address written, not only the last: a rerun can carry
the address of the render before last when the browser has not yet shown the newest (a
user typing fast), and applying that would undo what was just typed.
"""

from __future__ import annotations

from typing import Any, Callable
from urllib.parse import urlencode

import streamlit as st

from dashboard.offered import MAX_VALUE_LEN, offered, stop_if_refused
from engine.present.links import parse_choice, parse_choices, parse_integers, parse_number

__all__ = ["PageLink"]

# The addresses a page remembers writing, per session: far more than a rerun can lag.
WRITTEN_KEPT = 64


class PageLink:
    def __init__(self, page: str) -> None:
        stop_if_refused()  # a crafted widget value of this rerun: named, nothing drawn
        self._slot = st.container()  # at the top of the page: notes and the link
        self._state = f"_link_{page}"
        incoming = {k: st.query_params.get_all(k)[-1] for k in st.query_params}
        self._apply = incoming not in st.session_state.get(self._state, [])
        self.notes: list[str] = []
        self._out: dict[str, str] = {}
        self._seeded: set[str] = set()
        self._offers: dict[str, dict] = {}  # widget key -> its check (dashboard.offered)

    def _incoming(self, param: str) -> str | None:
        raw = st.query_params.get_all(param)
        return raw[-1] if raw else None

    def _seed(self, param: str, parse: Callable[[str | None], tuple],
              fill: Callable[[Any], dict[str, Any]]) -> None:
        """parse(raw) -> (value or None, a note, a list of notes or None); fill(value) ->
        {widget key: its value}, put in st.session_state before the widgets exist."""
        if not self._apply:
            return  # the address is the page's own: the widgets already hold it
        value, msgs = parse(self._incoming(param))
        self.notes.extend(m for m in ([msgs] if isinstance(msgs, str) else msgs or []) if m)
        if value is not None:
            for key, widget_value in fill(value).items():
                st.session_state[key] = widget_value
                self._seeded.add(key)

    def seeded(self, key: str) -> bool:
        """True when the link set this widget: the page then passes no default of its own."""
        return key in self._seeded

    def initial(self, key: str, **default: Any) -> dict[str, Any]:
        """The widget's own default (value=..., index=..., default=...) as keyword arguments,
        none when the link set the widget (Streamlit refuses both); with the check of a value
        the page did not offer when choice(), choices() or text() named the widget."""
        return {**({} if self.seeded(key) else default), **self._offers.get(key, {})}

    def choice(self, param: str, key: str, options: list, encode: Callable[[Any], str] = str,
               prefix_ok: bool = False, field: str | None = None) -> None:
        """field: what a value the page did not offer is refused as, when the widget's field
        is not the link's parameter (two sweep pickers on one page, both `sweep`)."""
        # Boxed: an option may itself be None (?sweep=all: every stored run).
        table = {encode(o): (o,) for o in options}
        self._offers[key] = offered(key, field or param, options, table)
        self._seed(param, lambda raw: parse_choice(param, raw, table, prefix_ok),
                   lambda boxed: {key: boxed[0]})

    def choices(self, param: str, key: str, options: list,
                encode: Callable[[Any], str] = str, prefix_ok: bool = False,
                field: str | None = None) -> None:
        table = {encode(o): o for o in options}
        self._offers[key] = offered(key, field or param, options, table)
        self._seed(param, lambda raw: parse_choices(param, raw, table, prefix_ok),
                   lambda values: {key: values})

    def number(self, param: str, key: str, lo: float, hi: float, integer: bool = False,
               default: float | None = None, zero: str | None = None) -> None:
        """default: what the widget shows instead of a refused value; the note says so
        ("using 3"), else the value is "ignored". zero: what 0 means, where allowed."""
        action = "ignored" if default is None else f"using {default:g}"
        self._seed(param, lambda raw: parse_number(param, raw, lo, hi, integer=integer,
                                                   action=action, zero=zero),
                   lambda value: {key: value})

    def integers(self, param: str, lo: int, hi: int,
                 fill: Callable[[list[int]], dict[str, Any]]) -> None:
        """Comma-separated integers (each bad one named and left out) into one widget or
        several: fill(values) -> {widget key: its value}."""
        self._seed(param, lambda raw: parse_integers(param, raw, lo, hi), fill)

    def text(self, param: str, key: str, max_len: int | None = None) -> None:
        """Free text for a text box, as given (at most max_len characters): the page checks
        it like typed text, so a bad one is the form's error, not a note. Typed text longer
        than MAX_VALUE_LEN is refused as not offered."""
        self._offers[key] = offered(key, param, max_len=max_len or MAX_VALUE_LEN)
        self._seed(param, lambda raw: (raw[:max_len] if raw else None, None),
                   lambda value: {key: value})

    def put(self, param: str, value: Any, encode: Callable[[Any], str] = str,
            default: Any = None) -> None:
        """Record the page's current selection for the address (None: left out; equal to
        `default`: left out too, the link names what differs). A list is several choices;
        a tuple is one value (a setting) that `encode` spells."""
        if value is None or (isinstance(value, list) and not value) or (
                default is not None and value == default):
            return
        if isinstance(value, list):
            self._out[param] = ",".join(encode(v) for v in value)
        else:
            self._out[param] = encode(value)

    def finish(self, label: str = "Link to this view",
               caption: str = "Opens this page with the same selection; the figures are "
                              "those stored when the link is opened.") -> None:
        """Write the selection to the address bar, show the notes on refused link values,
        and offer the link to copy (st.code has a copy button)."""
        written = st.session_state.setdefault(self._state, [])
        if self._out not in written:
            written.append(dict(self._out))
            del written[:-WRITTEN_KEPT]
        if dict(st.query_params) != self._out:
            st.query_params.from_dict(self._out)
        for msg in self.notes:
            self._slot.warning(msg, icon=":material/link_off:")
        base = st.context.url or ""
        with self._slot.expander(label, icon=":material/link:"):
            st.code(base + ("?" + urlencode(self._out) if self._out else ""), language=None,
                    wrap_lines=True)
            st.caption(caption)
