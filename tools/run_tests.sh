#!/bin/sh
# Installs dependencies, builds everything (the binary, the CUDA module when
# nvcc is found, tests and benchmarks), and runs every test (ctest: unit,
# e2e, cuda-emu; the gpu test reports Skipped without a GPU).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/install_deps.sh"
TARGETS= "$root/tools/build.sh" -DBUILD_TESTING=ON -DLOOKALIKE_BUILD_BENCH=ON "$@"
cd "${BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "${JOBS:-$(nproc)}"
