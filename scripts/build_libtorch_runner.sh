#!/usr/bin/env bash
# Build the LibTorch C++ runner against the installed torch wheel (run by scripts/setup.sh).
# CMake's find_package(Torch) fails on this CUDA wheel (it demands nvcc), so we link
# directly: torch's headers, libtorch_cpu and libc10, C++20, the wheel's C++11 ABI, and an
# rpath to torch/lib. Without a C++ compiler this says so and exits 0: the libtorch runtime
# then fails its runs with that message, and every other runtime works.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=engine/cpp/libtorch_runner.cpp
OUT=engine/cpp/build/libtorch_runner
CXX=${CXX:-g++}
if ! command -v "$CXX" >/dev/null 2>&1; then
  echo "note: no C++ compiler ($CXX); the libtorch runtime is unavailable until one is installed" >&2
  exit 0
fi
if [ -x "$OUT" ] && [ "$OUT" -nt "$SRC" ] && [ "$OUT" -nt requirements.txt ]; then
  exit 0
fi
TORCH_DIR=$(.venv/bin/python -c "import importlib.util, os; print(os.path.dirname(importlib.util.find_spec('torch').origin))")
mkdir -p "$(dirname "$OUT")"
echo "building the LibTorch C++ runner (about 30 s)..."
"$CXX" -O2 -std=c++20 -D_GLIBCXX_USE_CXX11_ABI=1 "$SRC" -o "$OUT.tmp" \
  -I"$TORCH_DIR/include" -I"$TORCH_DIR/include/torch/csrc/api/include" \
  -L"$TORCH_DIR/lib" -ltorch_cpu -lc10 -Wl,-rpath,"$TORCH_DIR/lib"
mv "$OUT.tmp" "$OUT"
