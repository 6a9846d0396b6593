#!/bin/sh
# lookalike against COLMAP's image retrieval (Debian package colmap 3.8:
# CPU SIFT feature_extractor, vocab_tree_builder, vocab_tree_retriever) on the
# same folder of photos, both on the same 2 CPUs, in one run: time per image
# for indexing, time per query, and mAP from the set's scorer, with the
# lookalike / COLMAP ratios.
#
# usage: bench/colmap_compare.sh [SET_DIR [BUILD_DIR]]
#   SET_DIR    default ../shared/data/devset. Needs SET_DIR/db/ (database photos),
#              SET_DIR/queries/ (query photos), SET_DIR/gt.csv; uses db.txt,
#              queries.txt (paths relative to SET_DIR) and queries_meta.csv when
#              present. The scorer is SET_DIR/../evaluate.py (or $EVALUATE).
#   BUILD_DIR  default $BUILD_DIR or build/ (needs tools/lookalike)
# environment:
#   VOCAB_WORDS  vocabulary-tree sizes to run, default "1024" (quick); the
#                issue's reference is 16384: VOCAB_WORDS="1024 16384"
#   CPUS         CPUs both tools are pinned to (taskset), default 0,1
#   THREADS      threads for both, default 2 (SIFT extraction and lookalike index)
#   K            results per query for both, default 100 (= COLMAP's verified top N)
#   WORK         keep intermediate files here (default: a temporary folder, removed)
#   REUSE        with WORK: skip the steps already timed in WORK/times (resume a
#                run, or re-score it); delete their lines there to redo them
#
# What is counted where (all wall-clock seconds, from /usr/bin/time):
#   COLMAP index  = feature_extractor on the database photos (full resolution,
#                   CPU SIFT, SiftExtraction.num_threads THREADS)
#                 + vocab_tree_builder on their descriptors (one-time cost)
#                 + vocab_tree_retriever adding the database photos to the
#                   tree's inverted index (--output_index_path)
#   COLMAP query  = feature_extractor on the query photos
#                 + vocab_tree_retriever querying the saved index (per query:
#                   wall of the call / number of queries; the retriever's own
#                   per-query timings are printed too), without verification
#                   and with --num_images_after_verification K (spatial
#                   verification of the top K)
#   lookalike index = `lookalike index` into a new database (sampling, k-means:
#                   the one-time cost, shown apart, then encoding and storing)
#   lookalike query = one `lookalike search` call over all queries / number of
#                   queries (database loaded once), default settings (re-ranking
#                   on) and without verification (--rerank 0 --expansion 0: VLAD + colour)
# Ratios are COLMAP time / lookalike time (> 1: lookalike is faster).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
set_dir=$(cd "${1:-$root/../shared/data/devset}" && pwd)
build=${2:-${BUILD_DIR:-$root/build}}
[ -d "$build" ] && build=$(cd "$build" && pwd)
bin=$build/tools/lookalike
vocab_words=${VOCAB_WORDS:-1024}
cpus=${CPUS:-0,1}
threads=${THREADS:-2}
k=${K:-100}
scorer=${EVALUATE:-$(dirname "$set_dir")/evaluate.py}
[ -x "$bin" ] || { echo "colmap_compare: $bin not built; run tools/build.sh" >&2; exit 2; }
[ -f "$scorer" ] || { echo "colmap_compare: scorer $scorer not found (set EVALUATE)" >&2; exit 2; }
for f in db queries gt.csv; do
  [ -e "$set_dir/$f" ] || { echo "colmap_compare: $set_dir/$f missing" >&2; exit 2; }
done
if ! command -v colmap >/dev/null 2>&1; then
  [ "$(id -u)" -eq 0 ] || { echo "colmap_compare: colmap missing; run as root or apt-get install colmap" >&2; exit 2; }
  echo "installing colmap (apt-get)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends colmap >&2 ||
    { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends colmap >&2; }
fi
[ -x /usr/bin/time ] || { echo "colmap_compare: /usr/bin/time missing (apt-get install time)" >&2; exit 2; }

if [ -n "${WORK:-}" ]; then
  work=$WORK; mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-colmap.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi
pin() { taskset -c "$cpus" "$@"; }
# timed NAME CMD...: runs CMD pinned, stdout+stderr to $work/NAME.log, and
# appends "NAME wall user sys" to $work/times.
timed() {
  name=$1; shift
  if [ -n "${REUSE:-}" ] && [ -f "$work/times" ] && grep -q "^$name " "$work/times"; then
    return 0
  fi
  /usr/bin/time -f "$name %e %U %S" -a -o "$work/times" taskset -c "$cpus" "$@" \
    > "$work/$name.log" 2> "$work/$name.err" || {
    rc=$?
    # lookalike exits 1 when some files were skipped (e.g. no features): not fatal.
    case $name in lk_*) [ $rc -eq 1 ] && return 0 ;; esac
    echo "colmap_compare: $name failed (exit $rc); last lines of $work/$name.log and .err:" >&2
    tail -n 10 "$work/$name.log" "$work/$name.err" >&2
    exit 2
  }
}
wall() { awk -v n="$1" '$1 == n { print $2 }' "$work/times"; }
cpu() { awk -v n="$1" '$1 == n { print $3 + $4 }' "$work/times"; }

# Image lists, relative to the set's root (COLMAP's image names; the scorer's paths).
list() {  # FOLDER LISTFILE OUT
  if [ -f "$set_dir/$2" ]; then cp "$set_dir/$2" "$3"
  else (cd "$set_dir" && find "$1" -type f | grep -iE '\.(jpe?g|png|tiff?|bmp|webp|p[gpn]m)$' | sort) > "$3"
  fi
}
list db db.txt "$work/db.txt"
list queries queries.txt "$work/queries.txt"
ndb=$(wc -l < "$work/db.txt")
nq=$(wc -l < "$work/queries.txt")
groups=""
[ -f "$set_dir/queries_meta.csv" ] && groups="--groups $set_dir/queries_meta.csv"
score() {  # RESULTS.tsv -> one JSON line
  # shellcheck disable=SC2086
  python3 "$scorer" "$set_dir/gt.csv" "$1" $groups
}
echo "set: $set_dir ($ndb database photos, $nq queries); CPUs $cpus, $threads threads; $(nproc) CPUs online, load $(cut -d' ' -f1-3 /proc/loadavg)"

# ---------------------------------------------------------------- lookalike
echo "lookalike: index, search (default and without verification)" >&2
timed lk_index "$bin" index "$set_dir/db" --db "$work/lk.db" --threads "$threads" --format json -q
# search.sh OUT [FLAGS]: every query of queries.txt in one search call.
cat > "$work/search.sh" <<'EOF'
out=$1; shift
cd "$SET_DIR"
set -- "$@" --
while IFS= read -r q; do set -- "$@" "$q"; done < "$WORK_DIR/queries.txt"
exec "$BIN" search --db "$WORK_DIR/lk.db" -k "$K" --format tsv "$@" > "$out"
EOF
export SET_DIR="$set_dir" WORK_DIR="$work" BIN="$bin" K="$k"
if ! { [ -n "${REUSE:-}" ] && grep -q "^lk_search " "$work/times" 2>/dev/null; }; then
  sh "$work/search.sh" /dev/null > /dev/null 2>&1 || true  # warm-up: page cache, binary
fi
timed lk_search sh "$work/search.sh" "$work/lk.tsv"
timed lk_search_plain sh "$work/search.sh" "$work/lk_plain.tsv" --rerank 0 --expansion 0
score "$work/lk.tsv" > "$work/lk.score"
score "$work/lk_plain.tsv" > "$work/lk_plain.score"
lk_train=$(python3 -c '
import json, sys
summary = [l for l in open(sys.argv[1]) if l.startswith("{")][-1]
t = json.loads(summary)["stage_seconds"]
print(t["train"] + t.get("pca", 0))' "$work/lk_index.log")

# ---------------------------------------------------------------- COLMAP
sift="--SiftExtraction.use_gpu 0 --SiftExtraction.num_threads $threads"
echo "COLMAP: feature extraction of the database photos" >&2
# shellcheck disable=SC2086
timed colmap_extract_db colmap feature_extractor --database_path "$work/colmap.db" \
  --image_path "$set_dir" --image_list_path "$work/db.txt" $sift
# Trees are built before the queries' features are added: the builder takes
# the descriptors of every image in its database.
for w in $vocab_words; do
  echo "COLMAP: vocab_tree_builder, $w words; indexing the database photos" >&2
  timed "colmap_build_$w" colmap vocab_tree_builder --database_path "$work/colmap.db" \
    --vocab_tree_path "$work/tree$w.bin" --num_visual_words "$w"
  timed "colmap_index_$w" colmap vocab_tree_retriever --database_path "$work/colmap.db" \
    --vocab_tree_path "$work/tree$w.bin" --database_image_list_path "$work/db.txt" \
    --output_index_path "$work/index$w.bin"
done
echo "COLMAP: feature extraction of the queries" >&2
# shellcheck disable=SC2086
timed colmap_extract_q colmap feature_extractor --database_path "$work/colmap.db" \
  --image_path "$set_dir" --image_list_path "$work/queries.txt" $sift
# Retriever log -> scorer TSV (query, rank, path, score) and per-query seconds.
parse() {  # LOG TSV
  python3 - "$1" "$2" <<'PY'
import re, sys
query, rank, times = None, 0, []
with open(sys.argv[1], errors="replace") as log, open(sys.argv[2], "w") as out:
    for line in log:
        m = re.search(r"Querying for image (.+) \[\d+/\d+\](?: in ([0-9.]+)s)?", line)
        if m:
            query, rank = m.group(1), 0
            if m.group(2): times.append(float(m.group(2)))
            continue
        m = re.match(r"\s+image_id=\d+, image_name=(.+), score=(\S+)\s*$", line)
        if m and query is not None:
            rank += 1
            out.write("%s\t%d\t%s\t%s\n" % (query, rank, m.group(1), m.group(2)))
times.sort()
print("%.4f %.4f" % (sum(times) / max(1, len(times)), times[len(times) // 2] if times else 0))
PY
}
for w in $vocab_words; do
  echo "COLMAP: vocab_tree_retriever, $w words, without and with spatial verification" >&2
  timed "colmap_query_$w" colmap vocab_tree_retriever --database_path "$work/colmap.db" \
    --vocab_tree_path "$work/index$w.bin" --database_image_list_path "$work/db.txt" \
    --query_image_list_path "$work/queries.txt" --num_images "$k"
  timed "colmap_query_sv_$w" colmap vocab_tree_retriever --database_path "$work/colmap.db" \
    --vocab_tree_path "$work/index$w.bin" --database_image_list_path "$work/db.txt" \
    --query_image_list_path "$work/queries.txt" --num_images "$k" \
    --num_images_after_verification "$k"
  parse "$work/colmap_query_$w.log" "$work/colmap_$w.tsv" > "$work/colmap_$w.qtimes"
  parse "$work/colmap_query_sv_$w.log" "$work/colmap_sv_$w.tsv" > "$work/colmap_sv_$w.qtimes"
  score "$work/colmap_$w.tsv" > "$work/colmap_$w.score"
  score "$work/colmap_sv_$w.tsv" > "$work/colmap_sv_$w.score"
done

# ---------------------------------------------------------------- report
python3 - "$work" "$ndb" "$nq" "$lk_train" "$vocab_words" "$k" <<'PY'
import json, os, sys
work, ndb, nq, lk_train = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
words, k = sys.argv[5].split(), sys.argv[6]
T = {}  # step -> (wall seconds, CPU seconds = user + sys)
for line in open(os.path.join(work, "times")):
    f = line.split()
    if len(f) == 4 and f[0] not in T:
        T[f[0]] = (float(f[1]), float(f[2]) + float(f[3]))
def add(*steps): return tuple(sum(T[s][i] for s in steps) for i in (0, 1))
def score(name):
    return json.loads(open(os.path.join(work, name + ".score")).read().strip().splitlines()[-1])
def groups(s):
    g = s.get("by_group") or {}
    return ", ".join("%s %.3f" % (name, g[name]["mAP"]) for name in sorted(g)
                     if "mAP" in g[name] and (":" not in name or name == "copy:hard"))
def row(label, t, n, note=""):  # t = (wall, CPU or None)
    cpu = "%9.1f" % (1000 * t[1] / n) if t[1] is not None else "%9s" % "-"
    print("%-62s %9.1f %s%s" % (label, 1000 * t[0] / n, cpu, note))
print()
print("INDEXING: ms per database photo (%d photos)                      wall       CPU" % ndb)
row("lookalike index, all (new database)", T["lk_index"], ndb)
# lookalike times k-means in wall seconds only (its CPU time is not reported).
row("  of which k-means K=512 (the vocabulary, one-time)", (lk_train, None), ndb)
lk_novocab = (T["lk_index"][0] - lk_train, None)
row("lookalike index without k-means", lk_novocab, ndb)
row("COLMAP feature_extractor (CPU SIFT, full resolution)", T["colmap_extract_db"], ndb)
tot = {}
for w in words:
    row("COLMAP vocab_tree_builder, %s words (one-time)" % w, T["colmap_build_" + w], ndb,
        "   = %.0f s wall, %.1f CPU-min" % (T["colmap_build_" + w][0], T["colmap_build_" + w][1] / 60))
    row("COLMAP vocab_tree_retriever indexing, %s words" % w, T["colmap_index_" + w], ndb)
    tot[w] = add("colmap_extract_db", "colmap_build_" + w, "colmap_index_" + w)
    row("COLMAP all, %s words" % w, tot[w], ndb)
    row("COLMAP without the tree building, %s words" % w, add("colmap_extract_db", "colmap_index_" + w), ndb)
print()
print("QUERIES: ms per query (%d queries, top %s)                        wall       CPU" % (nq, k))
row("lookalike search, default (re-ranking on), one call", T["lk_search"], nq)
row("lookalike search, no verification (--rerank 0 --expansion 0)", T["lk_search_plain"], nq)
row("COLMAP feature_extractor on the queries", T["colmap_extract_q"], nq)
q = {}
for w in words:
    for sv in ("", "sv_"):
        mean, med = map(float, open(os.path.join(work, "colmap_%s%s.qtimes" % (sv, w))).read().split())
        q[sv + w] = add("colmap_extract_q", "colmap_query_%s%s" % (sv, w))
        row("COLMAP extraction + retriever, %s words%s" % (w, ", verified top " + k if sv else ""), q[sv + w], nq,
            "   (retriever's own timer: mean %.0f, median %.0f ms)" % (1000 * mean, 1000 * med))
print()
print("mAP (the set's scorer; overall, then per group)")
lks, lkp = score("lk"), score("lk_plain")
print("%-46s %.3f   %s" % ("lookalike default", lks["mAP"], groups(lks)))
print("%-46s %.3f   %s" % ("lookalike without verification", lkp["mAP"], groups(lkp)))
cs = {}
for w in words:
    for sv in ("", "sv_"):
        cs[sv + w] = score("colmap_%s%s" % (sv, w))
        print("%-46s %.3f   %s" % ("COLMAP %s words%s" % (w, ", spatial verification" if sv else ""),
                                  cs[sv + w]["mAP"], groups(cs[sv + w])))
print()
print("RATIOS, this run: COLMAP / lookalike (> 1 = lookalike faster), wall (CPU)")
def r(a, b):
    cpu = " (%.1fx)" % (a[1] / b[1]) if a[1] is not None and b[1] is not None else ""
    return "%.1fx%s" % (a[0] / b[0], cpu)
for w in words:
    print("  indexing, %s-word tree, all: %s; without vocabulary building on either side: %s" % (
        w, r(tot[w], T["lk_index"]), r(add("colmap_extract_db", "colmap_index_" + w), lk_novocab)))
    print("  per query, %s-word tree: COLMAP plain / lookalike plain %s; COLMAP verified / lookalike default %s" % (
        w, r(q[w], T["lk_search_plain"]), r(q["sv_" + w], T["lk_search"])))
    print("  mAP, %s-word tree: lookalike default %.3f vs COLMAP verified %.3f (%+.3f); plain %.3f vs %.3f (%+.3f)" % (
        w, lks["mAP"], cs["sv_" + w]["mAP"], lks["mAP"] - cs["sv_" + w]["mAP"],
        lkp["mAP"], cs[w]["mAP"], lkp["mAP"] - cs[w]["mAP"]))
print()
print("scorer output (JSON):")
for name in ["lk", "lk_plain"] + ["colmap_%s%s" % (sv, w) for w in words for sv in ("", "sv_")]:
    print(name + ": " + open(os.path.join(work, name + ".score")).read().strip().splitlines()[-1])
PY
