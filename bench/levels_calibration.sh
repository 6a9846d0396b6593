#!/bin/sh
# Calibration of search's match levels (search/match_level.h): precision and
# recall of each level, with and without 10,000 unrelated images, on
#   - the development set's queries (copies: their original is a copy;
#     multi-view: each relevant image is a view),
#   - seeded edits of the development set's 97 database photos
#     (build/bench/make_edits: identical bytes, re-encoded, resized, cropped
#     10 %, rotated 90 and 10 degrees, mirrored, brightened: copies; cropped
#     50 %, pasted into a generated photo: parts),
#   - the development set's copy queries flipped left to right (mirrored
#     copies: their original is a copy).
# bench/levels/score_levels.py says how each (query, hit) pair's truth is
# set and prints the tables.
#
# usage: bench/levels_calibration.sh [DEVSET_DIR [BUILD_DIR]]
#   DEVSET_DIR  default ../shared/data/devset (relative to the repository root)
#   BUILD_DIR   default build (tools/lookalike, bench/make_edits; to make the
#               10,000-image database also bench/make_photos,
#               bench/grow_distractors and bench/raw_word_lists)
# environment:
#   DBS      "label=DB ..." databases to search (each must hold the dev
#            set's db/ images under a path ending in /db/<relative path>);
#            default: n0 = the dev database alone (indexed here) and
#            n10000 = the dev database plus 2,000 real unrelated images
#            (bench/distractor_curve.sh, the DISTRACTORS cache) grown to
#            10,000 by 8,000 collages of their stored features
#            (bench/distractor_grow.sh): about an hour on 2 free cores,
#            most of it indexing the 2,000
#   KEEP     folder to keep the made databases and results in (default:
#            temporary)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
devset=$(cd "${1:-$root/../shared/data/devset}" && pwd)
build=$(cd "${2:-$root/build}" && pwd)
bin=$build/tools/lookalike
edits=$build/bench/make_edits
if [ ! -x "$bin" ] || [ ! -x "$edits" ]; then
  echo "levels_calibration: build tools/lookalike and bench/make_edits first" >&2
  exit 2
fi
if [ -n "${KEEP:-}" ]; then
  mkdir -p "$KEEP"
  work=$(cd "$KEEP" && pwd)
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-levels.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi
echo "command: $0 $devset $build"
echo "  DBS=${DBS:-} KEEP=${KEEP:-}; tree at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' + uncommitted changes'); load $(cut -d' ' -f1-3 /proc/loadavg)"

"$edits" "$devset/db" "$work/edits" >/dev/null || [ $? -eq 1 ]
"$edits" "$devset/queries" "$work/mirrored" --only mirror >/dev/null || [ $? -eq 1 ]
echo "edits: $(($(wc -l <"$work/edits/edits.tsv") - 1)) of $(find "$devset/db" -type f | wc -l) photos; $(($(wc -l <"$work/mirrored/edits.tsv") - 1)) queries mirrored"

dbs=${DBS:-}
if [ -z "$dbs" ]; then
  if [ ! -d "$work/n0.db" ]; then
    "$bin" index "$devset/db" --db "$work/n0.db" --quiet >"$work/n0.index.log" 2>&1 || [ $? -eq 1 ]
  fi
  if [ ! -d "$work/grow/grown.db" ]; then
    KEEP_DBS=$work RESULTS=$work/curve "$root/bench/distractor_curve.sh" --n 2000 "$devset" "$build" \
      >"$work/curve.log"
    WORK=$work/grow KEEP=1 RESULTS=$work/grow/results \
      "$root/bench/distractor_grow.sh" "$work/distractors2k.db" 10000 "$devset" "$build" \
      >"$work/grow.log"
  fi
  dbs="n0=$work/n0.db n10000=$work/grow/grown.db"
fi

runs=
for entry in $dbs; do
  label=${entry%%=*}
  db=${entry#*=}
  out=$work/results/$label
  mkdir -p "$out"
  images=$("$bin" info --db "$db" | awk '/^images/ {print $2}')
  echo "$label: $db ($images images)"
  for set in devset mirrored edits; do
    case $set in
      devset) queries=$devset/queries ;;
      *) queries=$work/$set ;;
    esac
    "$bin" search --db "$db" "$queries" -k 10 --format json >"$out/$set.jsonl" 2>"$out/$set.log" ||
      [ $? -eq 1 ]
  done
  runs="$runs $out"
done
# shellcheck disable=SC2086 # a list of folders without spaces (our own)
/usr/bin/python3 "$root/bench/levels/score_levels.py" "$devset" "$work/edits/edits.tsv" $runs
