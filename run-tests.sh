#!/usr/bin/env bash
# Set everything up and run the whole test suite (what .ci/run calls).
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh --browser
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec .venv/bin/python -m pytest "$@"
