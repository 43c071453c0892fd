#!/usr/bin/env bash
# Set everything up and start the dashboard on the embedded DuckDB file (./data/bench.duckdb,
# or $BENCH_DB). Listens on 127.0.0.1:8501; see docs/SHARING.md for exposing it on a VM
# or in a notebook session.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
exec .venv/bin/python -m streamlit run app.py "$@"
