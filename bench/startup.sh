#!/bin/sh
# Start-up cost of commands that encode nothing on the GPU, for two builds
# side by side: wall time, CPU time (user + sys) and peak RSS of
#   lookalike --help
#   lookalike info --db DB          (a small generated database)
#   lookalike search --db DB PHOTO  (one query, decoded and encoded on the CPU)
# ROUNDS rounds (default 9) alternating the two builds, medians printed with
# the ratio B / A.
#
# usage: bench/startup.sh BUILD_A BUILD_B
#   e.g. bench/startup.sh build-cpu build-cuda  (a CPU-only and a CUDA build)
#        bench/startup.sh /tmp/old/build build   (an older commit's build)
# Each BUILD is a build folder holding tools/lookalike. The database is made
# once in WORK (default /tmp/lookalike-startup) from PHOTOS (default 60)
# photos by BUILD_A's or BUILD_B's bench/make_photos (320-480 px), indexed by
# BUILD_A with --backend cpu; WORK is reused by later runs.
#
# Wall time depends on what else the machine runs (shared cores): CPU time and
# RSS move less; the load average is printed before and after.
set -eu
[ $# -eq 2 ] || { sed -n '2,19p' "$0" >&2; exit 2; }
a=$(cd "$1" && pwd)
b=$(cd "$2" && pwd)
rounds=${ROUNDS:-9}
work=${WORK:-/tmp/lookalike-startup}
photos=${PHOTOS:-60}
for build in "$a" "$b"; do
  [ -x "$build/tools/lookalike" ] || { echo "startup.sh: no $build/tools/lookalike" >&2; exit 2; }
done
mkdir -p "$work"
if [ ! -d "$work/db" ]; then
  maker=$a/bench/make_photos
  [ -x "$maker" ] || maker=$b/bench/make_photos
  [ -x "$maker" ] || { echo "startup.sh: build bench/make_photos in $a or $b" >&2; exit 2; }
  rm -rf "$work/photos"
  "$maker" "$work/photos" "$photos" --min-side 320 --max-side 480 >/dev/null
  "$a/tools/lookalike" index "$work/photos" --db "$work/db" --backend cpu -q >/dev/null
fi
query=$(find "$work/photos" -name '*.jpg' | sort | head -n 1)

echo "A: $a/tools/lookalike"
echo "B: $b/tools/lookalike"
echo "database: $work/db ($(find "$work/photos" -name '*.jpg' | wc -l) photos); $rounds rounds"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"


# Each run is timed by the parent (wall: a monotonic clock around fork and
# wait) and measured by wait4 (CPU: user + sys; peak RSS), in microseconds:
# /usr/bin/time's 10 ms would round these figures away.
python3 - "$a/tools/lookalike" "$b/tools/lookalike" "$work/db" "$query" "$rounds" <<'PY'
import os, statistics, subprocess, sys, time

bins = {"A": sys.argv[1], "B": sys.argv[2]}
db, query, rounds = sys.argv[3], sys.argv[4], int(sys.argv[5])
commands = {
    "help": ["--help"],
    "info": ["info", "--db", db],
    "search": ["search", "--db", db, query, "-k", "5"],
}
samples = {}
for _ in range(rounds):
    for side in ("A", "B"):
        for name, args in commands.items():
            start = time.monotonic()
            child = subprocess.Popen([bins[side]] + args, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(child.pid, 0)
            wall = time.monotonic() - start
            child.returncode = os.waitstatus_to_exitcode(status)
            if child.returncode != 0:
                sys.exit("startup.sh: %s %s exited with %d" % (bins[side], " ".join(args),
                                                                 child.returncode))
            samples.setdefault((name, side), []).append(
                (wall * 1000, (usage.ru_utime + usage.ru_stime) * 1000, usage.ru_maxrss / 1024))

print("%-8s %9s %9s %5s   %9s %9s %5s   %8s %8s %5s" %
      ("command", "wall A", "wall B", "B/A", "cpu A", "cpu B", "B/A", "RSS A", "RSS B", "B/A"))
for name in commands:
    row = []
    for field in range(3):
        a = statistics.median(s[field] for s in samples[(name, "A")])
        b = statistics.median(s[field] for s in samples[(name, "B")])
        row += [a, b, b / a if a else 0.0]
    print("%-8s %6.0f ms %6.0f ms %5.2f   %6.0f ms %6.0f ms %5.2f   %5.0f MB %5.0f MB %5.2f" %
          tuple([name] + row))
print("(medians of %d runs each, alternating A and B; MB = 2^20 bytes)" % rounds)
PY
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
