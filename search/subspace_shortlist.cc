#include "search/subspace_shortlist.h"

#include "util/cpu_features.h"

#ifdef LOOKALIKE_X86_DISPATCH
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "util/blas.h"

namespace lookalike {
namespace {

constexpr int kMaxShortlist = 64;  // VerifyOptions::match_shortlist's bound

// One query row's shortlist, best first, written to `row`: a product enters
// only above the weakest kept, after the equal ones already kept, so offering
// candidates in row order keeps the lower row first among equals.
struct RowShortlist {
  float sim[kMaxShortlist];
  int* row = nullptr;
  int n = 0;
  float floor = -std::numeric_limits<float>::infinity();  // sim[n - 1]

  void Reset(int* out, int count) {
    row = out;
    n = count;
    std::fill(sim, sim + n, -std::numeric_limits<float>::infinity());
    std::fill(row, row + n, -1);
    floor = sim[n - 1];
  }
  void Offer(float s, int j) {
    if (!(s > floor)) return;
    int k = n - 1;
    for (; k > 0 && sim[k - 1] < s; --k) {
      sim[k] = sim[k - 1];
      row[k] = row[k - 1];
    }
    sim[k] = s;
    row[k] = j;
    floor = sim[n - 1];
  }
};

#ifdef LOOKALIKE_X86_DISPATCH

// Offers the 16 products of one query row with candidates base..base + 15
// (lo: the first eight) that beat its shortlist's weakest, in row order.
__attribute__((target("avx2,fma"))) inline void OfferAbove(RowShortlist* s, __m256 lo, __m256 hi,
                                                           int base, int nc) {
  const __m256 floor = _mm256_set1_ps(s->floor);
  unsigned mask = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(lo, floor, _CMP_GT_OQ))) |
                  static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(hi, floor, _CMP_GT_OQ)))
                      << 8;
  if (mask == 0) return;  // almost always, once the shortlist has filled
  alignas(32) float lanes[16];
  _mm256_store_ps(lanes, lo);
  _mm256_store_ps(lanes + 8, hi);
  for (; mask != 0; mask &= mask - 1) {
    const int lane = __builtin_ctz(mask);
    if (base + lane < nc) s->Offer(lanes[lane], base + lane);
  }
}

// Four query rows against 16 candidates at a time: eight accumulators of
// eight lanes, each product summed over the dimensions in order by FMA.
__attribute__((target("avx2,fma"))) void FusedShortlists(const float* query, int nq,
                                                         const float* candidate, int nc, int dim,
                                                         int shortlist, int* top) {
  // Candidates in panels of 16, dimension-major inside a panel: one aligned
  // row of 16 per dimension (the padding rows are zero and never offered).
  const int panels = (nc + 15) / 16;
  std::vector<float> packed(static_cast<size_t>(panels) * dim * 16, 0.0f);
  for (int j = 0; j < nc; ++j)
    for (int k = 0; k < dim; ++k)
      packed[(static_cast<size_t>(j / 16) * dim + k) * 16 + j % 16] =
          candidate[static_cast<size_t>(j) * dim + k];
  // Query rows four at a time, read in place; the last group's missing rows
  // come from a zero-padded copy of that group, their lists dropped.
  const int nq4 = (nq + 3) / 4 * 4;
  std::vector<float> tail(static_cast<size_t>(4) * dim, 0.0f);
  std::copy(query + static_cast<size_t>(nq4 - 4) * dim, query + static_cast<size_t>(nq) * dim,
            tail.begin());
  std::vector<int> dropped(static_cast<size_t>(4) * shortlist);
  RowShortlist best[4];
  for (int i0 = 0; i0 < nq4; i0 += 4) {
    for (int r = 0; r < 4; ++r)
      best[r].Reset(i0 + r < nq ? top + static_cast<size_t>(i0 + r) * shortlist
                                : dropped.data() + static_cast<size_t>(r) * shortlist,
                    shortlist);
    const float* q0 = i0 + 4 <= nq ? query + static_cast<size_t>(i0) * dim : tail.data();
    const float* q1 = q0 + dim;
    const float* q2 = q1 + dim;
    const float* q3 = q2 + dim;
    for (int p = 0; p < panels; ++p) {
      const float* c = packed.data() + static_cast<size_t>(p) * dim * 16;
      __m256 a0 = _mm256_setzero_ps(), b0 = a0, a1 = a0, b1 = a0, a2 = a0, b2 = a0, a3 = a0,
             b3 = a0;
      for (int k = 0; k < dim; ++k) {
        const __m256 lo = _mm256_loadu_ps(c + k * 16), hi = _mm256_loadu_ps(c + k * 16 + 8);
        __m256 x = _mm256_broadcast_ss(q0 + k);
        a0 = _mm256_fmadd_ps(x, lo, a0);
        b0 = _mm256_fmadd_ps(x, hi, b0);
        x = _mm256_broadcast_ss(q1 + k);
        a1 = _mm256_fmadd_ps(x, lo, a1);
        b1 = _mm256_fmadd_ps(x, hi, b1);
        x = _mm256_broadcast_ss(q2 + k);
        a2 = _mm256_fmadd_ps(x, lo, a2);
        b2 = _mm256_fmadd_ps(x, hi, b2);
        x = _mm256_broadcast_ss(q3 + k);
        a3 = _mm256_fmadd_ps(x, lo, a3);
        b3 = _mm256_fmadd_ps(x, hi, b3);
      }
      OfferAbove(&best[0], a0, b0, p * 16, nc);
      OfferAbove(&best[1], a1, b1, p * 16, nc);
      OfferAbove(&best[2], a2, b2, p * 16, nc);
      OfferAbove(&best[3], a3, b3, p * 16, nc);
    }
  }
}

#endif  // LOOKALIKE_X86_DISPATCH

}  // namespace

void SimilarityBlock(const float* candidate, int nc, const float* query_rows, int rows, int dim,
                     float* sims) {
  const float one = 1.0f, zero = 0.0f;
  sgemm_("T", "N", &nc, &rows, &dim, &one, candidate, &dim, query_rows, &dim, &zero, sims, &nc);
}

void SubspaceShortlistsBlas(const float* query, int nq, const float* candidate, int nc, int dim,
                            int shortlist, int* top) {
  std::vector<float> sims(static_cast<size_t>(kSimilarityBlockRows) * nc);
  RowShortlist best;
  for (int q0 = 0; q0 < nq; q0 += kSimilarityBlockRows) {
    const int rows = std::min(kSimilarityBlockRows, nq - q0);
    SimilarityBlock(candidate, nc, query + static_cast<size_t>(q0) * dim, rows, dim, sims.data());
    for (int row = 0; row < rows; ++row) {
      const float* s = sims.data() + static_cast<size_t>(row) * nc;
      best.Reset(top + static_cast<size_t>(q0 + row) * shortlist, shortlist);
      int j = 0;
#ifdef __SSE2__
      // Once the shortlist fills, most groups of eight hold nothing above
      // its weakest: one vector comparison skips them.
      for (; j + 8 <= nc; j += 8) {
        const __m128 f = _mm_set1_ps(best.floor);
        if ((_mm_movemask_ps(_mm_cmpgt_ps(_mm_loadu_ps(s + j), f)) |
             _mm_movemask_ps(_mm_cmpgt_ps(_mm_loadu_ps(s + j + 4), f))) == 0)
          continue;
        for (int k = 0; k < 8; ++k) best.Offer(s[j + k], j + k);
      }
#endif
      for (; j < nc; ++j) best.Offer(s[j], j);
    }
  }
}

bool SubspaceShortlistsFused(const float* query, int nq, const float* candidate, int nc, int dim,
                             int shortlist, int* top) {
#ifdef LOOKALIKE_X86_DISPATCH
  if (!CpuHasAvx2Fma()) return false;
  FusedShortlists(query, nq, candidate, nc, dim, shortlist, top);
  return true;
#else
  (void)query, (void)nq, (void)candidate, (void)nc, (void)dim, (void)shortlist, (void)top;
  return false;
#endif
}

void SubspaceShortlists(const float* query, int nq, const float* candidate, int nc, int dim,
                        int shortlist, int* top) {
  if (shortlist < 1 || shortlist > kMaxShortlist)
    throw std::invalid_argument("shortlist must be in 1.." + std::to_string(kMaxShortlist) +
                                ", got " + std::to_string(shortlist));
  if (nq <= 0) return;
  if (nc <= 0) {
    std::fill(top, top + static_cast<size_t>(nq) * shortlist, -1);
    return;
  }
  if (!SubspaceShortlistsFused(query, nq, candidate, nc, dim, shortlist, top))
    SubspaceShortlistsBlas(query, nq, candidate, nc, dim, shortlist, top);
}

}  // namespace lookalike
