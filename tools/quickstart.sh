#!/bin/sh
# Quick start: install dependencies, build, index real sample photos (OpenCV's
# sample images from Debian's opencv-doc package, fetched now, never committed)
# and search the index with a transformed copy of one of them. Builds only
# what it runs: the binary (which encodes on the CPU here; the CUDA module,
# tests and benchmarks are built by tools/build.sh or tools/run_tests.sh).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/install_deps.sh" --build
TARGETS="lookalike lookalike-make-copy" "$root/tools/build.sh" -DBUILD_TESTING=OFF
bin=${BUILD_DIR:-$root/build}/tools
samples=$root/samples
if [ ! -d "$samples/photos" ]; then
  echo "quickstart: fetching sample photos (Debian package opencv-doc)" >&2
  deb=$(mktemp -d)
  fetch() { (cd "$deb" && apt-get download -o APT::Sandbox::User=root opencv-doc >/dev/null); }
  fetch || { apt-get update -qq && fetch; }  # package lists may be missing or stale
  dpkg-deb -x "$deb"/opencv-doc_*.deb "$deb/x"
  mkdir -p "$samples/photos"
  find "$deb/x" -path '*examples/data/*' \( -name '*.jpg' -o -name '*.png' \) \
    -size +20k -exec cp {} "$samples/photos/" \;
  rm -rf "$deb"
fi
# The query: a cropped, rotated, downscaled, brightened JPEG copy of one photo.
"$bin/lookalike-make-copy" "$samples/photos/building.jpg" "$samples/query-building-copy.jpg"
rm -rf "$samples/db"
"$bin/lookalike" index "$samples/photos" --db "$samples/db" || [ $? -eq 1 ]
echo
echo "searching for $samples/query-building-copy.jpg (a transformed copy of building.jpg):"
"$bin/lookalike" search --db "$samples/db" "$samples/query-building-copy.jpg" -k 5
