#!/bin/sh
# Measures `lookalike dedup` on labelled sets and prints, per set: pair
# precision and recall, how many distinct photos were put in one group, how
# many copies joined their original, and how often the keeper is the
# original, at the default level (copy) and at part; then at --level view
# ("similar shots") against same-scene labels where the set has them.
#
#   dev        devset/db and devset/queries indexed together: each copy query
#              (queries_meta.csv, part "copy") is a duplicate of its source and
#              of the other copies of it, and so is the copy-move forgery
#              (opencv_ela: the same photo with a penguin pasted in); the other
#              multi-view queries (other photos of the same scene or object)
#              are not duplicates, but are same-scene pairs for --level view.
#   generated  devset/db plus four copies of every photo made by
#              lookalike-make-copy: re-encoded (JPEG 50), resized (1/2),
#              cropped (central 70 %), and the Quick start's cropped + rotated
#              + downscaled + brightened JPEG-40 copy.
#   mirrored   devset/db plus five mirrored copies of every photo: flipped
#              left to right (lookalike-make-copy --kind flip, JPEG 90), and
#              flipped then edited as each of generated's four copies.
#   samples    OpenCV's sample photos (tools/quickstart.sh fetches them into
#              samples/photos; SAMPLES_DIR=DIR to use others) plus ten copies
#              of twelve of them (every kind of lookalike-make-copy: the four
#              above, mirrored, turned 90 degrees, rotated 10 degrees with
#              black corners, brightened, a black border added, and a PNG with
#              an opaque alpha channel). Every sample is its own photo
#              (left01..14 and right01..14 are 28 poses of one chessboard;
#              aloeL/R, basketball1/2, graf1/3, ... other shots of a scene),
#              except ela_modified (an edit of ela_original) and imageTextR
#              (imageTextN rotated). Skipped, with a note, when missing.
#
# Pairs are scored over groups: every two images in one printed group form a
# predicted pair, every two images of one true photo a true pair. "distinct
# photos in one group" adds, over the printed groups, the true photos in it
# minus one: what following the groups' marks would delete wrongly. "copies
# joined" is the share of copies that land in their original's group;
# "original kept" counts the groups holding an original whose keeper is it.
#
# usage: tools/eval_dedup.sh [DEVSET_DIR] [BUILD_DIR] [-- extra dedup flags]
#   DEVSET_DIR  default ../shared/data/devset (relative to the repository root)
#   BUILD_DIR   default build
# EVAL_DEDUP_SETS="dev generated mirrored samples" (the default) chooses the
# sets.
# EVAL_DEDUP_BASELINE=BIN also runs dedup with another build's binary BIN on
# the same databases (same extra flags) and prints its figures first, labelled
# "baseline", so old and new are compared in one run (a binary from before
# match levels prints groups without roles: its first member is its keeper).
# EVAL_DEDUP_WORK=DIR keeps the copies and databases in DIR and reuses them
# on the next run (only dedup runs again).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
devset=${1:-$root/../shared/data/devset}
build=${2:-$root/build}
[ $# -ge 2 ] && shift 2 || shift $#
[ "${1:-}" = "--" ] && shift
devset=$(cd "$devset" && pwd)
samples=${SAMPLES_DIR:-$root/samples/photos}
sets=${EVAL_DEDUP_SETS:-dev generated mirrored samples}
bin=$build/tools/lookalike
copy=$build/tools/lookalike-make-copy
[ -x "$bin" ] && [ -x "$copy" ] || {
  echo "eval_dedup: $bin or $copy not built; run tools/build.sh first" >&2
  exit 2
}
if [ -n "${EVAL_DEDUP_WORK:-}" ]; then
  work=$EVAL_DEDUP_WORK
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-dedup.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi

# Generated sets: originals numbered, copies named after them (truth by
# name), in $work/$1, of the kinds $2... (flip+crop: flipped, then cropped).
make_generated() {
  out=$work/$1
  shift
  mkdir -p "$out/orig" "$out/copies"
  [ -n "$(ls "$out/copies")" ] && return
  i=0
  find "$devset/db" -type f -name '*.jpg' | LC_ALL=C sort | while read -r photo; do
    i=$((i + 1))
    n=$(printf '%03d' "$i")
    cp "$photo" "$out/orig/$n.jpg"
    for kinds in "$@"; do
      from=$photo
      for kind in $(echo "$kinds" | tr + ' '); do
        "$copy" --kind "$kind" "$from" "$out/copies/${n}_$kinds.jpg"
        from=$out/copies/${n}_$kinds.jpg
      done
    done
  done
}

# Samples set: the photos as they are, and copies named STEM~KIND.
make_samples() {
  mkdir -p "$work/samples/photos" "$work/samples/copies"
  [ -n "$(ls "$work/samples/copies")" ] && return
  cp "$samples"/* "$work/samples/photos/"
  for photo in aloeL.jpg baboon.jpg basketball1.png box.png building.jpg chicky_512.png \
    fruits.jpg graf1.png home.jpg left01.jpg messi5.jpg starry_night.jpg; do
    stem=${photo%.*}
    for kind in reencode resize crop copy flip rotate90 rotate10 brighten border png-alpha; do
      ext=jpg
      [ "$kind" = png-alpha ] && ext=png
      "$copy" --kind "$kind" "$samples/$photo" "$work/samples/copies/$stem~$kind.$ext"
    done
  done
}

for set in $sets; do
  case $set in
    dev) dir=$devset ;;
    generated) make_generated gen reencode resize crop copy && dir=$work/gen ;;
    mirrored)
      make_generated mirrored flip flip+reencode flip+resize flip+crop flip+copy &&
        dir=$work/mirrored ;;
    samples)
      if [ ! -d "$samples" ]; then
        echo "== samples: skipped, $samples missing (tools/quickstart.sh fetches OpenCV's sample photos)"
        continue
      fi
      make_samples && dir=$work/samples ;;
    *) echo "eval_dedup: unknown set $set" >&2; exit 2 ;;
  esac
  db=$work/$set.db
  [ -f "$work/$set.index.txt" ] && [ -d "$db" ] ||
    "$bin" index "$dir" --db "$db" --quiet >"$work/$set.index.txt" 2>&1 || [ $? -eq 1 ]
  images=$(awk '$1 == "indexed" {print $2}' "$work/$set.index.txt")
  for run in ${EVAL_DEDUP_BASELINE:+baseline} current; do
    if [ "$run" = baseline ]; then dedup=$EVAL_DEDUP_BASELINE; else dedup=$bin; fi
    # Levels only where the binary has them.
    levels=default
    "$dedup" dedup --help | grep -q -- '--level' && levels="copy part view"
    for level in $levels; do
      flags=""
      [ "$level" != default ] && flags="--level $level"
      out=$work/$set.$run.$level
      start=$(date +%s.%N)
      # shellcheck disable=SC2086
      "$dedup" dedup --db "$db" --format tsv -v $flags "$@" >"$out.groups.tsv" 2>"$out.log"
      end=$(date +%s.%N)
      echo "== $set: $images images; ${EVAL_DEDUP_BASELINE:+$run }dedup" \
        "${flags:-(defaults)}$( [ $# -gt 0 ] && echo " $*"): $(awk "BEGIN{printf \"%.1f\", $end - $start}") s wall"
      sed 's/^lookalike: /   /' "$out.log"
      python3 - "$set" "$devset" "$dir" "$out.groups.tsv" "$level" <<'EOF'
import csv, itertools, os, re, sys
set_name, devset, indexed_dir, groups_tsv, level = sys.argv[1:6]

def unescape(s):  # inverse of the CLI's EscapeField
    return re.sub(r'\\(x[0-9a-f]{2}|.)', lambda m: {'\\': '\\', 't': '\t', 'n': '\n', 'r': '\r'}.get(
        m.group(1), chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == 'x' else m.group(1)), s)

images = set()
for top, dirs, files in os.walk(indexed_dir):
    images.update(os.path.join(top, f) for f in files if f.lower().endswith(('.jpg', '.png')))
scene = {}  # image -> scene label, for --level view
if set_name == 'dev':
    meta = list(csv.DictReader(open(os.path.join(devset, 'queries_meta.csv'))))
    path = lambda p: os.path.join(devset, p)
    source = {path(m['query']): path(m['source']) for m in meta if m['part'] == 'copy'}
    # The copy-move forgery is the same photo edited.
    source.update({path(m['query']): path(m['relevant']) for m in meta
                   if m['source'] == 'opencv_ela/ela_modified'})
    kind = {path(m['query']): m['kind_or_level'] for m in meta}
    for m in meta:
        if m['part'] == 'mv':
            label = path(m['relevant'].split('|')[0])
            for r in [m['query']] + m['relevant'].split('|'):
                scene[path(r)] = scene.get(path(label), label)
    truth_of = lambda p: source.get(p, p)
    is_copy = lambda p: p in source
    kind_of = lambda p: 'forgery' if 'ela' in source.get(p, '') else kind[p]
elif set_name in ('generated', 'mirrored'):
    truth_of = lambda p: os.path.basename(p)[:3]
    is_copy = lambda p: '/copies/' in p
    kind_of = lambda p: os.path.basename(p)[4:-4]
else:
    edits = {'ela_modified': 'ela_original', 'imageTextR': 'imageTextN'}
    stem = lambda p: os.path.splitext(os.path.basename(p))[0].split('~')[0]
    truth_of = lambda p: edits.get(stem(p), stem(p))
    is_copy = lambda p: '~' in os.path.basename(p) or stem(p) in edits
    kind_of = lambda p: (os.path.splitext(os.path.basename(p))[0].split('~') + ['edit'])[1]
    scenes = [('aloeL', 'aloeR'), ('basketball1', 'basketball2'), ('graf1', 'graf3'),
              ('box', 'box_in_scene'), ('leuvenA', 'leuvenB'), ('rubberwhale1', 'rubberwhale2'),
              ('left', 'right'), ('Blender_Suzanne1', 'Blender_Suzanne2'), ('aero1', 'aero3'),
              ('text_defocus', 'text_motion'),
              tuple('%s%02d' % (side, i) for side in ('left', 'right') for i in range(1, 15))]
    label = {name: group[0] for group in scenes for name in group}
    for p in images:
        scene[p] = label.get(truth_of(p), truth_of(p))

groups, keeper = {}, {}
for line in open(groups_tsv):
    f = line.rstrip('\n').split('\t')
    g, p = f[0], unescape(f[1])
    groups.setdefault(g, []).append(p)
    if (len(f) >= 4 and f[3] == 'keep') or (len(f) == 3 and g not in keeper):
        keeper[g] = p
printed = list(groups.values())

def pairs_of(groups):
    out = set()
    for members in groups:
        out.update(frozenset(p) for p in itertools.combinations(sorted(members), 2))
    return out

by_truth = {}
for p in images:
    by_truth.setdefault(truth_of(p), []).append(p)
predicted, true_pairs = pairs_of(printed), pairs_of(by_truth.values())
if level == 'view':
    by_scene = {}
    for p in images:
        by_scene.setdefault(scene.get(p, truth_of(p)), []).append(p)
    same_scene = pairs_of(by_scene.values()) | true_pairs
    tp = len(predicted & same_scene)
    print('   similar shots: %d groups holding %d images; %d pairs, of which %d of one photo and '
          '%d of one scene (precision %.3f against same-scene labels); recall of same-scene pairs %.3f'
          % (len(printed), sum(map(len, printed)), len(predicted), len(predicted & true_pairs), tp,
             tp / len(predicted) if predicted else 1.0, tp / len(same_scene) if same_scene else 1.0))
    sys.exit(0)
tp = len(predicted & true_pairs)
group_of = {p: i for i, members in enumerate(printed) for p in members}
copies = [p for p in images if is_copy(p)]
joined = [p for p in copies if p in group_of and any(
    truth_of(q) == truth_of(p) and not is_copy(q) for q in printed[group_of[p]])]
by_kind = {}
for p in copies:
    total, ok = by_kind.get(kind_of(p), (0, 0))
    by_kind[kind_of(p)] = (total + 1, ok + (p in joined))
distinct = sum(len({truth_of(p) for p in g}) - 1 for g in printed)
mixed = [g for g in printed if len({truth_of(p) for p in g}) > 1]
with_original = [g for g, members in groups.items() if any(not is_copy(p) for p in members)]
kept = [g for g in with_original if not is_copy(keeper[g])]
print('   groups %d; pair precision %.3f, recall %.3f (%d predicted, %d true pairs); distinct photos '
      'in one group %d; copies joined to their original %d/%d; original kept %d/%d groups' % (
          len(printed), tp / len(predicted) if predicted else 1.0,
          tp / len(true_pairs) if true_pairs else 1.0, len(predicted), len(true_pairs), distinct,
          len(joined), len(copies), len(kept), len(with_original)))
print('   copies joined by kind: ' + ', '.join('%s %d/%d' % (k, ok, total)
                                              for k, (total, ok) in sorted(by_kind.items())))
prefix = os.path.commonpath(list(images)) + '/'
for g in mixed:
    print('   distinct photos joined (%d): %s' % (len({truth_of(p) for p in g}), ' '.join(
        sorted(p[len(prefix):] for p in g))))
for g in sorted(set(with_original) - set(kept)):
    print('   copy kept: %s (original %s)' % (keeper[g][len(prefix):], ' '.join(
        sorted(p[len(prefix):] for p in groups[g] if not is_copy(p)))))
EOF
    done
  done
done
