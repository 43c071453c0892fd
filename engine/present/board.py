"""The board: every configuration's state in a group at a glance, worst first, and one
configuration's evidence. Pure tables and choices for the History page (dashboard/
state_board.py) and the report; the words are engine/present/states_text.py's."""

from __future__ import annotations

import pandas as pd

from engine.analysis.states import IGNORED, STATES, ConfigState, worst_first
from engine.present.states_text import SWEEP_PREFIX, evidence_text

__all__ = ["BOARD_STATES", "filter_states", "board_frame", "evidence_frame", "mark_text",
           "style_states", "STATE_COLOURS"]

# What the board's state filter offers: the judged states, worst first, and ignored.
BOARD_STATES = (*STATES, IGNORED)
# A cell's colour per state (History's verdict colours: red slower, green faster, amber to
# look at, grey not judged).
STATE_COLOURS = {"regression": "#f8d7da", "missing": "#f8d7da", "suspicious": "#fff3cd",
                 "not comparable": "#e2e3e5", "recovered": "#d1e7dd", "improvement": "#d1e7dd",
                 "insufficient data": "#e2e3e5", "ignored": "#e2e3e5"}


def filter_states(states, *, shown=(), models=(), frameworks=()) -> list[ConfigState]:
    """The states the filters keep (an empty filter keeps all), worst first."""
    return [s for s in worst_first(states)
            if (not shown or s.shown in shown) and (not models or s.config.model in models)
            and (not frameworks or s.config.framework in frameworks)]


def mark_text(s: ConfigState) -> str:
    """The mark in force beside a state: who, when, why."""
    for word, m in (("acknowledged", s.acknowledged), ("ignored", s.ignored)):
        if m is not None:
            return f"{word} by {m.who} on {m.at:%Y-%m-%d %H:%M}: {m.why}"
    return ""


def board_frame(states) -> pd.DataFrame:
    """One row per configuration in the order given: state (ignored shown as such), the
    configuration, since which sweep, the newest point's ratio and interval, the evidence in
    words, and the mark."""
    rows = []
    for s in states:
        p = s.points[-1] if s.points else None
        rows.append({"state": s.shown, "configuration": s.config.label,
                     "since": s.since[:SWEEP_PREFIX],
                     "ratio": p.ratio if p else None,
                     "95 % CI": (f"{p.ci_low:.3f}-{p.ci_high:.3f}"
                                 if p is not None and p.ci_low is not None else ""),
                     "evidence": evidence_text(s.points) if s.points else s.note,
                     "mark": mark_text(s)})
    return pd.DataFrame(rows, columns=["state", "configuration", "since", "ratio", "95 % CI",
                                       "evidence", "mark"])


def evidence_frame(s: ConfigState) -> pd.DataFrame:
    """The points that made a state, oldest first: each sweep's gate decision against its
    baseline sweeps (what `compare --baseline ... --candidate SWEEP` says of it)."""
    return pd.DataFrame([{
        "sweep": p.sweep_id[:SWEEP_PREFIX],
        "date": None if p.created_at is None else pd.Timestamp(p.created_at),
        "verdict": p.verdict + (" (undecided)" if p.undecided else ""),
        "ratio": p.ratio, "CI low": p.ci_low, "CI high": p.ci_high, "p": p.p_value,
        "candidate [ms]": p.candidate_ms, "baseline [ms]": p.baseline_ms,
        "baseline sweeps": ", ".join(b[:SWEEP_PREFIX] for b in p.baseline),
        "note": p.note} for p in s.points],
        columns=["sweep", "date", "verdict", "ratio", "CI low", "CI high", "p",
                 "candidate [ms]", "baseline [ms]", "baseline sweeps", "note"])


def style_states(frame: pd.DataFrame):
    """The board with each state's cell coloured."""
    return frame.style.map(lambda v: f"background-color: {STATE_COLOURS[v]}"
                           if v in STATE_COLOURS else "", subset=["state"])
