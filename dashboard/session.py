"""The dashboard's long-lived resources and cached reads (this was store/cache.py; store/
itself never imports Streamlit, and the CLI never imports this).

- `database()`: the handle of the dashboard's database, one per path for the server
  process (st.cache_resource): one DuckDB connection shared by every session, a cursor per
  operation, open only while an operation runs (a CLI sweep in another process must be
  able to write while the dashboard is open).
- `job_manager()`: the job queue of the server process (st.cache_resource).
- `read(fn, *args)`: a store query's result (st.cache_data), keyed on the database's data
  version (store.queries.data_version), so a write by the job thread or by a CLI sweep
  invalidates it at the next rerun. Reruns that change nothing re-read nothing: the price
  catalog's CSV files, for one, are parsed once per change, not per rerun. While another
  process holds the file past the wait, the page says so and refreshes by itself instead
  of failing.

Opening the file costs tens of milliseconds, so the handle asks for the data version only
when the file or its write-ahead log changed on disk (a stat, microseconds): every write,
by any process, changes one of them, and reads change neither.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import streamlit as st

from engine.core.errors import UserError
from store.db import READER_WAIT_S, close, connect, resolve_db_path, writer_waiting
from store.queries import data_version

__all__ = ["Database", "database", "job_manager", "read", "read_on"]


class Database:
    """The dashboard's database: one DuckDB handle for the whole server process, shared by
    every session (each operation gets its own cursor), and the data version last read.

    The handle is open only while some operation uses it: DuckDB lets one process hold a
    writable file, and a CLI sweep must be able to store its runs while the dashboard is
    open. One handle per process, opened and closed under a lock, is also what keeps two
    sessions of this server from opening the file at the same moment (DuckDB refused that
    with "Unique file handle conflict"). While another process waits to write
    (store.db.writer_waiting), no new operation joins the handle, so readers that keep
    overlapping cannot starve the writer."""

    def __init__(self, path: Path, *, wait_s: float = READER_WAIT_S, clock=time.monotonic,
                 pause=time.sleep, read_only: bool = False):
        self.path = path
        self.read_only = read_only
        self.wait_s, self.clock, self.pause = wait_s, clock, pause
        self._lock = threading.Lock()
        self._seen: tuple | None = None  # (files' signature, data version)
        self._hold = threading.Lock()  # guards the shared handle and its user count
        self._con = None
        self._users = 0

    def _acquire(self):
        deadline = self.clock() + self.wait_s
        while True:
            with self._hold:
                if self._con is None:
                    # Waits (yielding to writers) up to wait_s, then a "busy" UserError.
                    self._con = connect(self.path, yield_to_writers=True,
                                        read_only=self.read_only,
                                        wait_s=max(deadline - self.clock(), 0.0),
                                        clock=self.clock, pause=self.pause)
                if self._users == 0 or writer_waiting(self.path) is None:
                    self._users += 1
                    return self._con
            if self.clock() >= deadline:  # a writer waits and our readers keep the file
                raise UserError(f"database: {self.path} is being written by another "
                                "process; this page refreshes when it is done", field="db")
            self.pause(0.05)

    def _release(self) -> None:
        with self._hold:
            self._users -= 1
            if self._users == 0:
                con, self._con = self._con, None
                close(con)

    @contextmanager
    def connect(self):
        con = self._acquire()
        try:
            cur = con.cursor()
            try:
                yield cur
            finally:
                cur.close()
        finally:
            self._release()

    @property
    def in_use(self) -> int:
        """Operations holding the shared handle now (0: the file is closed)."""
        with self._hold:
            return self._users

    def size_bytes(self) -> int:
        """Bytes on disk: the file and its write-ahead log."""
        return sum(p.stat().st_size for p in (self.path, Path(f"{self.path}.wal"))
                   if p.exists())

    def signature(self) -> tuple:
        """Modification time and size of the file and of its write-ahead log."""
        out = []
        for p in (self.path, Path(f"{self.path}.wal")):
            try:
                s = os.stat(p)
                out.append((s.st_mtime_ns, s.st_size))
            except FileNotFoundError:
                out.append(None)
        return tuple(out)

    def version(self) -> tuple:
        sig = self.signature()
        with self._lock:
            if self._seen is not None and self._seen[0] == sig:
                return self._seen[1]
        with self.connect() as con:  # creates and migrates a new file, too
            version = data_version(con)
        with self._lock:
            # The signature from before the query: a write that landed during it changes
            # the files again, and the next call reads the version afresh.
            self._seen = (sig, version)
        return version

@st.cache_resource(show_spinner=False)
def _database(path: str, read_only: bool = False) -> Database:
    return Database(Path(path), read_only=read_only)


def database() -> Database:
    """The handle of the database this server reads ($BENCH_DB, else ./data/bench.duckdb);
    read-only in viewer mode (no migration, no file created: a viewer writes nothing).
    Every read() asks: only the viewer flag is looked up, not the session's sign-in."""
    from dashboard.access import viewer_mode

    return _database(str(resolve_db_path()), viewer_mode(os.environ, _settings()[0]))


@st.cache_resource(show_spinner=False)
def _job_manager(path: str, read_only: bool):
    from engine.run.jobs import queue  # looked up at call time: tests replace get_manager
    return queue.get_manager(path, read_only)


@functools.cache
def _authlib() -> bool:
    """st.login needs Authlib; installed or not, that does not change while serving."""
    import importlib.util
    return importlib.util.find_spec("authlib") is not None


def _settings() -> tuple[dict, bool]:
    """The `[dashboard]` table of .streamlit/secrets.toml, and whether `[auth]` is set up
    for st.login (Authlib installed and an [auth] table present)."""
    try:
        secrets = st.secrets
        dashboard = dict(secrets.get("dashboard", {}))
        auth = "auth" in secrets
    except (FileNotFoundError, KeyError, st.errors.StreamlitSecretNotFoundError):
        return {}, False
    return dashboard, auth and _authlib()


def access():
    """What this browser session may do (dashboard.access): viewer mode, where the
    client connects from, and who is signed in."""
    from dashboard.access import decide

    settings, auth = _settings()
    email = None
    if auth and st.user.is_logged_in:
        # An unverified address is a claim, not an identity: it cannot name an admin.
        # Only a provider's explicit True counts (a missing claim or "false" does not).
        if st.user.get("email_verified") is True:
            email = st.user.get("email")
    ip = st.context.ip_address
    # A real server gives a str or None (loopback); AppTest gives a mock: no real client.
    ip = ip if isinstance(ip, str) else None
    return decide(env=dict(os.environ), settings=settings, auth_configured=auth,
                  ip_address=ip, headers=dict(st.context.headers or {}), email=email)


def job_manager():
    """The server process's one job queue for this database, as this session may use it:
    viewer mode makes the queue itself refuse writes; a session that may not write gets
    refusals from its handle (engine.run.jobs.queue.SessionJobs)."""
    from engine.run.jobs.queue import SessionJobs

    a = access()
    return SessionJobs(_job_manager(str(database().path), a.viewer), a)


@st.cache_data(show_spinner=False, max_entries=512)
def _cached(path: str, read_only: bool, version: tuple, name: str, args: tuple, kwargs: tuple,
            _fn: Callable):
    with _database(path, read_only).connect() as con:
        return _fn(con, *args, **dict(kwargs))


def read(fn: Callable, *args, **kwargs):
    """fn(con, *args, **kwargs) for the dashboard's database, cached until the data
    changes. fn is a store query; its arguments must be hashable by Streamlit."""
    db = database()
    return _guarded(lambda: _cached(str(db.path), db.read_only, db.version(),
                                    f"{fn.__module__}.{fn.__qualname__}", args,
                                    tuple(sorted(kwargs.items())), _fn=fn))


@st.cache_data(show_spinner=False, max_entries=16)
def _cached_on(path: str, read_only: bool, key: tuple, name: str, args: tuple, kwargs: tuple,
               _fn: Callable):
    with _database(path, read_only).connect() as con:
        return _fn(con, *args, **dict(kwargs))


def read_on(key: tuple, fn: Callable, *args, **kwargs):
    """fn(con, *args, **kwargs), cached on `key`, what its answer depends on, instead of the
    database's data version: for a read that costs seconds (judging a group's states: about
    2.6 s of CPU for 120 sweeps x 20 configurations) and depends on a few things (the
    group's sweeps and marks), so that a run stored for anything else does not redo it."""
    db = database()
    return _guarded(lambda: _cached_on(str(db.path), db.read_only, key,
                                       f"{fn.__module__}.{fn.__qualname__}", args,
                                       tuple(sorted(kwargs.items())), _fn=fn))


def _guarded(call: Callable):
    """A cached read, with a missing file or a busy one said on the page."""
    try:
        return call()
    except UserError as exc:
        if exc.field == "db" and "does not exist yet" in str(exc):  # a viewer before any run
            st.info(f"No results yet: {exc}", icon=":material/info:")
            st.stop()
        if exc.field != "db" or "in use by" not in str(exc) and "being written" not in str(exc):
            raise
        busy(str(exc))


def busy(message: str) -> None:
    """Another process holds the file longer than a page waits: say so, refresh in 2 s."""
    st.info(f"{message.removeprefix('database: ')} — results are being written; this page "
            "refreshes by itself.", icon=":material/hourglass_top:")

    @st.fragment(run_every=2.0)
    def refresh():
        if st.session_state.get("_busy_shown"):
            st.session_state["_busy_shown"] = False
            st.rerun(scope="app")
        st.session_state["_busy_shown"] = True

    refresh()
    st.stop()
