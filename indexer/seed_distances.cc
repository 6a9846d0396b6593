#include "indexer/seed_distances.h"

#include <algorithm>
#include <limits>

namespace lookalike {
namespace {

constexpr int kLanes = 8;

// nearest[b * 8 + p] lowered to point p of block b's distance to `seed`.
// Cloned for AVX2 (eight lanes in one register; the baseline clone needs two
// SSE registers): the lanes are independent points, each summed in dimension
// order, so both clones give the same bits.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void LowerBlocks(const float* blocks, int64_t num_blocks, int dim, const float* seed,
                 float* nearest) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    const float* y = blocks + b * dim * kLanes;
    float sum[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int j = 0; j < dim; ++j) {
      const float s = seed[j];
      for (int p = 0; p < kLanes; ++p) {
        const float diff = s - y[j * kLanes + p];
        sum[p] += diff * diff;
      }
    }
    float* out = nearest + b * kLanes;
    for (int p = 0; p < kLanes; ++p) out[p] = std::min(out[p], sum[p]);
  }
}

}  // namespace

SeedDistances::SeedDistances(const float* points, int64_t n, int dim) : n_(n), dim_(dim) {
  const int64_t num_blocks = (n + kLanes - 1) / kLanes;
  blocks_.assign(static_cast<size_t>(num_blocks * dim * kLanes), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    float* block = blocks_.data() + (i / kLanes) * dim * kLanes + i % kLanes;
    for (int j = 0; j < dim; ++j) block[j * kLanes] = points[i * dim + j];
  }
  nearest_.assign(static_cast<size_t>(num_blocks * kLanes), std::numeric_limits<float>::infinity());
}

void SeedDistances::Lower(const float* seed) {
  LowerBlocks(blocks_.data(), static_cast<int64_t>(nearest_.size()) / kLanes, dim_, seed,
              nearest_.data());
}

}  // namespace lookalike
