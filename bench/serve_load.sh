#!/bin/sh
# Load on `lookalike serve`: 16 concurrent clients x 50 uploaded searches
# (POST /api/search, default search settings, k = 10) against a database of
# a few hundred generated photos. Prints the load client's JSON line
# (requests, errors, p50 / p90 / p99 / max latency, throughput) and the
# server's peak resident memory (VmHWM), then stops the server with SIGTERM.
# Results and the machine they were measured on: tools/serve/README.md.
#
# usage: bench/serve_load.sh [IMAGES [CLIENTS [SEARCHES [BUILD_DIR]]]]
#   IMAGES 300, CLIENTS 16, SEARCHES 50 (per client)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/serve_started.sh"
images=${1:-300}
clients=${2:-16}
searches=${3:-50}
build=${4:-$root/build}
bin=$build/tools/lookalike
for b in "$bin" "$build/bench/make_photos"; do
  [ -x "$b" ] || { echo "serve_load: $b not built; run tools/build.sh" >&2; exit 2; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-serve-load.XXXXXX")
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

"$build/bench/make_photos" "$work/photos" "$images" --seed 7 --min-side 480 --max-side 1200 >/dev/null
"$bin" index "$work/photos" --db "$work/db" --quiet >/dev/null
# Queries: 50 of the indexed files, uploaded (every search finds its file).
queries=$(find "$work/photos" -name '*.jpg' | sort | head -n 50)

start_serve "$bin" "$work/db" "$work"

echo "serve_load: $images images, $clients clients x $searches searches, $(nproc) cores"
status=0
python3 "$root/bench/serve_load.py" "$port" "$clients" "$searches" 10 $queries || status=$?
rss=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$server/status")
echo "serve_load: server peak RSS $((rss / 1024)) MiB"
kill -TERM "$server"
wait "$server" || status=$?
server=""
exit $status
