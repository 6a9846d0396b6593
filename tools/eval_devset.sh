#!/bin/sh
# Scores lookalike on the labelled development set with default settings:
# indexes devset/db into a fresh database, searches every query with -k 100,
# and runs the set's scorer (overall and per group).
#
# usage: tools/eval_devset.sh [DEVSET_DIR] [BUILD_DIR] [-- extra index flags]
#   DEVSET_DIR  default ../shared/data/devset (relative to the repository root)
#   BUILD_DIR   default build
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
devset=${1:-$root/../shared/data/devset}
build=${2:-$root/build}
[ $# -ge 2 ] && shift 2 || shift $#
[ "${1:-}" = "--" ] && shift
devset=$(cd "$devset" && pwd)
bin=$build/tools/lookalike
[ -x "$bin" ] || { echo "eval_devset: $bin not built; run tools/build.sh first" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-eval.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$bin" index "$devset/db" --db "$work/db" --quiet "$@" >&2 || [ $? -eq 1 ]
start=$(date +%s.%N)
"$bin" search --db "$work/db" "$devset/queries" -k 100 --format tsv >"$work/results.tsv" || [ $? -eq 1 ]
end=$(date +%s.%N)
nq=$(cut -f1 "$work/results.tsv" | sort -u | wc -l)
echo "search: $nq queries in $(awk "BEGIN{print $end - $start}") s (one call, index loaded once)" >&2
scorer=$(dirname "$devset")/evaluate.py
python3 "$scorer" "$devset/gt.csv" "$work/results.tsv" --groups "$devset/queries_meta.csv"
