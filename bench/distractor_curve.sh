#!/bin/sh
# Distractor curve: the dev-set queries against the dev database plus N
# unrelated images, for several N, with default settings. For each N it
# prints mAP overall, for copies, hard copies and multi-view, the mAP of the
# two halves of a fixed split of the queries (bench/distractors/score_run.py
# says how it is drawn; search/README.md which figures are in-sample), the
# median and 90th-percentile query time and the indexing time.
#
# usage: bench/distractor_curve.sh [--n "0 2000 10000"] [DEVSET_DIR [BUILD_DIR]]
#   --n         distractor counts, one fresh database each (100000 works too:
#               about 3 h of indexing on 2 cores, see bench/README.md)
#   DEVSET_DIR  default ../shared/data/devset (relative to the repository root)
#   BUILD_DIR   default build (needs tools/lookalike and bench/make_photos)
# environment:
#   DISTRACTORS  distractor cache (default ../distractors beside the
#                repository): bench/distractors/make_distractors.sh fills it
#                once for the largest N, and the sets of every N are made of
#                links into it, DISTRACTORS/sets/N (db/ links to the dev
#                database, distractors/ to the first N distractors), so the
#                N = 2,000 images are also in the N = 10,000 database
#   KEEP_DBS     keep each database as KEEP_DBS/distractors<N>.db (N written
#                0, 2k, 10k, 100k); default: temporary, removed at the end
#   RESULTS      keep each run's results, per-query scores and hits in
#                RESULTS/n<N>/ (default: temporary)
#   THREADS      index threads (default 2)
#   INDEX_FLAGS  extra `index` flags, e.g. "--index-kind flat" (from 20,000
#                images `auto` builds the approximate index)
#
# Each database is created from its whole set, dev images and distractors
# together, so the codebook and PCA are learned from a sample of that
# collection as a user's would be (no model learned on the dev images
# alone and reused). Queries run in one `search -k 100 --format json` call
# per N (the index is loaded once); the JSON is written out as the exact
# `--format tsv` lines for evaluate.py, and its per-query `seconds` (read,
# decode, extract, rank, verify) give the latency columns.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
counts="0 2000 10000"
if [ "${1:-}" = "--n" ]; then
  [ $# -ge 2 ] || { echo "distractor_curve: --n needs a list" >&2; exit 2; }
  counts=$2
  shift 2
fi
devset=${1:-$root/../shared/data/devset}
build=${2:-$root/build}
devset=$(cd "$devset" && pwd)
bin=$build/tools/lookalike
[ -x "$bin" ] || { echo "distractor_curve: $bin not built; run tools/build.sh" >&2; exit 2; }
cache=${DISTRACTORS:-$root/../distractors}
threads=${THREADS:-2}
work=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-distractors.XXXXXX")
trap 'rm -rf "$work"' EXIT
results=${RESULTS:-$work/results}

echo "command: $0 --n \"$counts\" $devset $build"
echo "  DISTRACTORS=$cache THREADS=$threads KEEP_DBS=${KEEP_DBS:-} RESULTS=${RESULTS:-} INDEX_FLAGS=${INDEX_FLAGS:-}"
echo "  $bin built $(date -u -r "$bin" '+%Y-%m-%d %H:%M UTC'); tree at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' + uncommitted changes'); $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
max=0
for n in $counts; do [ "$n" -gt "$max" ] && max=$n; done
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
if [ "$max" -gt 0 ]; then
  t0=$(date +%s)
  "$root/bench/distractors/make_distractors.sh" "$cache" "$max" "$devset" "$build" 2>"$work/make.log" ||
    { cat "$work/make.log" >&2; exit 2; }
  echo "distractors: $max in $cache ($(($(date +%s) - t0)) s; $(tail -1 "$work/make.log" | sed 's/^make_distractors: //'))"
fi

# The set of N: links to the dev database (same relative paths, so results
# match gt.csv) and to distractors 0..N-1. Links are kept where they are.
make_set() {
  set_dir=$1
  n=$2
  mkdir -p "$set_dir/db"
  (cd "$devset/db" && find . -type f) | while read -r f; do
    mkdir -p "$set_dir/db/$(dirname "$f")"
    ln -sfn "$devset/db/$f" "$set_dir/db/$f"
  done
  [ "$n" -gt 0 ] || return 0
  /usr/bin/python3 - "$cache" "$set_dir/distractors" "$n" <<'EOF'
import os, sys
cache, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(n):
    rel = os.path.join("%04d" % (i // 1000), "d_%07d.jpg" % i)
    src, dst = os.path.join(cache, rel), os.path.join(out, rel)
    if not os.path.exists(src):
        sys.exit("distractor_curve: %s missing" % src)
    if not os.path.islink(dst):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        os.symlink(src, dst)
EOF
}

label() {
  case $1 in
    *000) echo "$(($1 / 1000))k" ;;
    *) echo "$1" ;;
  esac
}

printf '\n%8s %7s | %6s %6s %9s %6s | %6s %6s | %7s %7s | %8s %7s\n' \
  N images mAP copy copy:hard mv tune report "q p50" "q p90" "index s" "img/s" >"$work/table"
for n in $counts; do
  set_dir=$cache/sets/$n
  make_set "$set_dir" "$n"
  if [ -n "${KEEP_DBS:-}" ]; then
    mkdir -p "$KEEP_DBS"
    db=$KEEP_DBS/distractors$(label "$n").db
    rm -rf "$db"
  else
    db=$work/db$n
  fi
  echo "N=$n: indexing $set_dir into $db"
  t0=$(date +%s.%N)
  rc=0
  out=$results/n$n
  mkdir -p "$out"
  # shellcheck disable=SC2086 # INDEX_FLAGS is a list of flags
  nice -n 10 "$bin" index "$set_dir" --db "$db" --threads "$threads" --quiet --format json \
    ${INDEX_FLAGS:-} >"$out/index.json" 2>"$out/index.log" || rc=$?
  t1=$(date +%s.%N)
  [ $rc -le 1 ] || { cat "$out/index.log" >&2; echo "distractor_curve: index failed ($rc)" >&2; exit 2; }
  index_s=$(awk "BEGIN{printf \"%.0f\", $t1 - $t0}")
  images=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["indexed"])' "$out/index.json")
  # Flat pictures (smooth wallpaper crops) have no keypoints: stored as zero
  # vectors that match nothing, one warning each.
  echo "  $images images in $index_s s; $(grep -c NO_FEATURES "$out/index.log") without keypoints," \
    "$(grep -v NO_FEATURES "$out/index.log" | grep -c .) other messages ($out/index.log)"
  t0=$(date +%s.%N)
  rc=0
  "$bin" search --db "$db" "$devset/queries" -k 100 --format json >"$out/results.jsonl" || rc=$?
  t1=$(date +%s.%N)
  [ $rc -le 1 ] || { echo "distractor_curve: search failed ($rc)" >&2; exit 2; }
  echo "  search: $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s for all queries"
  row=$(/usr/bin/python3 "$root/bench/distractors/score_run.py" "$devset" "$out/results.jsonl" "$out")
  echo "  $row"
  echo "$row" | /usr/bin/python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
n, images, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
f = lambda v: "%.3f" % v if v is not None else "-"
print("%8d %7d | %6s %6s %9s %6s | %6s %6s | %7.0f %7.0f | %8.0f %7.1f" % (
    n, images, f(r["mAP"]), f(r["copy"]), f(r["copy:hard"]), f(r["mv"]), f(r["tune"]),
    f(r["report"]), r["query_ms_p50"], r["query_ms_p90"], secs, images / secs))
' "$n" "$images" "$index_s" >>"$work/table"
done
cat "$work/table"
echo "(mAP over $(wc -l <"$devset/gt.csv" | awk '{print $1 - 1}') relevant pairs of $(($(wc -l <"$devset/queries_meta.csv") - 1)) queries; tune / report: the two halves of the split in bench/distractors/score_run.py; q p50 / p90: ms per query; index s: wall time of \`index\` into a new database, $threads threads)"
[ -n "${RESULTS:-}" ] && echo "results kept in $results"
exit 0
