#!/bin/sh
# Installs what lookalike needs from Debian 12 packages (run as root).
# Only missing packages are installed; safe to re-run.
set -eu
packages="build-essential cmake pkg-config git ca-certificates python3 \
  libfaiss-dev libopenblas-dev libopencv-dev librocksdb-dev \
  libboost-program-options-dev libgtest-dev libvlfeat-dev libjpeg-dev zlib1g-dev \
  libxxhash-dev nlohmann-json3-dev clang-format libcpp-httplib-dev \
  chromium chromium-driver python3-selenium \
  slurmctld slurmd slurm-client munge"
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
