"""History and regressions as the terminal and the History page show them: result-set labels,
the verdict table (text and DataFrame with coloured verdicts) and one configuration's
latency over time. Built here so the page only draws and tests read exact values."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from engine.analysis.regress import (FAMILY_ALPHA, IMPROVEMENT, NOT_COMPARABLE, REGRESSION,
                                     SetComparison)
from engine.analysis.trend import HistoryPoint
from engine.present.charts import _LAYOUT, colour_map
from engine.present.tables import format_table

__all__ = ["set_label", "sets_table", "verdict_rows", "verdict_table", "verdict_frame",
           "style_verdicts", "history_chart", "gate_line", "rule_text", "VERDICT_CSS"]

VERDICT_CSS = {REGRESSION: "background-color: #f8d0d0; font-weight: bold",
               IMPROVEMENT: "background-color: #d4f4dd; font-weight: bold"}
VERDICT_HEADERS = ["configuration", "machine", "baseline ms", "candidate ms", "ratio",
                   "95 % CI", "sweeps", "rounds", "verdict", "note"]


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


def verdict_rows(cmp: SetComparison) -> list[list[str]]:
    """One row of strings per change, in VERDICT_HEADERS order; a regression says the gate
    fails on it."""
    rows = []
    for ch in cmp.changes:
        d = ch.decision
        rounds = "/".join(str(len(r.round_medians)) if r else "–"
                          for r in (ch.baseline, ch.candidate))
        sweeps = "/".join(str(n) for n in ch.sweeps) if any(ch.sweeps) else "–"
        verdict = d.verdict + (" · undecided" if d.undecided else "")
        if d.verdict == REGRESSION:
            verdict += f" · FAILS > {cmp.fail_above:g}x"
        rows.append([ch.config.label, str(ch.machine or "–"), _ms(ch.baseline_ms),
                     _ms(ch.candidate_ms), "" if d.ratio is None else f"{d.ratio:.3f}x",
                     "" if d.ci_low is None else f"{d.ci_low:.3f}-{d.ci_high:.3f}",
                     sweeps, rounds, verdict, d.note])
    return rows


def rule_text(cmp: SetComparison) -> str:
    """What the verdicts rest on, in one line."""
    spread = (f"sweep-to-sweep spread ±{cmp.sweep_sd_pct:.1f} % ({cmp.sweep_df:.1f} degrees "
              "of freedom, from the sweeps each side repeated)"
              if cmp.sweep_sd is not None else
              "no sweep-to-sweep spread: each side has one sweep per configuration")
    return (f"threshold ±{100 * cmp.threshold:g} % · regression beyond {cmp.fail_above:g}x · "
            f"{spread} · one-sided tests at {100 * FAMILY_ALPHA:g} % family-wise over the "
            f"{cmp.family} configuration{'s' if cmp.family != 1 else ''} judged (step-down "
            "min-p) · ratio = candidate / baseline latency (geometric mean of round medians)")


def _summary(cmp: SetComparison) -> str:
    counts = ", ".join(f"{cmp.count(v)} {v}" for v in
                       (REGRESSION, IMPROVEMENT, "no change", NOT_COMPARABLE))
    return f"{rule_text(cmp)} · {counts}"


def verdict_table(cmp: SetComparison) -> str:
    return "\n".join([f"baseline {cmp.baseline} · candidate {cmp.candidate}",
                      format_table(VERDICT_HEADERS, verdict_rows(cmp)),
                      _summary(cmp)])


def gate_line(cmp: SetComparison) -> tuple[int, str]:
    """(exit status, one line why): 1 when a configuration's verdict is regression; else 2
    when something the baseline measured could not be judged (missing or failed in the
    candidate, another machine or policy, or one sweep on each side) or nothing was
    compared; else 0."""
    def n(k, what):
        return f"{k} configuration{'s' if k != 1 else ''} {what}"
    failing = cmp.failing()
    if failing:
        return 1, (f"regression gate: {n(len(failing), 'slower than')} {cmp.fail_above:g}x "
                   f"({100 * FAMILY_ALPHA:g} % family-wise over the configurations judged): exit 1")
    unverified, unjudged = cmp.unverified(), cmp.unjudged()
    if unverified:
        return 2, (f"regression gate: cannot judge: {n(len(unverified), 'measured')} in the "
                   "baseline without a comparable successful run in the candidate (missing, "
                   "failed, or on another machine or policy): exit 2")
    if not cmp.compared:
        return 2, ("regression gate: cannot judge: nothing could be compared (different "
                   "machine or measurement policy on every configuration): exit 2")
    if unjudged:
        return 2, (f"regression gate: cannot judge: {n(len(unjudged), 'compared')} with one "
                   "sweep on each side, which cannot tell a slower day from a slower build; "
                   "run the baseline again and select its sweeps together: exit 2")
    undecided = sum(c.decision.undecided for c in cmp.changes)
    more = f" ({undecided} undecided: more sweeps narrow them)" if undecided else ""
    return 0, (f"regression gate: no configuration slower than {cmp.fail_above:g}x among "
               f"{cmp.compared} compared{more}: exit 0")


def verdict_frame(cmp: SetComparison) -> pd.DataFrame:
    """The page's table: numbers as numbers (ratio, ms), the rest as text."""
    rows = []
    for ch, text in zip(cmp.changes, verdict_rows(cmp)):
        d = ch.decision
        rows.append({"configuration": text[0], "machine": text[1],
                     "baseline [ms]": ch.baseline_ms, "candidate [ms]": ch.candidate_ms,
                     "ratio": d.ratio, "95 % CI": text[5], "sweeps": text[6],
                     "rounds": text[7], "verdict": text[8], "note": d.note})
    return pd.DataFrame(rows, columns=["configuration", "machine", "baseline [ms]",
                                       "candidate [ms]", "ratio", "95 % CI", "sweeps",
                                       "rounds", "verdict", "note"])


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
