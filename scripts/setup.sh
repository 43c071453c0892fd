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
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "installing pinned requirements into .venv (first time: about 3 minutes)..."
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt 2>&1 \
    | grep -v "^WARNING: Location" || true
  .venv/bin/python -m pip check
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
