#!/bin/sh
# The merge side of a sharded build at scale: N simulated images (derived from
# a real database by build/bench/simulate_shards) in S shards, merged into
# one database; prints the shard writing rate, merge time (table files +
# ingestion, and the search index build), peak RSS of merge, disk per image,
# query latency p50/p99 and peak RSS of a query batch, and recall@10 of the
# stored (approximate) search index against exact search (the same database
# re-merged with --index-kind flat) on the VLAD stage (no re-ranking).
#
# usage: bench/merge_scale.sh REAL QUERIES WORK N S [BUILD_DIR]
#   REAL     a schema-3 database with a PCA (e.g. `lookalike index PHOTOS --db REAL`, >= 113 photos)
#   QUERIES  a folder of query photos
#   WORK     scratch folder (about 2 x 31 KiB x N of disk); removed at the end unless KEEP=1
set -eu
real=$1 queries=$2 work=$3 n=$4 s=$5
build=${6:-$(cd "$(dirname "$0")/.." && pwd)/build}
L=$build/tools/lookalike
mkdir -p "$work"
echo "== simulating $n images in $s shards"
"$build/bench/simulate_shards" --from "$real" --out "$work" --images "$n" --shards "$s"
shard_kb=$(du -sk "$work"/shard-* | awk '{t += $1} END {print t}')
echo "== merge"
/usr/bin/time -f "merge peak RSS %M KiB, wall %e s" "$L" merge --db "$work/out" "$work"/shard-* --format json
out_kb=$(du -sk "$work/out" | cut -f1)
echo "disk: shards $shard_kb KiB, merged $out_kb KiB = $(awk -v k="$out_kb" -v n="$n" 'BEGIN {printf "%.1f", k / n}') KiB per image"
echo "== verify"
/usr/bin/time -f "verify wall %e s" "$L" verify --db "$work/out"
echo "== queries (default search: colour, re-ranking, expansion)"
/usr/bin/time -f "query batch peak RSS %M KiB, wall %e s" "$L" search --db "$work/out" "$queries" \
  --format json >"$work/queries.json"
python3 - "$work/queries.json" <<'PY'
import json, sys
t = sorted(json.loads(l)["seconds"] for l in open(sys.argv[1]))
pick = lambda q: t[min(len(t) - 1, int(q * len(t)))]
print(f"queries {len(t)}: p50 {pick(0.5) * 1000:.0f} ms, p99 {pick(0.99) * 1000:.0f} ms")
PY
echo "== recall@10 of the stored index against exact search (VLAD stage)"
fast="--rerank 0 --rerank-vlad 0 --expansion 0 --colour-weight 0 --format tsv -k 10"
# shellcheck disable=SC2086
"$L" search --db "$work/out" "$queries" $fast >"$work/approx.tsv"
/usr/bin/time -f "re-merge as flat: wall %e s" "$L" merge --db "$work/out" "$work"/shard-* \
  --index-kind flat >/dev/null
# shellcheck disable=SC2086
"$L" search --db "$work/out" "$queries" $fast >"$work/exact.tsv"
python3 - "$work/approx.tsv" "$work/exact.tsv" <<'PY'
import sys, collections
def load(p):
    r = collections.defaultdict(set)
    for l in open(p):
        q, _, path = l.rstrip("\n").split("\t")[:3]
        r[q].add(path)
    return r
a, e = load(sys.argv[1]), load(sys.argv[2])
rec = [len(a[q] & e[q]) / max(1, len(e[q])) for q in e]
print(f"recall@10 {sum(rec) / len(rec):.3f} over {len(rec)} queries")
PY
[ "${KEEP:-0}" = 1 ] || rm -rf "$work"
