"""`python -m engine watch`: a Run page link read back into the request the page would launch,
every bad flag or link value refused before anything runs, and a real tiny sweep run twice
through the real CLI in a subprocess against a real DuckDB file (the selftest framework's
identity model), its exit status, the group, the states and the changes stored, and the feed
file it writes."""

import os
import subprocess
import sys
from xml.etree import ElementTree as ET

import pytest

from engine.analysis.states import INSUFFICIENT
from engine.cli import main
from engine.core.errors import UserError
from engine.core.limits import logical_cores
from engine.core.policy import MeasurementPolicy
from engine.present.feed import ATOM_NS, feed_name
from engine.run.jobs.run_link import request_from_link
from tests.conftest import ROOT

QUERY = ("model=identity&framework=selftest&batch=1,2&threads=1&min_time=0.05&min_iters=5"
         "&warmup=1&rounds=1&max_rounds=1")


def test_a_run_link_is_the_request_the_run_page_would_launch():
    r = request_from_link(f"http://127.0.0.1:8501/run?{QUERY}&margin=5&contention=1")
    assert (r.models, r.frameworks, r.batch_sizes, r.threads) == (
        ("identity",), ("selftest",), (1, 2), (1,))
    assert r.policy == MeasurementPolicy(warmup_iters=1, min_time_s=0.05, min_iters=5)
    assert (r.rounds, r.max_rounds, r.margin, r.contention) == (1, 1, 0.05, True)
    # the query string alone, and the page's defaults where the link names nothing
    d = request_from_link("?model=resnet18")
    assert (d.frameworks, d.batch_sizes, d.threads, d.rounds, d.max_rounds) == (
        ("torch", "tensorflow"), (1, 8), (logical_cores(),), 3, 6)
    assert request_from_link("http://h/proxy/8501/?model=resnet18").models == ("resnet18",)


@pytest.mark.parametrize("link, field, words", [
    ("?model=vgg", "model", "model: 'vgg' is not offered; allowed: comma-separated, of "),
    ("?batch=0", "batch", "batch: 0 is out of range; allowed: integers 1..4096"),
    ("?rounds=two", "rounds", "rounds: 'two' is not an integer; allowed: 1..100"),
    ("?margin=nan", "margin", "margin: nan is out of range; allowed: 0..50"),
    ("?energy=yes", "energy", "energy: 'yes'; allowed: 1 (on) or 0 (off)"),
    ("?source=file", "source", "source: 'file'; allowed: catalog"),
    ("?model=resnet18&rm=1", "link", "link: unknown parameter 'rm'; allowed: model, "),
    ("http://h:8501/compare?baseline=x", "link", "link: the 'compare' page's; allowed: a "
                                                 "link of the Run page"),
    ("  ", "link", "link: 0 characters; allowed: a Run page link or its query string"),
])
def test_a_link_value_watch_cannot_use_is_refused_naming_it(link, field, words):
    with pytest.raises(UserError) as err:
        request_from_link(link)
    assert err.value.field == field
    assert str(err.value).startswith(words)


@pytest.mark.parametrize("flags, words", [
    (["--link", "?model=vgg"], "error: model: 'vgg' is not offered"),
    (["--threshold", "5"], "error: threshold: 5.0 is out of range; allowed: number 0.01..1"),
    (["--webhook", "file:///etc/passwd"], "error: webhook: 'file:///etc/passwd' is not an "
                                          "address; allowed: an http:// or https:// URL"),
    (["--base-url", "dash"], "error: base_url: 'dash' is not an address; allowed: an http://"),
    (["--group", " "], "error: group: 0 characters; allowed: a name of 1..500 characters"),
    (["--link", f"?{QUERY}&threads=999"], "error: threads: 999 is out of range; allowed: "
                                          "integers 1.."),
    (["--feed-out", "/tmp"], "error: feed_out: /tmp is a folder; allowed: a file path"),
])
def test_a_bad_flag_exits_2_naming_the_field_before_anything_runs(flags, words, db_path,
                                                                   capsys):
    args = {"--link": f"?{QUERY}", "--group": "nightly"}
    for k, v in zip(flags[::2], flags[1::2]):
        args[k] = v
    assert main(["watch", *[x for kv in args.items() for x in kv], "--db", str(db_path)]) == 2
    assert capsys.readouterr().err.startswith(words)
    assert not db_path.exists()  # nothing ran, nothing was written


def test_a_policy_flag_out_of_range_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["watch", "--link", QUERY, "--group", "g", "--confirm", "1"])
    assert exit_.value.code == 2
    assert "confirm: 1 is out of range; allowed: integer 2..10" in capsys.readouterr().err


def _watch(db_path, feed, *extra):
    return subprocess.run(
        [sys.executable, "-m", "engine", "watch", "--link", f"http://127.0.0.1:8501/run?{QUERY}",
         "--group", "nightly selftest", "--min-baseline", "2", "--feed-out", str(feed),
         "--db", str(db_path), *extra],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
        text=True, timeout=300)


def test_watch_runs_the_saved_sweep_twice_and_stores_the_group_and_its_states(db_path,
                                                                              tmp_path):
    from store.db import open_db
    from store.states import group_sweep_ids, state_changes

    feed = tmp_path / "feed.xml"
    first = _watch(db_path, feed)
    # Two configurations with no baseline yet: nothing could be judged, the gate's 2.
    assert first.returncode == 2, first.stderr
    assert "2 state change(s) recorded:" in first.stdout
    lines = first.stdout.splitlines()
    # the board, worst first (equal states: the configurations' own order), then the
    # changes, none sent to people: insufficient data is shown, not alerted
    board = [line for line in lines if line.startswith(INSUFFICIENT)]
    assert [line.split(" · ")[1] for line in board] == ["identity 32px b1 t1",
                                                        "identity 32px b2 t1"]
    assert all(line.endswith(" · 0 baseline sweeps of the 2 needed") for line in board)
    assert [line for line in lines if line.startswith("  ")] == [
        f"  {INSUFFICIENT} · identity 32px b{b} t1 · selftest (python) · 0 baseline sweeps "
        "of the 2 needed (not alerted)" for b in (1, 2)]
    assert first.stdout.rstrip().endswith(
        "states: cannot judge: 2 configuration(s) with insufficient data (too few baseline "
        "sweeps yet) and none judged: exit 2")
    # a feed written outside static/feeds/ is not said to be served by the dashboard
    assert f"feed: {feed} (outside static/feeds/: not served by the dashboard)" in lines
    second = _watch(db_path, feed)
    assert second.returncode == 2, second.stderr
    assert "0 state change(s) recorded" in second.stdout  # the same states: nothing new
    with open_db(db_path) as con:
        sweeps = group_sweep_ids(con, "nightly selftest")
        changes = state_changes(con, group="nightly selftest", alerts_only=False)
        sources = con.execute("SELECT DISTINCT source FROM state_groups").fetchall()
        runs = con.execute("SELECT count(*), count(DISTINCT sweep_id) FROM runs WHERE "
                           "status = 'ok'").fetchone()
    assert len(sweeps) == 2 and runs == (4, 2)
    assert sorted((c.configuration.split(" ")[0], c.old_state, c.new_state, c.alert)
                  for c in changes) == [("identity", None, INSUFFICIENT, False)] * 2
    assert sources == [(f"http://127.0.0.1:8501/run?{QUERY}",)]
    # A valid Atom feed with no entry: insufficient data is not sent to people.
    root = ET.fromstring(feed.read_text())
    assert root.tag == f"{{{ATOM_NS}}}feed"
    assert root.find(f"{{{ATOM_NS}}}title").text == "Benchmark states: nightly selftest"
    assert root.findall(f"{{{ATOM_NS}}}entry") == []
    assert root.find(f"{{{ATOM_NS}}}link[@rel='self']").get("href") == (
        f"http://127.0.0.1:8501/app/static/feeds/{feed_name('nightly selftest')}")
