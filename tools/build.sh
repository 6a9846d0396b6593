#!/bin/sh
# Configures and builds lookalike (Release) into BUILD_DIR (default build/).
# CUDA is used when nvcc is found (also at /usr/local/cuda); pass
# -DWITH_CUDA=OFF to force a CPU-only build. Extra arguments go to cmake.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
jobs=${JOBS:-$(nproc)}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" -j "$jobs"
