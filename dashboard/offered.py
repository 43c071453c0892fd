"""Widget values checked against what the page offered.

The browser offers only a page's options, but a session can send any value in its rerun
message. Streamlit resets a choice it does not know to the widget's default once the widget
is drawn, and a number outside min..max to its default, silently (the number boxes check
their own range: dashboard/numbers.py): a crafted Launch pressed in the same message would
still queue what remained. A text box without max_chars takes any
length. So each checked widget carries an on_change callback, which Streamlit calls with the
new value before the page runs: a value the page did not offer is remembered, and the page
stops at its top (stop_if_refused, from PageLink) with a message naming the field and what is
allowed, before anything reads or writes with it.
"""

from __future__ import annotations

from typing import Any, Iterable

import streamlit as st

from engine.present.links import MAX_VALUE_LEN, not_offered

__all__ = ["offered", "stop_if_refused", "MAX_VALUE_LEN"]

_REFUSED = "_offered_refused"


def offered(key: str, field: str, options: Iterable[Any] | None = None,
            names: Iterable[str] | None = None, max_len: int | None = None) -> dict:
    """Keyword arguments for widget `key`: its value must be one of `options` (each of them,
    for a list) and a text at most max_len characters. names: the options as the message
    spells them (default str)."""
    opts = None if options is None else tuple(options)
    spelled = tuple(names) if names is not None else tuple(str(o) for o in opts or ())
    return {"on_change": _check, "args": (key, field, opts, spelled, max_len)}


def _check(key: str, field: str, options: tuple | None, names: tuple,
           max_len: int | None) -> None:
    msg = not_offered(field, st.session_state.get(key), options, names, max_len)
    if msg and _REFUSED not in st.session_state:  # the first one is enough
        st.session_state[_REFUSED] = msg


def stop_if_refused() -> None:
    """At a page's top: a value refused by a callback of this rerun is named, and the page
    draws nothing more (no read with it, no launch); the next honest rerun draws it again."""
    msg = st.session_state.pop(_REFUSED, None)
    if msg:
        st.error(msg, icon=":material/block:")
        st.stop()
