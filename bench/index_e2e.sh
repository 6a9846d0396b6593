#!/bin/sh
# A large database built end to end with the real binary, measured as a user
# would measure it: N generated photos (bench/make_photos, seeded) indexed by
# `lookalike index` in two runs, then `info`, one CLI `search`, `dedup` and a
# batch of copy queries against the result.
#
#   1. make_photos writes N photos (kept and reused with PHOTOS_DIR).
#   2. The indexed folder is WORK/collection, symlinks to the photos (the
#      photos themselves are never touched): first it holds the first N/10
#      photos and `index` creates the database from them; then the other 90 %
#      are linked in and a normal incremental `index` of the same folder into
#      the same database adds them (the first N/10 are "unchanged"). For each
#      run: wall and CPU time, images/s and peak RSS (/usr/bin/time -v). The
#      two peaks side by side are the evidence that index memory does not grow
#      with the collection (the second run holds a 10x larger database).
#   3. Disk: `du -sk` of the database, KiB per image (and of the photos).
#   4. Wall time and peak RSS of `info`, of ONE CLI `search` of one query image
#      (the time to its answer, loading included) and of `dedup` over the whole
#      database (default flags: exact neighbours, RANSAC verification).
#   5. Query latency: QUERIES copies of indexed photos (evenly spread over the
#      collection; each cropped to 80-95 % of each side, rescaled by 0.6-1.0
#      and re-encoded as JPEG quality 60-85, seeded; made with OpenCV from
#      /usr/bin/python3, or, where python3-opencv is missing, byte copies of
#      the photos, which the output says) searched in ONE
#      `search -k 10 --format json` call: p50 / p99 of the per-query "seconds"
#      and the share of queries whose source photo is ranked first (a sanity
#      check that search still works at that size).
# A summary table closes the output, with the command line, the binary's
# date, the tree's commit and the load average before and after.
#
# Photo size: MIN_SIDE=320 MAX_SIDE=480 (longest side) by default, small web
# photos below index's --max-side 512, so `index` decodes them without a
# resize. Measured at small N (400-600 photos, 2 threads, machine loaded by
# other builds; index's extract stage seconds, summed over threads, so
# inflated by the load): extraction takes ~0.22 s per photo at make_photos'
# own 640..1600 (downscaled to 512 before SIFT, 5-6 images/s), ~0.10 s at
# 320..480 and still ~0.08 s at 160..240 (min-keypoints re-detection), so
# 320..480 is near the floor without making toy images. In the test runs
# (N = 1,000 and 3,000) the incremental pass
# costs 0.060-0.062 s of CPU per photo: ~30 images/s on 2 free cores, so
# 100,000 photos index in roughly an hour; with the cores shared by other
# builds (load 5-6) those runs got 16 images/s, i.e. ~1.7 hours.
# `dedup` verifies ~3.7 candidate pairs per image at ~5 ms each, one core
# (58 s at N = 3,000), and its exact neighbour search grows as N^2 (0.18 s at
# 3,000), so at 100,000 it adds roughly 35 minutes; the queries ~2-5 more.
# Disk: 25 KiB per photo; the database 31.8 KiB per image at N = 1,000 and
# 18.6 at 3,000 (a fixed 4 MiB of word index and the model amortised), so
# 100,000 need ~5 GB in all.
#
# usage: bench/index_e2e.sh N [BUILD_DIR]
#   N          photos (e.g. 100000; more than 150: the first run indexes
#              N/10 but at least 150, as the PCA needs 113 images)
#   BUILD_DIR  a build folder (tools/lookalike, bench/make_photos) or a folder
#              holding the two binaries; default $BUILD_DIR or build/
# environment:
#   PHOTOS_DIR  keep the generated photos here and reuse them (photos already
#               there are not rewritten; the first N are used); default: a
#               temporary folder, removed at the end
#   KEEP_DB=1   keep the work folder (database, symlinked collection, queries,
#               outputs); its path is printed. Default: removed at the end
#   THREADS     index and make_photos threads (default 2)
#   MIN_SIDE, MAX_SIDE  make_photos' longest-side range (default 320, 480)
#   QUERIES     copy queries for the latency batch (default 200)
#   TMPDIR      where the work folder goes (needs ~2x the photos' disk)
#
# Example (about an hour and a half on 2 otherwise idle cores):
#   nice -n 10 bench/index_e2e.sh 100000
#   PHOTOS_DIR=/work/photos100k KEEP_DB=1 nice -n 10 bench/index_e2e.sh 100000 /work/e2e-bin
# Not a ctest test: timings on shared machines are not pass/fail material.
set -eu
cmdline="$0 $*"
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || {
  echo "usage: bench/index_e2e.sh N [BUILD_DIR]" >&2
  exit 2
}
n=$1
build=${2:-${BUILD_DIR:-$root/build}}
if [ -x "$build/tools/lookalike" ]; then
  bin=$build/tools/lookalike gen=$build/bench/make_photos
else
  bin=$build/lookalike gen=$build/make_photos
fi
threads=${THREADS:-2}
min_side=${MIN_SIDE:-320}
max_side=${MAX_SIDE:-480}
nq=${QUERIES:-200}
for b in "$bin" "$gen"; do
  [ -x "$b" ] || { echo "index_e2e: $b not built; run tools/build.sh" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "index_e2e: /usr/bin/time missing (apt-get install time)" >&2; exit 2; }
# The first run creates the model: the PCA needs 113 images with features, so
# it gets at least 150 photos.
first=$((n / 10))
[ "$first" -ge 150 ] || first=150
[ "$n" -gt "$first" ] || { echo "index_e2e: N must be more than 150" >&2; exit 2; }
[ "$nq" -le "$n" ] || nq=$n

work=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-e2e.XXXXXX")
if [ "${KEEP_DB:-0}" = 1 ]; then
  trap 'echo "kept: $work (database $work/db)"' EXIT
else
  trap 'rm -rf "$work"' EXIT
fi
photos=${PHOTOS_DIR:-$work/photos}
mkdir -p "$photos"
photos=$(cd "$photos" && pwd)
db=$work/db

load() { cut -d' ' -f1-3 /proc/loadavg; }
load_start=$(load)
tree="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' + uncommitted changes')"
echo "index_e2e: N = $n, photos $min_side..$max_side px, $threads threads, $nq queries"
echo "  $bin built $(date -u -r "$bin" '+%Y-%m-%d %H:%M UTC'); tree at $tree; $(nproc) cores, load $load_start"

# timed NAME COMMAND...: runs it under /usr/bin/time -v (stdout to
# $work/NAME.out, stderr to $work/NAME.err); exit status 1 (finished, some
# inputs skipped) is accepted. Sets $wall, $cpu (seconds) and $rss (MiB).
timed() {
  name=$1
  shift
  rc=0
  /usr/bin/time -v -o "$work/$name.time" "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  if [ $rc -gt 1 ]; then
    echo "index_e2e: $name failed (exit $rc): $*" >&2
    tail -n 20 "$work/$name.err" >&2
    exit 2
  fi
  wall=$(sed -n 's/.*Elapsed (wall clock).*: //p' "$work/$name.time" |
    awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.2f", s }')
  cpu=$(awk -F': ' '/User time|System time/ { s += $2 } END { printf "%.2f", s }' "$work/$name.time")
  rss=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$work/$name.time")
  echo "$name $wall $cpu $rss" >>"$work/summary"
}
# jfield FILE KEY: a number field of a one-line JSON object.
jfield() { sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p" "$1" | head -n 1; }

echo "== 1. $n photos in $photos (make_photos --seed 1; kept files are reused)"
t0=$(date +%s)
"$gen" "$photos" "$n" --seed 1 --min-side "$min_side" --max-side "$max_side" --threads "$threads"
find "$photos" -name 'img_*.jpg' | sort | head -n "$n" >"$work/photos.txt"
[ "$(wc -l <"$work/photos.txt")" -eq "$n" ] || { echo "index_e2e: fewer than $n photos in $photos" >&2; exit 2; }
photos_kb=$(xargs stat -c %s <"$work/photos.txt" | awk '{ s += $1 } END { printf "%d", s / 1024 }')
echo "   $(($(date +%s) - t0)) s; $photos_kb KiB of photos, $(awk -v k="$photos_kb" -v n="$n" 'BEGIN { printf "%.1f", k / n }') KiB per photo"

# link FROM TO: symlinks photos FROM..TO (1-based lines of photos.txt) into
# the collection, mirroring make_photos' NNNN/ folders.
link() {
  sed -n "$1,$2p" "$work/photos.txt" | python3 -c '
import os, sys
dest = sys.argv[1]
for line in sys.stdin:
    src = line.rstrip("\n")
    sub = os.path.join(dest, os.path.basename(os.path.dirname(src)))
    os.makedirs(sub, exist_ok=True)
    os.symlink(src, os.path.join(sub, os.path.basename(src)))
' "$work/collection"
}

# index_run NAME EXPECTED_NEW: one `index` of the collection, checked and printed.
index_run() {
  timed "$1" "$bin" index "$work/collection" --db "$db" --threads "$threads" --format json -q
  out=$work/$1.out
  if grep -q '"cancelled":true' "$out"; then
    echo "index_e2e: $1 was cancelled (a signal?): $(cat "$out")" >&2
    exit 2
  fi
  indexed=$(jfield "$out" indexed)
  unchanged=$(jfield "$out" unchanged)
  nofeat=$(jfield "$out" no_features)
  [ "$indexed" -eq "$2" ] || echo "   WARNING: indexed $indexed of $2 new photos: $(cat "$out")"
  echo "   $1: $indexed indexed, $unchanged unchanged, $nofeat without features; wall $wall s," \
    "CPU $cpu s, $(awk -v i="$indexed" -v w="$wall" 'BEGIN { printf "%.1f", i / w }') images/s," \
    "peak RSS $rss MiB"
  echo "$1 $indexed $wall $cpu $rss" >>"$work/index_runs"
}

echo "== 2. index: the first $first photos (new database), then all $n (incremental)"
link 1 "$first"
index_run index_first "$first"
link $((first + 1)) "$n"
index_run index_all $((n - first))

echo "== 3. disk"
db_kb=$(du -sk "$db" | cut -f1)
timed info "$bin" info --db "$db" --format json
images=$(jfield "$work/info.out" images)
descriptors=$(jfield "$work/info.out" descriptors)
size_bytes=$(jfield "$work/info.out" size_bytes)
kib_per_image=$(awk -v k="$db_kb" -v n="$images" 'BEGIN { printf "%.1f", k / n }')
echo "   database: $images images, $descriptors local features; du $db_kb KiB = $kib_per_image KiB per image" \
  "(info size_bytes $size_bytes); photos $photos_kb KiB"
echo "   info: wall $wall s, peak RSS $rss MiB"

echo "== 4. $nq copy queries"
mkdir "$work/queries"
awk -v n="$n" -v q="$nq" 'BEGIN { for (i = 0; i < q; i++) pick[int((i + 0.5) * n / q) + 1] = 1 }
  NR in pick' "$work/photos.txt" >"$work/sources.txt"
if /usr/bin/python3 -c 'import cv2' 2>/dev/null; then
  query_kind="copies (crop 80-95 % a side, x0.6-1.0, JPEG 60-85; OpenCV)"
  /usr/bin/python3 - "$work/sources.txt" "$work/queries" <<'PY'
import os, random, sys
import cv2
rng = random.Random(7)
for src in open(sys.argv[1]).read().split():
    img = cv2.imread(src)
    h, w = img.shape[:2]
    ch, cw = int(h * rng.uniform(0.8, 0.95)), int(w * rng.uniform(0.8, 0.95))
    y, x = rng.randint(0, h - ch), rng.randint(0, w - cw)
    img = img[y:y + ch, x:x + cw]
    s = rng.uniform(0.6, 1.0)
    img = cv2.resize(img, (max(1, int(cw * s)), max(1, int(ch * s))), interpolation=cv2.INTER_AREA)
    out = os.path.join(sys.argv[2], "q_" + os.path.basename(src))
    cv2.imwrite(out, img, [cv2.IMWRITE_JPEG_QUALITY, rng.randint(60, 85)])
PY
else
  query_kind="the indexed photos themselves (byte copies: /usr/bin/python3 has no cv2)"
  while read -r src; do cp "$src" "$work/queries/q_$(basename "$src")"; done <"$work/sources.txt"
fi
echo "   queries: $query_kind"
one=$(find "$work/queries" -name 'q_*.jpg' | sort | head -n 1)
timed search_one "$bin" search --db "$db" "$one" --format json
echo "   one CLI search ($(basename "$one")): wall $wall s, CPU $cpu s, peak RSS $rss MiB"
timed search_batch "$bin" search --db "$db" "$work/queries" -k 10 --format json
python3 - "$work/search_batch.out" "$wall" "$rss" >"$work/latency" <<'PY'
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
t = sorted(r["seconds"] for r in rows)
pick = lambda q: t[min(len(t) - 1, int(q * len(t)))]
first = sum(1 for r in rows if r["results"] and
            os.path.basename(r["results"][0]["path"]) == os.path.basename(r["query"])[2:])
print(len(rows), "%.0f" % (pick(0.5) * 1000), "%.0f" % (pick(0.99) * 1000), first)
PY
# shellcheck disable=SC2046
set -- $(cat "$work/latency")
q_count=$1 p50=$2 p99=$3 q_first=$4
echo "   $q_count queries in one search call: wall $wall s, peak RSS $rss MiB; per query p50 $p50 ms," \
  "p99 $p99 ms; source photo ranked first: $q_first of $q_count"

echo "== 5. dedup (whole database, default flags)"
timed dedup "$bin" dedup --db "$db" --format tsv -v
groups=$(cut -f1 "$work/dedup.out" | sort -u | grep -c . || true)
members=$(grep -c . "$work/dedup.out" || true)
echo "   dedup: wall $wall s, CPU $cpu s, peak RSS $rss MiB; $groups groups, $members members"
tail -n 3 "$work/dedup.err" | sed 's/^/   | /'

echo "== summary: N = $n ($min_side..$max_side px photos), $threads threads"
awk '{ printf "%-14s %10s %10s %10s %12s\n", $1, $2, $3, $4, $5 }' <<EOF
step indexed wall_s CPU_s peak_RSS_MiB
$(awk '{ print $1, $2, $3, $4, $5 }' "$work/index_runs")
EOF
awk '$1 == "info" || $1 == "search_one" || $1 == "search_batch" || $1 == "dedup" {
  printf "%-14s %10s %10s %10s %12s\n", $1, "-", $2, $3, $4 }' "$work/summary"
total_wall=$(awk '{ s += $3 } END { printf "%.1f", s }' "$work/index_runs")
total_rate=$(awk '{ i += $2; s += $3 } END { printf "%.1f", i / s }' "$work/index_runs")
peak_ratio=$(awk '{ p[NR] = $5 } END { printf "%.2f", p[2] / p[1] }' "$work/index_runs")
echo "index, both runs: $total_wall s wall, $total_rate images/s;" \
  "peak RSS of the incremental run over all $n / of the first run over $first: ${peak_ratio}x (must not grow with the collection)"
echo "disk: $kib_per_image KiB per image ($db_kb KiB for $images images)"
echo "queries ($query_kind): p50 $p50 ms, p99 $p99 ms, source first $q_first / $q_count"
echo "command: $cmdline"
echo "binary: $bin built $(date -u -r "$bin" '+%Y-%m-%d %H:%M UTC'); tree $tree"
echo "load average: $load_start at the start, $(load) at the end ($(nproc) cores)"
