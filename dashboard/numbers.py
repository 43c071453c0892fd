"""Number boxes whose range the page checks itself.

Streamlit's number_input replaces a value outside its min_value..max_value, and a NaN or
infinite one, with the widget's default, silently (NumberInputSerde.deserialize): a crafted
rerun message with an out-of-range number and a Launch press would queue the default. And an
integer box turns a crafted NaN into int(nan), which raises inside Streamlit before the page
runs. So these boxes have no Streamlit bounds and are float boxes (integers shown with
"%.0f"), their Streamlit default is None (the form's default is put in st.session_state
before the box first exists), and the form checks the value (engine/present/links.py's
number_refused): a number outside the range, a fraction where an integer is asked for, an
emptied box, or a non-finite number (which Streamlit turns into that None) is the form's
error naming the field and the range, so the form refuses and its launch button is drawn
disabled, which makes Streamlit drop a press sent in the same message. The range stays in the
box's help for honest users, and the browser's stepper works as before.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from engine.present.links import number_allowed, number_refused

__all__ = ["Numbers"]


class Numbers:
    """A form's number boxes; errors: the refusals by field (the form's own dict, so that a
    refused number refuses the form)."""

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = errors

    def __call__(self, where: Any, label: str, key: str, field: str, lo: float, hi: float, *,
                 default: float, integer: bool = False, step: float | None = None,
                 help: str | None = None, zero: str | None = None,
                 **widget: Any) -> float | int:
        """Draw the box in `where` (st or a column); its value (an int when integer), or
        `default` when refused (the refusal is in errors[field]). zero: what 0 means, where
        it is allowed outside lo..hi."""
        # The box's value is put in session state on every run, not only the first: a box
        # whose value came from session state carries it in the element the browser draws,
        # so a box the browser drew afresh (after an interrupted rerun dropped it) shows
        # its value; with the Streamlit default of None it came back empty, and the form
        # refused an empty box the user never emptied (seen in the upload test under load).
        # An empty value (emptied, or a crafted NaN or inf, which Streamlit turns into
        # None) is refused in this run, and the box shows the default again.
        before = st.session_state.get(key, default) if key in st.session_state else default
        st.session_state[key] = default if before is None else before
        allowed = "allowed: " + number_allowed(lo, hi, integer, zero)
        value = where.number_input(
            label, key=key, value=None, step=float(step or (1 if integer else 0.01)),
            help=f"{help}; {allowed}" if help else allowed,
            **({"format": "%.0f"} if integer else {}), **widget)
        refused = number_refused(field, None if before is None else value, lo, hi, integer,
                                 zero)
        if refused:
            self.errors.setdefault(field, refused)
            return default
        return int(value) if integer else float(value)

    def linked(self, link: Any, param: str, where: Any, label: str, key: str, field: str,
               lo: float, hi: float, *, default: float, integer: bool = False,
               zero: str | None = None, **widget: Any) -> float | int:
        """A box of the page's link (dashboard.link_state.PageLink): ?param= seeds it when
        a link is opened (a refused value is a note naming param and the range, and the
        box shows `default`), and its value is written back when it differs from default."""
        link.number(param, key, lo, hi, integer=integer, default=default, zero=zero)
        value = self(where, label, key, field, lo, hi, default=default, integer=integer,
                     zero=zero, **widget)
        link.put(param, value, lambda v: f"{v:g}", default=default)
        return value

    def stop_if_refused(self) -> None:
        """On a page without a form (nothing to disable): a refused number is named and the
        page draws nothing after it, rather than figures for a value nobody asked for."""
        if self.errors:
            st.error(next(iter(self.errors.values())), icon=":material/block:")
            st.stop()
