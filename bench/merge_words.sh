#!/bin/sh
# merge's word index: shards whose word index matches their records have it
# joined (their postings copied word by word, ids re-keyed), against the
# same shards' images encoded again from their stored features with the
# model's vocabulary, alternating in one run. PHOTOS gets one model
# (`train`) and is indexed into SHARDS shards twice, with the word index
# (--word-index-min-images 1) and without; each round merges both sets into
# new databases (--word-index-min-images 1) and prints the search index
# update's wall time (merge's index_seconds) and the whole merge's CPU time;
# then the medians and joined / encoded. The two merged databases must
# answer QUERIES (default: the first 20 photos) identically: the script
# fails otherwise.
#
# usage: bench/merge_words.sh PHOTOS [BUILD_DIR]
# environment: SHARDS (default 2), ROUNDS (default 3), THREADS (default 2)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { sed -n '2,15p' "$0" >&2; exit 2; }
photos=$1
bin=${2:-${BUILD_DIR:-$root/build}}/tools/lookalike
shards=${SHARDS:-2}
rounds=${ROUNDS:-3}
threads=${THREADS:-2}
[ -x "$bin" ] || { echo "merge_words: $bin not built" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-merge-words.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Exit 1 of `index` (a photo without features) counts as success.
run() { "$@" || [ $? -eq 1 ]; }

run "$bin" train "$photos" --db "$work/base" --threads "$threads" -q >/dev/null
with="" without=""
i=0
while [ "$i" -lt "$shards" ]; do
  run "$bin" index "$photos" --db "$work/with$i" --model-from "$work/base" --shard "$i/$shards" \
    --threads "$threads" --word-index-min-images 1 -q >/dev/null 2>&1
  run "$bin" index "$photos" --db "$work/without$i" --model-from "$work/base" \
    --shard "$i/$shards" --threads "$threads" --word-index off -q >/dev/null 2>&1
  with="$with $work/with$i"
  without="$without $work/without$i"
  i=$((i + 1))
done

# One merge: prints "index_seconds cpu_seconds" and checks the summary.
merge() {
  out=$1 expect=$2
  shift 2
  rm -rf "$out"
  /usr/bin/time -f "%U %S" -o "$work/time" "$bin" merge --db "$out" "$@" --threads "$threads" \
    --word-index-min-images 1 --format json >"$work/merge.json"
  python3 - "$work/merge.json" "$work/time" "$expect" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
user, system = open(sys.argv[2]).read().split()[-2:]
joined = "postings joined" in report["search_index"]
if joined != (sys.argv[3] == "joined"):
    sys.exit("merge_words: expected the word index %s: %s" % (sys.argv[3], report["search_index"]))
print("%.3f %.2f" % (report["index_seconds"], float(user) + float(system)))
EOF
}

echo "round  joined: index s  cpu s   encoded: index s  cpu s"
r=1
: >"$work/figures"
while [ "$r" -le "$rounds" ]; do
  # shellcheck disable=SC2086  # lists of shard folders
  j=$(merge "$work/joined" joined $with)
  # shellcheck disable=SC2086
  e=$(merge "$work/encoded" encoded $without)
  echo "$r $j $e" | awk '{printf "%5d  %15.3f %6.2f  %16.3f %6.2f\n", $1, $2, $3, $4, $5}'
  echo "$j $e" >>"$work/figures"
  r=$((r + 1))
done

queries=$(find -L "$photos" -type f \( -iname '*.jpg' -o -iname '*.jpeg' -o -iname '*.png' \) |
  sort | head -20)
# shellcheck disable=SC2086  # a list of photo paths without spaces
"$bin" search --db "$work/joined" $queries -k 10 --format tsv >"$work/joined.tsv"
# shellcheck disable=SC2086
"$bin" search --db "$work/encoded" $queries -k 10 --format tsv >"$work/encoded.tsv"
cmp -s "$work/joined.tsv" "$work/encoded.tsv" ||
  { echo "merge_words: the joined and encoded databases answer differently" >&2; exit 1; }
echo "the two merged databases answer $(wc -l <"$work/joined.tsv") hits of 20 queries identically"

python3 - "$work/figures" <<'EOF'
import statistics, sys
rows = [list(map(float, line.split())) for line in open(sys.argv[1])]
med = [statistics.median(col) for col in zip(*rows)]
print("median  joined: index %.3f s, cpu %.2f s; encoded: index %.3f s, cpu %.2f s" % tuple(med))
print("joined / encoded: index %.2fx, cpu %.2fx" % (med[0] / med[2], med[1] / med[3]))
EOF
