#!/bin/sh
# Query latency of the real binary, from image file to ranked list: indexes
# a folder (default: the whole development set, db/ and queries/, 220 photos)
# into a new database, then searches every query image in one call and prints
# the median, 90th percentile and mean of the per-query seconds that
# `search --format json` reports (read, decode, extract, encode, search,
# spatial re-ranking, query expansion), with default settings and, in the
# same run, with re-ranking off (the VLAD-only baseline) for the ratio.
#
# usage: bench/query_latency.sh [INDEX_DIR [QUERY_DIR [BUILD_DIR]]]
#   INDEX_DIR  default ../shared/data/devset
#   QUERY_DIR  default ../shared/data/devset/queries
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
index_dir=${1:-$root/../shared/data/devset}
query_dir=${2:-$root/../shared/data/devset/queries}
bin=${3:-$root/build}/tools/lookalike
[ -x "$bin" ] || { echo "query_latency: $bin not built; run tools/build.sh" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-latency.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$bin" index "$index_dir" --db "$work/db" --quiet >/dev/null 2>&1 || [ $? -eq 1 ]
images=$("$bin" info --db "$work/db" --format json | sed 's/.*"images":\([0-9]*\).*/\1/')

# Prints: median p90 mean count (seconds) of the queries' "seconds" fields.
stats() {
  sed -n 's/.*"seconds":\([0-9.]*\).*/\1/p' "$1" | sort -n | awk '
    { v[NR] = $1; s += $1 }
    END { if (NR == 0) { print "0 0 0 0"; exit }
          m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          p = v[int(0.9 * NR + 0.999)]; printf "%.4f %.4f %.4f %d\n", m, p, s / NR, NR }'
}
"$bin" search --db "$work/db" "$query_dir" -k 100 --format json >"$work/default.json" || [ $? -eq 1 ]
"$bin" search --db "$work/db" "$query_dir" -k 100 --format json --rerank 0 --colour-weight 0 >"$work/vlad.json" || [ $? -eq 1 ]
echo "index: $images images; $(nproc) cores"
for run in default vlad; do
  set -- $(stats "$work/$run.json")
  label="default (re-ranking + expansion)"
  [ "$run" = vlad ] && label="VLAD only (--rerank 0 --colour-weight 0)"
  awk -v l="$label" -v m="$1" -v p="$2" -v a="$3" -v n="$4" 'BEGIN {
    printf "%-34s %d queries   median %7.1f ms   p90 %7.1f ms   mean %7.1f ms\n", l, n, m * 1000, p * 1000, a * 1000 }'
  eval "${run}_median=$1"
done
awk -v a="$default_median" -v b="$vlad_median" 'BEGIN {
  printf "re-ranking costs %.2fx the VLAD-only median; target: default median < 500 ms\n", a / b }'
