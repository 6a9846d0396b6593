#!/bin/sh
# Peak resident memory of `lookalike index` into a new database, for growing
# numbers of generated photo-sized JPEGs (bench/make_photos: seeded, longest
# side 640..1600 px), to show that memory does not grow with the collection.
# Target: under 2 GB on 10,000 images, and flat.
#
# usage: bench/index_memory.sh [COUNTS [BUILD_DIR]]
#   COUNTS     default "1000 3000 10000" (image counts, one new database each)
#   BUILD_DIR  default $BUILD_DIR or build/ (needs tools/lookalike, bench/make_photos)
# environment:
#   THREADS     index threads (default 2)
#   PHOTOS_DIR  keep the generated photos here and reuse them on the next run
#               (default: a temporary folder, removed at the end)
#
# For each count it prints the run's time, images/s, the peak RSS measured by
# /usr/bin/time -v (the kernel's high-water mark of the whole process), and
# the RSS sampled at 25/50/75 % and at the end of the run: a collection-sized
# leak would show as RSS climbing through the encoding pass and as a peak
# that grows with the count.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
counts=${1:-1000 3000 10000}
build=${2:-${BUILD_DIR:-$root/build}}
bin=$build/tools/lookalike
gen=$build/bench/make_photos
threads=${THREADS:-2}
for b in "$bin" "$gen"; do
  [ -x "$b" ] || { echo "index_memory: $b not built; run tools/build.sh" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "index_memory: /usr/bin/time missing (apt-get install time)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-mem.XXXXXX")
trap 'rm -rf "$work"' EXIT
photos=${PHOTOS_DIR:-$work/photos}

max=0
for n in $counts; do [ "$n" -gt "$max" ] && max=$n; done
echo "generating $max photos in $photos (seeded; kept files are reused)"
t0=$(date +%s)
"$gen" "$photos" "$max" --seed 1 --min-side 640 --max-side 1600
echo "  $(($(date +%s) - t0)) s, $(du -sh "$photos" | cut -f1)"
echo "lookalike index, new database each, --threads $threads, default settings"
printf '%8s %9s %9s %12s   %s\n' images seconds images/s "peak RSS" "RSS at 25% / 50% / 75% / end of the run (MiB)"

for n in $counts; do
  dir=$work/set$n
  mkdir "$dir"
  # The first n photos, hard-linked into one folder (no copy).
  find "$photos" -name 'img_*.jpg' | sort | head -n "$n" | xargs ln -t "$dir"
  db=$work/db$n
  rsslog=$work/rss$n
  : > "$rsslog"
  /usr/bin/time -v -o "$work/time$n" "$bin" index "$dir" --db "$db" --threads "$threads" \
    --format json -q > "$work/json$n" 2> "$work/err$n" &
  tpid=$!
  # Sample the indexer's RSS once a second (its pid is the child of time).
  while kill -0 "$tpid" 2>/dev/null; do
    pid=$(pgrep -P "$tpid" 2>/dev/null | head -n 1 || true)
    [ -n "$pid" ] && awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null >> "$rsslog" || true
    sleep 1
  done
  wait "$tpid" || { echo "index_memory: index of $n images failed:" >&2; cat "$work/err$n" >&2; exit 2; }
  peak=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time$n")
  python3 - "$work/json$n" "$rsslog" "$n" "$peak" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
rss = [int(x) for x in open(sys.argv[2]).read().split()]
n, peak = int(sys.argv[3]), int(sys.argv[4])
assert s["indexed"] == n, f"indexed {s['indexed']} of {n}"
def at(f):
    return "%d" % (rss[min(len(rss) - 1, int(f * len(rss)))] / 1024) if rss else "-"
print("%8d %9.1f %9.1f %8.0f MiB   %s / %s / %s / %s" % (
    n, s["seconds"], s["images_per_second"], peak / 1024, at(.25), at(.5), at(.75), at(1)))
EOF
  echo "$n $peak" >> "$work/peaks"
  rm -rf "$db" "$dir"
done
sort -n "$work/peaks" | awk '{ n[NR] = $1; p[NR] = $2; if ($2 > top) top = $2 } END {
  printf "peak RSS at %d images / at %d images: %.2fx; largest peak %.0f MiB (target: < 2048 MiB and not growing)\n",
    n[NR], n[1], p[NR] / p[1], top / 1024 }'
