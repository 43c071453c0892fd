"""`watch`: run a saved sweep (a Run page link), make it the newest sweep of a group, bring the
group's states up to date, alert, and exit as the regression gate does. One command for
cron or a CI job; what a state is, and the policy, are engine/analysis/states.py's."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from engine.cli.args import (db_arg, float_arg, int_arg, machine_shape_option, memory_cap,
                             memory_cap_option)
from engine.core.errors import UserError, plain_text
from engine.core.limits import (BASELINE_SWEEPS_RANGE, CONFIRM_RANGE, LOOKBACK_RANGE,
                                MARK_TEXT_MAX, MISSING_AFTER_RANGE, THRESHOLD_RANGE,
                                WEBHOOK_TRIES_RANGE)

__all__ = ["add_parsers", "COMMANDS", "DEFAULT_BASE_URL"]

DEFAULT_BASE_URL = "http://127.0.0.1:8501"  # run-dashboard.sh's address


def add_parsers(sub) -> None:
    from engine.analysis.states import StatePolicy

    d = StatePolicy()
    w = sub.add_parser("watch", help="run a saved sweep (a Run page link) as the newest of a "
                                     "group, update every configuration's state, alert on a "
                                     "change; exit as the regression gate")
    w.add_argument("--link", required=True, metavar="URL",
                   help="the Run page's \"Link to this sweep\", or its query string")
    w.add_argument("--group", required=True, metavar="NAME",
                   help="the group the sweep joins: the same sweep, day after day")
    w.add_argument("--webhook", metavar="URL", default=None,
                   help="POST each alert as JSON here (a Slack or Teams incoming webhook); "
                        "sent once per change, retried, every attempt stored")
    w.add_argument("--base-url", metavar="URL", default=DEFAULT_BASE_URL,
                   help=f"the dashboard's address, for the links in alerts and the feed "
                        f"(default {DEFAULT_BASE_URL})")
    w.add_argument("--feed-out", metavar="PATH", default=None,
                   help="write the group's Atom feed here (default: the dashboard's "
                        "static/feeds/ folder, served at <base-url>/app/static/feeds/)")
    w.add_argument("--tries", type=int_arg("tries", *WEBHOOK_TRIES_RANGE), default=3,
                   help="POSTs per alert in this update (default 3)")
    w.add_argument("--threshold", type=float_arg("threshold"), default=d.threshold,
                   help=f"the gate's: a change within ± this fraction is no change (default "
                        f"{d.threshold:g}; {THRESHOLD_RANGE[0]:g}..{THRESHOLD_RANGE[1]:g})")
    w.add_argument("--fail-above", type=float_arg("fail_above"), default=None, metavar="RATIO",
                   help="the gate's: a regression is slower than this ratio (default 1 + "
                        "threshold)")
    for flag, name, rng, what in (
            ("--confirm", "confirm", CONFIRM_RANGE, "sweeps in a row that make a regression"),
            ("--lookback", "lookback", LOOKBACK_RANGE,
             "sweeps back a violation still makes a configuration suspicious"),
            ("--min-baseline", "min_baseline", BASELINE_SWEEPS_RANGE,
             "baseline sweeps before a sweep is judged"),
            ("--window", "window", BASELINE_SWEEPS_RANGE, "baseline sweeps judged against, "
                                                          "at most"),
            ("--missing-after", "missing_after", MISSING_AFTER_RANGE,
             "sweeps in a row that measured a configuration before its absence is missing")):
        w.add_argument(flag, type=int_arg(name, *rng), default=getattr(d, name),
                       help=f"{what} (default {getattr(d, name)}; {rng[0]}..{rng[1]})")
    w.add_argument("--timeout", type=float_arg("timeout"), default=600.0,
                   help="wall-time limit per run in seconds (default 600)")
    memory_cap_option(w)
    machine_shape_option(w)
    db_arg(w)


def _policy(args):
    from engine.analysis.states import StatePolicy

    return StatePolicy(threshold=args.threshold, fail_above=args.fail_above,
                       confirm=args.confirm, lookback=args.lookback,
                       min_baseline=args.min_baseline, window=args.window,
                       missing_after=args.missing_after).validate()


def cmd_watch(args) -> int:
    from engine.alerts.update import update_states, write_feed
    from engine.alerts.webhook import Webhook, utc_now
    from engine.cli.progress import run_and_summarize
    from engine.core.paths import FEEDS_DIR
    from engine.present.feed import feed_name
    from engine.present.states_text import board_text, change_line, status_line
    from engine.run.jobs.run_link import request_from_link
    from store.db import open_db, resolve_db_path
    from store.states import join_group

    # Everything a user gave is checked before a single run starts.
    group = plain_text(args.group.strip())
    if not 1 <= len(group) <= MARK_TEXT_MAX:
        raise UserError(f"group: {len(group)} characters; allowed: a name of 1.."
                        f"{MARK_TEXT_MAX} characters, e.g. nightly-cpu", field="group")
    policy = _policy(args)
    parts = urlsplit(args.base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"base_url: {args.base_url!r} is not an address; allowed: an http:// "
                        "or https:// URL with a host", field="base_url")
    webhook = Webhook(args.webhook, args.base_url, tries=args.tries).validate() \
        if args.webhook else None
    out = Path(args.feed_out) if args.feed_out else FEEDS_DIR / feed_name(group)
    if out.is_dir():
        raise UserError(f"feed_out: {out} is a folder; allowed: a file path, e.g. "
                        "feed.xml", field="feed_out")
    request = replace(request_from_link(args.link), timeout_s=args.timeout,
                      memory_cap_bytes=memory_cap(args))
    specs, left_out = request.expand()
    for split in left_out:
        print(f"left out: {split}")
    records = run_and_summarize(request, specs, args, table=None, noun="runs")
    if not records:
        raise UserError("link: the sweep stored no run; allowed: a sweep that runs here",
                        field="link")
    db = resolve_db_path(args.db)
    with open_db(db) as con:
        join_group(con, group, records[0].sweep_id, source=args.link)
    update = update_states(db, group, policy=policy, webhook=webhook)
    print(f"\ngroup {group}: {len(update.states)} configurations as of sweep "
          f"{records[0].sweep_id}")
    print(board_text(update.states, policy))
    print(f"\n{len(update.changes)} state change(s) recorded"
          + (":" if update.changes else ""))
    for ch in update.changes:
        print(f"  {change_line(ch)}" + ("" if ch.alert else " (not alerted)"))
    for s in update.sent:
        print(f"  webhook: change {s.change_id[:8]} "
              + (f"delivered in {s.attempts} attempt(s)" if s.ok
                 else f"not delivered after {s.attempts} attempt(s) (each stored; one "
                      "without a final answer is tried again by the next watch)"))
    url = write_feed(db, group, policy, args.base_url, out, utc_now())
    # served only from the dashboard's static folder; a file elsewhere is the user's to serve
    served = out.resolve().parent == FEEDS_DIR.resolve()
    print(f"feed: {out}" + (f" (served at {url})" if served else
                            " (outside static/feeds/: not served by the dashboard)"))
    code, line = status_line(update.states)
    print(line)
    sys.stdout.flush()
    return code


COMMANDS = {"watch": cmd_watch}
