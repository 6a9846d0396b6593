#include "indexer/slice_codes.h"

#include <cassert>
#include <cmath>

#include "util/cpu_features.h"

#if defined(LOOKALIKE_X86_DISPATCH)
#include <immintrin.h>
#endif

// Every distance must round as FAISS's does: a subtraction, a product and a
// sum per dimension, never fused (this file is compiled with
// -ffp-contract=off, and the AVX path does not enable FMA).

namespace lookalike {
namespace {

constexpr int kK = SliceCoder::kCentroids;

// FAISS's fvec_L2sqr_ny_nearest_ref: the first index of the smallest
// distance below +inf (0 when there is none).
uint8_t FirstNearest(const float* dist) {
  float best = HUGE_VALF;
  int code = 0;
  for (int k = 0; k < kK; ++k)
    if (dist[k] < best) {
      best = dist[k];
      code = k;
    }
  return static_cast<uint8_t>(code);
}

void EncodePortable(const float* x, int64_t n, int slices, int dim, const float* by_dim,
                    uint8_t* codes) {
  float dist[kK];
  for (int64_t i = 0; i < n; ++i)
    for (int m = 0; m < slices; ++m) {
      const float* xs = x + (i * slices + m) * dim;
      const float* c = by_dim + static_cast<size_t>(m) * dim * kK;
      // fvec_L2sqr_ref's sum starts at 0: 0 + t * t is t * t exactly.
      for (int k = 0; k < kK; ++k) {
        const float t = xs[0] - c[k];
        dist[k] = t * t;
      }
      for (int j = 1; j < dim; ++j) {
        const float xj = xs[j];
        const float* cj = c + static_cast<size_t>(j) * kK;
        for (int k = 0; k < kK; ++k) {
          const float t = xj - cj[k];
          dist[k] += t * t;
        }
      }
      codes[i * slices + m] = FirstNearest(dist);
    }
}

#if defined(LOOKALIKE_X86_DISPATCH)
// Eight centroids per register; the smallest distance is found with vector
// minima, then its first index (the minimum is exact, so "equal" is "first
// smallest").
template <int kDim>
__attribute__((target("avx2"))) void EncodeAvx2(const float* x, int64_t n, int slices,
                                                int runtime_dim, const float* by_dim,
                                                uint8_t* codes) {
  const int dim = kDim > 0 ? kDim : runtime_dim;
  alignas(32) float dist[kK];
  for (int64_t i = 0; i < n; ++i)
    for (int m = 0; m < slices; ++m) {
      const float* xs = x + (i * slices + m) * dim;
      const float* c = by_dim + static_cast<size_t>(m) * dim * kK;
      __m256 low = _mm256_set1_ps(HUGE_VALF);
      for (int k = 0; k < kK; k += 8) {
        __m256 t = _mm256_sub_ps(_mm256_set1_ps(xs[0]), _mm256_loadu_ps(c + k));
        __m256 acc = _mm256_mul_ps(t, t);
        for (int j = 1; j < dim; ++j) {
          t = _mm256_sub_ps(_mm256_set1_ps(xs[j]), _mm256_loadu_ps(c + j * kK + k));
          acc = _mm256_add_ps(acc, _mm256_mul_ps(t, t));
        }
        _mm256_store_ps(dist + k, acc);
        low = _mm256_min_ps(acc, low);  // a NaN distance is passed over, as FAISS's '<' does
      }
      __m128 q = _mm_min_ps(_mm256_castps256_ps128(low), _mm256_extractf128_ps(low, 1));
      q = _mm_min_ps(q, _mm_movehl_ps(q, q));
      q = _mm_min_ss(q, _mm_shuffle_ps(q, q, 1));
      const float best = _mm_cvtss_f32(q);
      int code = 0;
      if (best < HUGE_VALF) {
        const __m256 b = _mm256_set1_ps(best);
        for (int k = 0; k < kK; k += 8) {
          const int mask =
              _mm256_movemask_ps(_mm256_cmp_ps(_mm256_load_ps(dist + k), b, _CMP_EQ_OQ));
          if (mask != 0) {
            code = k + __builtin_ctz(static_cast<unsigned>(mask));
            break;
          }
        }
      }
      codes[i * slices + m] = static_cast<uint8_t>(code);
    }
}
#endif

}  // namespace

SliceCoder::SliceCoder(const float* centroids, int slices, int slice_dim)
    : slices_(slices),
      slice_dim_(slice_dim),
      by_dim_(static_cast<size_t>(slices) * slice_dim * kK) {
  assert(Handles(slice_dim) && slices > 0);
  for (int m = 0; m < slices; ++m)
    for (int k = 0; k < kK; ++k)
      for (int j = 0; j < slice_dim; ++j)
        by_dim_[(static_cast<size_t>(m) * slice_dim + j) * kK + k] =
            centroids[(static_cast<size_t>(m) * kK + k) * slice_dim + j];
}

void SliceCoder::Encode(const float* x, int64_t n, uint8_t* codes, SliceKernel kernel) const {
  if (n <= 0) return;
#if defined(LOOKALIKE_X86_DISPATCH)
  if (kernel == SliceKernel::kAuto && CpuHasAvx2Fma()) {
    if (slice_dim_ == 8)
      EncodeAvx2<8>(x, n, slices_, slice_dim_, by_dim_.data(), codes);
    else
      EncodeAvx2<0>(x, n, slices_, slice_dim_, by_dim_.data(), codes);
    return;
  }
#else
  (void)kernel;
#endif
  EncodePortable(x, n, slices_, slice_dim_, by_dim_.data(), codes);
}

}  // namespace lookalike
