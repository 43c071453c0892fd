"""The placeholder dashboard page, through Streamlit's AppTest; never imports a framework."""

import subprocess
import sys

from streamlit.testing.v1 import AppTest

from store.db import open_db
from store.runs import save_record
from tests.conftest import ROOT
from tests.helpers import SYSTEM, failed_record, ok_record

APP = str(ROOT / "app.py")


def test_empty_database_says_what_to_do(db_path, monkeypatch):
    monkeypatch.setenv("BENCH_DB", str(db_path))
    at = AppTest.from_file(APP).run(timeout=30)
    assert not at.exception
    assert "No results yet" in at.info[0].value
    assert "python -m engine run" in at.info[0].value


def test_seeded_database_lists_runs(db_path, monkeypatch):
    with open_db(db_path) as con:
        save_record(con, ok_record("r1"), SYSTEM)
        save_record(con, failed_record("r2", status="oom"), SYSTEM)
    monkeypatch.setenv("BENCH_DB", str(db_path))
    at = AppTest.from_file(APP).run(timeout=30)
    assert not at.exception
    assert [m.value for m in at.metric] == ["2", "5", "1"]
    df = at.dataframe[0].value
    assert sorted(df.status) == ["ok", "oom"]


def test_dashboard_process_never_imports_a_framework(tmp_path):
    code = ("import sys, os; os.environ['BENCH_DB'] = sys.argv[1]; "
            "from streamlit.testing.v1 import AppTest; "
            f"AppTest.from_file({APP!r}).run(timeout=30); "
            "print([m for m in ('torch', 'tensorflow', 'keras', 'torchvision') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x.duckdb")],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip().splitlines()[-1] == "[]"
