#!/bin/sh
# Fails when a source file includes from a higher layer. The layers, bottom to
# top (README "Layout"):
#   util < storage < cuda < indexer < search < tools
# A file in one of these folders may include project headers from its own
# layer or a lower one only. tests/ and bench/ sit above everything.
#
# usage: check_layers.sh [ROOT]   (default: the repository holding this script)
set -eu
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
layers="util storage cuda indexer search tools"

rank() {
  r=0
  for l in $layers; do
    [ "$l" = "$1" ] && { echo $r; return; }
    r=$((r + 1))
  done
  echo -1
}

status=0
checked=0
for layer in $layers; do
  [ -d "$root/$layer" ] || continue
  own=$(rank "$layer")
  files=$(find "$root/$layer" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \))
  for f in $files; do
    checked=$((checked + 1))
    # Project includes are written from the repository root: "layer/file.h".
    # Relative ones ("../search/x.h") are resolved to the folder they name.
    grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
      sed -E 's/^([0-9]+):[^"]*"([^"]*)".*/\1 \2/' |
      while read -r line path; do
        target=$(printf '%s\n' "$path" | sed -E 's#^(\.\./)+##' | cut -d/ -f1)
        case "$path" in */*) ;; *) continue ;; esac  # same-folder include
        tr=$(rank "$target")
        [ "$tr" -lt 0 ] && continue  # not a project layer (e.g. a system header)
        if [ "$tr" -gt "$own" ]; then
          echo "${f#$root/}:$line: includes \"$path\": $target/ is above $layer/ (layers: $layers)"
          echo violation
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
[ $status -eq 0 ] && echo "check_layers: $checked files, every include points down"
exit $status
