#!/bin/sh
# A 1,000,000-image database built on one machine with the real `index` and
# `merge`: the dev set's db/ photos, FILES generated photo files and
# synthetic images up to TOTAL. Measured by bench/million_measure.sh.
#
#   1. FILES photos (build/bench/make_photos, seeded, 320-480 px: small web
#      photos, below index's --max-side 512) in WORK/photos; kept files are
#      reused.
#   2. `lookalike index WORK/photos --db WORK/files.db`: the real indexer, which
#      also learns the model (codebook, PCA, word vocabulary) from them.
#   3. `lookalike index DEVSET/db --db WORK/dev.db --model-from WORK/files.db`:
#      the dev set's photos, a shard with the same model.
#   4. TOTAL - FILES - dev images synthetic images in shards of CHUNK
#      (build/bench/grow_distractors --from WORK/files.db: each a collage of two
#      generated photos' stored local features, everything search uses derived
#      from it as `index` derives it from a photo: descriptors, keypoints,
#      VLAD vector and its projection, colour, thumbnail; bench/README.md,
#      "Distractors"), JOBS shards at a time.
#   5. `lookalike merge --db WORK/db WORK/files.db WORK/dev.db WORK/synthetic/*`:
#      one database; its search index and word index are built at the end.
#   6. build/bench/raw_word_lists: the collages repeat their sources'
#      signatures, so their word lists compress where a real collection's do
#      not; they are stored raw, as a real collection's are, so query times
#      measure the engine, not the synthesis.
# Every step is resumable: re-running the command skips what is done (a
# photo written, an image indexed, a shard finished, a shard merged) and
# finishes the rest, so it can be stopped (kill, reboot) and started again.
# Each step's wall and CPU time and peak RSS are appended to WORK/build.txt.
#
# Cost (2 cores; bench/results/2026-11-29-search-a-million-measured.md):
# the photos' indexing about 0.044 CPU-s per photo, a synthetic image about
# 0.007 CPU-s, the merge 1.3 CPU-ms per image (729 s, 2.0 GiB peak): about
# 12,300 CPU-s at the defaults, under two hours of two free cores, most of
# it steps 2 and 4.
# Disk: about 30 KiB per image at the peak (shards and the merged database
# side by side); remove WORK/synthetic after step 6 with CLEAN=1.
#
# usage: bench/million_build.sh WORK [DEVSET [BUILD_DIR]]
#   WORK    a folder with room (about 40 GB at the defaults)
#   DEVSET  the labelled set whose db/ joins the collection (default
#           ../shared/data/devset; any folder with a db/ subfolder of photos)
# environment: TOTAL (1000000), FILES (100000), CHUNK (100000), JOBS (2),
#   CLEAN=1 removes the shards once merged.
# Example: nice -n 19 bench/million_build.sh /srv/million
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || {
  echo "usage: bench/million_build.sh WORK [DEVSET [BUILD_DIR]]" >&2
  exit 2
}
work=$1
devset=${2:-$root/../shared/data/devset}
build=${3:-$root/build}
total=${TOTAL:-1000000} files=${FILES:-100000} chunk=${CHUNK:-100000} jobs=${JOBS:-2}
L=$build/tools/lookalike
for b in "$L" "$build/bench/make_photos" "$build/bench/grow_distractors" "$build/bench/raw_word_lists"; do
  [ -x "$b" ] || { echo "million_build: $b not built; run tools/build.sh" >&2; exit 2; }
done
[ -d "$devset/db" ] || { echo "million_build: $devset/db: no such folder" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "million_build: /usr/bin/time missing (apt-get install time)" >&2; exit 2; }
mkdir -p "$work/photos" "$work/synthetic"
work=$(cd "$work" && pwd -P)
devset=$(cd "$devset" && pwd -P)
echo "million_build: $total images ($files photo files), $jobs jobs, in $work; tree at" \
  "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), load $(cut -d' ' -f1-3 /proc/loadavg)" |
  tee -a "$work/build.txt"

# step NAME COMMAND...: runs it, appends "NAME: wall, CPU, peak RSS" to
# build.txt; exit 1 (finished, some inputs skipped) counts as success.
step() {
  name=$1
  shift
  rc=0
  /usr/bin/time -f "%e %U %S %M" -o "$work/step.time" "$@" >"$work/step.out" 2>"$work/step.err" || rc=$?
  if [ $rc -gt 1 ]; then
    echo "million_build: $name failed (exit $rc): $*" >&2
    tail -n 20 "$work/step.err" >&2
    exit 2
  fi
  # (time's last line: before it, "Command exited with non-zero status 1")
  tail -n 1 "$work/step.time" |
    awk -v n="$name" '{ printf "%s: %.0f s wall, %.0f CPU-s, peak RSS %.0f MiB\n", n, $1, $2 + $3, $4 / 1024 }' |
    tee -a "$work/build.txt"
}

step "1. $files photos" "$build/bench/make_photos" "$work/photos" "$files" --seed 1 \
  --min-side 320 --max-side 480 --threads "$jobs"
step "2. index the photos" "$L" index "$work/photos" --db "$work/files.db" --threads "$jobs" --quiet
step "3. index the dev set" "$L" index "$devset/db" --db "$work/dev.db" \
  --model-from "$work/files.db" --threads "$jobs" --quiet

dev=$(find "$devset/db" -type f | wc -l)
synthetic=$((total - files - dev))
[ "$synthetic" -ge 0 ] || synthetic=0
chunks=$(((synthetic + chunk - 1) / chunk))
# One shard per chunk: synthetic image i depends only on the seed and i, so
# a shard killed half-way is made again from its start.
i=0
: >"$work/chunks.txt"
while [ "$i" -lt "$chunks" ]; do
  n=$chunk
  [ $(((i + 1) * chunk)) -le "$synthetic" ] || n=$((synthetic - i * chunk))
  [ -e "$work/synthetic/$i.done" ] || echo "$i $((i * chunk)) $n" >>"$work/chunks.txt"
  i=$((i + 1))
done
if [ -s "$work/chunks.txt" ]; then
  export work build
  step "4. $(wc -l <"$work/chunks.txt") synthetic shards" xargs -P "$jobs" -L 1 sh -c '
    rm -rf "$work/synthetic/$0"
    "$build/bench/grow_distractors" --from "$work/files.db" --out "$work/synthetic/$0" \
      --images "$2" --start "$1" --source-prefix "$work/photos/" >"$work/synthetic/$0.log" 2>&1 &&
    touch "$work/synthetic/$0.done"' <"$work/chunks.txt"
fi
shards=""
i=0
while [ "$i" -lt "$chunks" ]; do
  shards="$shards $work/synthetic/$i"
  i=$((i + 1))
done
# shellcheck disable=SC2086
step "5. merge" "$L" merge --db "$work/db" "$work/files.db" "$work/dev.db" $shards --threads "$jobs"
if [ ! -e "$work/raw_lists.done" ]; then
  step "6. word lists stored raw" "$build/bench/raw_word_lists" --db "$work/db"
  touch "$work/raw_lists.done"
fi
[ "${CLEAN:-0}" = 1 ] && rm -rf "$work/synthetic"
"$L" info --db "$work/db" | tee -a "$work/build.txt"
echo "million_build: done; measure it with bench/million_measure.sh $work $devset"
