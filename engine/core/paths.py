"""Where the project's files live: one definition for every side of the process boundary."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["PROJECT_ROOT", "PRICES_DIR", "CPP_BUILD_DIR", "FEEDS_DIR", "data_root"]

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PRICES_DIR = PROJECT_ROOT / "prices"
# The LibTorch C++ runner and trainer, built by scripts/build_libtorch_runner.sh.
CPP_BUILD_DIR = PROJECT_ROOT / "engine" / "worker" / "cpp" / "build"
# Where `watch` writes each group's Atom feed: under static/, the folder Streamlit serves
# at /app/static/ (server.enableStaticServing in .streamlit/config.toml), so a feed is a
# plain URL a reader can subscribe to, viewer mode included (docs/pages/history.md).
FEEDS_DIR = PROJECT_ROOT / "static" / "feeds"


def data_root() -> Path:
    """Generated image sets are cached here (deterministic, so safe to reuse)."""
    return Path(os.environ.get("BENCH_DATA_DIR") or PROJECT_ROOT / "data" / "datasets")
