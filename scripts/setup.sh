#!/usr/bin/env bash
# Create .venv (if needed) and install the pinned requirements. Safe to run again: pip
# skips what is already installed, so a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.requirements.sha256
want=$(cat requirements.txt requirements-nodeps.txt | sha256sum | cut -d' ' -f1)
# The pin check runs every time (0.1 s): a venv someone changed by hand is repaired too.
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] \
   || ! .venv/bin/python scripts/check_requirements.py requirements.txt requirements-nodeps.txt 2>/dev/null; then
  # The venv needs about 8 GiB (torch's wheel brings its CUDA libraries); say so up front,
  # because a disk that fills half way leaves a venv that imports some packages and not others.
  free_kib=$(df -Pk .venv | awk 'NR==2 {print $4}')
  echo "installing pinned requirements into .venv (first time: about 3 minutes, about 8 GiB;" \
       "$((free_kib / 1048576)) GiB free here)..."
  log=.venv/pip-install.log
  ok=""
  # Up to three tries: pip keeps what it already installed, so a retry after a dropped
  # download only fetches the rest. pip's own exit status decides, never a filter's.
  for try in 1 2 3; do
    if .venv/bin/python -m pip install --disable-pip-version-check -r requirements.txt \
         >"$log" 2>&1 \
       && .venv/bin/python -m pip install --disable-pip-version-check --no-deps \
         -r requirements-nodeps.txt >>"$log" 2>&1; then
      ok=1; break
    fi
    echo "pip install failed (try $try of 3); its last lines:" >&2
    grep -v "^WARNING: Location" "$log" | tail -n 15 >&2
  done
  if [ -z "$ok" ]; then
    echo "error: could not install requirements.txt into .venv (full log: $log)." >&2
    echo "Check the network to the package index and the free disk space (df -h .), then run this again." >&2
    exit 1
  fi
  # keras-hub's one unmet requirement is expected (requirements-nodeps.txt says why); any
  # other line pip check prints fails the setup.
  .venv/bin/python -m pip check > .venv/pip-check.log 2>&1 || true
  if grep -v "^keras-hub 0.32.0 requires tensorflow-text, which is not installed.$" \
       .venv/pip-check.log | grep -v "^No broken requirements found.$" | grep .; then
    echo "error: pip check found broken requirements (above)." >&2
    exit 1
  fi
  .venv/bin/python scripts/check_requirements.py requirements.txt requirements-nodeps.txt
  echo "$want" > "$stamp"
fi
# The LibTorch C++ runner (the libtorch runtime); skipped with a note when there is no g++.
bash scripts/build_libtorch_runner.sh

# The end-to-end test drives Debian's chromium through Playwright (never `playwright install`).
if [ "${1:-}" = "--browser" ] && [ ! -x /usr/bin/chromium ]; then
  echo "installing Debian's chromium for the browser test..."
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
