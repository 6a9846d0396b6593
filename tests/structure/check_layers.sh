#!/bin/sh
# Fails when a source file includes upward: from a higher layer, or from a
# higher tier of its own module.
#
# The layers, bottom to top (README "Layout"):
#   util < storage < cuda < indexer < search < tools
# A file in one of these folders may include project headers from its own
# layer or a lower one only. tests/ and bench/ sit above everything.
#
# Inside storage/, indexer/ and search/ the files are ordered too, in tiers
# from the bottom up (below, by name without extension: x.h and x.cc share a
# tier; "*" is every file not named). Shared vocabulary (options, records,
# errors) sits below the files that use it, and the orchestrator (the store,
# the pipeline, the searcher) on top: a file may include headers of its own
# module from its own tier or a lower one only.
#
# usage: check_layers.sh [ROOT]   (default: the repository holding this script)
set -euf  # -f: no globbing, "*" is a tier name
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
layers="util storage cuda indexer search tools"

tiers_storage="encoding model_record records store_error | * | store store_impl creation merge verify"
tiers_indexer="* | index_options index_summary |
  file_processing update_plan model_training encode_commit projection_growth migration | pipeline"
tiers_search="* | search_options | ranking | searcher dedup"

rank() {
  r=0
  for l in $layers; do
    [ "$l" = "$1" ] && { echo $r; return; }
    r=$((r + 1))
  done
  echo -1
}

# tiers_of LAYER: the tier list of a module ("" when its files are not ordered).
tiers_of() {
  case "$1" in
    storage) echo "$tiers_storage" ;;
    indexer) echo "$tiers_indexer" ;;
    search) echo "$tiers_search" ;;
    *) echo "" ;;
  esac
}

# tier TIERS NAME: the position of file NAME (no folder, no extension) in
# TIERS, counted from 0 at the bottom; the "*" tier's when it is not named.
tier() {
  t=0
  star=-1
  found=-1
  for word in $(printf '%s\n' "$1" | sed 's/|/ | /g'); do
    case "$word" in
      '|') t=$((t + 1)) ;;
      '*') star=$t ;;
      "$2") found=$t ;;
    esac
  done
  [ "$found" -ge 0 ] && echo "$found" || echo "$star"
}

# stem PATH: the file name without folder and extension.
stem() { basename "$1" | sed -E 's/\.(h|cc|cu|cuh|cpp)$//'; }

status=0
checked=0
for layer in $layers; do
  [ -d "$root/$layer" ] || continue
  own=$(rank "$layer")
  tiers=$(tiers_of "$layer")
  files=$(find "$root/$layer" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \))
  for f in $files; do
    checked=$((checked + 1))
    [ -n "$tiers" ] && own_tier=$(tier "$tiers" "$(stem "$f")")
    # Project includes are written from the repository root: "layer/file.h".
    # Relative ones ("../search/x.h") are resolved to the folder they name;
    # a bare name ("x.h") is a file of the same folder.
    grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
      sed -E 's/^([0-9]+):[^"]*"([^"]*)".*/\1 \2/' |
      while read -r line path; do
        clean=$(printf '%s\n' "$path" | sed -E 's#^(\.\./)+##')
        case "$clean" in
          */*) target=$(printf '%s\n' "$clean" | cut -d/ -f1) ;;
          *) target=$layer ;;
        esac
        tr=$(rank "$target")
        [ "$tr" -lt 0 ] && continue  # not a project layer (e.g. a system header)
        if [ "$tr" -gt "$own" ]; then
          echo "${f#$root/}:$line: includes \"$path\": $target/ is above $layer/ (layers: $layers)"
          echo violation
        elif [ "$tr" -eq "$own" ] && [ -n "$tiers" ]; then
          target_tier=$(tier "$tiers" "$(stem "$clean")")
          if [ "$target_tier" -gt "$own_tier" ]; then
            echo "${f#$root/}:$line: includes \"$path\", a higher tier of $layer/ (tiers, bottom" \
              "to top: $(printf '%s' "$tiers" | tr -s ' \n' ' '))"
            echo violation
          fi
        fi
      done
  done
done >"${TMPDIR:-/tmp}/lookalike-layers.$$" 2>&1 || true
if grep -q '^violation$' "${TMPDIR:-/tmp}/lookalike-layers.$$"; then
  grep -v '^violation$' "${TMPDIR:-/tmp}/lookalike-layers.$$" >&2
  status=1
fi
rm -f "${TMPDIR:-/tmp}/lookalike-layers.$$"
if [ "$checked" -eq 0 ]; then
  echo "check_layers: no source files found under $root" >&2
  exit 2
fi
[ $status -eq 0 ] && echo "check_layers: $checked files, every include points down (between layers and between the tiers of storage/, indexer/ and search/)"
exit $status
