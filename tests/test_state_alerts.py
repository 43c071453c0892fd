"""Benchmark states through a real DuckDB file and a real local HTTP server: a group's sweeps,
marks refused to a session that may not launch, each change recorded once, the Atom feed,
and the webhook's body, one send per change and a retry after a failure (the waits
injected: nothing sleeps)."""

import json
import threading
from dataclasses import replace
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.etree import ElementTree as ET

import pytest

from dashboard.access import Access
from engine.alerts.update import update_states
from engine.alerts.webhook import Webhook
from engine.analysis.states import (ACKNOWLEDGED, DISTRIBUTION_CHANGE, IGNORED, INSUFFICIENT,
                                    NO_CHANGE, REGRESSION, SUSPICIOUS, StatePolicy)
from engine.core.errors import UserError
from engine.present.feed import ATOM_NS, atom_feed
from seeds.records import SYSTEM, ok_record
from store.db import open_db
from store.runs import save_record, save_sweep
from store.states import (add_mark, deliveries, group_marks, group_states, join_group,
                          state_changes, withdraw_mark)

GROUP = "nightly <cpu> & co"  # a name the feed must escape
BASE = "http://dash.example/app"
WRITER = Access(viewer=False, remote=False, auth_configured=False, email=None, admin=False)
VIEWER = replace(WRITER, viewer=True)
MODELS = ("resnet18", "mobilenet_v3_small")
DAY = (1.00, 1.01, 0.99, 1.005, 0.995, 1.0, 1.01, 0.99)


class Clock:
    """Injected time: each call one minute later."""

    def __init__(self):
        self.t = datetime(2026, 3, 1, 9, 0)

    def __call__(self):
        self.t += timedelta(minutes=1)
        return self.t


def add_sweeps(db_path, levels: dict[int, float]) -> None:
    """Sweeps d of the group (one open of the file for them all): resnet18 at 2 ms x level,
    mobilenet at 4 ms, three rounds each."""
    with open_db(db_path) as con:
        for d, level in levels.items():
            sid = f"sweep-{d:02d}"
            save_sweep(con, sid, rounds=3, seed=d, plan=[], configurations=2)
            for model, ms in zip(MODELS, (2.0 * level, 4.0)):
                for r in (1, 2, 3):
                    ns = int(ms * DAY[d % len(DAY)] * (1 + 0.002 * r) * 1e6)
                    rec = ok_record(f"{sid}-{model}-{r}", samples=(ns, ns, ns), model=model)
                    save_record(con, replace(rec, sweep_id=sid, round_no=r), SYSTEM)
            join_group(con, GROUP, sid, source="http://dash.example/app/run?model=resnet18")


def steady(db_path, clock, **kw):
    """Six sweeps of an unchanged build, then the group's first update."""
    add_sweeps(db_path, {d: 1.0 for d in range(6)})
    update(db_path, clock, **kw)


def update(db_path, clock, **kw):
    return update_states(db_path, GROUP, clock=clock, sleep=kw.pop("sleep", None) or
                         (lambda s: pytest.fail("slept without a retry")), **kw)


class Hook:
    """A real HTTP server on 127.0.0.1, port 0, in a thread: it keeps every body and
    answers with the next scripted status (then 200)."""

    def __init__(self, statuses=()):
        self.bodies, self.statuses = [], list(statuses)
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers["Content-Length"])
                hook.bodies.append((self.headers["Content-Type"],
                                    json.loads(self.rfile.read(n))))
                self.send_response(hook.statuses.pop(0) if hook.statuses else 200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/T000/secret"

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def hook():
    h = Hook()
    yield h
    h.close()


def test_marks_are_stored_for_everyone_and_refused_to_a_session_that_may_not_launch(db_path):
    add_sweeps(db_path, {d: 1.0 for d in range(4)})
    with open_db(db_path) as con:
        (state, _) = group_states(con, GROUP, StatePolicy())
        with pytest.raises(UserError) as e:
            add_mark(con, VIEWER, group=GROUP, kind=IGNORED, who="ana", why="flaky",
                     config_key=state.key)
        assert e.value.field == "mark" and "viewer mode" in str(e.value)
        assert group_marks(con, GROUP) == []
        for kw, field in ((dict(kind="mute"), "kind"), (dict(why=" "), "why"),
                          (dict(kind=ACKNOWLEDGED, state="fine", sweep_id="sweep-03"), "state"),
                          (dict(kind=DISTRIBUTION_CHANGE, sweep_id="nope"), "sweep"),
                          (dict(group="other"), "group")):
            with pytest.raises(UserError) as e:
                add_mark(con, WRITER, **{**dict(group=GROUP, kind=IGNORED, who="ana",
                                                why="flaky", config_key=state.key), **kw})
            assert e.value.field == field
        m = add_mark(con, WRITER, group=GROUP, kind=IGNORED, who="ana@example.com",
                     why="flaky on this VM", config_key=state.key, now=datetime(2026, 3, 1))
        assert group_marks(con, GROUP) == [m]
        assert [s.shown for s in group_states(con, GROUP, StatePolicy())
                if s.key == state.key] == [IGNORED]
        with pytest.raises(UserError) as e:
            withdraw_mark(con, VIEWER, m.mark_id, who="bob")
        assert e.value.field == "mark"
        withdraw_mark(con, WRITER, m.mark_id, who="ana@example.com")
        assert group_marks(con, GROUP) == []
        with pytest.raises(UserError):
            withdraw_mark(con, WRITER, m.mark_id, who="ana@example.com")


def test_each_change_is_recorded_once_and_an_acknowledged_state_stays_quiet(db_path):
    clock, seen = Clock(), []
    for days, level in ((range(3), 1.0), (range(3, 6), 1.0), ([6], 1.3), ([7], 1.3),
                        ([8], 1.3)):
        add_sweeps(db_path, {d: level for d in days})
        got = update(db_path, clock)
        seen += [(days[-1], c.configuration.split()[0], c.old_state, c.new_state, c.alert)
                 for c in got.changes]
    assert seen == [(2, "mobilenet_v3_small", None, INSUFFICIENT, False),
                    (2, "resnet18", None, INSUFFICIENT, False),
                    (5, "mobilenet_v3_small", INSUFFICIENT, NO_CHANGE, False),
                    (5, "resnet18", INSUFFICIENT, NO_CHANGE, False),
                    (6, "resnet18", NO_CHANGE, SUSPICIOUS, False),
                    (7, "resnet18", SUSPICIOUS, REGRESSION, True)]
    again = update(db_path, clock)
    assert again.changes == () and again.exit_status == 1
    with open_db(db_path) as con:
        (alert,) = state_changes(con, group=GROUP)
        assert (alert.new_state, alert.sweep_id, alert.since) == (REGRESSION, "sweep-07",
                                                                 "sweep-07")
        assert [round(p.ratio, 2) for p in alert.points] == [1.31, 1.29]
        assert len(state_changes(con, group=GROUP, alerts_only=False)) == 6
        add_mark(con, WRITER, group=GROUP, kind=ACKNOWLEDGED, who="ana", why="the new "
                 "allocator; accepted", config_key=alert.config_key, state=REGRESSION,
                 sweep_id=alert.since)
    quiet = update(db_path, clock)
    assert quiet.changes == () and quiet.exit_status == 0
    assert quiet.states[-1].acknowledged.who == "ana"


def test_the_atom_feed_has_an_entry_per_alert_with_its_link(db_path):
    clock = Clock()
    steady(db_path, clock)
    for d in (6, 7):
        add_sweeps(db_path, {d: 1.3})
        update(db_path, clock)
    with open_db(db_path) as con:
        changes = state_changes(con, group=GROUP)
    xml = atom_feed(changes, title=f"{GROUP} states", feed_url=f"{BASE}/feed.xml",
                    base_url=BASE, policy=StatePolicy(), updated=datetime(2026, 3, 1))
    root = ET.fromstring(xml.encode())
    a = f"{{{ATOM_NS}}}"
    assert root.tag == f"{a}feed"
    assert root.find(f"{a}title").text == "nightly <cpu> & co states"
    assert root.find(f"{a}id").text.startswith("urn:uuid:")
    assert root.find(f"{a}updated").text == "2026-03-01T09:03:00Z"
    assert root.find(f"{a}link[@rel='self']").get("href") == f"{BASE}/feed.xml"
    (entry,) = root.findall(f"{a}entry")
    assert entry.find(f"{a}id").text == f"urn:uuid:{changes[0].change_id[:8]}-" \
        f"{changes[0].change_id[8:12]}-{changes[0].change_id[12:16]}-" \
        f"{changes[0].change_id[16:20]}-{changes[0].change_id[20:]}"
    assert entry.find(f"{a}title").text.startswith("regression: resnet18")
    assert entry.find(f"{a}updated").text == "2026-03-01T09:03:00Z"
    assert entry.find(f"{a}category").get("term") == REGRESSION
    link = entry.find(f"{a}link").get("href")
    assert link.startswith(f"{BASE}/history?baseline=sweep-00%2Csweep-01%2Csweep-02%2C"
                           "sweep-03%2Csweep-04%2Csweep-05&candidate=sweep-07&threshold=10"
                           "&config=resnet18")
    empty = ET.fromstring(atom_feed([], title="t", feed_url=f"{BASE}/f", base_url=BASE,
                                    policy=StatePolicy(), updated=datetime(2026, 2, 1, 8)))
    assert empty.find(f"{a}updated").text == "2026-02-01T08:00:00Z"
    assert empty.findall(f"{a}entry") == []


def test_the_webhook_gets_one_json_post_per_alert_with_the_change_and_its_link(db_path, hook):
    clock = Clock()
    webhook = Webhook(hook.url, BASE)
    steady(db_path, clock, webhook=webhook)
    for d in (6, 7, 8):
        add_sweeps(db_path, {d: 1.3})
        update(db_path, clock, webhook=webhook)
    assert len(hook.bodies) == 1  # insufficient data, no change and suspicious are not sent
    content_type, body = hook.bodies[0]
    assert content_type == "application/json"
    change = body["change"]
    assert (change["old_state"], change["new_state"], change["sweep_id"], change["group"]) == (
        SUSPICIOUS, REGRESSION, "sweep-07", GROUP)
    assert round(change["ratio"], 2) == 1.29 and change["ci"][0] < 1.3 < change["ci"][1]
    assert change["baseline_sweeps"] == [f"sweep-0{d}" for d in range(6)]
    assert body["text"].startswith("regression (was suspicious) · resnet18")
    assert body["text"].endswith("\n" + change["link"])
    assert change["link"].startswith(f"{BASE}/history?baseline=")
    update(db_path, clock, webhook=webhook)  # nothing changed: nothing sent
    assert len(hook.bodies) == 1
    with open_db(db_path) as con:
        (sent,) = deliveries(con, change["id"])
    assert (sent["attempt"], sent["status"], sent["ok"], sent["final"]) == (1, 200, True, True)
    assert sent["target"].startswith("127.0.0.1#") and "secret" not in sent["target"]


def test_a_failed_post_is_retried_after_the_injected_wait_and_every_attempt_recorded(db_path):
    hook, clock, waits = Hook([500]), Clock(), []
    try:
        webhook = Webhook(hook.url, BASE, tries=3, backoff_s=2.0)
        steady(db_path, clock, webhook=webhook)
        for d in (6, 7):
            add_sweeps(db_path, {d: 1.3})
            update(db_path, clock, webhook=webhook, sleep=waits.append)
        assert waits == [2.0] and len(hook.bodies) == 2
        assert hook.bodies[0][1] == hook.bodies[1][1]  # the same body, sent again
        with open_db(db_path) as con:
            (alert,) = state_changes(con, group=GROUP)
            tries = deliveries(con, alert.change_id)
        assert [(t["attempt"], t["status"], t["ok"], t["final"]) for t in tries] == [
            (1, 500, False, False), (2, 200, True, True)]
        # a webhook down for a whole update: its tries fail, and the next update tries again
        hook.statuses = [503, 503, 503]
        add_sweeps(db_path, {8: 1.0})  # back inside: recovered, an alert
        update(db_path, clock, webhook=webhook, sleep=waits.append)
        assert waits == [2.0, 2.0, 4.0] and len(hook.bodies) == 5
        later = update(db_path, clock, webhook=webhook, sleep=waits.append)
        assert [(s.attempts, s.ok) for s in later.sent] == [(1, True)]
        with open_db(db_path) as con:
            newest = state_changes(con, group=GROUP)[0]
            assert [t["status"] for t in deliveries(con, newest.change_id)] == [503, 503, 503,
                                                                               200]
    finally:
        hook.close()


def test_a_webhook_refused_with_a_4xx_is_not_retried_and_a_bad_address_is_refused(db_path):
    hook, clock = Hook([404]), Clock()
    try:
        steady(db_path, clock)
        for d in (6, 7):
            add_sweeps(db_path, {d: 1.3})
            got = update(db_path, clock, webhook=Webhook(hook.url, BASE))
        assert [(s.attempts, s.ok) for s in got.sent] == [(1, False)]
        assert update(db_path, clock, webhook=Webhook(hook.url, BASE)).sent == ()
    finally:
        hook.close()
    for url, field in (("file:///etc/passwd", "webhook"), ("http://", "webhook")):
        with pytest.raises(UserError) as e:
            update(db_path, clock, webhook=Webhook(url, BASE))
        assert e.value.field == field
    with pytest.raises(UserError) as e:
        update(db_path, clock, webhook=Webhook(hook.url, "dash"))
    assert e.value.field == "base_url"
