"""A page's report for someone without the dashboard: HTML (opens offline, with charts) or
Markdown, built on request from one sweep (Compare's: engine/present/report.py; Deploy's:
engine/present/serving_report.py; about a second, some megabytes, so not through the cached
reads) and kept in the session until downloaded."""

from __future__ import annotations

from typing import Callable

import streamlit as st

from dashboard.offered import offered
from dashboard.session import busy, database
from engine.core.errors import UserError
from engine.present.report import REPORT_FORMATS, build_report

__all__ = ["report_section", "FORMAT_LABELS"]

FORMAT_LABELS = {"html": "HTML (opens offline, with charts)",
                 "md": "Markdown (for a pull request or wiki)"}


def report_section(sweep_id: str, build: Callable[..., bytes] = build_report,
                   prefix: str = "", groups: list[str] = ()) -> None:
    """The format choice, "Prepare report" and, once prepared for this sweep and format,
    the download button. A busy database file is said and retried, never raised.
    build(con, sweep_id, fmt) -> bytes; prefix: the widget keys' and the kept report's, one
    per page that offers a report; groups: the groups whose board of benchmark states the
    report may include (build then takes group=)."""
    r1, r2, r3 = st.columns([2, 1, 1])
    fmt = r1.radio("Report", list(REPORT_FORMATS), horizontal=True,
                   key=f"{prefix}report_format",
                   **offered(f"{prefix}report_format", "report_format", REPORT_FORMATS),
                   format_func=FORMAT_LABELS.get)
    group = r1.selectbox("With the board of benchmark states of", [None, *groups],
                         key=f"{prefix}report_group", format_func=lambda g: g or "no group",
                         **offered(f"{prefix}report_group", "group", [None, *groups])) \
        if groups else None
    extra = {} if group is None else {"group": group}
    if r2.button("Prepare report", key=f"{prefix}prepare_report"):
        try:
            with database().connect() as con:
                st.session_state[f"{prefix}report"] = (sweep_id, fmt,
                                                       build(con, sweep_id, fmt, **extra),
                                                       group)
        except UserError as exc:
            if exc.field != "db":
                raise
            busy(str(exc))
    ready = st.session_state.get(f"{prefix}report")
    if ready and (ready[0], ready[1], ready[3]) == (sweep_id, fmt, group):
        mime, suffix = REPORT_FORMATS[fmt]
        r3.download_button(f"Download ({suffix}, {len(ready[2]) / 2**20:.1f} MiB)", ready[2],
                           f"{prefix}report-{sweep_id[:8]}{suffix}", mime,
                           key=f"{prefix}download_report")
