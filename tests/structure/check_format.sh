#!/bin/sh
# Fails when a C++ or CUDA source is not formatted as .clang-format says,
# with Debian 12's clang-format (14). Lists each file that differs and how to
# fix it.
#
# usage: check_format.sh [ROOT]   (default: the repository holding this script)
set -eu
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cf=""
for c in clang-format-14 clang-format; do
  command -v "$c" >/dev/null 2>&1 && { cf=$c; break; }
done
if [ -z "$cf" ]; then
  echo "check_format: clang-format not found; tools/install_deps.sh installs it (Debian package clang-format)" >&2
  exit 1
fi
[ -f "$root/.clang-format" ] || { echo "check_format: $root/.clang-format is missing" >&2; exit 1; }
list=$(cd "$root" && find . -path ./build -prune -o -path './build-*' -prune -o -path ./.git -prune \
  -o -path ./samples -prune -o -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) -print | sort)
[ -n "$list" ] || { echo "check_format: no sources under $root" >&2; exit 1; }
bad=0
n=0
for f in $list; do
  n=$((n + 1))
  if ! (cd "$root" && "$cf" --style=file --dry-run -Werror "$f" >/dev/null 2>&1); then
    echo "not formatted: ${f#./}" >&2
    bad=$((bad + 1))
  fi
done
if [ $bad -gt 0 ]; then
  echo "check_format: $bad of $n files differ from .clang-format; fix with: $cf -i --style=file FILE" >&2
  exit 1
fi
echo "check_format: $n files formatted ($($cf --version | head -1))"
