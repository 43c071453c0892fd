"""A webhook for state changes: a JSON POST to a configured URL (a Slack or Teams incoming
webhook, or anything that reads JSON) with a line, the change's fields and a link to the
view. Each alert is sent once per target: tried up to `tries` times in an update, waiting
`backoff_s`, then twice that, between tries (the wait injected, so tests never sleep), and
every attempt recorded (store/states.py); one that failed short of a final answer is tried
again at the next update, up to store.states.MAX_ATTEMPTS in all. urllib only: no client
library for one POST.
"""

from __future__ import annotations

import hashlib
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable
from urllib.parse import urlsplit

from engine.analysis.states import StatePolicy
from engine.core.errors import UserError
from engine.core.limits import WEBHOOK_TRIES_RANGE, int_range
from engine.present.states_text import change_link, webhook_body
from store.db import open_db
from store.states import pending_alerts, record_delivery

__all__ = ["Webhook", "Attempt", "Sent", "post_json", "deliver", "utc_now"]


@dataclass(frozen=True)
class Webhook:
    """Where alerts go and how hard to try: url (http or https), base_url (the dashboard's
    address, for each alert's link), tries per alert per update, the first wait between
    tries and each POST's timeout."""

    url: str
    base_url: str
    tries: int = 3
    backoff_s: float = 2.0
    timeout_s: float = 10.0

    def validate(self) -> "Webhook":
        for field, value in (("webhook", self.url), ("base_url", self.base_url)):
            parts = urlsplit(value or "")
            # urllib would open file: and ftp: addresses too: only the web is a webhook
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise UserError(f"{field}: {value!r} is not an address; allowed: an http:// "
                                "or https:// URL with a host", field=field)
        int_range("tries", self.tries, *WEBHOOK_TRIES_RANGE)
        return self

    @property
    def target(self) -> str:
        """How the store names this webhook: its host and a digest of the whole URL, whose
        path is the secret of a Slack or Teams webhook."""
        digest = hashlib.sha256(self.url.encode()).hexdigest()[:12]
        return f"{urlsplit(self.url).hostname}#{digest}"


@dataclass(frozen=True)
class Attempt:
    """What one POST got: the HTTP status (None: no answer), the error, whether it was
    delivered, and whether trying again could help (no answer, 429 or a 5xx)."""

    status: int | None
    error: str | None
    ok: bool
    retry: bool


@dataclass(frozen=True)
class Sent:
    """One alert's delivery in this update: its change, the attempts it took and whether
    it got through."""

    change_id: str
    attempts: int
    ok: bool


def post_json(url: str, body: dict, timeout_s: float) -> Attempt:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": "bench-dashboard-alerts"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return Attempt(resp.status, None, 200 <= resp.status < 300, False)
    except urllib.error.HTTPError as exc:
        return Attempt(exc.code, f"HTTP {exc.code} {exc.reason}", False,
                       exc.code == 429 or exc.code >= 500)
    except (urllib.error.URLError, OSError) as exc:  # refused, unreachable, timed out
        return Attempt(None, str(getattr(exc, "reason", exc)), False, True)


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def deliver(db, webhook: Webhook, policy: StatePolicy, new: list[str], *,
            post: Callable[[str, dict, float], Attempt] = post_json,
            sleep: Callable[[float], None] = time.sleep,
            clock: Callable[[], datetime] = utc_now) -> list[Sent]:
    """Send the alerts pending for this webhook (new: the ids just recorded; earlier ones
    that failed are retried too), oldest first, recording every attempt. The database is
    opened per read and per attempt, never held across a POST."""
    webhook.validate()
    with open_db(db) as con:
        pending = pending_alerts(con, webhook.target, new)
    out = []
    for ch in pending:
        body = webhook_body(ch, change_link(webhook.base_url, ch, policy))
        got = None
        for k in range(webhook.tries):
            if k:
                sleep(webhook.backoff_s * 2 ** (k - 1))
            got = post(webhook.url, body, webhook.timeout_s)
            with open_db(db) as con:
                record_delivery(con, ch.change_id, webhook.target, status=got.status,
                                error=got.error, ok=got.ok, final=got.ok or not got.retry,
                                now=clock())
            if got.ok or not got.retry:
                break
        out.append(Sent(ch.change_id, k + 1, got.ok))
    return out
