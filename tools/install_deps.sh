#!/bin/sh
# Installs what lookalike needs from Debian 12 packages (run as root).
# Only missing packages are installed; safe to re-run.
#   tools/install_deps.sh          everything: build, tests and benchmarks
#   tools/install_deps.sh --build  what building the binary needs (the quick
#                                  start: no test framework, browser or SLURM)
set -eu
packages="build-essential cmake pkg-config git ca-certificates python3 \
  libfaiss-dev libopenblas-dev libopencv-dev librocksdb-dev \
  libboost-program-options-dev libjpeg-dev zlib1g-dev \
  libxxhash-dev nlohmann-json3-dev libcpp-httplib-dev"
case "${1:-}" in
  --build) ;;
  "") packages="$packages libgtest-dev libvlfeat-dev clang-format \
        chromium chromium-driver python3-selenium \
        slurmctld slurmd slurm-client munge time" ;;
  *) echo "usage: $0 [--build]" >&2; exit 2 ;;
esac
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install_deps: missing packages:$missing -- run as root (or: sudo $0)" >&2
    exit 2
  fi
  echo "install_deps: installing$missing" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
