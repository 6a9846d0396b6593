#!/bin/sh
# merge's vector index: the shards' inverted lists joined, against the
# merged index built from every stored vector, alternating in one run.
# PHOTOS gets a model whose search quantizer is trained for N images
# (`train --search-lists-for N`) and a database REAL (`index --model-from`);
# build/bench/simulate_shards derives N images from REAL in SHARDS shards
# twice, each shard with its persisted search index: once with the model's
# quantizer (the shards fill copies of the same lists) and once without it
# (each shard trains its own, as a model from `train` alone does). Each
# round merges three ways into new databases (the word index left out:
# --word-index-min-images above N):
#   joined   the lists shards, their lists joined (VectorIndex::MergeFrom);
#   filled   the same shards with --join-lists off: every stored vector read
#            and encoded into a copy of the model's lists;
#   rebuilt  the shards without the quantizer, --index-kind ivfsq: every
#            stored vector read, k-means trained, every vector encoded (what
#            merge did before, and still does for such shards).
# It prints merge's search index step (index_seconds, wall;
# index_cpu_seconds, the process's CPU time meanwhile, which includes
# RocksDB's background compaction of the tables just ingested, the same in
# all three; index_thread_cpu_seconds, the CPU of the thread that ran it:
# the step's own work when THREADS=1) and the whole merge's CPU time (user +
# system, which includes the table copy and ingestion all three share),
# their medians and the ratios;
# then recall@10 of each index against exact search (the plain shards
# merged --index-kind flat) on the VLAD stage for QUERIES photos, and how
# many of the joined index's top 10 the rebuilt one shares.
#
# usage: bench/merge_ivf_join.sh PHOTOS N [BUILD_DIR]
#   PHOTOS  a folder of at least a few hundred photos (the model's sample:
#           its training images' search vectors train the quantizer)
# environment: SHARDS (default 2), ROUNDS (default 3), THREADS (default 2),
#   QUERIES (default 20: the first photos of PHOTOS as queries), WORK (a
#   scratch folder kept afterwards, whose base and real, made for the same
#   PHOTOS and N, are reused; default a temporary one, removed)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { sed -n '2,35p' "$0" >&2; exit 2; }
photos=$1 n=$2
build=${3:-${BUILD_DIR:-$root/build}}
bin=$build/tools/lookalike sim=$build/bench/simulate_shards
shards=${SHARDS:-2} rounds=${ROUNDS:-3} threads=${THREADS:-2} nq=${QUERIES:-20}
for b in "$bin" "$sim"; do [ -x "$b" ] || { echo "merge_ivf_join: $b not built" >&2; exit 2; }; done
if [ -n "${WORK:-}" ]; then
  work=$WORK
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-merge-ivf.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi

# Exit 1 of `index` (a photo without features) counts as success.
run() { "$@" || [ $? -eq 1 ]; }

[ -d "$work/base" ] ||
  run "$bin" train "$photos" --db "$work/base" --search-lists-for "$n" --threads "$threads" -q
[ -d "$work/real" ] ||
  run "$bin" index "$photos" --db "$work/real" --model-from "$work/base" --threads "$threads" -q
echo "== $n simulated images in $shards shards, with and without the model's quantizer"
rm -rf "$work/lists" "$work/plain"
mkdir -p "$work/lists" "$work/plain"
"$sim" --from "$work/real" --out "$work/lists" --images "$n" --shards "$shards" --search-index
"$sim" --from "$work/real" --out "$work/plain" --images "$n" --shards "$shards" --search-index \
  --no-search-lists

# One merge into a new OUT: prints "index_seconds cpu_seconds peak_kib" and
# checks that its summary says the lists were joined or not, as expected.
merge() {
  out=$1 expect=$2 from=$3
  shift 3
  rm -rf "$out"
  /usr/bin/time -f "%U %S %M" -o "$work/time" "$bin" merge --db "$out" "$work/$from"/shard-* \
    --threads "$threads" --word-index-min-images $((n + 1)) --format json "$@" >"$work/merge.json"
  python3 - "$work/merge.json" "$work/time" "$expect" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
user, system, rss = open(sys.argv[2]).read().split()[-3:]
joined = "merged shards joined" in report["search_index"]
if joined != (sys.argv[3] == "joined"):
    sys.exit("merge_ivf_join: expected %s: %s" % (sys.argv[3], report["search_index"]))
print("%.3f %.2f %.2f %.2f %s" % (report["index_seconds"], report["index_cpu_seconds"],
                                  report["index_thread_cpu_seconds"],
                                  float(user) + float(system), rss))
EOF
}

echo "search index step: wall s, process CPU s, its thread's CPU s; whole merge: CPU s"
echo "round         joined                     filled                     rebuilt"
: >"$work/figures"
r=1
while [ "$r" -le "$rounds" ]; do
  j=$(merge "$work/joined" joined lists)
  f=$(merge "$work/filled" filled lists --join-lists off)
  b=$(merge "$work/rebuilt" rebuilt plain --index-kind ivfsq)
  echo "$r $j $f $b" | awk '{printf "%5d  %6.2f %5.2f %5.2f %6.2f   %6.2f %5.2f %5.2f %6.2f" \
    "   %6.2f %5.2f %5.2f %6.2f\n", $1, $2, $3, $4, $5, $7, $8, $9, $10, $12, $13, $14, $15}'
  echo "$j $f $b" >>"$work/figures"
  r=$((r + 1))
done
python3 - "$work/figures" <<'EOF'
import statistics, sys
rows = [list(map(float, line.split())) for line in open(sys.argv[1])]
m = [statistics.median(col) for col in zip(*rows)]
names = (("joined", 0), ("filled", 5), ("rebuilt", 10))
for name, k in names:
    print("median %-7s: index step %.3f s wall, %.2f s process CPU, %.2f s its thread's;"
          " merge CPU %.2f s, peak RSS %.0f MiB"
          % (name, m[k], m[k + 1], m[k + 2], m[k + 3], m[k + 4] / 1024))
for (a, i), (b, j) in ((names[0], names[2]), (names[1], names[2]), (names[0], names[1])):
    print("%s / %s: index step wall %.3f, process CPU %.3f, thread CPU %.3f; merge CPU %.3f"
          % (a, b, m[i] / m[j], m[i + 1] / m[j + 1], m[i + 2] / m[j + 2], m[i + 3] / m[j + 3]))
EOF

echo "== recall@10 on the VLAD stage, $nq queries"
merge "$work/exact" rebuilt plain --index-kind flat >/dev/null
queries=$(find -L "$photos" -type f \( -iname '*.jpg' -o -iname '*.jpeg' -o -iname '*.png' \) |
  sort | head -n "$nq")
fast="--rerank 0 --rerank-vlad 0 --expansion 0 --colour-weight 0 --colour-candidates 0"
fast="$fast --thumbnail-candidates 0 --format tsv -k 10"
for db in exact joined filled rebuilt; do
  # shellcheck disable=SC2086  # lists of flags and of photo paths without spaces
  "$bin" search --db "$work/$db" $queries $fast >"$work/$db.tsv"
done
python3 - "$work" <<'EOF'
import collections, sys
def load(name):
    r = collections.defaultdict(set)
    for line in open("%s/%s.tsv" % (sys.argv[1], name)):
        q, _, path = line.rstrip("\n").split("\t")[:3]
        r[q].add(path)
    return r
exact = load("exact")
found = {name: load(name) for name in ("joined", "filled", "rebuilt")}
for name, got in found.items():
    rec = [len(got[q] & exact[q]) / max(1, len(exact[q])) for q in exact]
    print("recall@10 %-7s %.3f" % (name, sum(rec) / len(rec)))
same = [len(found["joined"][q] & found["rebuilt"][q]) / 10 for q in exact]
print("joined's top 10 in rebuilt's: %.3f" % (sum(same) / len(same)))
print("joined and filled answer identically: %s" % (found["joined"] == found["filled"]))
EOF
