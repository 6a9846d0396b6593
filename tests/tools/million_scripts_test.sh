#!/bin/bash
# bench/million_build.sh and bench/million_measure.sh, the commands that
# build and measure the 1,000,000-image database, at a toy size: 150
# generated photo files (enough for the model's PCA, as at full size), a
# labelled set of 6 photos with 4 edited copies as queries, synthetic
# images up to 400 in shards of 100. Checks: the build finishes with 400
# images that verify; run again, it resumes (no shard made again) and keeps
# 400; the measurement prints every figure (disk per image, `info`, one
# CLI search twice, `serve`, the queries' p50 / p99) and, as this set has
# no scorer beside it, says the quality is not scored. What the scripts
# measure is not checked here: timings are not tests (bench/README.md).
#
# usage: million_scripts_test.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: million_scripts_test.sh BUILD_DIR}
tmp=$(mktemp -d /tmp/lookalike-million-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "million_scripts_test: FAILED: $*" >&2
  exit 1
}
run() {  # run LOG COMMAND...: the command's output in LOG, shown if it fails
  log=$1
  shift
  "$@" >"$log" 2>&1 || {
    rc=$?
    cat "$log" >&2
    fail "exit $rc: $*"
  }
}

set=$tmp/set
run "$tmp/photos.log" "$build/bench/make_photos" "$set/db/photos" 6 --seed 11 \
  --min-side 320 --max-side 400
mkdir -p "$set/queries"
i=0
for photo in $(find "$set/db/photos" -type f | sort | head -n 4); do
  i=$((i + 1))
  run "$tmp/copy.log" "$build/tools/lookalike-make-copy" "$photo" "$set/queries/q$i.jpg"
done
[ "$i" = 4 ] || fail "found $i photos to copy as queries, not 4"

export TOTAL=400 FILES=150 CHUNK=100 JOBS=2
images() { "$build/tools/lookalike" info --db "$tmp/work/db" | awk '/^images/ { print $2 }'; }
run "$tmp/build1.log" "$root/bench/million_build.sh" "$tmp/work" "$set" "$build"
grep -q "million_build: done" "$tmp/build1.log" || fail "the build did not say it was done"
[ "$(images)" = 400 ] || fail "the built database holds $(images) images, not 400"
run "$tmp/verify.log" "$build/tools/lookalike" verify --db "$tmp/work/db"

# Resumed: every shard is done, so none is made again, and nothing doubles.
run "$tmp/build2.log" "$root/bench/million_build.sh" "$tmp/work" "$set" "$build"
if grep -q "synthetic shards" "$tmp/build2.log"; then
  cat "$tmp/build2.log" >&2
  fail "the second run made synthetic shards again"
fi
[ "$(images)" = 400 ] || fail "after the second run the database holds $(images) images"

run "$tmp/measure.log" "$root/bench/million_measure.sh" "$tmp/work" "$set" "$build"
for line in "400 images" "info: " "KiB per image" "one CLI search (first): " \
  "one CLI search (again): " "serve after one search: VmHWM" \
  "dev-set queries, -k 10: 4 queries, p50 " "dev-set queries, -k 100 (for quality): 4 queries" \
  "quality: not scored"; do
  grep -qF "$line" "$tmp/measure.log" || {
    cat "$tmp/measure.log" >&2
    fail "the measurement printed no '$line'"
  }
done
echo "million_scripts_test: build, resumed build and measurement passed"
