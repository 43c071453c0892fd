"""Benchmark states in the store: a group's sweeps, people's marks, each state change once,
and every attempt to deliver one (tables from m016_states). What a state is and how it is
read is engine/analysis/states.py and state_timeline.py; this module keeps what people and
the updates did, so everyone who opens the dashboard sees the same marks and alerts.

The tables (m016_states): `state_groups`, which sweeps form a group (the same sweep run day
after day; source: the Run link it was run from); `state_marks`, people's marks, append-only
(a withdrawn one keeps who withdrew it and when); `state_changes`, each state change once,
with its evidence and the policy it was read by; `alert_deliveries`, every attempt to send
one to a webhook, the target named by the URL's host and a digest of the URL, never the URL,
whose path is the secret of a Slack or Teams webhook.

A mark changes what everyone sees, so it follows the launching rule: a session that may not
launch (engine.core.errors.refuse_read_only) is refused with the reason, and a viewer only
reads.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict
from datetime import datetime, timezone

from engine.analysis.state_timeline import SweepRows, latest, timeline
from engine.analysis.states import (ACKNOWLEDGED, DISTRIBUTION_CHANGE, IGNORED, MARK_KINDS,
                                    STATES, ConfigState, Mark, Point, StateChange, StatePolicy)
from engine.core.errors import UserError, plain_text, refuse_read_only
from engine.core.limits import MARK_TEXT_MAX, choice
from store.history import sweep_runs

__all__ = ["join_group", "group_names", "group_sweep_ids", "require_group", "group_series",
           "group_states",
           "group_timeline", "add_mark",
           "withdraw_mark", "group_marks", "record_changes", "state_changes",
           "pending_alerts", "record_delivery", "deliveries", "group_policy", "states_version",
           "MAX_ATTEMPTS"]

# Every attempt to deliver one change to one target, over all updates: past it the change
# is not tried there again (a URL that has failed this often needs a person, not a retry).
MAX_ATTEMPTS = 12


def _now(now: datetime | None) -> datetime:
    """UTC without a zone, as every timestamp in the store."""
    now = now or datetime.now(timezone.utc)
    return now.astimezone(timezone.utc).replace(tzinfo=None) if now.tzinfo else now


def _text(field: str, value: str | None, *, required: bool = True) -> str:
    text = plain_text((value or "").strip())
    if required and not text:
        raise UserError(f"{field}: empty; allowed: 1..{MARK_TEXT_MAX} characters of text",
                        field=field)
    if len(text) > MARK_TEXT_MAX:
        raise UserError(f"{field}: {len(text)} characters is too long; allowed: 1.."
                        f"{MARK_TEXT_MAX} characters", field=field)
    return text


def join_group(con, group: str, sweep_id: str, *, source: str | None = None,
               now: datetime | None = None) -> None:
    """Make a stored sweep one of the group's (again is a no-op). source: what it was run
    from (a Run link), kept for whoever runs the group next."""
    group = _text("group", group)
    if not con.execute("SELECT count(*) FROM sweeps WHERE sweep_id = ?",
                       [sweep_id]).fetchall()[0][0]:
        raise UserError(f"sweep: {sweep_id!r} is not a stored sweep; allowed: a sweep id "
                        "from `python -m engine history`", field="sweep")
    con.execute("INSERT INTO state_groups VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [group, sweep_id, source, _now(now)])


def group_names(con) -> list[str]:
    return [r[0] for r in con.execute("SELECT DISTINCT group_name FROM state_groups "
                                      "ORDER BY group_name").fetchall()]


def group_sweep_ids(con, group: str) -> list[str]:
    """The group's sweeps, oldest first (by when each sweep was made)."""
    return [r[0] for r in con.execute(
        "SELECT g.sweep_id FROM state_groups g JOIN sweeps s USING (sweep_id) "
        "WHERE g.group_name = ? ORDER BY s.created_at, g.sweep_id", [group]).fetchall()]


def require_group(con, group: str) -> list[str]:
    """The group's sweep ids, or UserError naming the groups there are."""
    ids = group_sweep_ids(con, group)
    if not ids:
        names = group_names(con)
        raise UserError(f"group: {group!r} has no sweeps; allowed: one of "
                        f"{', '.join(names) if names else '(none yet)'}", field="group")
    return ids


def group_series(con, group: str) -> list[SweepRows]:
    """The group's sweeps with their inference runs, oldest first: what
    engine.analysis.state_timeline.timeline reads."""
    ids = group_sweep_ids(con, group)
    dates = dict(con.execute("SELECT sweep_id, created_at FROM sweeps WHERE "
                             "list_contains(?::VARCHAR[], sweep_id)", [ids]).fetchall())
    by_sweep: dict = {i: [] for i in ids}
    for r in sweep_runs(con, ids):
        by_sweep[r["sweep_id"]].append(r)
    return [SweepRows(i, dates.get(i), tuple(by_sweep[i])) for i in ids]


def group_states(con, group: str, policy: StatePolicy) -> list[ConfigState]:
    """Every configuration's state as of the group's newest sweep, worst first, with the
    marks in force: what the board shows (a read; a viewer's connection will do)."""
    require_group(con, group)
    return latest(group_series(con, group), group_marks(con, group), policy)


def group_timeline(con, group: str, policy: StatePolicy) -> dict:
    """Each configuration's state as of every sweep of the group (its evidence over time)."""
    require_group(con, group)
    return timeline(group_series(con, group), group_marks(con, group), policy)


def add_mark(con, access, *, group: str, kind: str, who: str, why: str,
             config_key: str | None = None, state: str | None = None,
             sweep_id: str | None = None, now: datetime | None = None) -> Mark:
    """A person's mark on a group's configuration, for everyone. kind: acknowledged (state
    and sweep_id: the state and the sweep it began at, ConfigState.state and .since),
    ignored, or distribution change (sweep_id: a new baseline from it on; config_key None:
    every configuration of the group). access: the session's (dashboard.access.Access); a
    session that may not launch is refused."""
    refuse_read_only(access, "mark")
    choice("kind", kind, MARK_KINDS)
    who, why = _text("who", who), _text("why", why)
    ids = require_group(con, _text("group", group))
    if kind in (ACKNOWLEDGED, IGNORED) and not config_key:
        raise UserError(f"config: {kind} names one configuration; allowed: a configuration "
                        "of the group", field="config")
    if kind == ACKNOWLEDGED:
        choice("state", state, STATES)
    if kind in (ACKNOWLEDGED, DISTRIBUTION_CHANGE) and sweep_id not in ids:
        raise UserError(f"sweep: {sweep_id!r} is not a sweep of group {group!r}; allowed: "
                        f"one of its {len(ids)} sweeps", field="sweep")
    m = Mark(uuid.uuid4().hex, kind, config_key, who, _now(now), why,
             state if kind == ACKNOWLEDGED else None,
             sweep_id if kind != IGNORED else None)
    con.execute("INSERT INTO state_marks (mark_id, group_name, config_key, kind, state, "
                "sweep_id, who, marked_at, why) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [m.mark_id, group, m.config_key, m.kind, m.state, m.sweep_id, m.who, m.at,
                 m.why])
    return m


def withdraw_mark(con, access, mark_id: str, *, who: str, now: datetime | None = None) -> None:
    """Take a mark back (it stays in the table with who withdrew it and when)."""
    refuse_read_only(access, "mark")
    who = _text("who", who)
    found = con.execute("SELECT withdrawn_at FROM state_marks WHERE mark_id = ?",
                        [mark_id]).fetchall()
    if not found or found[0][0] is not None:
        raise UserError(f"mark: {mark_id!r} is not a mark in force; allowed: a mark shown "
                        "beside a state", field="mark")
    con.execute("UPDATE state_marks SET withdrawn_by = ?, withdrawn_at = ? WHERE mark_id = ?",
                [who, _now(now), mark_id])


def group_marks(con, group: str) -> list[Mark]:
    """The group's marks in force, oldest first."""
    return [Mark(*r) for r in con.execute(
        "SELECT mark_id, kind, config_key, who, marked_at, why, state, sweep_id FROM "
        "state_marks WHERE group_name = ? AND withdrawn_at IS NULL ORDER BY marked_at, mark_id",
        [group]).fetchall()]


def _last_states(con, group: str) -> dict[str, str]:
    # the last row inserted, not the latest time: an injected clock may stand still
    return dict(con.execute(
        "SELECT config_key, arg_max(new_state, rowid) FROM state_changes WHERE group_name = ? "
        "GROUP BY config_key", [group]).fetchall())


def record_changes(con, group: str, states: list[ConfigState], policy: StatePolicy, *,
                   now: datetime | None = None) -> list[StateChange]:
    """Store each configuration whose state differs from the last one recorded for it (the
    first state of each too), once: run again on the same states, it records nothing. An
    ignored configuration records nothing while it is ignored. Returns what it recorded."""
    last = _last_states(con, group)
    at = _now(now)
    out = []
    for s in states:
        old = last.get(s.key)
        if s.ignored is not None or old == s.state:
            continue
        ch = StateChange(uuid.uuid4().hex, group, s.key, s.config.label, s.sweep_id, old,
                         s.state, s.since, policy.alerts(old, s.state), s.note, s.points, at)
        con.execute("INSERT INTO state_changes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [ch.change_id, group, ch.config_key, ch.configuration, ch.sweep_id, old,
                     ch.new_state, ch.since, ch.alert, ch.note,
                     json.dumps([p.to_dict() for p in ch.points]),
                     json.dumps(asdict(policy)), at])
        out.append(ch)
    return out


_CHANGES = ("SELECT change_id, group_name, config_key, configuration, sweep_id, old_state, "
            "new_state, since, alert, note, points, recorded_at FROM state_changes ")


def _change(row) -> StateChange:
    *head, points, at = row
    return StateChange(*head, tuple(Point.from_dict(p) for p in json.loads(points)), at)


def state_changes(con, *, group: str | None = None, alerts_only: bool = True,
                  limit: int = 50) -> list[StateChange]:
    """Recorded changes, newest first: a group's or every group's, the ones sent to people
    (alerts_only) or all."""
    return [_change(r) for r in con.execute(
        _CHANGES + "WHERE (?::VARCHAR IS NULL OR group_name = ?) AND (alert OR NOT ?) "
        "ORDER BY recorded_at DESC, rowid DESC LIMIT ?",
        [group, group, alerts_only, limit]).fetchall()]


def pending_alerts(con, target: str, new: list[str]) -> list[StateChange]:
    """The alerts to try delivering to target now, oldest first: those just recorded (new:
    their ids) and earlier ones whose attempts there all failed short of a final answer
    and of MAX_ATTEMPTS. A change recorded while no webhook was set is never sent later."""
    return [_change(r) for r in con.execute(
        _CHANGES + "WHERE alert AND change_id NOT IN (SELECT change_id FROM alert_deliveries "
        "WHERE target = ? AND (ok OR final)) AND (list_contains(?::VARCHAR[], change_id) OR "
        "change_id IN (SELECT change_id FROM alert_deliveries WHERE target = ? "
        "GROUP BY change_id HAVING count(*) < ?)) ORDER BY recorded_at, rowid",
        [target, list(new), target, MAX_ATTEMPTS]).fetchall()]


def record_delivery(con, change_id: str, target: str, *, status: int | None,
                    error: str | None, ok: bool, final: bool,
                    now: datetime | None = None) -> int:
    """One attempt to deliver a change to a target, numbered from 1; returns its number."""
    (n,) = con.execute("SELECT count(*) FROM alert_deliveries WHERE change_id = ? AND "
                       "target = ?", [change_id, target]).fetchall()[0]
    con.execute("INSERT INTO alert_deliveries VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [change_id, target, n + 1, _now(now), status,
                 None if error is None else plain_text(error)[:MARK_TEXT_MAX], ok,
                 final or n + 1 >= MAX_ATTEMPTS])
    return n + 1


def deliveries(con, change_id: str) -> list[dict]:
    """Every attempt to deliver one change, in order: target, attempt, tried_at, status,
    error, ok, final."""
    cur = con.execute("SELECT target, attempt, tried_at, status, error, ok, final FROM "
                      "alert_deliveries WHERE change_id = ? ORDER BY target, attempt",
                      [change_id])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def group_policy(con, group: str) -> StatePolicy | None:
    """The policy the group's last update read its states by (what `watch` was given), so
    the board shows the states the alerts were sent on; None before any update."""
    row = con.execute("SELECT policy FROM state_changes WHERE group_name = ? "
                      "ORDER BY rowid DESC LIMIT 1", [group]).fetchall()
    if not row:
        return None
    d = json.loads(row[0][0])
    return StatePolicy(**{**d, "alert_states": tuple(d["alert_states"])})


def states_version(con) -> tuple:
    """What store.queries.data_version adds for these tables (a mark made or withdrawn, a
    sweep joined, a change recorded), so a page's cached reads see them at once; () on a
    file not yet migrated (a viewer opens one as it is)."""
    if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = "
                       "'state_marks'").fetchall()[0][0]:
        return ()
    return con.execute("SELECT (SELECT count(*) FROM state_groups), (SELECT count(*) FROM "
                       "state_marks), (SELECT count(withdrawn_at) FROM state_marks), "
                       "(SELECT count(*) FROM state_changes)").fetchall()[0]
