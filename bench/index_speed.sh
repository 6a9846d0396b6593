#!/bin/sh
# Indexing speed of the real binary on a folder of photos, 1 and 2 threads,
# in one run: a new database (sampling + k-means + encoding) and the steady
# state (more images into the existing database, stored codebook), with the
# share of each stage and the 2-thread / 1-thread ratio.
#
# usage: bench/index_speed.sh [TRAIN_DIR [MORE_DIR [BUILD_DIR]]]
#   TRAIN_DIR  default ../shared/data/devset/db      (new database)
#   MORE_DIR   default ../shared/data/devset/queries (steady state)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
train=${1:-$root/../shared/data/devset/db}
more=${2:-$root/../shared/data/devset/queries}
bin=${3:-$root/build}/tools/lookalike
[ -x "$bin" ] || { echo "index_speed: $bin not built; run tools/build.sh" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Runs one index and prints: seconds images read_decode extract train encode store
run() {
  "$bin" index "$1" --db "$2" --threads "$3" --format json -q 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin); t = s["stage_seconds"]
print(s["seconds"], s["indexed"], t["read_decode"], t["extract"], t["train"], t["encode"], t["store"])'
}

report() {  # label threads fields...
  label=$1; threads=$2; shift 2
  echo "$@" | awk -v label="$label" -v th="$threads" '{
    total = $1; n = $2
    printf "%-12s %d thread(s): %6.2f s  %6.1f images/s   read+decode %4.1f%%  extract %4.1f%%  train %4.1f%%  encode %4.1f%%  store %4.1f%%  (decode/extract in thread-seconds / threads)\n",
      label, th, total, n / total, 100*$3/th/total, 100*$4/th/total, 100*$5/total, 100*$6/total, 100*$7/total }'
}

for threads in 1 2; do
  new=$(run "$train" "$work/db$threads" "$threads")
  steady=$(run "$more" "$work/db$threads" "$threads")
  report "new DB" "$threads" $new
  report "steady" "$threads" $steady
  eval "new$threads=\$(echo \$new | cut -d' ' -f1)"
  eval "steady$threads=\$(echo \$steady | cut -d' ' -f1)"
done
awk -v a="$new1" -v b="$new2" -v c="$steady1" -v d="$steady2" 'BEGIN {
  printf "2 threads vs 1: new DB %.2fx, steady state %.2fx\n", a / b, c / d }'
