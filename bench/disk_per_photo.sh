#!/bin/sh
# Disk per photo of new databases of N real photos, the PCA matrix's bits
# automatic (the default) against 4 bits (the strongest fixed choice at any
# size), and of one database grown through the same sizes by successive
# `index` runs, which learns its projection again at more bits as it grows.
#
# usage: bench/disk_per_photo.sh PHOTOS "N1 N2 ..." [BUILD_DIR]
#   PHOTOS     a folder of photos (searched recursively, symlinks followed);
#              the first N in path order make the collection of size N
#   BUILD_DIR  default $BUILD_DIR or build/
# e.g. a folder holding links to ../shared/data/devset/db and queries (220
# photos) and to the JPEGs under /usr/share/wallpapers and
# /usr/share/backgrounds (indexer/README.md, "Current figures").
# Prints, for each N: KiB per photo (du -sk of the database / N) and the
# bits `info` reports, for the default and for --pca-bits 4, and their ratio;
# then the grown database's bits and KiB per photo after each run.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
photos=$1
sizes=$2
bin=${3:-${BUILD_DIR:-$root/build}}/tools/lookalike
[ -x "$bin" ] || { echo "disk_per_photo: $bin not built; run tools/build.sh" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-disk.XXXXXX")
trap 'rm -rf "$work"' EXIT
find -L "$photos" -type f \( -iname '*.jpg' -o -iname '*.jpeg' -o -iname '*.png' \) | sort > "$work/all"
total=$(wc -l < "$work/all")

# Links the first $1 photos into folder $2 (their relative paths kept).
collection() {
  mkdir -p "$2"
  head -n "$1" "$work/all" | while IFS= read -r f; do
    rel=${f#"$photos"/}
    mkdir -p "$2/$(dirname "$rel")"
    [ -e "$2/$rel" ] || ln -s "$(readlink -f "$f")" "$2/$rel"
  done
}
# `lookalike index`, where exit 1 (some files skipped, each named) is success.
index() {
  "$bin" index "$@" -q > /dev/null || [ $? -eq 1 ]
}
# "bits KiB-per-photo" of database $1 holding $2 photos.
measure() {
  bits=$("$bin" info --db "$1" --format json | /usr/bin/python3 -c '
import json, sys
print((json.load(sys.stdin).get("pca") or {}).get("component_bits", "none"))')
  kib=$(du -sk "$1" | cut -f1)
  echo "$bits $(/usr/bin/python3 -c "print(f'{$kib / $2:.1f}')")"
}

printf '%6s | %-24s | %-24s | %s\n' N "default: bits, KiB/photo" "--pca-bits 4" "ratio"
for n in $sizes; do
  [ "$n" -le "$total" ] || { echo "disk_per_photo: $photos has $total photos, not $n" >&2; exit 2; }
  collection "$n" "$work/p$n"
  index "$work/p$n" --db "$work/auto$n"
  index "$work/p$n" --db "$work/four$n" --pca-bits 4
  set -- $(measure "$work/auto$n" "$n") $(measure "$work/four$n" "$n")
  printf '%6s | %-24s | %-24s | %s\n' "$n" "$1, $2" "$3, $4" \
    "$(/usr/bin/python3 -c "print(f'{$2 / $4:.3f}')")"
  rm -rf "$work/auto$n" "$work/four$n"
done

echo
echo "one database grown through the sizes (default flags):"
for n in $sizes; do
  collection "$n" "$work/grown"
  index "$work/grown" --db "$work/grown.db"
  set -- $(measure "$work/grown.db" "$n")
  printf '%6s | bits %s, %s KiB/photo\n' "$n" "$1" "$2"
done
