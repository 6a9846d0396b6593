#!/bin/sh
# Indexing speed of the real binary on a folder of photos, 1 and 2 threads,
# in one run: a new database (sampling + k-means + encoding) and the steady
# state (more images into the existing database, stored codebook), with the
# share of each stage and the 2-thread / 1-thread ratio, checked against the
# targets (steady state: everything but decoding and extraction <= 5 % of
# the time; 2 threads >= 1.8x one thread). A second line per run gives the
# process's CPU seconds per image (user + system) and each stage's part of
# them (its share of the stage seconds): what a stage costs per image,
# which load on a shared machine moves far less than wall time.
#
# usage: bench/index_speed.sh [TRAIN_DIR [MORE_DIR [BUILD_DIR]]]
#   TRAIN_DIR  default ../shared/data/devset/db      (new database)
#   MORE_DIR   default ../shared/data/devset/queries (steady state)
#   BUILD_DIR  default $BUILD_DIR or build/
# environment: REPEAT (default 1) runs each measurement that many times and
# keeps the fastest (the machine is shared; the fastest run is the least
# disturbed one).
#
# Stages (from `index --format json`): read (open, read, hash), decode (checks
# and decoding, reduced-size JPEG decoding included), resize, extract (SIFT +
# RootSIFT, colour, thumbnail) and compact (quantising the stored features)
# on the worker threads; train (k-means, the descriptor quantizer and the
# word vocabulary, new database only) and pca before encoding; assign
# (nearest centroid), aggregate (residual sums, normalisation), project (PCA)
# and store (RocksDB) on the encoder thread, overlapping with the workers;
# then the search index's update ("index"). Shares are of the summed stage
# seconds (the CPU work), so they add up to 100 % whatever the overlap.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
train=${1:-$root/../shared/data/devset/db}
more=${2:-$root/../shared/data/devset/queries}
bin=${3:-${BUILD_DIR:-$root/build}}/tools/lookalike
repeat=${REPEAT:-1}
[ -x "$bin" ] || { echo "index_speed: $bin not built; run tools/build.sh" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Runs one index and prints:
#   seconds images read decode resize extract train+quantizer+words+pca assign
#   aggregate store compact project search_index cpu_seconds
# (cpu_seconds: the process's user + system time, which load moves far less
# than the stage times, which are wall-clock).
run() {
  /usr/bin/time -f '%U %S' -o "$work/time" \
    "$bin" index "$1" --db "$2" --threads "$3" --format json -q 2>/dev/null > "$work/json" ||
    [ $? -eq 1 ]
  cpu=$(tail -n 1 "$work/time" | awk '{ print $1 + $2 }')
  python3 -c '
import json, sys
s = json.load(open(sys.argv[1])); t = s["stage_seconds"]
print(s["seconds"], s["indexed"], t["read"], t["decode"], t["resize"], t["extract"],
      t["train"] + t.get("quantizer", 0) + t.get("words", 0) + t.get("pca", 0), t["assign"],
      t["aggregate"],
      t["store"], t.get("compact", 0), t.get("project", 0), t.get("search_index", 0),
      sys.argv[2])' "$work/json" "$cpu"
}

# The fastest of $repeat runs: a new database each time, or the steady-state
# folder into a copy of the database built by the first new-database run.
best() {  # kind threads
  out=""
  i=0
  while [ $i -lt "$repeat" ]; do
    if [ "$1" = new ]; then
      rm -rf "$work/db$2.$i"
      r=$(run "$train" "$work/db$2.$i" "$2")
      [ $i -eq 0 ] || rm -rf "$work/db$2.$i"
    else
      rm -rf "$work/steady"
      cp -a "$work/db$2.0" "$work/steady"
      r=$(run "$more" "$work/steady" "$2")
    fi
    if [ -z "$out" ] || [ "$(echo "$r $out" | awk '{ print ($1 < $15) }')" = 1 ]; then out=$r; fi
    i=$((i + 1))
  done
  echo "$out"
}

report() {  # label threads fields...
  label=$1; threads=$2; shift 2
  echo "$@" | awk -v label="$label" -v th="$threads" '{
    total = $1; n = $2; sum = 0
    for (i = 3; i <= 13; i++) sum += $i
    if (sum <= 0) sum = 1
    other = sum - $4 - $6
    printf "%-7s %d thread(s): %6.2f s %6.1f images/s | read %4.1f%% decode %4.1f%% resize %4.1f%% extract %4.1f%% compact %4.1f%% train %4.1f%% assign %4.1f%% aggregate %4.1f%% project %4.1f%% store %4.1f%% index %4.1f%% | all but decode+extract %4.1f%%\n",
      label, th, total, n / total, 100*$3/sum, 100*$4/sum, 100*$5/sum, 100*$6/sum, 100*$11/sum, 100*$7/sum, 100*$8/sum, 100*$9/sum, 100*$12/sum, 100*$10/sum, 100*$13/sum, 100*other/sum
    # Each stage'"'"'s share of the CPU seconds, per image.
    ms = 1000 * $14 / n / sum
    printf "%-7s %d thread(s): CPU %.3f s/image | read+decode+resize %.1f ms, extract %.1f ms, compact %.1f ms, assign+aggregate %.1f ms, project+store+index %.1f ms per image; train %.2f s once\n",
      label, th, $14 / n, ms * ($3 + $4 + $5), ms * $6, ms * $11, ms * ($8 + $9), ms * ($12 + $10 + $13), $14 * $7 / sum }'
}

echo "lookalike index: $(nproc) CPUs online, load $(cut -d' ' -f1-3 /proc/loadavg); best of $repeat"
for threads in 1 2; do
  new=$(best new "$threads")
  steady=$(best steady "$threads")
  report "new DB" "$threads" $new
  report "steady" "$threads" $steady
  eval "new$threads=\$new"
  eval "steady$threads=\$steady"
done
echo "$new1 $new2 $steady1 $steady2" | awk '{
  sn = $1 / $15; ss = $29 / $43
  sum = 0
  for (i = 31; i <= 41; i++) sum += $i
  other = sum - $32 - $34
  printf "2 threads vs 1: new DB %.2fx, steady state %.2fx (target >= 1.8x: %s)\n", sn, ss, (ss >= 1.8 ? "met" : "NOT met")
  printf "steady state, 1 thread: everything but decoding and extraction %.1f%% of the stage time (target <= 5%%: %s)\n",
    100 * other / sum, (100 * other / sum <= 5 ? "met" : "NOT met") }'
