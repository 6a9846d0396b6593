#!/bin/sh
# Times `lookalike dedup` on one database: wall and CPU seconds, peak RSS
# (/usr/bin/time -v), candidate pairs, groups, the split between the
# neighbour search and verification, and whether each run printed the same
# groups as the first. Dedup opens the database read-only; still, run it on a
# copy of a database others use.
#
# usage: bench/dedup_scale.sh DB [BUILD_DIR] [-- extra dedup flags]
#   BUILD_DIR  default build
#   BASELINE=BIN   first runs another build's binary (e.g. before a change) with
#                  the extra flags only, so old and new are compared in one run
#   VARIANTS="FLAGS|FLAGS|..."  further runs of this build, each with the extra
#                  flags plus one variant's flags, e.g.
#                  VARIANTS="--index-kind flat|--index-kind ivfsq --nprobe 8"
#   WORK=DIR       keep each run's groups and log in DIR (default: a temporary one)
#   ROUNDS=N       N rounds of the runs above, alternating (the machine's drift
#                  falls on all), then each one's median wall and CPU seconds
#                  and their ratios to the first's (default 1)
#
# Example:
#   cp -r /work/eval/s3f/distractors10k.db /tmp/d10k.db
#   BASELINE=/work/main/build/tools/lookalike \
#   VARIANTS="--index-kind ivfsq|--index-kind ivfsq --nprobe 8" \
#     bench/dedup_scale.sh /tmp/d10k.db
#   ROUNDS=3 VARIANTS="--mirrored 0" bench/dedup_scale.sh DB   # mirror images on, then off
# Not a ctest test: timings on shared machines are not pass/fail material.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || {
  echo "usage: bench/dedup_scale.sh DB [BUILD_DIR] [-- extra dedup flags]" >&2
  exit 2
}
db=$1
shift
build=$root/build
if [ $# -ge 1 ] && [ "$1" != "--" ]; then
  build=$1
  shift
fi
[ "${1:-}" = "--" ] && shift
bin=$build/tools/lookalike
[ -x "$bin" ] || {
  echo "dedup_scale: $bin not built; run tools/build.sh first" >&2
  exit 2
}
[ -d "$db" ] || {
  echo "dedup_scale: no database at $db; build one with 'lookalike index'" >&2
  exit 2
}
[ -x /usr/bin/time ] || {
  echo "dedup_scale: /usr/bin/time missing; apt-get install time" >&2
  exit 2
}
if [ -n "${WORK:-}" ]; then
  work=$WORK
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-dedup-scale.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi

echo "dedup_scale: $db; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "  current: $bin ($(cd "$root" && git describe --always --dirty 2>/dev/null || echo '?'))"
[ -n "${BASELINE:-}" ] && echo "  baseline: $BASELINE"
run=0
# One run: label, binary, flags.
time_run() {
  label=$1
  binary=$2
  shift 2
  run=$((run + 1))
  out=$work/run$run
  /usr/bin/time -v "$binary" dedup --db "$db" --format tsv -v "$@" >"$out.tsv" 2>"$out.log"
  python3 - "$label" "$out" "$work/run1.tsv" "$*" "$work/summary" <<'EOF'
import re, sys
label, out, first, flags, summary = sys.argv[1:6]
log = open(out + '.log').read()
def field(pattern, cast=float, default=None):
    m = re.search(pattern, log)
    return cast(m.group(1)) if m else default
wall_text = field(r'Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([0-9:.]+)', str, '0')
wall = 0.0
for part in wall_text.split(':'):
    wall = wall * 60 + float(part)
cpu = field(r'User time \(seconds\): ([0-9.]+)') + field(r'System time \(seconds\): ([0-9.]+)')
rss_mib = field(r'Maximum resident set size \(kbytes\): ([0-9]+)', int) / 1024
images = field(r'lookalike: ([0-9]+) images', int)
pairs = field(r'([0-9]+) candidate pairs', int)
groups = field(r'([0-9]+) groups holding', int)
grouped = field(r'groups holding ([0-9]+) images', int)
index = field(r'neighbours from (.*?); search', str, 'range search (older build)')
search = field(r'search ([0-9.]+) s')
verify = field(r'verification ([0-9.]+) s')

def group_sets(path):
    groups = {}
    for line in open(path):
        g, p = line.rstrip('\n').split('\t')[:2]
        groups.setdefault(g, set()).add(p)
    return {frozenset(m) for m in groups.values()}
mine, reference = group_sets(out + '.tsv'), group_sets(first)
if out + '.tsv' == first:
    same = 'run 1: the reference'
elif mine == reference:
    same = 'same as run 1'
else:
    same = '%d of %d groups not in run 1' % (len(mine - reference), len(mine))
print('%s%s' % (label, ' (' + flags + ')' if flags else ''))
print('  %d images: %.1f s wall, %.1f s CPU, peak RSS %.0f MiB (%.1f KiB per image); '
      '%d candidate pairs, %d groups holding %d images (%s)' %
      (images, wall, cpu, rss_mib, rss_mib * 1024 / max(images, 1), pairs, groups, grouped, same))
print('  neighbour search %.2f s, verification %.2f s (wall); index: %s' % (search, verify, index))
with open(summary, 'a') as f:
    f.write('%s%s\t%.3f\t%.3f\n' % (label, ' (' + flags + ')' if flags else '', wall, cpu))
EOF
}

rounds=${ROUNDS:-1}
round=0
while [ "$round" -lt "$rounds" ]; do
  round=$((round + 1))
  [ -n "${BASELINE:-}" ] && time_run baseline "$BASELINE" "$@"
  time_run current "$bin" "$@"
  if [ -n "${VARIANTS:-}" ]; then
    echo "$VARIANTS" | tr '|' '\n' | while read -r variant; do
      # shellcheck disable=SC2086  # a variant is a list of flags
      time_run current "$bin" "$@" $variant
    done
  fi
done
[ "$rounds" -gt 1 ] && python3 - "$work/summary" "$rounds" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, wall, cpu = line.rstrip('\n').split('\t')
    runs.setdefault(name, []).append((float(wall), float(cpu)))
print('medians of %s rounds (min-max), ratio to the first:' % sys.argv[2])
base = None
for name, times in runs.items():
    wall = statistics.median(t[0] for t in times)
    cpu = statistics.median(t[1] for t in times)
    base = base or (wall, cpu)
    print('  %s: %.2f s wall (%.2f-%.2f), %.2f s CPU (%.2f-%.2f); x%.2f wall, x%.2f CPU' % (
        name, wall, min(t[0] for t in times), max(t[0] for t in times), cpu,
        min(t[1] for t in times), max(t[1] for t in times), wall / base[0], cpu / base[1]))
EOF
true
