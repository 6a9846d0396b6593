// What `dedup` offers for removal, for the user to act on: only members
// whose role is `duplicate`, never a keeper or a file in a reference folder.
// The review script itself is tools/removal_script.h's (the web page's
// export writes the same).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "search/dedup.h"
#include "tools/removal_script.h"

namespace lookalike {

// The duplicates' paths exactly as they are, each followed by '\n' (`nul`
// false) or '\0' (true: for `xargs -0`, safe for any file name). With '\n',
// a path holding a newline cannot be written; it is left out and returned,
// for the caller to report.
std::vector<std::string> WriteRemoveList(std::ostream& out, const DedupResult& r, bool nul);

// The duplicates as removals, in group order: each with its group's keeper
// and keep reason, its level with the keeper and why it is not kept.
std::vector<Removal> DuplicateRemovals(const DedupResult& r);

}  // namespace lookalike
