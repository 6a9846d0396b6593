// The model flags of `index` and `train` (codebook, PCA, extraction,
// normalisation), declared once for both.
#pragma once

#include "indexer/index_options.h"
#include "tools/flags.h"

namespace lookalike {

// Declares the flags that set the model of a new database in `o`.
void DeclareModelFlags(FlagGroup* g, ModelOptions* o);

}  // namespace lookalike
