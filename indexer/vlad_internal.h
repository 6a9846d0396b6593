// Backend constructors used by CreateVladEncoder (indexer/vlad_backend.cc).
#pragma once

#include <memory>

#include "indexer/vlad.h"

namespace lookalike {

std::unique_ptr<VladEncoder> CreateCpuVladEncoder(const Codebook& codebook,
                                                  const VladOptions& options);
// Defined only when built WITH_CUDA; throws std::runtime_error without a
// usable device.
std::unique_ptr<VladEncoder> CreateCudaVladEncoder(const Codebook& codebook,
                                                   const VladOptions& options);

}  // namespace lookalike
