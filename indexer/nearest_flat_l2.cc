#include "indexer/nearest_flat_l2.h"

#include <faiss/utils/distances.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "util/blas.h"
#include "util/cpu_features.h"

#if defined(LOOKALIKE_X86_DISPATCH)
#include <immintrin.h>
#endif

namespace lookalike {
namespace {

constexpr int kLanes = 8;

// FAISS's baseline fvec_norm_L2sqr_ref: float squares summed in double.
void SquaredNorms(const float* x, int64_t n, int64_t d, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0;
    const float* row = x + i * d;
    for (int64_t j = 0; j < d; ++j) sum += row[j] * row[j];
    out[i] = static_cast<float>(sum);
  }
}

// The first smallest of (value, index) pairs: `b` replaces `a` when smaller,
// or equal with a lower index.
inline void Merge(float* a_min, int64_t* a_idx, float b_min, int64_t b_idx) {
  if (b_idx >= 0 && (*a_idx < 0 || *a_min > b_min || (*a_min == b_min && b_idx < *a_idx))) {
    *a_min = b_min;
    *a_idx = b_idx;
  }
}

// For each of `rows` queries (row r of `ip`: `cols` dot products with
// centroids j0..j0 + cols - 1), the distance x_norm + c_norm - 2 ip clamped
// at 0, as FAISS's exhaustive_L2sqr_blas computes it; its first smallest
// lowers (best[r], label[r]) only when strictly smaller, as FAISS's
// SingleBestResultHandler keeps them.
void KeepNearest(const float* ip, int64_t rows, int64_t cols, int64_t j0, const float* x_norms,
                 const float* c_norms, float* best, faiss::Index::idx_t* label) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* line = ip + r * cols;
    for (int64_t j = 0; j < cols; ++j) {
      float dis = x_norms[r] + c_norms[j] - 2 * line[j];
      if (dis < 0) dis = 0;
      if (best[r] > dis) {
        best[r] = dis;
        label[r] = j0 + j;
      }
    }
  }
}

#if defined(LOOKALIKE_X86_DISPATCH)
// The same, eight centroids per register, two registers of running minima
// per query (their own first smallest each, merged by Merge); AVX2 alone,
// no FMA. The clamp and the comparisons are blends, so a NaN is kept and
// never chosen, as FAISS's comparisons do.
__attribute__((target("avx2"))) void KeepNearestAvx2(const float* ip, int64_t rows, int64_t cols,
                                                     int64_t j0, const float* x_norms,
                                                     const float* c_norms, float* best,
                                                     faiss::Index::idx_t* label) {
  const int64_t full = cols - cols % (2 * kLanes);
  const __m256 zero = _mm256_setzero_ps(), two = _mm256_set1_ps(2.0f);
  const __m256i step = _mm256_set1_epi32(2 * kLanes);
  alignas(32) float lane_min[2 * kLanes];
  alignas(32) int32_t lane_idx[2 * kLanes];
  for (int64_t r = 0; r < rows; ++r) {
    const float* line = ip + r * cols;
    const __m256 xn = _mm256_set1_ps(x_norms[r]);
    __m256 min0 = _mm256_set1_ps(HUGE_VALF), min1 = min0;
    __m256i idx0 = _mm256_set1_epi32(-1), idx1 = idx0;
    __m256i at0 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i at1 = _mm256_add_epi32(at0, _mm256_set1_epi32(kLanes));
    for (int64_t j = 0; j < full; j += 2 * kLanes) {
      __m256 d0 = _mm256_sub_ps(_mm256_add_ps(xn, _mm256_loadu_ps(c_norms + j)),
                                _mm256_mul_ps(two, _mm256_loadu_ps(line + j)));
      __m256 d1 = _mm256_sub_ps(_mm256_add_ps(xn, _mm256_loadu_ps(c_norms + j + kLanes)),
                                _mm256_mul_ps(two, _mm256_loadu_ps(line + j + kLanes)));
      d0 = _mm256_blendv_ps(d0, zero, _mm256_cmp_ps(d0, zero, _CMP_LT_OQ));
      d1 = _mm256_blendv_ps(d1, zero, _mm256_cmp_ps(d1, zero, _CMP_LT_OQ));
      const __m256 lower0 = _mm256_cmp_ps(min0, d0, _CMP_GT_OQ);
      const __m256 lower1 = _mm256_cmp_ps(min1, d1, _CMP_GT_OQ);
      min0 = _mm256_blendv_ps(min0, d0, lower0);
      min1 = _mm256_blendv_ps(min1, d1, lower1);
      idx0 = _mm256_castps_si256(
          _mm256_blendv_ps(_mm256_castsi256_ps(idx0), _mm256_castsi256_ps(at0), lower0));
      idx1 = _mm256_castps_si256(
          _mm256_blendv_ps(_mm256_castsi256_ps(idx1), _mm256_castsi256_ps(at1), lower1));
      at0 = _mm256_add_epi32(at0, step);
      at1 = _mm256_add_epi32(at1, step);
    }
    _mm256_store_ps(lane_min, min0);
    _mm256_store_ps(lane_min + kLanes, min1);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lane_idx), idx0);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lane_idx + kLanes), idx1);
    float block_min = HUGE_VALF;
    int64_t block_idx = -1;
    for (int p = 0; p < 2 * kLanes; ++p) Merge(&block_min, &block_idx, lane_min[p], lane_idx[p]);
    for (int64_t j = full; j < cols; ++j) {  // after every lane's columns
      float dis = x_norms[r] + c_norms[j] - 2 * line[j];
      if (dis < 0) dis = 0;
      if (block_min > dis) {
        block_min = dis;
        block_idx = j;
      }
    }
    if (block_idx >= 0 && best[r] > block_min) {
      best[r] = block_min;
      label[r] = j0 + block_idx;
    }
  }
}
#endif

}  // namespace

void NearestFlatL2::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                           const faiss::SearchParameters* params) const {
  if (k != 1 || params || n < faiss::distance_compute_blas_threshold || ntotal == 0) {
    faiss::IndexFlatL2::search(n, x, k, distances, labels, params);
    return;
  }
  const float* y = get_xb();
  const int64_t bs_x = faiss::distance_compute_blas_query_bs;
  const int64_t bs_y = faiss::distance_compute_blas_database_bs;
  std::unique_ptr<float[]> ip(new float[static_cast<size_t>(bs_x * bs_y)]);
  std::vector<float> x_norms(static_cast<size_t>(n)), y_norms(static_cast<size_t>(ntotal));
  SquaredNorms(x, n, d, x_norms.data());
  SquaredNorms(y, ntotal, d, y_norms.data());
  for (int64_t i0 = 0; i0 < n; i0 += bs_x) {
    const int64_t i1 = std::min<int64_t>(n, i0 + bs_x);
    for (int64_t i = i0; i < i1; ++i) distances[i] = HUGE_VALF;
    for (int64_t j0 = 0; j0 < ntotal; j0 += bs_y) {
      const int64_t j1 = std::min<int64_t>(ntotal, j0 + bs_y);
      const float one = 1, zero = 0;
      const int nyi = static_cast<int>(j1 - j0), nxi = static_cast<int>(i1 - i0), di = d;
      sgemm_("Transpose", "Not transpose", &nyi, &nxi, &di, &one, y + j0 * d, &di, x + i0 * d, &di,
             &zero, ip.get(), &nyi);
#if defined(LOOKALIKE_X86_DISPATCH)
      if (!portable_ && CpuHasAvx2Fma()) {
        KeepNearestAvx2(ip.get(), i1 - i0, j1 - j0, j0, x_norms.data() + i0, y_norms.data() + j0,
                        distances + i0, labels + i0);
        continue;
      }
#endif
      KeepNearest(ip.get(), i1 - i0, j1 - j0, j0, x_norms.data() + i0, y_norms.data() + j0,
                  distances + i0, labels + i0);
    }
  }
}

}  // namespace lookalike
