"""What a stored run holds cannot change by accident: one real selftest sweep through the
CLI, then every table's columns and types, the RunRecord's fields, the columns an ok run
fills and the keys of its `extra`, compared with tests/data/schema_expectation.json.

The expectation was dumped from commit c244be9, before engine/ was split into
sub-packages, with the same sweep: the layout change dropped no column and no field. A
deliberate change (a migration adding a column, a new record field or extra key) updates
the file on purpose (a new kind's own tables need not: they are held to their
declaration): run `python -m tests.test_schema DB_FOLDER` to print the current facts and
review the difference before replacing it.
"""

from __future__ import annotations

import dataclasses
import json
import sys

import duckdb

from engine.cli import main
from engine.core.record import RunRecord
from engine.scenarios import KIND_TABLES
from tests.conftest import ROOT

EXPECTATION = ROOT / "tests" / "data" / "schema_expectation.json"
SWEEP = ["run", "--model", "identity", "--framework", "selftest", "--batch", "1",
         "--min-time", "0.02", "--min-iters", "5", "--warmup", "1", "--rounds", "1",
         "--seed", "1", "--no-table"]


def stored_facts(db_path) -> dict:
    assert main([*SWEEP, "--db", str(db_path)]) == 0
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        tables: dict[str, list] = {}
        for table, column, kind in con.execute(
                "SELECT table_name, column_name, data_type FROM information_schema.columns "
                "ORDER BY table_name, ordinal_position").fetchall():
            tables.setdefault(table, []).append([column, kind])
        cur = con.execute("SELECT * FROM runs")
        [row] = cur.fetchall()
        run = dict(zip([d[0] for d in cur.description], row))
    finally:
        con.close()
    return {"tables": tables,
            "record_fields": [f.name for f in dataclasses.fields(RunRecord)],
            "run_non_null": sorted(k for k, v in run.items() if v is not None),
            "extra_keys": sorted(json.loads(run["extra"]))}


def test_a_stored_run_keeps_every_column_field_and_extra_key(db_path, worker_env, capsys):
    want = json.loads(EXPECTATION.read_text())
    got = stored_facts(db_path)
    capsys.readouterr()
    # A kind added since keeps its own tables, declared in its package (its table.py) and
    # created from the registry: each is held to its declaration instead, so a new kind
    # edits no shared expectation. Every other table is the expectation's, exactly.
    declared = {t.name: t for t in KIND_TABLES}
    added = sorted(set(got["tables"]) - set(want["tables"]))
    assert [t for t in added if t not in declared] == []
    for table in added:
        assert [c for c, _ in got["tables"][table]] == list(declared[table].column_names)
    assert sorted(set(got["tables"]) - set(added)) == sorted(want["tables"])
    for table, columns in want["tables"].items():
        assert got["tables"][table] == columns, table
    assert got["record_fields"] == want["record_fields"]
    assert got["run_non_null"] == want["run_non_null"]
    assert got["extra_keys"] == want["extra_keys"]


if __name__ == "__main__":  # print the current facts, to update the expectation on purpose
    from pathlib import Path
    print(json.dumps(stored_facts(Path(sys.argv[1]) / "schema.duckdb"), indent=1))
