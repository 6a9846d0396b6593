#!/bin/sh
# Measures a large database against the targets for 1,000,000 images
# (bench/million_build.sh builds one; any database holding DEVSET's db/
# photos under a path ending in /db/<relative path> works, e.g. the N =
# 10,000 one of bench/distractor_curve.sh):
#   - disk per image (du -sk of the database over its images);
#   - `info`: wall time and peak RSS;
#   - one CLI `search` of one photo, opening included: wall time to its
#     answer and peak RSS;
#   - `serve`: resident memory after one uploaded search (VmRSS and VmHWM);
#   - DEVSET's queries in one `search --format json` with the default -k
#     (10, what a user asks for): p50 / p99 of each query's `seconds`;
#   - the same queries with -k 100, which quality needs (bench/distractors/
#     score_run.py: mAP, copies, multi-view, the two halves of its split),
#     and their p50 / p99 (evidence and thumbnail correlation for 100
#     results instead of 10: 1.65x the CPU at 100,000 images).
# Each figure is printed with its target at 1,000,000 images; the queries
# are also run with FLAGS (e.g. FLAGS="--word-postings 4000000") when set.
#
# usage: bench/million_measure.sh WORK_OR_DB [DEVSET [BUILD_DIR]]
#   WORK_OR_DB  bench/million_build.sh's WORK (its database is WORK/db) or a
#               database folder
#   DEVSET      default ../shared/data/devset; its queries/ are searched, and
#               scored when the scorer evaluate.py lies beside DEVSET
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/serve_started.sh"
[ $# -ge 1 ] || {
  echo "usage: bench/million_measure.sh WORK_OR_DB [DEVSET [BUILD_DIR]]" >&2
  exit 2
}
db=$1
[ -d "$db/db" ] && db=$db/db
devset=${2:-$root/../shared/data/devset}
build=${3:-$root/build}
L=$build/tools/lookalike
[ -x "$L" ] || { echo "million_measure: $L not built; run tools/build.sh" >&2; exit 2; }
out=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-million.XXXXXX")
trap 'kill "$server" 2>/dev/null || true; rm -rf "$out"' EXIT
server=""

timed() {  # timed COMMAND...: sets $wall (s) and $rss (MiB); output in $out/run.*
  rc=0
  /usr/bin/time -f "%e %M" -o "$out/time" "$@" >"$out/run.out" 2>"$out/run.err" || rc=$?
  [ $rc -le 1 ] || { cat "$out/run.err" >&2; exit 2; }
  wall=$(cut -d' ' -f1 "$out/time" | tail -1)
  rss=$(awk '{ printf "%.0f", $2 / 1024 }' "$out/time" | tail -1)
}
verdict() { awk -v v="$1" -v l="$2" 'BEGIN { print (v + 0 <= l + 0) ? "ok" : "MISSED" }'; }

timed "$L" info --db "$db"
images=$(awk '/^images/ { print $2 }' "$out/run.out")
echo "database: $db, $images images; tree at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "info: $wall s, peak RSS $rss MiB"
kb=$(du -sk "$db" | cut -f1)
per=$(awk -v k="$kb" -v n="$images" 'BEGIN { printf "%.1f", k / n }')
echo "disk: $kb KiB, $per KiB per image (target <= 32: $(verdict "$per" 32))"

one=$(find "$devset/queries" -type f | sort | head -1)
# Twice: the first often reads the database from disk (what a user's first
# search after a while meets), the second from the page cache.
for run in first again; do
  timed "$L" search --db "$db" "$one"
  echo "one CLI search ($run): $wall s to its answer (target <= 1.5: $(verdict "$wall" 1.5)), peak RSS $rss MiB (target <= 400: $(verdict "$rss" 400))"
done

start_serve "$L" "$db" "$out"
/usr/bin/python3 - "$port" "$one" <<'PY'
import http.client, sys, uuid
port, path = int(sys.argv[1]), sys.argv[2]
boundary = uuid.uuid4().hex
body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"q.jpg\"\r\n"
        "Content-Type: image/jpeg\r\n\r\n").encode() + open(path, "rb").read() + f"\r\n--{boundary}--\r\n".encode()
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
conn.request("POST", "/api/search", body, {"Content-Type": "multipart/form-data; boundary=" + boundary})
r = conn.getresponse()
answer = r.read()
if r.status != 200:
    sys.exit(f"million_measure: serve answered {r.status}: {answer[:200]!r}")
PY
echo "serve after one search: $(awk '/VmRSS|VmHWM/ { printf "%s %.0f MiB  ", $1, $2 / 1024 }' "/proc/$server/status")"
kill "$server"
wait "$server" 2>/dev/null || true
server=""

latency() {  # latency RESULTS LABEL: p50 / p99 of the queries' "seconds"
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
t = sorted(json.loads(l)["seconds"] for l in open(sys.argv[1]))
pick = lambda q: t[min(len(t) - 1, int(q * len(t)))]
ok = lambda v, l: "ok" if v <= l else "MISSED"
print(f"{sys.argv[2]}: {len(t)} queries, p50 {pick(0.5) * 1000:.0f} ms (target <= 300: "
      f"{ok(pick(0.5), 0.3)}), p99 {pick(0.99) * 1000:.0f} ms (target <= 1500: {ok(pick(0.99), 1.5)})")
PY
}
queries() {  # queries LABEL [FLAGS...]
  label=$1
  shift
  timed "$L" search --db "$db" "$devset/queries" --format json "$@"
  latency "$out/run.out" "$label, -k 10"
  timed "$L" search --db "$db" "$devset/queries" -k 100 --format json "$@"
  cp "$out/run.out" "$out/results.jsonl"
  latency "$out/results.jsonl" "$label, -k 100 (for quality)"
  if [ ! -f "$(dirname "$devset")/evaluate.py" ]; then
    echo "  quality: not scored ($(dirname "$devset")/evaluate.py, the scorer, is missing)"
    return
  fi
  mkdir -p "$out/score"
  echo "  quality: $(/usr/bin/python3 "$root/bench/distractors/score_run.py" "$devset" "$out/results.jsonl" "$out/score")" \
    "(targets: mAP >= 0.87, copy >= 0.93)"
}
queries "dev-set queries"
# shellcheck disable=SC2086
[ -z "${FLAGS:-}" ] || queries "dev-set queries, $FLAGS" $FLAGS
