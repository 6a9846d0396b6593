// The verification flags search and dedup share: how a pair of images is
// matched and fitted (search/verifier.h, VerifyOptions).
#pragma once

#include "search/verifier.h"
#include "tools/flags.h"

namespace lookalike {

// --match-dims N and --ransac usac|classic into *options; defaults from
// `defaults` (the command's default options).
void DeclareVerifyFlags(FlagGroup* g, VerifyOptions* options, const VerifyOptions& defaults);

}  // namespace lookalike
