#!/usr/bin/env bash
# Build the LibTorch C++ binaries against the installed torch wheel (run by scripts/setup.sh):
# the inference runner (engine/worker/cpp/libtorch_runner.cpp) and the trainer
# (engine/worker/cpp/libtorch_train.cpp). Each is rebuilt only when older than its source or
# the shared header engine/worker/cpp/common.h or requirements.txt.
# CMake's find_package(Torch) fails on this CUDA wheel (it demands nvcc), so we link
# directly: torch's headers, libtorch_cpu and libc10, C++20, the wheel's C++11 ABI, and an
# rpath to torch/lib, written as DT_RPATH (--disable-new-dtags): an AOTInductor package's
# model library, which the runner dlopens, needs libtorch.so, and only an executable's
# DT_RPATH (not the default DT_RUNPATH) is searched for the libraries a dlopened one needs
# (measured: "dlopen: libtorch.so: cannot open shared object file" without it).
# Without a C++ compiler this says so and exits 0: the libtorch runtimes then fail their runs
# with that message, and every other runtime works.
set -euo pipefail
cd "$(dirname "$0")/.."
CXX=${CXX:-g++}
PYTHON=${PYTHON:-.venv/bin/python}  # the interpreter whose torch wheel is linked against
if ! command -v "$CXX" >/dev/null 2>&1; then
  echo "note: no C++ compiler ($CXX); the libtorch runtime is unavailable until one is installed" >&2
  exit 0
fi
TORCH_DIR=""

build() {  # build SRC OUT WHAT
  local src=$1 out=$2 what=$3
  if [ -x "$out" ] && [ "$out" -nt "$src" ] && [ "$out" -nt engine/worker/cpp/common.h ] \
     && [ "$out" -nt requirements.txt ]; then
    return 0
  fi
  if [ -z "$TORCH_DIR" ]; then
    TORCH_DIR=$("$PYTHON" -c "import importlib.util, os; print(os.path.dirname(importlib.util.find_spec('torch').origin))")
  fi
  mkdir -p "$(dirname "$out")"
  echo "building the LibTorch C++ $what (about 30 s)..."
  "$CXX" -O2 -std=c++20 -D_GLIBCXX_USE_CXX11_ABI=1 "$src" -o "$out.tmp" \
    -I"$TORCH_DIR/include" -I"$TORCH_DIR/include/torch/csrc/api/include" \
    -L"$TORCH_DIR/lib" -ltorch_cpu -lc10 -Wl,--disable-new-dtags,-rpath,"$TORCH_DIR/lib"
  mv "$out.tmp" "$out"
}

build engine/worker/cpp/libtorch_runner.cpp engine/worker/cpp/build/libtorch_runner runner
build engine/worker/cpp/libtorch_train.cpp engine/worker/cpp/build/libtorch_train trainer
