"""The dashboard's cached reads: a store query runs again only when the data changed,
whichever process wrote; the handles it caches hold no open connection."""

import subprocess
import sys

from store.db import open_db
from store.queries import data_version
from store.runs import list_runs, save_record
from tests.helpers import SYSTEM, ok_record


def test_a_cached_read_reruns_its_query_only_after_a_write(db_path, monkeypatch):
    from store.cache import database, read
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
    monkeypatch.setattr("store.cache.data_version",
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
