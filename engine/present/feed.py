"""An Atom 1.0 feed (RFC 4287) of benchmark state changes: what a reader subscribes to, in
viewer mode too, as asv publishes its regressions. Pure: recorded changes in, XML text out,
built with ElementTree so every database string is escaped; each entry links to the view that
shows its evidence."""

from __future__ import annotations

import hashlib
import re
import uuid
from datetime import datetime
from xml.etree import ElementTree as ET

from engine.analysis.states import StateChange, StatePolicy
from engine.core.errors import plain_text
from engine.present.states_text import HISTORY_PAGE, change_line, change_link, policy_text
from engine.present.links import view_url

__all__ = ["atom_feed", "feed_name", "feed_url", "ATOM_NS", "FEED_AUTHOR", "STATIC_ROUTE"]

ATOM_NS = "http://www.w3.org/2005/Atom"
FEED_AUTHOR = "benchmark dashboard"
STATIC_ROUTE = "app/static"  # where Streamlit serves the app's static/ folder


def feed_name(group: str) -> str:
    """A group's feed file name: its name in lower-case letters, digits and dashes (a group
    is free text: "nightly <cpu> & co"), and a digest of the whole name, so two groups whose
    names spell alike never share a file."""
    slug = re.sub(r"[^a-z0-9]+", "-", group.lower()).strip("-")[:40] or "group"
    return f"{slug}-{hashlib.sha256(group.encode()).hexdigest()[:8]}.xml"


def feed_url(base_url: str, group: str) -> str:
    """The address a reader subscribes to: the dashboard's static route and the file."""
    return f"{base_url.rstrip('/')}/{STATIC_ROUTE}/feeds/{feed_name(group)}"


def _time(at: datetime) -> str:
    """RFC 3339 in UTC (the store keeps UTC without a zone)."""
    return at.replace(tzinfo=None).isoformat(timespec="seconds") + "Z"


def _add(parent, tag: str, text: str | None = None, **attrs) -> ET.Element:
    el = ET.SubElement(parent, f"{{{ATOM_NS}}}{tag}", attrs)
    if text is not None:
        el.text = plain_text(text)  # XML 1.0 has no control characters but tab and newline
    return el


def atom_feed(changes: list[StateChange], *, title: str, feed_url: str, base_url: str,
              policy: StatePolicy, updated: datetime) -> str:
    """The feed of these changes (newest first, as store.states.state_changes gives them).
    feed_url: the feed's own address, from which its id is made, so a reader knows it again;
    updated: when it was last updated when there is no change yet (else the newest
    change's time)."""
    ET.register_namespace("", ATOM_NS)
    feed = ET.Element(f"{{{ATOM_NS}}}feed")
    _add(feed, "id", f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, feed_url)}")
    _add(feed, "title", title)
    _add(feed, "subtitle", policy_text(policy))
    _add(feed, "updated", _time(max((c.at for c in changes), default=updated)))
    _add(feed, "link", rel="self", type="application/atom+xml", href=feed_url)
    _add(feed, "link", rel="alternate", type="text/html",
         href=view_url(base_url, HISTORY_PAGE, {}))
    _add(_add(feed, "author"), "name", FEED_AUTHOR)
    for ch in changes:
        entry = _add(feed, "entry")
        _add(entry, "id", f"urn:uuid:{uuid.UUID(hex=ch.change_id)}")
        _add(entry, "title", f"{ch.new_state}: {ch.configuration}")
        _add(entry, "updated", _time(ch.at))
        _add(entry, "link", rel="alternate", type="text/html",
             href=change_link(base_url, ch, policy))
        _add(entry, "category", term=ch.new_state)
        _add(entry, "summary", f"{change_line(ch)} · group {ch.group} · sweep {ch.sweep_id}",
             type="text")
    return ('<?xml version="1.0" encoding="utf-8"?>\n'
            + ET.tostring(feed, encoding="unicode"))
