#!/bin/sh
# The large points of the distractor curve (e.g. N = 100,000) without
# extracting N real images: a copy of a real distractor database (the
# N = 10,000 one of bench/distractor_curve.sh, kept with KEEP_DBS) grown to
# TOTAL distractors with synthetic ones made by build/bench/grow_distractors
# (collages of two real distractors' stored local features, and of their
# thumbnails when DB has them: give it an `index` run first; nothing is
# derived from a dev image), merged in with `lookalike merge` (which rebuilds
# the search index and re-learns the word vocabulary over the whole
# collection, as for any merged database), then the dev-set queries scored
# as in distractor_curve.sh. The collages repeat their sources' signatures,
# so the grown word lists compress where a real collection's do not; they
# are rewritten raw (build/bench/raw_word_lists), as a real collection
# stores them, before the queries are timed (bench/README.md,
# "Distractors"). Rankings are the same either way.
#
# usage: bench/distractor_grow.sh DB TOTAL [DEVSET_DIR [BUILD_DIR]]
#   DB     the kept N = 10,000 database (e.g. KEEP_DBS/distractors10k.db)
#   TOTAL  distractors wanted in all (real + synthetic), e.g. 100000
# environment:
#   WORK     scratch folder (default: temporary; about 35 KiB x TOTAL of disk),
#            kept when KEEP=1
#   RESULTS  keep the results and per-query scores here (default: WORK/results)
#   RAW_LISTS=0  keep the word lists as merge compressed them
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { sed -n '2,24p' "$0" >&2; exit 2; }
db=$(cd "$1" && pwd)
total=$2
devset=$(cd "${3:-$root/../shared/data/devset}" && pwd)
build=${4:-$root/build}
bin=$build/tools/lookalike
grow=$build/bench/grow_distractors
raw=$build/bench/raw_word_lists
[ -x "$bin" ] && [ -x "$grow" ] && [ -x "$raw" ] || { echo "distractor_grow: build tools/lookalike, bench/grow_distractors and bench/raw_word_lists first" >&2; exit 2; }
work=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/lookalike-grow.XXXXXX")}
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
results=${RESULTS:-$work/results}

# The database's distractors are the images outside the dev set's db/ folder.
info=$("$bin" info --db "$db")
images=$(echo "$info" | awk '/^images/ {print $2}')
real_db=$(find "$devset/db" -type f | wc -l)
real=$((images - real_db))
synthetic=$((total - real))
[ "$synthetic" -gt 0 ] || { echo "distractor_grow: $db holds $real distractors already" >&2; exit 2; }
prefix=$("$bin" search --db "$db" "$devset/queries/$(ls "$devset/queries" | head -1)" -k 1 --format tsv |
  cut -f3 | sed 's#/db/.*##')/distractors/
echo "command: $0 $db $total $devset $build"
echo "  $real real distractors under $prefix, $synthetic synthetic; tree at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"

t0=$(date +%s)
cp -a "$db" "$work/grown.db"
"$grow" --from "$db" --out "$work/synthetic" --images "$synthetic" --source-prefix "$prefix" | tail -1
t1=$(date +%s)
/usr/bin/time -f "merge: %e s, peak RSS %M KiB" "$bin" merge --db "$work/grown.db" "$work/synthetic" >/dev/null
t2=$(date +%s)
echo "grown: $((t1 - t0)) s to synthesise, $((t2 - t1)) s to merge; $(du -sk "$work/grown.db" | cut -f1) KiB"
if [ "${RAW_LISTS:-1}" != 0 ]; then
  "$raw" --db "$work/grown.db"
  echo "word lists stored raw, as a real collection's: $(du -sk "$work/grown.db" | cut -f1) KiB"
fi
"$bin" info --db "$work/grown.db" | grep -E '^(images|search)' || true

mkdir -p "$results"
/usr/bin/time -f "search: %e s for all queries, peak RSS %M KiB" \
  "$bin" search --db "$work/grown.db" "$devset/queries" -k 100 --format json >"$results/run.jsonl"
echo "N=$total: $(/usr/bin/python3 "$root/bench/distractors/score_run.py" "$devset" "$results/run.jsonl" "$results")"
