"""A page's selection as its address: link values seed the widgets on a session's first
render, and the page writes its current selection back to st.query_params, so the address
bar (and the "Link to this view" box) reopens the same view for someone else.

Parsing and refusals are engine/present/links.py; this module only moves values between
st.query_params, st.session_state and the page. Widgets keep their own keys: a value from
the link is put in st.session_state[key] before the widget exists, only when the address
differs from what this page last wrote (a link just opened), so a user's later change is
never overwritten by the link.
"""

from __future__ import annotations

from typing import Any, Callable
from urllib.parse import urlencode

import streamlit as st

from engine.present.links import parse_choice, parse_choices, parse_number

__all__ = ["PageLink"]


class PageLink:
    def __init__(self, page: str) -> None:
        self._slot = st.container()  # at the top of the page: notes and the link
        self._state = f"_link_{page}"
        incoming = {k: st.query_params.get_all(k)[-1] for k in st.query_params}
        self._apply = incoming != st.session_state.get(self._state)
        self.notes: list[str] = []
        self._out: dict[str, str] = {}
        self._seeded: set[str] = set()

    def _incoming(self, param: str) -> str | None:
        raw = st.query_params.get_all(param)
        return raw[-1] if raw else None

    def _seed(self, key: str, param: str, parse: Callable[[str | None], tuple],
              boxed: bool = False) -> None:
        if not self._apply:
            return  # the address is the page's own: the widgets already hold it
        value, msg = parse(self._incoming(param))
        if msg:
            self.notes.append(msg)
        if value is not None:
            st.session_state[key] = value[0] if boxed else value
            self._seeded.add(key)

    def seeded(self, key: str) -> bool:
        """True when the link set this widget: the page then passes no default of its own."""
        return key in self._seeded

    def choice(self, param: str, key: str, options: list, encode: Callable[[Any], str] = str,
               prefix_ok: bool = False) -> None:
        # Boxed: an option may itself be None (?sweep=all: every stored run).
        table = {encode(o): (o,) for o in options}
        self._seed(key, param, lambda raw: parse_choice(param, raw, table, prefix_ok),
                   boxed=True)

    def choices(self, param: str, key: str, options: list,
                encode: Callable[[Any], str] = str, prefix_ok: bool = False) -> None:
        table = {encode(o): o for o in options}
        self._seed(key, param, lambda raw: parse_choices(param, raw, table, prefix_ok))

    def number(self, param: str, key: str, lo: float, hi: float, integer: bool = False) -> None:
        self._seed(key, param, lambda raw: parse_number(param, raw, lo, hi, integer=integer))

    def put(self, param: str, value: Any, encode: Callable[[Any], str] = str) -> None:
        """Record the page's current selection for the address (None: left out). A list is
        several choices; a tuple is one value (a setting) that `encode` spells."""
        if value is None or (isinstance(value, list) and not value):
            return
        if isinstance(value, list):
            self._out[param] = ",".join(encode(v) for v in value)
        else:
            self._out[param] = encode(value)

    def finish(self, label: str = "Link to this view") -> None:
        """Write the selection to the address bar, show the notes on refused link values,
        and offer the link to copy (st.code has a copy button)."""
        st.session_state[self._state] = dict(self._out)
        if dict(st.query_params) != self._out:
            st.query_params.from_dict(self._out)
        for msg in self.notes:
            self._slot.warning(msg, icon=":material/link_off:")
        base = st.context.url or ""
        with self._slot.expander(label, icon=":material/link:"):
            st.code(base + ("?" + urlencode(self._out) if self._out else ""), language=None,
                    wrap_lines=True)
            st.caption("Opens this page with the same selection; the figures are those "
                       "stored when the link is opened.")
