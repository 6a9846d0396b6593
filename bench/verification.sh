#!/bin/sh
# What search's verification costs, against the exact verification it
# replaced, in one run on an existing database: every query image is searched
# in one `search` call with the defaults (nearest neighbours in the query's 32
# principal components, LO-RANSAC, the query's 2,000 strongest features) and
# in another with the baseline (`--match-dims 0 --ransac classic
# --verify-keypoints 0 --rerank 50 --rerank-vlad 25`: brute-force matching
# of every feature and classic RANSAC, 50 fused candidates and the VLAD head
# verified beside the word head: what search did before, and the strongest
# simple alternative).
# Prints per-query p50 / p90 / p99 / max of the seconds `search --format json`
# reports, the CPU seconds and peak RSS of each call, and the ratios. When
# DEVSET is given (a folder with queries_meta.csv and evaluate.py, e.g.
# ../shared/data/devset) and the queries are its queries, both runs are also
# scored (bench/distractors/score_run.py: mAP, copy, hard copy, multi-view,
# tune and report halves), so the speed-up is shown at equal quality.
#
# usage: bench/verification.sh DB QUERY_DIR [BUILD_DIR]
#   env DEVSET=DIR  score both runs against that labelled set
#   env BASELINE_FLAGS="..."  another baseline, e.g. "--thumbnail-weight 0"
#                   (what one feature costs)
#   env BASELINE_BUILD=DIR  the baseline is another build's lookalike (an
#                   older commit's), with no flags unless BASELINE_FLAGS
#                   says so: what a change of the code bought
#   env FLAGS="..."  flags of the default run, e.g. "--thumbnail-depth 1000"
#   env ROUNDS=N    N rounds, default then baseline in each (the machine's
#                   drift falls on both); one line each, scored on the last
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
db=$1
queries=$2
bin=${3:-$root/build}/tools/lookalike
[ -x "$bin" ] || { echo "verification: $bin not built; run tools/build.sh" >&2; exit 2; }
base_bin=$bin
if [ -n "${BASELINE_BUILD:-}" ]; then
  base_bin=$BASELINE_BUILD/tools/lookalike
  [ -x "$base_bin" ] || { echo "verification: no baseline build at $base_bin" >&2; exit 2; }
fi
[ -d "$db" ] || { echo "verification: no database at $db" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-verification.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Prints: p50 p90 p99 max count (seconds) of the queries' "seconds" fields.
stats() {
  sed -n 's/.*"seconds":\([0-9.]*\).*/\1/p' "$1" | sort -n | awk '
    { v[NR] = $1 }
    END { if (NR == 0) { print "0 0 0 0 0"; exit }
          printf "%.4f %.4f %.4f %.4f %d\n", v[int(0.5 * NR + 0.999)], v[int(0.9 * NR + 0.999)],
                 v[int(0.99 * NR + 0.999)], v[NR], NR }'
}

run() {  # NAME BINARY FLAGS...
  name=$1
  binary=$2
  shift 2
  /usr/bin/time -f "%U %S %M" -o "$work/$name.time" \
    "$binary" search --db "$db" "$queries" -k 100 --format json "$@" >"$work/$name.json" ||
    [ $? -eq 1 ]
}
# Each query's seconds, by query: "QUERY<tab>SECONDS" lines, sorted for join.
tab=$(printf '\t')
seconds_by_query() {
  sed -n "s/.*\"query\":\"\([^\"]*\)\",\"seconds\":\([0-9.]*\).*/\1$tab\2/p" "$1" | LC_ALL=C sort
}
if [ -n "${BASELINE_BUILD:-}" ]; then
  baseline_flags=${BASELINE_FLAGS:-}
else
  baseline_flags=${BASELINE_FLAGS:---match-dims 0 --ransac classic --verify-keypoints 0 --rerank 50 --rerank-vlad 25}
fi
echo "database $db: $("$bin" info --db "$db" --format json | sed 's/.*"images":\([0-9]*\).*/\1/') images; $(nproc) cores; default: ${FLAGS:-(none)}; baseline: ${BASELINE_BUILD:+$base_bin }${baseline_flags:-(none)}"
round=0
while [ "$round" -lt "${ROUNDS:-1}" ]; do
  round=$((round + 1))
  # shellcheck disable=SC2086 # the flags are words
  run default "$bin" ${FLAGS:-}
  # shellcheck disable=SC2086 # the flags are words
  run baseline "$base_bin" $baseline_flags

  for name in default baseline; do
    set -- $(stats "$work/$name.json") $(cat "$work/$name.time")
    awk -v l="$name" -v p50="$1" -v p90="$2" -v p99="$3" -v mx="$4" -v n="$5" -v u="$6" -v s="$7" \
      -v rss="$8" 'BEGIN {
      printf "%-9s %d queries  p50 %6.0f ms  p90 %6.0f ms  p99 %6.0f ms  max %6.0f ms  CPU %7.1f s  peak RSS %4.0f MiB\n",
             l, n, p50 * 1000, p90 * 1000, p99 * 1000, mx * 1000, u + s, rss / 1024 }'
    echo "$1 $3 $6 $7" >"$work/$name.sum"
  done
  set -- $(cat "$work/default.sum") $(cat "$work/baseline.sum")
  awk -v a50="$1" -v a99="$2" -v acpu="$3" -v asys="$4" -v b50="$5" -v b99="$6" -v bcpu="$7" \
    -v bsys="$8" 'BEGIN {
    printf "default / baseline: p50 %.2fx  p99 %.2fx  CPU %.2fx", a50 / b50, a99 / b99,
           (acpu + asys) / (bcpu + bsys) }'
  # Paired by query: the median of each query's default / baseline seconds,
  # which the machine's drift between the two calls moves less than p50.
  seconds_by_query "$work/default.json" >"$work/default.by_query"
  seconds_by_query "$work/baseline.json" >"$work/baseline.by_query"
  LC_ALL=C join -t "$tab" "$work/default.by_query" "$work/baseline.by_query" |
    awk -F "$tab" '$3 > 0 { print $2 / $3 }' | sort -n | awk '
      { v[NR] = $1 }
      END { if (NR > 0) printf "  per query (median of %d): %.2fx", NR, v[int(0.5 * NR + 0.999)] }'
  echo
done

if [ -n "${DEVSET:-}" ]; then
  for name in default baseline; do
    mkdir -p "$work/score-$name"
    printf '%-9s %s\n' "$name" \
      "$(python3 "$root/bench/distractors/score_run.py" "$DEVSET" "$work/$name.json" "$work/score-$name")"
  done
fi
