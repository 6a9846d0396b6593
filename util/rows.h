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

}  // namespace lookalike
