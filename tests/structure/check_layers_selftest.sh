#!/bin/sh
# Proves check_layers.sh can fail: a tree where the indexer includes search/
# (directly and through a relative path) must be refused, and the same tree
# without those includes accepted; inside a module, a phase or a record
# header that includes its orchestrator (by path or by bare name) must be
# refused, and the orchestrator including them accepted.
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
echo '#include "util/threads.h"' >"$tmp/storage/store.cc"
"$here/check_layers.sh" "$tmp" >/dev/null || { echo "selftest: the clean tree was refused" >&2; exit 1; }

# Tiers inside a module: orchestrators on top, shared records at the bottom.
echo '#include "storage/records.h"' >"$tmp/storage/store.h"
echo '#include "storage/records.h"' >"$tmp/storage/values.h"
: >"$tmp/storage/records.h"
echo '#include "indexer/index_options.h"' >"$tmp/indexer/file_processing.h"
: >"$tmp/indexer/index_options.h"
printf '#include "indexer/file_processing.h"\n#include "indexer/index_options.h"\n' >"$tmp/indexer/pipeline.h"
"$here/check_layers.sh" "$tmp" >/dev/null || { echo "selftest: includes down the tiers were refused" >&2; exit 1; }
refused() {  # refused FILE LINE TEXT: TEXT appended to FILE must be refused at FILE:LINE
  cp "$tmp/$1" "$tmp/saved"
  echo "$3" >>"$tmp/$1"
  if "$here/check_layers.sh" "$tmp" 2>"$tmp/out"; then
    echo "selftest: an upward include inside a module ($1: $3) was accepted" >&2; exit 1
  fi
  grep -q "$1:$2: includes" "$tmp/out" || { echo "selftest: $1:$2 was not named:" >&2; cat "$tmp/out" >&2; exit 1; }
  mv "$tmp/saved" "$tmp/$1"
}
refused indexer/file_processing.h 2 '#include "indexer/pipeline.h"'
refused indexer/file_processing.h 2 '#include "pipeline.h"'
refused storage/values.h 2 '#include "storage/store.h"'
refused storage/records.h 1 '#include "storage/values.h"'
refused indexer/index_options.h 1 '#include "../indexer/file_processing.h"'
"$here/check_layers.sh" "$tmp" >/dev/null || { echo "selftest: the restored tree was refused" >&2; exit 1; }
echo "check_layers selftest: upward includes (between layers and inside a module) are refused and named"
