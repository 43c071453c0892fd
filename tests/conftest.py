import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(autouse=True)
def _no_ambient_db(monkeypatch):
    """Tests never touch the user's ./data database unless they pass a path."""
    monkeypatch.delenv("BENCH_DB", raising=False)


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "bench.duckdb"


@pytest.fixture
def worker_env(monkeypatch):
    """Workers are started with `python -m engine.worker` from the project root."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
