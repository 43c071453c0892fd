"""The dashboard's long-lived resources and cached reads; the only store module that
imports Streamlit (the CLI never imports it).

- `database()`: the handle of the dashboard's database, one per path for the server
  process (st.cache_resource). It holds the path, never an open connection: DuckDB lets
  one process hold a writable file, and a CLI sweep in another process must be able to
  write while the dashboard is open, so every operation opens and closes the file.
- `job_manager()`: the job queue of the server process (st.cache_resource).
- `read(fn, *args)`: a store query's result (st.cache_data), keyed on the database's data
  version (store.queries.data_version), so a write by the job thread or by a CLI sweep
  invalidates it at the next rerun. Reruns that change nothing re-read nothing: the price
  catalog's CSV files, for one, are parsed once per change, not per rerun.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import streamlit as st

from store.db import open_db, resolve_db_path
from store.queries import data_version

__all__ = ["Database", "database", "job_manager", "read"]


@dataclass(frozen=True)
class Database:
    path: Path

    @contextmanager
    def connect(self):
        with open_db(self.path) as con:
            yield con

    def version(self) -> tuple:
        with self.connect() as con:
            return data_version(con)


@st.cache_resource(show_spinner=False)
def _database(path: str) -> Database:
    return Database(Path(path))


def database() -> Database:
    """The handle of the database this server reads ($BENCH_DB, else ./data/bench.duckdb)."""
    return _database(str(resolve_db_path()))


@st.cache_resource(show_spinner=False)
def _job_manager(path: str):
    from engine.run import jobs  # looked up at call time: tests replace get_manager
    return jobs.get_manager(path)


def job_manager():
    """The server process's one job queue for this database."""
    return _job_manager(str(database().path))


@st.cache_data(show_spinner=False, max_entries=512)
def _cached(path: str, version: tuple, name: str, args: tuple, kwargs: tuple, _fn: Callable):
    with open_db(path) as con:
        return _fn(con, *args, **dict(kwargs))


def read(fn: Callable, *args, **kwargs):
    """fn(con, *args, **kwargs) for the dashboard's database, cached until the data
    changes. fn is a store query; its arguments must be hashable by Streamlit."""
    db = database()
    return _cached(str(db.path), db.version(), f"{fn.__module__}.{fn.__qualname__}", args,
                   tuple(sorted(kwargs.items())), _fn=fn)
