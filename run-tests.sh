#!/usr/bin/env bash
# Set everything up and run the whole test suite (what .ci/run calls).
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh --browser
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# Two test processes (pytest-xdist), whole files to each: on a 2-core machine most of a real
# test's time is a worker starting and importing its framework, one core at a time, so two
# files at once ran the suite in 29:51 here (CI's one-at-a-time run of nearly the same tests:
# 51 min); a file stays in one process so its module fixtures (a real sweep, the runtime
# probes) run once.
# No test asserts a duration; those whose outcome rests on measured time (a LoadGen bound,
# the contention verdict) are marked `alone` and run with nothing beside them (conftest.py).
exec .venv/bin/python -m pytest -n 2 --dist loadfile "$@"
