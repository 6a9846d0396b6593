#include "indexer/seed_distances.h"

#include <algorithm>
#include <limits>

#include "util/cpu_features.h"

#if defined(LOOKALIKE_X86_DISPATCH)
#include <immintrin.h>
#endif

namespace lookalike {
namespace {

constexpr int kLanes = 8;

// nearest[b * 8 + p] lowered to point p of block b's distance to `seed`:
// each lane one point, summed in dimension order.
void LowerBlocks(const float* blocks, int64_t num_blocks, int dim, const float* seed,
                 float* nearest) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    const float* y = blocks + b * dim * kLanes;
    float* out = nearest + b * kLanes;
    for (int p = 0; p < kLanes; ++p) {
      float sum = 0;
      for (int j = 0; j < dim; ++j) {
        const float diff = seed[j] - y[j * kLanes + p];
        sum += diff * diff;
      }
      out[p] = std::min(out[p], sum);
    }
  }
}

#if defined(LOOKALIKE_X86_DISPATCH)
// The same, one block per register, four blocks at a time (independent
// sums keep the adder busy); AVX2 alone, no FMA.
__attribute__((target("avx2"))) __m256 BlockSums(const float* y, int dim, const float* seed) {
  __m256 sum = _mm256_setzero_ps();
  for (int j = 0; j < dim; ++j) {
    const __m256 diff = _mm256_sub_ps(_mm256_set1_ps(seed[j]), _mm256_loadu_ps(y + j * kLanes));
    sum = _mm256_add_ps(sum, _mm256_mul_ps(diff, diff));
  }
  return sum;
}

__attribute__((target("avx2"))) void Lower(float* out, __m256 sum) {
  const __m256 old = _mm256_loadu_ps(out);  // std::min(old, sum): sum only when smaller
  _mm256_storeu_ps(out, _mm256_blendv_ps(old, sum, _mm256_cmp_ps(sum, old, _CMP_LT_OQ)));
}

__attribute__((target("avx2"))) void LowerBlocksAvx2(const float* blocks, int64_t num_blocks,
                                                     int dim, const float* seed, float* nearest) {
  const int64_t stride = int64_t{dim} * kLanes;
  int64_t b = 0;
  for (; b + 4 <= num_blocks; b += 4) {
    const float* y = blocks + b * stride;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int j = 0; j < dim; ++j) {
      const __m256 c = _mm256_set1_ps(seed[j]);
      const __m256 d0 = _mm256_sub_ps(c, _mm256_loadu_ps(y + j * kLanes));
      const __m256 d1 = _mm256_sub_ps(c, _mm256_loadu_ps(y + stride + j * kLanes));
      const __m256 d2 = _mm256_sub_ps(c, _mm256_loadu_ps(y + 2 * stride + j * kLanes));
      const __m256 d3 = _mm256_sub_ps(c, _mm256_loadu_ps(y + 3 * stride + j * kLanes));
      s0 = _mm256_add_ps(s0, _mm256_mul_ps(d0, d0));
      s1 = _mm256_add_ps(s1, _mm256_mul_ps(d1, d1));
      s2 = _mm256_add_ps(s2, _mm256_mul_ps(d2, d2));
      s3 = _mm256_add_ps(s3, _mm256_mul_ps(d3, d3));
    }
    Lower(nearest + b * kLanes, s0);
    Lower(nearest + (b + 1) * kLanes, s1);
    Lower(nearest + (b + 2) * kLanes, s2);
    Lower(nearest + (b + 3) * kLanes, s3);
  }
  for (; b < num_blocks; ++b)
    Lower(nearest + b * kLanes, BlockSums(blocks + b * stride, dim, seed));
}
#endif

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

void SeedDistances::Lower(const float* seed, bool portable) {
  const int64_t num_blocks = static_cast<int64_t>(nearest_.size()) / kLanes;
#if defined(LOOKALIKE_X86_DISPATCH)
  if (!portable && CpuHasAvx2Fma()) {
    LowerBlocksAvx2(blocks_.data(), num_blocks, dim_, seed, nearest_.data());
    return;
  }
#endif
  (void)portable;
  LowerBlocks(blocks_.data(), num_blocks, dim_, seed, nearest_.data());
}

}  // namespace lookalike
