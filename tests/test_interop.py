import json
from pathlib import Path

import pytest

from engine.core.errors import UserError
from store.queries import overview
from store.db import open_db
from store.ingest import export_bytes, export_runs, import_file
from store.runs import save_record
from seeds.records import SYSTEM, failed_record, ok_record

# The complete example from PerfZero's documentation (also in shared/reference/).
PERFZERO = Path(__file__).resolve().parent / "data" / "perfzero_summary_example.json"


def seed(path):
    with open_db(path) as con:
        save_record(con, ok_record("r1", minute=0), SYSTEM)
        save_record(con, ok_record("r2", samples=(5, 6, 7, 8), minute=2, framework="tensorflow",
                                   model="mobilenet_v3_small", batch_size=2), SYSTEM)
        save_record(con, failed_record("r3", status="timeout", minute=3), SYSTEM)


def test_download_bytes_are_the_export_files_of_the_chosen_runs(tmp_path):
    """The Results page's CSV and Parquet downloads: one read of the runs, two files, each
    importable and holding exactly the chosen runs."""
    a = tmp_path / "a.duckdb"
    seed(a)
    with open_db(a) as con:
        files = export_bytes(con, ("csv", "parquet"), ["r1", "r3"])
        with pytest.raises(UserError, match="format: 'xlsx' is not supported"):
            export_bytes(con, ("xlsx",), ["r1"])
    assert sorted(files) == ["csv", "parquet"]
    for fmt, data in files.items():
        path = tmp_path / f"download.{fmt}"
        path.write_bytes(data)
        with open_db(tmp_path / f"{fmt}.duckdb") as con:
            assert import_file(con, path) == (2, 0, f"export ({fmt})")
            assert con.execute("SELECT run_id, status FROM runs ORDER BY run_id").fetchall() \
                == [("r1", "ok"), ("r3", "timeout")]


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_export_import_round_trip_is_equal(tmp_path, fmt):
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    seed(a)
    out1, out2 = tmp_path / f"one.{fmt}", tmp_path / f"two.{fmt}"
    with open_db(a) as con:
        assert export_runs(con, out1, fmt) == 3
    with open_db(b) as con:
        assert import_file(con, out1) == (3, 0, f"export ({fmt})")
        assert import_file(con, out1) == (0, 3, f"export ({fmt})")  # idempotent
        assert overview(con)["counts"] == {"runs": 3, "samples": 3 + 2 + 4 + 2, "systems": 1,
                                           "sweeps": 0, "model_info": 2}
        export_runs(con, out2, fmt)
    with open_db(a) as ca, open_db(b) as cb:
        cols = "* EXCLUDE (started_at), epoch_us(started_at) AS t"
        q = f"SELECT {cols} FROM runs ORDER BY run_id"
        assert ca.execute(q).fetchall() == cb.execute(q).fetchall()
        q = "SELECT * FROM samples ORDER BY run_id, phase, idx"
        assert ca.execute(q).fetchall() == cb.execute(q).fetchall()
        assert ca.execute("SELECT * EXCLUDE (first_seen) FROM systems").fetchall() == \
            cb.execute("SELECT * EXCLUDE (first_seen) FROM systems").fetchall()
    if fmt != "parquet":
        assert out1.read_text().count("r2") == out2.read_text().count("r2")


def test_perfzero_summary_imports_as_a_run(db_path):
    with open_db(db_path) as con:
        assert import_file(con, PERFZERO) == (1, 0, "PerfZero summary")
        row = con.execute(
            "SELECT model, framework, runtime, status, measured_s, peak_rss_bytes, source, "
            "extra->>'$.metrics[1].name', versions->>'$.tensorflow' FROM runs").fetchall()
        assert row == [("official.resnet.estimator_cifar_benchmark.EstimatorCifar10BenchmarkTests"
                        ".unit_test", "tensorflow", "perfzero", "ok", 14.552583694458008,
                        4269047808, "perfzero", "accuracy_top_1", "1.13.0-dev20190206")]
        sysrow = con.execute("SELECT cpu_model, physical_cores, logical_cores, accelerator, "
                             "accelerator_count FROM systems").fetchall()
        assert sysrow == [("Intel(R) Xeon(R) CPU @ 2.20GHz", 8, 16, "Tesla V100-SXM2-16GB", 2)]


def test_perfzero_failure_and_list_forms(tmp_path, db_path):
    doc = json.loads(PERFZERO.read_text())
    bad = json.loads(json.dumps(doc))
    bad["benchmark_result"]["succeeded"] = False
    bad["execution_id"] = "other"
    f = tmp_path / "many.json"
    f.write_text(json.dumps([doc, bad]))
    with open_db(db_path) as con:
        assert import_file(con, f) == (2, 0, "PerfZero summary")
        assert sorted(r[0] for r in con.execute("SELECT status FROM runs").fetchall()) == \
            ["error", "ok"]


def test_malformed_files_are_refused_with_the_file_named(tmp_path, db_path):
    junk = tmp_path / "junk.json"
    junk.write_text('{"hello": 1}')
    with open_db(db_path) as con:
        with pytest.raises(UserError) as info:
            import_file(con, junk)
        assert str(info.value).startswith(f"file: {junk} is neither our export")
        with pytest.raises(UserError, match="does not exist"):
            import_file(con, tmp_path / "nope.csv")
        broken = tmp_path / "broken.parquet"
        broken.write_bytes(b"not parquet")
        with pytest.raises(UserError, match="could not be read"):
            import_file(con, broken)
        assert overview(con)["counts"]["runs"] == 0


def test_export_rejects_unknown_format(tmp_path, db_path):
    with open_db(db_path) as con:
        with pytest.raises(UserError, match="format: 'xlsx' is not supported; allowed: "
                                            "parquet, csv, json"):
            export_runs(con, tmp_path / "x.xlsx", "xlsx")
