#!/bin/sh
# Installs dependencies, builds lookalike with its tests, and runs every test
# (ctest: unit, e2e, cuda-emu; the gpu test reports Skipped without a GPU).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/install_deps.sh"
"$root/tools/build.sh" -DBUILD_TESTING=ON "$@"
cd "${BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "${JOBS:-$(nproc)}"
