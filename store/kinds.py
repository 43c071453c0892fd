"""The kinds' own measurement tables (engine.scenarios.tables): created from the registry,
written in a run's transaction and read back, the same SQL for every kind.

A kind declares its tables as data (names, DuckDB types, key) and registers them with its
Scenario; the identifiers spelled into the SQL below come from those declarations, which
KindTable checks to be plain lower-case names and known types, and every value is a bound
parameter. A table is created when missing and given the columns its declaration gained
since (nullable, as a column added to rows already stored must be); nothing of `runs`
changes when a kind comes or grows.
"""

from __future__ import annotations

import pandas as pd

from engine.scenarios.tables import KindTable

__all__ = ["create_kind_tables", "save_kind_rows", "kind_rows"]


def _ddl(table: KindTable) -> str:
    columns = [f"{c.name} {c.type}{' NOT NULL' if c.not_null else ''}" for c in table.columns]
    return (f"CREATE TABLE {table.name} ({', '.join(columns)}, "
            f"PRIMARY KEY ({', '.join(table.key)}))")


def create_kind_tables(con, tables: tuple[KindTable, ...]) -> None:
    """Every table missing, created; every declared column a table lacks, added. Tables a
    migration created before (serving's, m012) are left as they are when they match."""
    for table in tables:
        have = [r[0] for r in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "AND table_schema = current_schema() ORDER BY ordinal_position",
            [table.name]).fetchall()]
        if not have:
            con.execute(_ddl(table))
            continue
        for c in table.columns:
            if c.name not in have:
                con.execute(f"ALTER TABLE {table.name} ADD COLUMN {c.name} {c.type}")


def save_kind_rows(con, scenario, record) -> None:
    """The rows a stored record adds to its kind's tables (Scenario.table_rows), inside the
    caller's transaction; a row's missing columns are NULL."""
    tables = {t.name: t for t in scenario.tables}
    for name, rows in scenario.table_rows(record).items():
        table = tables[name]  # a kind writes only the tables it registered
        sql = (f"INSERT INTO {table.name} ({', '.join(table.column_names)}) "
               f"VALUES ({', '.join('?' * len(table.columns))})")
        for row in rows:
            con.execute(sql, [row.get(c) for c in table.column_names])


def kind_rows(con, table: KindTable, run_ids: list[str]) -> pd.DataFrame:
    """A kind table's rows of these runs, in key order, every declared column."""
    return con.execute(
        f"SELECT {', '.join(table.column_names)} FROM {table.name} "
        f"WHERE list_contains(?, run_id) ORDER BY {', '.join(table.key)}",
        [list(run_ids)]).df()
