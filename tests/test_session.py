"""The dashboard's cached reads: a store query runs again only when the data changed,
whichever process wrote; one shared handle per server process, open only while used; a
waiting writer is not starved; a page that meets a busy file says so instead of failing."""

import os
import subprocess
import sys

import pytest

from store.db import open_db
from store.queries import data_version
from store.runs import list_runs, save_record
from seeds.records import SYSTEM, ok_record


def test_a_cached_read_reruns_its_query_only_after_a_write(db_path, monkeypatch):
    from dashboard.session import database, read
    monkeypatch.setenv("BENCH_DB", str(db_path))
    calls = []

    def runs(con, limit):
        calls.append(limit)
        return list_runs(con, limit=limit)

    assert read(runs, 5).empty and calls == [5]
    assert read(runs, 5).empty and calls == [5]  # nothing written: served from the cache
    assert read(runs, 6).empty and calls == [5, 6]  # other arguments, another entry
    with open_db(db_path) as con:
        before = data_version(con)
        save_record(con, ok_record("r-1"), SYSTEM)
        assert data_version(con) != before
    assert read(runs, 5).run_id.tolist() == ["r-1"] and calls == [5, 6, 5]
    # The version is read from the database only when its files changed on disk.
    versions = []
    monkeypatch.setattr("dashboard.session.data_version",
                        lambda con: versions.append(1) or data_version(con))
    db = database()
    first = db.version()  # known from the read above: the files did not change since
    assert db.version() == first and versions == []
    with open_db(db_path) as con:
        save_record(con, ok_record("r-2", minute=5), SYSTEM)
    assert db.version() != first and versions == [1]
    # The handle is a path, not a connection: another process (a CLI sweep) can write now.
    assert database().path == db_path
    other = subprocess.run([sys.executable, "-c", "import duckdb, sys; "
                            "duckdb.connect(sys.argv[1]).execute('CHECKPOINT').close()",
                            str(db_path)], capture_output=True, text=True)
    assert other.returncode == 0, other.stderr


def holder_process(db_path):
    """A real process holding the file (as a long CLI import does) until its stdin closes."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
         "print('held', flush=True); sys.stdin.read()", str(db_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_sessions_share_one_handle_with_a_cursor_each_and_it_closes_when_idle(db_path):
    from dashboard.session import Database
    db = Database(db_path)
    with db.connect() as a, db.connect() as b:
        assert db.in_use == 2 and a is not b  # one cursor per operation
        assert db._con is not None
        a.execute("SELECT 1")
        b.execute("SELECT 2")
    assert db.in_use == 0 and db._con is None  # the file is free for a CLI sweep again
    other = subprocess.run([sys.executable, "-c", "import duckdb, sys; "
                            "duckdb.connect(sys.argv[1]).execute('CHECKPOINT').close()",
                            str(db_path)], capture_output=True, text=True)
    assert other.returncode == 0, other.stderr


def test_the_handle_counts_the_file_and_its_write_ahead_log_on_disk(tmp_path):
    from dashboard.session import Database
    db = Database(tmp_path / "bench.duckdb")
    assert db.size_bytes() == 0  # no file yet
    (tmp_path / "bench.duckdb").write_bytes(b"x" * 1000)
    assert db.size_bytes() == 1000
    (tmp_path / "bench.duckdb.wal").write_bytes(b"x" * 24)
    assert db.size_bytes() == 1024


def test_a_waiting_writer_is_marked_and_readers_stop_joining_the_handle(db_path):
    from engine.core.errors import UserError
    from dashboard.session import Database
    from store.db import connect, writer_waiting
    connect(db_path).close()
    holder = holder_process(db_path)
    seen = []
    try:
        ticks = iter(range(100))
        with pytest.raises(UserError):  # a writer: marks that it waits, then gives up
            connect(db_path, wait_s=3, clock=lambda: next(ticks),
                    pause=lambda s: seen.append(sorted(p.name for p in db_path.parent.glob(
                        "*.writer-waiting.*"))))
        assert seen[0] == [f"{db_path.name}.writer-waiting.{os.getpid()}"]
        assert list(db_path.parent.glob("*.writer-waiting.*")) == []  # removed on the way out
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    # Another live process waits to write: a reader that already holds the handle does not
    # let a second operation join it, and says the file is being written.
    marker = db_path.with_name(f"{db_path.name}.writer-waiting.{os.getppid()}")
    ticks = iter(range(100))
    db = Database(db_path, wait_s=2, clock=lambda: next(ticks), pause=lambda s: None)
    with db.connect():
        marker.touch()
        assert writer_waiting(db_path) == os.getppid()
        with pytest.raises(UserError) as info:
            with db.connect():
                pass
        assert info.value.field == "db" and "being written" in str(info.value)
        assert db.in_use == 1
    marker.unlink()
    # A marker left by a process that no longer exists is ignored and removed.
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True)
    stale = db_path.with_name(f"{db_path.name}.writer-waiting.{int(dead.stdout)}")
    stale.touch()
    assert writer_waiting(db_path) is None and not stale.exists()


def test_a_page_says_results_are_being_written_instead_of_failing(db_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT
    from seeds.records import seed_sweep
    from tests.conftest import seed_once
    seed_once(seed_sweep, db_path)
    monkeypatch.setenv("BENCH_DB", str(db_path))
    holder = holder_process(db_path)  # holds past the page's 5 s wait
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        at.run()
        at.switch_page("views/results.py")
        at.run()
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert not at.exception, [e.value for e in at.exception]
    assert any("results are being written" in i.value for i in at.info)
