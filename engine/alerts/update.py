"""A group's states brought up to date: read its sweeps and marks, judge them
(engine/analysis/state_timeline.py), record each change once (store/states.py) and send the
alerts to a webhook, if one is set. What `watch` calls after its sweep, and anything that
adds a sweep to a group."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable

from engine.alerts.webhook import Attempt, Sent, Webhook, utc_now, deliver, post_json
from engine.analysis.state_timeline import latest
from engine.analysis.states import ConfigState, StateChange, StatePolicy, exit_status
from engine.present.feed import atom_feed, feed_url
from store.db import open_db
from store.states import (group_marks, group_series, record_changes, require_group,
                          state_changes)

__all__ = ["Update", "update_states", "write_feed"]


@dataclass(frozen=True)
class Update:
    """What one update found and did: every configuration's state as of the group's newest
    sweep (worst first), the changes it recorded, and the alerts it sent."""

    group: str
    states: tuple[ConfigState, ...]
    changes: tuple[StateChange, ...]
    sent: tuple[Sent, ...] = ()

    @property
    def exit_status(self) -> int:
        """The gate's: 0 no regression, 1 a regression nobody acknowledged, 2 something
        could not be judged (engine.analysis.states.exit_status)."""
        return exit_status(self.states)


def update_states(db, group: str, *, policy: StatePolicy | None = None,
                  webhook: Webhook | None = None,
                  post: Callable[[str, dict, float], Attempt] = post_json,
                  sleep: Callable[[float], None] = time.sleep,
                  clock: Callable[[], datetime] = utc_now) -> Update:
    """Judge the group's sweeps, record what changed and send it. The database is opened
    once to judge and record, then per delivery attempt: never held while posting."""
    policy = (policy or StatePolicy()).validate()
    if webhook is not None:
        webhook.validate()  # a bad address is refused before anything is recorded
    with open_db(db) as con:  # one operation: judging a year of sweeps takes a second
        require_group(con, group)
        states = latest(group_series(con, group), group_marks(con, group), policy)
        changes = record_changes(con, group, states, policy, now=clock())
    sent = () if webhook is None else tuple(deliver(
        db, webhook, policy, [c.change_id for c in changes], post=post, sleep=sleep,
        clock=clock))
    return Update(group, tuple(states), tuple(changes), sent)


def write_feed(db, group: str, policy, base_url: str, out: Path, now) -> str:
    """The group's alerts as an Atom file, written whole then renamed over the old one (a
    reader never fetches half a file); returns the address it is served at."""
    with open_db(db) as con:
        changes = state_changes(con, group=group, alerts_only=True, limit=100)
    url = feed_url(base_url, group)
    text = atom_feed(changes, title=f"Benchmark states: {group}", feed_url=url,
                     base_url=base_url, policy=policy, updated=now)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    return url
