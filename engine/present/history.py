"""History and regressions as the terminal and the History page show them: result-set labels,
the verdict table (text and DataFrame with coloured verdicts) and one configuration's
latency over time. Built here so the page only draws and tests read exact values."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from engine.analysis.regress import (IMPROVEMENT, NOT_COMPARABLE, REGRESSION, HistoryPoint,
                                     SetComparison)
from engine.present.charts import _LAYOUT, colour_map
from engine.present.tables import format_table

__all__ = ["set_label", "sets_table", "verdict_rows", "verdict_table", "verdict_frame",
           "style_verdicts", "history_chart", "VERDICT_CSS"]

VERDICT_CSS = {REGRESSION: "background-color: #f8d0d0; font-weight: bold",
               IMPROVEMENT: "background-color: #d4f4dd; font-weight: bold"}
VERDICT_HEADERS = ["configuration", "machine", "baseline ms", "candidate ms", "ratio",
                   "95 % CI", "rounds", "verdict", "note"]


def _short(values, n: int) -> str:
    return ", ".join(str(v)[:n] for v in values) or "–"


def set_label(s) -> str:
    """A result set (store.history.result_sets row) in one line: date, sweep, commit,
    versions, machine, runs."""
    return (f"{str(s.created_at)[:16]} · sweep {s.sweep_id[:8]} · commit "
            f"{_short(s.commits, 8)} · {s.versions or 'versions not recorded'} · "
            f"{_short(s.machine_names, 40)} ({_short(s.machines, 8)}) · {s.ok}/{s.runs} ok")


def sets_table(sets: pd.DataFrame) -> str:
    rows = [[str(s.created_at)[:19], s.sweep_id, _short(s.commits, 12), s.versions or "–",
             f"{_short(s.machine_names, 40)} ({_short(s.machines, 8)})", str(s.rounds),
             f"{s.ok}/{s.runs}"] for s in sets.itertuples()]
    return format_table(["created (UTC)", "sweep", "commit", "framework versions", "machine",
                         "rounds", "ok/runs"], rows)


def _ms(v) -> str:
    return "" if v is None else f"{v:.4g}"


def verdict_rows(cmp: SetComparison, fail_above: float | None = None) -> list[list[str]]:
    """One row of strings per change, in VERDICT_HEADERS order; a change failing the gate
    says so in its verdict."""
    rows = []
    for ch in cmp.changes:
        d = ch.decision
        rounds = "/".join(str(len(r.round_medians)) if r else "–"
                          for r in (ch.baseline, ch.candidate))
        verdict = d.verdict + (" · undecided" if d.undecided else "")
        if fail_above is not None and d.fails(fail_above):
            verdict += f" · FAILS > {fail_above:g}x"
        rows.append([ch.config.label, str(ch.machine or "–")[:8], _ms(ch.baseline_ms),
                     _ms(ch.candidate_ms), "" if d.ratio is None else f"{d.ratio:.3f}x",
                     "" if d.ci_low is None else f"{d.ci_low:.3f}-{d.ci_high:.3f}",
                     rounds, verdict, d.note])
    return rows


def _summary(cmp: SetComparison) -> str:
    counts = ", ".join(f"{cmp.count(v)} {v}" for v in
                       (REGRESSION, IMPROVEMENT, "no change", NOT_COMPARABLE))
    floor = (f"noise floor {cmp.floor:.1%}" if cmp.floor is not None else
             "no noise floor (no configuration has two rounds)")
    return (f"threshold ±{100 * cmp.threshold:g} % · {floor} · ratio = candidate / baseline "
            f"latency (geometric mean of round medians) · {counts}")


def verdict_table(cmp: SetComparison, fail_above: float | None = None) -> str:
    return "\n".join([f"baseline {cmp.baseline} · candidate {cmp.candidate}",
                      format_table(VERDICT_HEADERS, verdict_rows(cmp, fail_above)),
                      _summary(cmp)])


def verdict_frame(cmp: SetComparison) -> pd.DataFrame:
    """The page's table: numbers as numbers (ratio, ms), the rest as text."""
    rows = []
    for ch, text in zip(cmp.changes, verdict_rows(cmp)):
        d = ch.decision
        rows.append({"configuration": text[0], "machine": text[1],
                     "baseline [ms]": ch.baseline_ms, "candidate [ms]": ch.candidate_ms,
                     "ratio": d.ratio, "95 % CI": text[5], "rounds": text[6],
                     "verdict": text[7], "note": d.note})
    return pd.DataFrame(rows, columns=["configuration", "machine", "baseline [ms]",
                                       "candidate [ms]", "ratio", "95 % CI", "rounds",
                                       "verdict", "note"])


def style_verdicts(df: pd.DataFrame):
    """A Styler that colours regression cells red and improvement cells green."""
    def css(value):
        return VERDICT_CSS.get(str(value).split(" · ")[0], "")
    return df.style.map(css, subset=["verdict"])


def history_chart(points: list[HistoryPoint], title: str) -> go.Figure:
    """Each sweep's figure (geometric mean of round medians, min-max over rounds) over time,
    one series per framework versions (and machine, when there are several)."""
    machines = {p.machine for p in points}
    def series(p):
        return p.versions + (f" @{str(p.machine)[:8]}" if len(machines) > 1 else "")
    colours = colour_map(series(p) for p in points)
    fig = go.Figure()
    for name in sorted({series(p) for p in points}):
        ps = [p for p in points if series(p) == name]
        fig.add_trace(go.Scatter(
            x=[p.created_at for p in ps], y=[p.center_ms for p in ps], name=name,
            mode="lines+markers", line=dict(color=colours[name], width=3),
            error_y=dict(type="data", symmetric=False,
                         array=[p.max_ms - p.center_ms for p in ps],
                         arrayminus=[p.center_ms - p.min_ms for p in ps]),
            customdata=[[str(p.sweep_id)[:8], str(p.commit or "–")[:12], p.rounds]
                        for p in ps],
            hovertemplate="%{y:.3f} ms · sweep %{customdata[0]} · commit %{customdata[1]}"
                          " · %{customdata[2]} rounds<extra>" + name + "</extra>"))
    fig.update_layout(**_LAYOUT, title=title)
    fig.update_xaxes(title="sweep date (UTC)")
    fig.update_yaxes(title="median latency per batch [ms]")
    return fig
