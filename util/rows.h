// Row-wise helpers for row-major float matrices.
#pragma once

#include <cmath>
#include <cstdint>

namespace lookalike {

// Scales each of the n rows of `rows` (n x dim, row-major) to unit L2 norm,
// accumulating in double; all-zero rows stay zero.
inline void NormaliseRows(float* rows, int64_t n, int64_t dim) {
  for (int64_t i = 0; i < n; ++i) {
    float* r = rows + i * dim;
    double norm2 = 0;
    for (int64_t j = 0; j < dim; ++j) norm2 += double{r[j]} * r[j];
    if (norm2 == 0) continue;
    const float inv = static_cast<float>(1.0 / std::sqrt(norm2));
    for (int64_t j = 0; j < dim; ++j) r[j] *= inv;
  }
}

// a . b over n floats with eight partial sums, which the compiler keeps in
// vector registers (a single running sum cannot be reordered, so it would
// stay scalar); the tail, then the partial sums, are added in index order.
// The order is fixed, so the same inputs give the same bits on every call,
// unlike a BLAS kernel, whose order can depend on the caller's matrix shape.
inline float LanedDot(const float* a, const float* b, int64_t n) {
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) part[k] += a[i + k] * b[i + k];
  float sum = 0;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (float p : part) sum += p;
  return sum;
}

}  // namespace lookalike
