#!/bin/sh
# Configures and builds lookalike (Release) into BUILD_DIR (default build/):
# everything (the binary, the CUDA module, tests, benchmarks), or only the
# targets named in TARGETS (e.g. TARGETS=lookalike). CUDA is used when nvcc is
# found (also at /usr/local/cuda); pass -DWITH_CUDA=OFF to force a CPU-only
# build. Extra arguments go to cmake; JOBS (default: all cores) to the build.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
jobs=${JOBS:-$(nproc)}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
# shellcheck disable=SC2086  # TARGETS is a list
cmake --build "$build" -j "$jobs" ${TARGETS:+--target $TARGETS}
