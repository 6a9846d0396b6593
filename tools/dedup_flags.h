// The flags that say which duplicate groups to form and which member to
// keep, shared by `dedup` and `serve` (its Duplicates page): --level,
// --keep and --keep-in, bound to a DedupOptions.
#pragma once

#include "search/dedup.h"
#include "tools/flags.h"

namespace lookalike {

// --level LEVEL, --keep RULE and --keep-in DIR (repeatable) into *options;
// defaults from a default-constructed DedupOptions.
void DeclareDedupGroupFlags(FlagGroup* g, DedupOptions* options);

}  // namespace lookalike
