#!/bin/sh
# Fills OUT_DIR with N distractor JPEGs for bench/distractor_curve.sh: photos
# and wallpapers from Debian packages, frames of their sample videos and image
# sequences, seeded transformed crops of those, and generated photo-like
# images (bench/make_photos). None is, or is cut from, a dev-set image: the
# rules and the mix are in make_distractors.py's header.
#
# usage: bench/distractors/make_distractors.sh OUT_DIR N [DEVSET_DIR [BUILD_DIR]]
#   OUT_DIR     the cache: OUT_DIR/NNNN/d_NNNNNNN.jpg, 1000 per folder; files
#               already there are kept, so re-running (or a larger N) only
#               writes what is missing, and the first N of any run are the same
#   DEVSET_DIR  default ../shared/data/devset (relative to the repository root):
#               its sources.csv and images say what must be left out
#   BUILD_DIR   default build (needs bench/make_photos)
# environment: SEED (default 1), THREADS (default: all cores)
#
# Installs what is missing with apt-get (as root): python3-opencv,
# python3-numpy and the image packages, about 700 MB. Runs Debian's
# /usr/bin/python3 (its OpenCV), not whatever python3 is first on PATH.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 2 ] || { sed -n '2,18p' "$0" >&2; exit 2; }
out=$1
n=$2
devset=${3:-$root/../shared/data/devset}
build=${4:-$root/build}
[ -f "$devset/sources.csv" ] || { echo "make_distractors: $devset/sources.csv not found" >&2; exit 2; }
gen=$build/bench/make_photos
[ -x "$gen" ] || { echo "make_distractors: $gen not built; run tools/build.sh" >&2; exit 2; }

packages="python3-opencv python3-numpy plasma-workspace-wallpapers mate-backgrounds
  ukui-wallpapers lomiri-wallpapers sway-backgrounds desktop-base gnome-backgrounds opencv-doc
  cimg-examples python3-skimage python3-imageio visp-images-data"
missing=
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "make_distractors: installing$missing" >&2
  apt-get update -qq
  # shellcheck disable=SC2086 # a list of package names
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
fi

exec /usr/bin/python3 "$root/bench/distractors/make_distractors.py" "$out" "$n" \
  --devset "$devset" --make-photos "$gen" --seed "${SEED:-1}" --threads "${THREADS:-$(nproc)}"
