#!/bin/sh
# The search side of a 100,000-image database against its targets.
#
# Builds the database quickly from real features: a real database indexed
# from PHOTOS and QUERIES (copied into WORK, never into the repository),
# N records simulated from its images (bench/simulate_shards.cc: records,
# local features and mixed vectors of the real images) in 2 shards, merged
# (which builds the search index and the word index from the stored
# features). Then: `info` (wall, peak RSS), one CLI
# `search` of one query (wall = time to its answer, peak RSS), one `search`
# of 50 queries (p50 / p99 of the per-query `seconds` of its JSON), and the
# database's bytes per image on disk; each figure is printed against its
# target. Targets (N = 100,000, 2 cores): one CLI query answers in < 1 s
# with peak RSS < 200 MB + 1 KB per image; query p50 <= 200 ms, p99 <= 1 s.
#
# usage: bench/scale_100k.sh PHOTOS QUERIES WORK [N] [BUILD_DIR]
#   PHOTOS   a folder of photos (e.g. ../shared/data/devset/db)
#   QUERIES  a folder of query photos (e.g. ../shared/data/devset/queries);
#            PHOTOS + QUERIES need >= 113 images for the PCA
#   WORK     scratch folder (about 2 x 30 KiB x N of disk); a database
#            already built there is reused; removed at the end with CLEAN=1
set -eu
photos=$1 queries=$2 work=$3 n=${4:-100000}
build=${5:-$(cd "$(dirname "$0")/.." && pwd)/build}
L=$build/tools/lookalike
mkdir -p "$work"
work=$(cd "$work" && pwd)
timed() {  # timed LABEL COMMAND...: runs it, prints wall, CPU and peak RSS, keeps $wall $cpu $rss_kb
  label=$1
  shift
  rc=0
  /usr/bin/time -f "%e %M %U %S" -o "$work/time.txt" "$@" >"$work/out.txt" 2>"$work/err.txt" || rc=$?
  if [ $rc -gt 1 ]; then  # 1: finished, some inputs skipped (e.g. a flat photo)
    cat "$work/err.txt" >&2
    exit 2
  fi
  wall=$(tail -1 "$work/time.txt" | cut -d' ' -f1)
  rss_kb=$(tail -1 "$work/time.txt" | cut -d' ' -f2)
  cpu=$(tail -1 "$work/time.txt" | awk '{ printf "%.2f", $3 + $4 }')
  echo "$label: wall $wall s, CPU $cpu s, peak RSS $((rss_kb / 1024)) MiB"
}
verdict() {  # verdict VALUE LIMIT: "ok" when VALUE <= LIMIT
  awk -v v="$1" -v l="$2" 'BEGIN { print (v + 0 <= l + 0) ? "ok" : "MISSED" }'
}

if [ ! -d "$work/real" ]; then
  echo "== real database from $photos and $queries"
  mkdir -p "$work/photos"
  cp -r "$photos" "$work/photos/db"
  cp -r "$queries" "$work/photos/queries"
  timed "index (real photos)" "$L" index "$work/photos" --db "$work/real"
fi
if [ ! -d "$work/db" ]; then
  echo "== $n simulated images, merged"
  rm -rf "$work/sim"
  mkdir -p "$work/sim"
  "$build/bench/simulate_shards" --from "$work/real" --out "$work/sim" --images "$n" --shards 2
  timed "merge (search index and word index built)" "$L" merge --db "$work/db" "$work"/sim/shard-*
  rm -rf "$work/sim"
fi

one=$(find "$queries" -type f | sort | head -1)
find "$queries" -type f | sort | head -50 >"$work/queries.txt"
target_rss_mb=$(awk -v n="$n" 'BEGIN { printf "%.0f", 200 + n / 1024 }')
for layout in db; do
  d=$work/$layout
  echo "== $n images"
  timed "info" "$L" info --db "$d"
  timed "one query" "$L" search --db "$d" "$one" --format json
  echo "   one CLI query: $wall s (target < 1 s: $(verdict "$wall" 0.999); CPU $cpu s), peak RSS" \
    "$((rss_kb / 1024)) MiB (target < $target_rss_mb MiB: $(verdict $((rss_kb / 1024)) "$target_rss_mb"))," \
    "$(awk -v k="$rss_kb" -v n="$n" 'BEGIN { printf "%.2f", k * 1024 / n / 1024 }') KiB per image"
  # shellcheck disable=SC2046
  timed "50 queries" "$L" search --db "$d" $(cat "$work/queries.txt") --format json
  python3 - "$work/out.txt" <<'PY'
import json, sys
t = sorted(json.loads(l)["seconds"] for l in open(sys.argv[1]))
pick = lambda q: t[min(len(t) - 1, int(q * len(t)))]
p50, p99 = pick(0.5), pick(0.99)
ok = lambda v, l: "ok" if v <= l else "MISSED"
print(f"   queries {len(t)}: p50 {p50 * 1000:.0f} ms (target <= 200 ms: {ok(p50, 0.2)}), "
      f"p99 {p99 * 1000:.0f} ms (target <= 1000 ms: {ok(p99, 1.0)})")
PY
  # What the word stage costs per query, and so how it scales with N.
  # shellcheck disable=SC2046
  timed "50 queries, no word stage" "$L" search --db "$d" $(cat "$work/queries.txt") \
    --format json --rerank-words 0 --word-weight 0
  python3 - "$work/out.txt" <<'PY'
import json, sys
t = sorted(json.loads(l)["seconds"] for l in open(sys.argv[1]))
pick = lambda q: t[min(len(t) - 1, int(q * len(t)))]
print(f"   without the word stage: p50 {pick(0.5) * 1000:.0f} ms, p99 {pick(0.99) * 1000:.0f} ms")
PY
  kb=$(du -sk "$d" | cut -f1)
  echo "   disk: $kb KiB, $(awk -v k="$kb" -v n="$n" 'BEGIN { printf "%.1f", k / n }') KiB per image"
done
[ "${CLEAN:-0}" = 1 ] && rm -rf "$work"
exit 0
