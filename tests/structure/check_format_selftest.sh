#!/bin/sh
# Proves check_format.sh can fail: a badly formatted file in a copy of the
# style must be named, and the same file once formatted accepted.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-format-selftest.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$root/.clang-format" "$tmp/"
mkdir -p "$tmp/search"
printf 'int  f( int x ){return x+1;}\n' >"$tmp/search/bad.cc"
if "$here/check_format.sh" "$tmp" 2>"$tmp/out"; then
  echo "selftest: a badly formatted file was accepted" >&2; exit 1
fi
grep -q 'search/bad.cc' "$tmp/out" || { echo "selftest: the file was not named" >&2; cat "$tmp/out" >&2; exit 1; }
printf 'int f(int x) { return x + 1; }\n' >"$tmp/search/bad.cc"
"$here/check_format.sh" "$tmp" >/dev/null || { echo "selftest: a formatted file was refused" >&2; exit 1; }
echo "check_format selftest: unformatted files are refused and named"
