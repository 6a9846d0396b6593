#!/bin/sh
# Indexing throughput of two builds side by side in one run, alternating
# (baseline, build, baseline, build, ...), so that the load of a shared
# machine falls on both alike: a new database of PHOTOS, and an update of an
# existing database (the steady state: every UPDATE_EVERY-th photo added to a
# database of the others, its stored model). Prints each run, then per build
# the median images/s and CPU seconds per image, and build / baseline.
#
# usage: bench/index_speed_ab.sh BASELINE_BUILD [BUILD_DIR [PHOTOS]]
#   BASELINE_BUILD  the other build's folder (e.g. an older commit's, built
#                   in its own worktree), holding tools/lookalike
#   BUILD_DIR       default $BUILD_DIR or build/
#   PHOTOS          a folder of photos (searched recursively, symlinks
#                   followed); default: the dev set's db/ and queries/ (220
#                   photos; $DEVSET, default ../shared/data/devset)
# environment: ROUNDS (default 3), THREADS (default 2), UPDATE_EVERY
# (default 4: every 4th photo in path order is left out of the base database
# and added by the timed update; the base keeps >= --pca-min-images photos,
# so it has its projection as a grown collection does).
#
# Images/s is the photos indexed over the wall time of the whole command (as
# a user sees it: opening, training, encoding, the search index's update);
# CPU s / image is user + system time over the photos, which load moves far
# less than wall time. Exit 1 of `index` (a photo without features, named on
# stderr) counts as success.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { sed -n '2,25p' "$0" >&2; exit 2; }
base_bin=$1/tools/lookalike
bin=${2:-${BUILD_DIR:-$root/build}}/tools/lookalike
photos=${3:-}
rounds=${ROUNDS:-3}
threads=${THREADS:-2}
every=${UPDATE_EVERY:-4}
for b in "$base_bin" "$bin"; do
  [ -x "$b" ] || { echo "index_speed_ab: $b not built" >&2; exit 2; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-ab.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ -z "$photos" ]; then
  devset=${DEVSET:-$root/../shared/data/devset}
  find -L "$devset/db" "$devset/queries" -type f | sort > "$work/list"
  prefix=$devset
else
  photos=$(cd "$photos" && pwd)
  find -L "$photos" -type f | sort > "$work/list"
  prefix=$photos
fi
total=$(wc -l < "$work/list")
[ "$total" -gt 0 ] || { echo "index_speed_ab: no photos" >&2; exit 2; }

# Links the photos of list $1 into folder $2, their relative paths kept.
link() {
  while IFS= read -r f; do
    rel=${f#"$prefix"/}
    mkdir -p "$2/$(dirname "$rel")"
    ln -s "$(readlink -f "$f")" "$2/$rel"
  done < "$1"
}
link "$work/list" "$work/all"
awk -v e="$every" 'NR % e == 0' "$work/list" > "$work/added"
awk -v e="$every" 'NR % e != 0' "$work/list" > "$work/kept"
added=$(wc -l < "$work/added")
# The update's folder holds the kept photos while the base databases are
# made, then the added ones too.
link "$work/kept" "$work/grow"

# `index` of folder $2 into $3 with binary $1; prints "wall cpu".
timed() {
  start=$(date +%s.%N)
  /usr/bin/time -f '%U %S' -o "$work/time" "$1" index "$2" --db "$3" --threads "$threads" -q \
    > /dev/null 2> "$work/err" || [ $? -eq 1 ] || { cat "$work/err" >&2; exit 2; }
  end=$(date +%s.%N)
  # (time's last line: the first says "Command exited with non-zero status 1".)
  tail -n 1 "$work/time" | awk -v s="$start" -v e="$end" '{ printf "%.2f %.2f\n", e - s, $1 + $2 }'
}

base_of() { [ "$1" = base ] && echo "$base_bin" || echo "$bin"; }

echo "lookalike index A/B: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $rounds rounds, $threads threads"
echo "baseline $base_bin"
echo "build    $bin"
echo "new database: $total photos; update: $added photos added to a database of $((total - added))"
for b in base new; do timed "$(base_of $b)" "$work/grow" "$work/kept.$b" > /dev/null; done
link "$work/added" "$work/grow"

: > "$work/results"
r=1
while [ "$r" -le "$rounds" ]; do
  for b in base new; do
    rm -rf "$work/db"
    set -- $(timed "$(base_of $b)" "$work/all" "$work/db")
    echo "new $b $total $1 $2" >> "$work/results"
    printf 'round %d %-8s new database %6.1f s %5.2f images/s %6.3f CPU s/image\n' "$r" \
      "$b" "$1" "$(echo "$total $1" | awk '{ print $1 / $2 }')" \
      "$(echo "$total $2" | awk '{ print $2 / $1 }')"
    rm -rf "$work/db"
    cp -a "$work/kept.$b" "$work/db"
    set -- $(timed "$(base_of $b)" "$work/grow" "$work/db")
    echo "update $b $added $1 $2" >> "$work/results"
    printf 'round %d %-8s update       %6.1f s %5.2f images/s %6.3f CPU s/image\n' "$r" \
      "$b" "$1" "$(echo "$added $1" | awk '{ print $1 / $2 }')" \
      "$(echo "$added $2" | awk '{ print $2 / $1 }')"
  done
  r=$((r + 1))
done

# Median of the numbers on stdin.
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
for kind in new update; do
  for b in base new; do
    ips=$(awk -v k="$kind" -v b="$b" '$1 == k && $2 == b { print $3 / $4 }' "$work/results" | median)
    cpu=$(awk -v k="$kind" -v b="$b" '$1 == k && $2 == b { print $5 / $3 }' "$work/results" | median)
    eval "ips_$b=$ips cpu_$b=$cpu"
  done
  echo "$kind $ips_base $ips_new $cpu_base $cpu_new" | awk '{
    printf "%-7s median images/s: baseline %.2f, build %.2f (build / baseline %.2fx); CPU s/image: baseline %.3f, build %.3f (%.2fx)\n",
      $1, $2, $3, $3 / $2, $4, $5, $5 / $4 }'
done
