"""Benchmark states in words: the policy stated once, a state or a change in one line with its
evidence, the view it opens, and a webhook's JSON body. Pure, so the board, the feed, a
webhook and `watch` say the same thing."""

from __future__ import annotations

from engine.analysis.regress import FAMILY_ALPHA
from engine.analysis.states import (INSUFFICIENT, MISSING, NOT_COMPARABLE, REGRESSION,
                                    ConfigState, Point, StateChange, StatePolicy, exit_status,
                                    worst_first)
from engine.present.links import view_url

__all__ = ["policy_text", "evidence_text", "state_line", "change_line", "state_link",
           "change_link", "webhook_body", "status_line", "board_text", "HISTORY_PAGE",
           "SWEEP_PREFIX"]

HISTORY_PAGE = "history"  # app.py's url_path of the page that compares sweeps
# A link names a sweep by a prefix (the History page takes a unique one): seven full ids
# would pass the 200 characters a link value may hold (engine/present/links.MAX_VALUE_LEN).
SWEEP_PREFIX = 12


def policy_text(policy: StatePolicy) -> str:
    """The policy every state is read by, in one paragraph: shown once beside the states."""
    p = policy
    return (f"Each sweep is judged by the regression gate against the configuration's last "
            f"{p.window} baseline sweeps (at least {p.min_baseline}; none beyond the "
            f"threshold, same machine, framework versions and measurement policy): slower "
            f"than {p.upper:g}x or faster than 1/{1 + p.threshold:g}x, one-sided at "
            f"{100 * FAMILY_ALPHA:g} % family-wise over the sweep's configurations. "
            f"regression: the last {p.confirm} or more sweeps slower; suspicious: a slower "
            f"sweep among the last {p.lookback} that is not (yet) a regression; recovered: "
            f"back inside within {p.lookback} sweeps after a regression; improvement: the last "
            f"{p.confirm} or more faster; insufficient data: fewer than {p.min_baseline} "
            f"baseline sweeps; missing: measured by each of the last {p.missing_after} sweeps "
            "and not by the newest; not comparable: another machine, framework versions or "
            "measurement policy than every baseline sweep's, never judged.")


def _point(p: Point) -> str:
    ci = "" if p.ci_low is None else f" (95 % CI {p.ci_low:.2f}-{p.ci_high:.2f})"
    ratio = "" if p.ratio is None else f"{p.ratio:.2f}x{ci}"
    return f"{ratio} in sweep {p.sweep_id[:8]}"


def evidence_text(points: tuple[Point, ...]) -> str:
    """The newest point first, then the others' ratios: '1.30x (95 % CI 1.27-1.33) in
    sweep s08 against 6 baseline sweeps; earlier 1.31x, 1.29x'."""
    if not points:
        return "no judged point"
    newest = points[-1]
    text = f"{_point(newest)} against {len(newest.baseline)} baseline sweeps"
    earlier = [f"{p.ratio:.2f}x" for p in points[:-1] if p.ratio is not None]
    return text + (f"; earlier {', '.join(earlier)}" if earlier else "")


def state_line(s: ConfigState) -> str:
    """One configuration's state in one line, with its marks and evidence."""
    marks = []
    if s.acknowledged is not None:
        marks.append(f"acknowledged by {s.acknowledged.who}: {s.acknowledged.why}")
    if s.ignored is not None:
        marks.append(f"ignored by {s.ignored.who}: {s.ignored.why}")
    detail = evidence_text(s.points) if s.points else s.note
    return (f"{s.shown} · {s.config.label} · since sweep {s.since[:8]} · {detail}"
            + "".join(f" · {m}" for m in marks))


def change_line(ch: StateChange) -> str:
    """A change in one line: what it became, of what, on what evidence, from what."""
    detail = evidence_text(ch.points) if ch.points else ch.note
    was = f" (was {ch.old_state})" if ch.old_state else ""
    return f"{ch.new_state}{was} · {ch.configuration} · {detail}"


def state_link(base_url: str, sweep_id: str, configuration: str, points: tuple[Point, ...],
               policy: StatePolicy) -> str:
    """The History page comparing the newest point's baseline sweeps with its sweep, the
    configuration chosen: the gate's table and the configuration over time."""
    newest = points[-1] if points else None
    return view_url(base_url, HISTORY_PAGE, {
        "baseline": ",".join(b[:SWEEP_PREFIX] for b in newest.baseline) if newest else "",
        "candidate": (newest.sweep_id if newest else sweep_id)[:SWEEP_PREFIX],
        "threshold": f"{100 * policy.threshold:g}",
        "config": configuration})


def change_link(base_url: str, ch: StateChange, policy: StatePolicy) -> str:
    return state_link(base_url, ch.sweep_id, ch.configuration, ch.points, policy)


def webhook_body(ch: StateChange, link: str) -> dict:
    """A webhook's JSON body: `text` for Slack's and Teams' incoming webhooks (a line and the
    link), `change` for anything that reads fields."""
    newest = ch.newest
    return {"text": f"{change_line(ch)}\n{link}",
            "change": {"id": ch.change_id, "group": ch.group,
                       "configuration": ch.configuration, "old_state": ch.old_state,
                       "new_state": ch.new_state, "sweep_id": ch.sweep_id, "since": ch.since,
                       "at": ch.at.isoformat() + "Z", "note": ch.note,
                       "ratio": newest.ratio if newest else None,
                       "ci": [newest.ci_low, newest.ci_high] if newest else None,
                       "baseline_sweeps": list(newest.baseline) if newest else [],
                       "link": link}}


def status_line(states) -> tuple[int, str]:
    """(exit status, one line why), as the regression gate says its own (gate_line):
    engine.analysis.states.exit_status's rule in words."""
    code = exit_status(states)
    live = [s for s in states if s.ignored is None]
    if code == 1:
        n = sum(s.state == REGRESSION and s.acknowledged is None for s in live)
        return 1, f"states: {n} regression(s) nobody acknowledged: exit 1"
    if code == 2:
        gone = sum(s.state in (MISSING, NOT_COMPARABLE) and s.acknowledged is None
                   for s in live)
        if gone:
            return 2, (f"states: cannot judge: {gone} configuration(s) missing or not "
                       "comparable (another machine, framework versions or policy): exit 2")
        few = sum(s.state == INSUFFICIENT for s in live)
        return 2, (f"states: cannot judge: {few} configuration(s) with insufficient data "
                   "(too few baseline sweeps yet) and none judged: exit 2")
    return 0, f"states: no unacknowledged regression among {len(live)} judged: exit 0"


def board_text(states, policy: StatePolicy) -> str:
    """The board as text (watch's output, the report's section): the policy once, then one
    line per configuration, worst first."""
    lines = [f"Policy: {policy_text(policy)}", ""]
    lines += [state_line(s) for s in worst_first(states)] or ["(no configuration)"]
    return "\n".join(lines)
