"""A kind's own measurement tables, declared as data: what a kind measures beyond the common
columns of `runs` goes in tables of its own keyed by run id, so adding a kind never migrates
`runs`.

A `KindTable` names its table, its columns with their DuckDB types (and which may not be
NULL) and its primary key, which starts with run_id. Its Scenario lists it in `tables`, and
gives each stored record's rows with `table_rows` (by default, what its `result_columns`
put in the record's `kind_rows`). The SQL stays in store/: store/db.py creates every
registered table from the registry (engine.scenarios.KIND_TABLES) and store/kinds.py
writes and reads their rows, with bound parameters; the names here are checked to be plain
identifiers and the types to be DuckDB's, since they are spelled into that SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Column", "KindTable", "DUCKDB_TYPES"]

# The column types a kind's table may declare: DuckDB's scalar types, and lists of them
DUCKDB_TYPES = ("VARCHAR", "BIGINT", "INTEGER", "DOUBLE", "BOOLEAN", "TIMESTAMP", "JSON",
                "BLOB")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # one of DUCKDB_TYPES, or one of them followed by [] (a list)
    not_null: bool = False

    def __post_init__(self):
        if not _NAME.match(self.name):
            raise ValueError(f"column {self.name!r}: not a lower-case identifier")
        if self.type.removesuffix("[]") not in DUCKDB_TYPES:
            raise ValueError(f"column {self.name!r}: type {self.type!r} is not one of "
                             f"{', '.join(DUCKDB_TYPES)} (or a list of one)")


@dataclass(frozen=True)
class KindTable:
    """A table of one kind's measurements: `columns` in order, run_id first; `key`, its
    primary key, run_id alone (one row a run) or run_id and more (several rows a run)."""

    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ("run_id",)

    def __post_init__(self):
        if not _NAME.match(self.name):
            raise ValueError(f"table {self.name!r}: not a lower-case identifier")
        names = [c.name for c in self.columns]
        if names[:1] != ["run_id"] or self.key[:1] != ("run_id",):
            raise ValueError(f"table {self.name!r}: run_id must be its first column and "
                             "lead its key")
        if len(set(names)) != len(names) or not set(self.key) <= set(names):
            raise ValueError(f"table {self.name!r}: a column named twice, or a key column "
                             "it does not have")

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)
