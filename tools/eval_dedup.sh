#!/bin/sh
# Measures `lookalike dedup` on labelled near-duplicates and prints pair
# precision and recall, per set, at the default threshold and for a sweep.
#
#   dev        devset/db and devset/queries indexed together: each copy query
#              (queries_meta.csv, part "copy") is a true duplicate of its
#              source and of the other copies of it; the multi-view queries
#              (other photos of the same scene or object) are not duplicates.
#   generated  devset/db plus four copies of every photo made by
#              lookalike-make-copy: re-encoded (JPEG 50), resized (1/2),
#              cropped (central 70 %), and the Quick start's cropped + rotated
#              + downscaled + brightened JPEG-40 copy.
#
# Pairs are scored over groups: every two images in one printed group form a
# predicted pair, every two images of one true group a true pair. "copies
# joined" is the share of copies that land in their original's group.
#
# usage: tools/eval_dedup.sh [DEVSET_DIR] [BUILD_DIR] [-- extra dedup flags]
#   DEVSET_DIR  default ../shared/data/devset (relative to the repository root)
#   BUILD_DIR   default build
# EVAL_DEDUP_BASELINE=BIN also runs dedup with another build's binary BIN on
# the same databases (same extra flags) and prints its figures first, labelled
# "baseline", so old and new are compared in one run.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
devset=${1:-$root/../shared/data/devset}
build=${2:-$root/build}
[ $# -ge 2 ] && shift 2 || shift $#
[ "${1:-}" = "--" ] && shift
devset=$(cd "$devset" && pwd)
bin=$build/tools/lookalike
copy=$build/tools/lookalike-make-copy
[ -x "$bin" ] && [ -x "$copy" ] || {
  echo "eval_dedup: $bin or $copy not built; run tools/build.sh first" >&2
  exit 2
}
# EVAL_DEDUP_WORK=DIR keeps the copies and databases in DIR and reuses them
# on the next run (only dedup runs again).
if [ -n "${EVAL_DEDUP_WORK:-}" ]; then
  work=$EVAL_DEDUP_WORK
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-dedup.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi

# Generated set: originals numbered, copies named after them (truth by name).
mkdir -p "$work/gen/orig" "$work/gen/copies"
i=0
[ -d "$work/gen/copies" ] && [ -n "$(ls "$work/gen/copies")" ] ||
find "$devset/db" -type f -name '*.jpg' | LC_ALL=C sort | while read -r photo; do
  i=$((i + 1))
  n=$(printf '%03d' "$i")
  cp "$photo" "$work/gen/orig/$n.jpg"
  for kind in reencode resize crop copy; do
    "$copy" --kind "$kind" "$photo" "$work/gen/copies/${n}_$kind.jpg"
  done
done

for set in dev generated; do
  if [ "$set" = dev ]; then dir=$devset; else dir=$work/gen; fi
  db=$work/$set.db
  [ -f "$work/$set.index.txt" ] && [ -d "$db" ] ||
    "$bin" index "$dir" --db "$db" --quiet >"$work/$set.index.txt" 2>&1 || [ $? -eq 1 ]
  images=$(awk '$1 == "indexed" {print $2}' "$work/$set.index.txt")
  for run in ${EVAL_DEDUP_BASELINE:+baseline} current; do
    if [ "$run" = baseline ]; then dedup=$EVAL_DEDUP_BASELINE; else dedup=$bin; fi
    start=$(date +%s.%N)
    "$dedup" dedup --db "$db" --format tsv -v "$@" >"$work/$set.$run.groups.tsv" 2>"$work/$set.$run.log"
    end=$(date +%s.%N)
    # Candidates do not depend on --threshold, --min-inliers or --min-spread, so
    # one run with the lowest values gives every pair's evidence for the sweep.
    "$dedup" dedup --db "$db" --format pairs "$@" --threshold 0.01 --min-inliers 5 \
      --min-spread 0 >"$work/$set.$run.pairs.tsv"
    echo "== $set: $images images; ${EVAL_DEDUP_BASELINE:+$run }dedup (defaults$( [ $# -gt 0 ] && echo ", $*")):" \
      "$(awk "BEGIN{printf \"%.1f\", $end - $start}") s wall"
    sed 's/^lookalike: /   /' "$work/$set.$run.log"
    python3 - "$set" "$devset" "$dir" "$work/$set.$run.groups.tsv" "$work/$set.$run.pairs.tsv" "$dedup" "$@" <<'EOF'
import csv, itertools, os, re, subprocess, sys
set_name, devset, indexed_dir, groups_tsv, pairs_tsv, binary = sys.argv[1:7]
flags = sys.argv[7:]

def unescape(s):  # inverse of the CLI's EscapeField
    return re.sub(r'\\(x[0-9a-f]{2}|.)', lambda m: {'\\': '\\', 't': '\t', 'n': '\n', 'r': '\r'}.get(
        m.group(1), chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == 'x' else m.group(1)), s)

if set_name == 'dev':
    source = {}
    for m in csv.DictReader(open(os.path.join(devset, 'queries_meta.csv'))):
        if m['part'] == 'copy':
            source[os.path.join(devset, m['query'])] = os.path.join(devset, m['source'])
    level = {os.path.join(devset, m['query']): m['kind_or_level'] for m in
             csv.DictReader(open(os.path.join(devset, 'queries_meta.csv')))}
    truth_of = lambda p: source.get(p, p)
    is_copy = lambda p: p in source
    kind_of = lambda p: level[p]
else:
    truth_of = lambda p: os.path.basename(p)[:3]
    is_copy = lambda p: '/copies/' in p
    kind_of = lambda p: os.path.basename(p)[4:-4]

# Every indexed image (the truth groups need those never paired too).
images = set()
for top, dirs, files in os.walk(indexed_dir):
    images.update(os.path.join(top, f) for f in files if f.lower().endswith(('.jpg', '.png')))
pairs = []
for line in open(pairs_tsv):
    a, b, sim, matches, inliers, score, spread, dup = line.rstrip('\n').split('\t')
    pairs.append((unescape(a), unescape(b), int(inliers), float(score), float(spread)))

def score_groups(groups):
    predicted = set()
    for members in groups:
        predicted.update(frozenset(p) for p in itertools.combinations(sorted(members), 2))
    by_truth = {}
    for p in images:
        by_truth.setdefault(truth_of(p), []).append(p)
    true_pairs = set()
    for members in by_truth.values():
        true_pairs.update(frozenset(p) for p in itertools.combinations(sorted(members), 2))
    tp = len(predicted & true_pairs)
    group_of = {p: i for i, members in enumerate(groups) for p in members}
    copies = [p for p in images if is_copy(p)]
    joined = [p for p in copies if p in group_of and any(
        truth_of(q) == truth_of(p) and not is_copy(q) and group_of.get(q) == group_of[p]
        for q in groups[group_of[p]])]
    by_kind = {}
    for p in copies:
        total, ok = by_kind.get(kind_of(p), (0, 0))
        by_kind[kind_of(p)] = (total + 1, ok + (p in joined))
    mixed = [g for g in groups if len({truth_of(p) for p in g}) > 1]
    return (tp / len(predicted) if predicted else 1.0, tp / len(true_pairs) if true_pairs else 1.0,
            len(predicted), len(true_pairs), len(joined), len(copies), by_kind, mixed)

def components(min_inliers, min_spread, threshold):
    parent = {}
    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    for a, b, inliers, score, spread in pairs:
        if inliers >= min_inliers and spread >= min_spread and score >= threshold:
            parent[find(a)] = find(b)
    out = {}
    for p in list(parent):
        out.setdefault(find(p), set()).add(p)
    return [m for m in out.values() if len(m) > 1]

printed = {}
for line in open(groups_tsv):
    g, path, score = line.rstrip('\n').split('\t')
    printed.setdefault(g, set()).add(unescape(path))
p, r, npred, ntrue, joined, ncopies, by_kind, mixed = score_groups(list(printed.values()))
print('   printed groups: %d; pair precision %.3f, recall %.3f (%d predicted, %d true pairs); '
      'copies joined to their original %d/%d' % (len(printed), p, r, npred, ntrue, joined, ncopies))
print('   copies joined by kind: ' + ', '.join('%s %d/%d' % (k, ok, total)
                                              for k, (total, ok) in sorted(by_kind.items())))
prefix = os.path.commonpath(list(images)) + '/'
for g in mixed:
    print('   wrongly joined (%d true groups): %s' % (len({truth_of(p) for p in g}), ' '.join(
        sorted(p[len(prefix):] for p in g if not is_copy(p)))))

def flag(name, default):
    return float(flags[flags.index(name) + 1]) if name in flags else default
help_text = subprocess.run([binary, 'dedup', '--help'], capture_output=True, text=True).stdout
defaults = {k: float(v) for k, v in
            re.findall(r'--(threshold|min-inliers|min-spread) arg \(=([0-9.]+)\)', help_text)}
min_inliers = flag('--min-inliers', defaults['min-inliers'])
min_spread = flag('--min-spread', defaults['min-spread'])
chosen = flag('--threshold', defaults['threshold'])
print('   sweep (min inliers %g, min spread %g): threshold  precision  recall  copies joined'
      % (min_inliers, min_spread))
for t in sorted({0.05, 0.08, 0.10, 0.12, 0.15, 0.20, 0.25, 0.30, 0.40, chosen}):
    p, r, _, _, joined, ncopies, _, _ = score_groups(components(min_inliers, min_spread, t))
    print('     %s %.2f      %.3f      %.3f   %d/%d' % ('*' if t == chosen else ' ', t, p, r, joined, ncopies))
EOF
  done
done
