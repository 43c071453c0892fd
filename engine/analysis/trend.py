"""One configuration over time: a point per sweep and machine, what the History page's chart
draws (the verdicts between two sets are engine/analysis/regress.py's)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.analysis.compare import geomean

__all__ = ["HistoryPoint", "history_points"]


@dataclass(frozen=True)
class HistoryPoint:
    """One configuration in one sweep on one machine: what a history chart plots."""

    sweep_id: str | None
    created_at: object  # the sweep's date (datetime)
    machine: str | None
    versions: str
    commit: str | None
    center_ms: float  # geometric mean of the sweep's round medians
    min_ms: float
    max_ms: float
    rounds: int


def history_points(rows) -> list[HistoryPoint]:
    """store.history.config_history rows -> one point per (sweep, machine) with a
    successful round, oldest first."""
    groups: dict = {}
    for r in rows:
        if r["status"] == "ok" and r["median_ms"] is not None:
            groups.setdefault((r["sweep_id"], r["system_id"]), []).append(r)
    out = []
    for (sweep_id, machine), rs in groups.items():
        meds = [r["median_ms"] for r in rs]
        out.append(HistoryPoint(sweep_id, rs[0]["sweep_created"], machine,
                                ", ".join(sorted({r["versions"] for r in rs})),
                                rs[0]["git_commit"], geomean(meds), min(meds), max(meds),
                                len(meds)))
    return sorted(out, key=lambda p: (p.created_at is None, p.created_at or 0,
                                      str(p.sweep_id)))
