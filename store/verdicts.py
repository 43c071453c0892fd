"""A stored sweep's verdict: its runs and the rule it kept, read here and judged by
engine.analysis.sweep_verdict. The one way the Compare page (through dashboard.session.read,
cached until the data changes), the report and `python -m engine compare` reach a verdict,
so the three cannot disagree."""

from __future__ import annotations

from engine.analysis.sweep_verdict import SweepVerdict, judge_sweep
from store.runs import sweep_rounds, sweep_rule

__all__ = ["sweep_verdicts"]


def sweep_verdicts(con, sweep_id: str) -> SweepVerdict:
    """The verdict of every contest of one sweep (a full id: store.sweep_ref resolves a
    prefix), with the sweep's noise, shared versus dedicated and its run counts; an unknown
    id gives an empty verdict."""
    return judge_sweep(sweep_rounds(con, sweep_id), sweep_rule(con, sweep_id),
                       sweep_id=sweep_id)
