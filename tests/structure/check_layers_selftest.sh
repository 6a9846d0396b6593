#!/bin/sh
# Proves check_layers.sh can fail: a tree where the indexer includes search/
# (directly and through a relative path) must be refused, and the same tree
# without those includes accepted.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lookalike-layers-selftest.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/util" "$tmp/storage" "$tmp/indexer" "$tmp/search" "$tmp/tools"
echo '#include "util/threads.h"' >"$tmp/storage/store.cc"
echo '#include "storage/store.h"' >"$tmp/indexer/pipeline.cc"
echo '#include "indexer/pipeline.h"' >"$tmp/search/searcher.cc"
echo '#include "search/searcher.h"' >"$tmp/tools/cli.cc"
"$here/check_layers.sh" "$tmp" >/dev/null || { echo "selftest: a clean tree was refused" >&2; exit 1; }
echo '#include "search/vector_index.h"' >>"$tmp/indexer/pipeline.cc"
if "$here/check_layers.sh" "$tmp" 2>"$tmp/out"; then
  echo "selftest: an upward include (indexer -> search) was accepted" >&2; exit 1
fi
grep -q 'indexer/pipeline.cc:2' "$tmp/out" || { echo "selftest: the violation was not named:" >&2; cat "$tmp/out" >&2; exit 1; }
printf '#include "storage/store.h"\n' >"$tmp/indexer/pipeline.cc"
echo '#include "../tools/cli.h"' >"$tmp/storage/store.cc"
if "$here/check_layers.sh" "$tmp" 2>/dev/null; then
  echo "selftest: a relative upward include (storage -> ../tools) was accepted" >&2; exit 1
fi
echo "check_layers selftest: upward includes are refused and named"
