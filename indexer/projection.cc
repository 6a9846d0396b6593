#include "indexer/projection.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "util/blas.h"
#include "util/rows.h"

namespace lookalike {

void ProjectionOptions::Validate() const {
  if (out_dim < 0 || out_dim > 65536)
    throw std::invalid_argument("--pca-dim must be 0 (off) or in 1..65536, got " +
                                std::to_string(out_dim));
  if (min_images < 0)
    throw std::invalid_argument("--pca-min-images must be >= 0, got " + std::to_string(min_images));
  if (!(eigen_regularization >= 0.0f) || !std::isfinite(eigen_regularization))
    throw std::invalid_argument("--pca-regularization must be >= 0, got " +
                                std::to_string(eigen_regularization));
  if (!(power_alpha > 0.0f && power_alpha <= 1.0f))
    throw std::invalid_argument("--pca-power must be in (0, 1], got " +
                                std::to_string(power_alpha));
  if (component_bits != 0 && component_bits != 1 && component_bits != 2 && component_bits != 4 &&
      component_bits != 16 && component_bits != 32)
    throw std::invalid_argument("--pca-bits must be 0 (automatic), 1, 2, 4, 16 or 32, got " +
                                std::to_string(component_bits));
  if (matrix_bytes_per_image <= 0)
    throw std::invalid_argument("the PCA matrix's budget per image must be > 0, got " +
                                std::to_string(matrix_bytes_per_image));
}

int ComponentBitsFor(const ProjectionOptions& options, int64_t images, int64_t vlad_dim) {
  if (options.component_bits != 0) return options.component_bits;
  const double values = static_cast<double>(options.out_dim) * static_cast<double>(vlad_dim);
  const double budget =
      static_cast<double>(options.matrix_bytes_per_image) * static_cast<double>(images);
  for (int bits : {4, 2})
    if (values * bits / 8 <= budget) return bits;
  return 1;
}

bool ShouldLearnProjection(const ProjectionOptions& options, int64_t num_images) {
  return options.out_dim > 0 && num_images >= std::max<int64_t>(2, options.min_images);
}

namespace {

// C (row-major m x n) = A (row-major m x k) x B^T (B row-major n x k), through
// column-major BLAS: C^T = B x A^T.
void GemmABt(const float* a, const float* b, int64_t m, int64_t n, int64_t k, float* c) {
  const float one = 1.0f, zero = 0.0f;
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  sgemm_("T", "N", &ni, &mi, &ki, &one, b, &ki, a, &ki, &zero, c, &ni);
}

// The eigen decomposition of the centred Gram matrix of the n rows of x
// (row-major, dim floats each; `mean` their mean): ascending eigenvalues into
// `eigenvalues`, the eigenvectors returned, column-major n x n (LAPACK dsyev).
std::vector<double> CentredGramEigen(const float* x, int64_t n, int64_t dim,
                                     const std::vector<float>& mean,
                                     std::vector<double>* eigenvalues) {
  // Centred Gram matrix without centring a copy of the data (Gram trick for
  // n << dim): Gc = X X^T - s 1^T - 1 s^T + |m|^2, s = X m. The eigenvectors
  // of the covariance are Xc^T v / sqrt(lambda) for Gc's eigenpairs (v, lambda).
  std::vector<float> gram(static_cast<size_t>(n * n));
  GemmABt(x, x, n, n, dim, gram.data());
  std::vector<double> s(n, 0.0);
  double mm = 0;
  for (int64_t j = 0; j < dim; ++j) mm += double{mean[j]} * mean[j];
  for (int64_t i = 0; i < n; ++i) {
    double acc = 0;
    for (int64_t j = 0; j < dim; ++j) acc += double{x[i * dim + j]} * mean[j];
    s[i] = acc;
  }
  std::vector<double> gc(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      gc[i * n + j] = 0.5 * (double{gram[i * n + j]} + gram[j * n + i]) - s[i] - s[j] + mm;
  std::vector<float>().swap(gram);

  std::vector<double>& eig = *eigenvalues;
  eig.assign(n, 0.0);
  if (const int info = SymmetricEigen(static_cast<int>(n), gc.data(), eig.data()); info != 0)
    throw std::runtime_error("PCA: eigen decomposition failed (LAPACK dsyev info " +
                             std::to_string(info) + ")");
  return gc;
}

// The half-range of a row's grid, in RMS of the row, for each number of
// bits: the grid's outer values sit there. At 4 bits +-3 RMS (values beyond
// are clamped: a unit row of 65,536 values has RMS 1/256, and its few larger
// values matter less than a fine step for the bulk, measured against the
// largest value as the range); at 2 bits +-2 RMS and at 1 bit +-0.8 RMS
// (close to the mean magnitude of a Gaussian, 0.798), the best of those
// measured for each.
double GridReachInRms(uint32_t bits) { return bits == 4 ? 3.0 : bits == 2 ? 2.0 : 0.8; }

// Puts every component value on its row's grid (ProjectionRecord::GridCode)
// of p->component_bits bits. The record then holds exactly what m:pca
// stores, so a projection just learned and one read back map vectors
// identically.
void QuantizeComponents(ProjectionRecord* p) {
  const uint64_t dim = p->in_dim;
  const uint32_t bits = p->component_bits;
  // The outer code's value is step x (2^bits - 1) / 2.
  const double half_levels = ((1u << bits) - 1) / 2.0;
  p->component_scales.assign(p->out_dim, 0.0f);
  for (uint32_t c = 0; c < p->out_dim; ++c) {
    float* row = p->components.data() + c * dim;
    double sum2 = 0;
    for (uint64_t j = 0; j < dim; ++j) sum2 += double{row[j]} * row[j];
    const double rms = std::sqrt(sum2 / static_cast<double>(dim));
    const float step =
        static_cast<float>(std::max(GridReachInRms(bits) * rms / half_levels, 1e-30));
    p->component_scales[c] = step;
    for (uint64_t j = 0; j < dim; ++j)
      row[j] =
          ProjectionRecord::GridValue(ProjectionRecord::GridCode(row[j], step, bits), step, bits);
  }
}

// Replaces the in_dim mean by its projection on each stored row (m:pca format
// 4): applying the projection needs only that. Done for the 1- and 2-bit
// matrices of small collections, where the 256 KiB mean is a fifth of the
// record; 4-bit records keep the mean, so builds that read format 2 open
// large collections' databases.
void ProjectMean(ProjectionRecord* p) {
  p->projected_mean.assign(p->out_dim, 0.0f);
  for (uint32_t c = 0; c < p->out_dim; ++c) {
    const float* row = p->components.data() + uint64_t{c} * p->in_dim;
    double acc = 0;
    for (uint32_t j = 0; j < p->in_dim; ++j) acc += double{row[j]} * p->mean[j];
    p->projected_mean[c] = static_cast<float>(acc);
  }
  std::vector<float>().swap(p->mean);
}

}  // namespace

ProjectionRecord LearnProjection(const float* vectors, int64_t num, int64_t dim,
                                 const ProjectionOptions& options) {
  // Options were validated where they entered (IndexOptions::Validate).
  if (options.out_dim == 0) throw std::invalid_argument("LearnProjection: out_dim is 0");
  if (options.component_bits == 0)
    throw std::invalid_argument("LearnProjection: component_bits 0 (automatic) is not resolved");
  if (dim < 2 || dim > (int64_t{1} << 30))
    throw std::invalid_argument("LearnProjection: bad dimension " + std::to_string(dim));
  // Images without features are stored as zero vectors; they say nothing
  // about the distribution of real ones.
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < num; ++i) {
    const float* v = vectors + i * dim;
    if (std::any_of(v, v + dim, [](float x) { return x != 0.0f; })) rows.push_back(i);
  }
  const int64_t n = static_cast<int64_t>(rows.size());
  if (n < 2)
    throw std::invalid_argument("cannot learn a PCA projection from " + std::to_string(n) +
                                " vector(s); it needs at least 2 images with features");
  // Gather the usable rows only when some were skipped (avoids a copy of the
  // usual n x dim block, 256 MiB for 1,000 images at K = 512).
  std::vector<float> gathered;
  const float* x = vectors;
  if (n != num) {
    gathered.resize(static_cast<size_t>(n * dim));
    for (int64_t i = 0; i < n; ++i)
      std::copy(vectors + rows[i] * dim, vectors + (rows[i] + 1) * dim, gathered.begin() + i * dim);
    x = gathered.data();
  }
  // Mean, in double.
  std::vector<double> mean_d(dim, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < dim; ++j) mean_d[j] += x[i * dim + j];
  std::vector<float> mean(dim);
  for (int64_t j = 0; j < dim; ++j) mean[j] = static_cast<float>(mean_d[j] / n);

  std::vector<double> eig;
  const std::vector<double> gc = CentredGramEigen(x, n, dim, mean, &eig);
  // dsyev returns ascending eigenvalues; column c of gc (column-major, so
  // row c of the row-major buffer) is the eigenvector. Keep the largest,
  // dropping numerically null ones (centring removes one dimension).
  const double top = std::max(eig[n - 1], 0.0);
  int64_t keep = 0;
  while (keep < std::min<int64_t>(options.out_dim, n - 1) && eig[n - 1 - keep] > 1e-7 * top &&
         top > 0)
    ++keep;
  if (keep == 0)
    throw std::invalid_argument("cannot learn a PCA projection: the " + std::to_string(n) +
                                " training vectors are identical");

  // Components U = diag(lambda^-1/2) V^T Xc = diag(lambda^-1/2) (V^T X - (V^T 1) m^T).
  std::vector<float> vt(static_cast<size_t>(keep * n));  // keep x n, row-major
  std::vector<double> vsum(keep, 0.0);
  for (int64_t c = 0; c < keep; ++c) {
    const double* col = gc.data() + (n - 1 - c) * n;
    for (int64_t i = 0; i < n; ++i) {
      vt[c * n + i] = static_cast<float>(col[i]);
      vsum[c] += col[i];
    }
  }
  ProjectionRecord p;
  p.in_dim = static_cast<uint32_t>(dim);
  p.out_dim = static_cast<uint32_t>(keep);
  p.num_samples = static_cast<uint32_t>(n);
  p.whiten = options.whiten;
  p.component_bits = static_cast<uint32_t>(options.component_bits);
  p.eigen_regularization = options.eigen_regularization;
  p.power_alpha = options.power_alpha;
  p.mean = mean;
  p.eigenvalues.resize(keep);
  p.components.resize(static_cast<size_t>(keep * dim));
  {
    // (keep x n) x (n x dim): C^T (dim x keep, col-major) = X^T (dim x n) V.
    const float one = 1.0f, zero = 0.0f;
    const int ki = static_cast<int>(keep), ni = static_cast<int>(n), di = static_cast<int>(dim);
    sgemm_("N", "N", &di, &ki, &ni, &one, x, &di, vt.data(), &ni, &zero, p.components.data(), &di);
  }
  for (int64_t c = 0; c < keep; ++c) {
    const double lambda = eig[n - 1 - c];
    p.eigenvalues[c] = static_cast<float>(lambda / n);  // covariance eigenvalue
    float* u = p.components.data() + c * dim;
    double norm2 = 0;
    for (int64_t j = 0; j < dim; ++j) {
      const double v = double{u[j]} - vsum[c] * mean[j];
      u[j] = static_cast<float>(v);
      norm2 += v * v;
    }
    // |Xc^T v| = sqrt(lambda) in exact arithmetic; normalise by the measured
    // norm so rows are unit length despite rounding.
    const float inv = static_cast<float>(1.0 / std::sqrt(std::max(norm2, 1e-300)));
    for (int64_t j = 0; j < dim; ++j) u[j] *= inv;
  }
  if (ProjectionRecord::Gridded(p.component_bits)) QuantizeComponents(&p);
  if (p.component_bits == 1 || p.component_bits == 2) ProjectMean(&p);
  return p;
}

namespace {

// The dot products of Apply: sums[i * out_dim + c] = row c of `matrix` .
// row i of `in`, as LanedDot's fixed order over spans of kSpan floats, the
// spans added in order in double. Cloned for AVX2 (one register holds
// LanedDot's eight partial sums where SSE2 needs two): the same products
// and sums, each rounded alike (AVX2 alone, no fused multiply-add), so both
// give the same bits (ProjectionTest.ApplyIsTheFixedOrderSum); the clone
// runs about half the instructions.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void SpanSums(const float* matrix, const float* in, int64_t n, int64_t in_dim, int64_t out_dim,
              double* sums) {
  constexpr int64_t kSpan = 4096;
  for (int64_t j0 = 0; j0 < in_dim; j0 += kSpan) {
    const int64_t len = std::min(kSpan, in_dim - j0);
    for (int64_t i = 0; i < n; ++i) {
      const float* v = in + i * in_dim + j0;
      double* row_sums = sums + i * out_dim;
      for (int64_t c = 0; c < out_dim; ++c)
        row_sums[c] += LanedDot(matrix + c * in_dim + j0, v, len);
    }
  }
}

}  // namespace

SearchProjection SearchProjection::FromStore(const Store& store) {
  const auto record = store.GetProjection();
  return FromRecord(record ? &*record : nullptr, static_cast<int64_t>(store.model().vlad_dim()));
}

SearchProjection SearchProjection::FromRecord(const ProjectionRecord* record, int64_t in_dim) {
  SearchProjection sp;
  sp.in_dim_ = in_dim;
  sp.out_dim_ = in_dim;
  if (!record) return sp;
  const ProjectionRecord& p = *record;
  if (in_dim < 0 || !p.Maps(static_cast<uint64_t>(in_dim)) || !p.SizesConsistent())
    throw std::runtime_error("the database's PCA projection (" + std::to_string(p.in_dim) + " -> " +
                             std::to_string(p.out_dim) + ") does not fit its VLAD vectors (" +
                             std::to_string(in_dim) + " dimensions); re-index into a new --db");
  if (!(p.power_alpha > 0.0f && p.power_alpha <= 1.0f) || !(p.eigen_regularization >= 0.0f))
    throw std::runtime_error(
        "the database's PCA projection has unusable settings; "
        "re-index into a new --db");
  sp.identity_ = false;
  sp.out_dim_ = p.out_dim;
  sp.power_alpha_ = p.power_alpha;
  sp.matrix_ = p.components;
  std::vector<float> scales(p.out_dim, 1.0f);
  if (p.whiten) {
    double mean_eig = 0;
    for (float e : p.eigenvalues) mean_eig += e;
    mean_eig /= p.out_dim;
    const double floor = std::max(1e-12 * p.eigenvalues[0], 1e-30);
    for (uint32_t c = 0; c < p.out_dim; ++c) {
      const double e =
          std::max<double>(p.eigenvalues[c], 0.0) + double{p.eigen_regularization} * mean_eig;
      scales[c] = static_cast<float>(1.0 / std::sqrt(std::max(e, floor)));
      float* row = sp.matrix_.data() + uint64_t{c} * p.in_dim;
      for (uint32_t j = 0; j < p.in_dim; ++j) row[j] *= scales[c];
    }
  }
  sp.offset_.resize(p.out_dim);
  for (uint32_t c = 0; c < p.out_dim; ++c) {
    if (!p.projected_mean.empty()) {
      sp.offset_[c] = scales[c] * p.projected_mean[c];
      continue;
    }
    const float* row = sp.matrix_.data() + uint64_t{c} * p.in_dim;
    double acc = 0;
    for (uint32_t j = 0; j < p.in_dim; ++j) acc += double{row[j]} * p.mean[j];
    sp.offset_[c] = static_cast<float>(acc);
  }
  return sp;
}

void SearchProjection::Apply(const float* in, int64_t n, float* out) const {
  if (n <= 0) return;
  if (identity_) {
    // Stored vectors are already L2-normalised (or zero); copy unless in place.
    if (in != out) std::copy(in, in + n * in_dim_, out);
    return;
  }
  // Each output is the same sum in the same order whatever else is in the
  // batch: a vector's projection must not depend on which images were encoded
  // with it (a resumed or sharded run stores bit-identical vectors). OpenBLAS
  // does not promise that: on an AMD EPYC its sgemm rounded a row
  // differently with the number of rows (and their positions), so a killed
  // and resumed `index`, or a merge of shards, stored vectors one float16
  // step apart. The input is taken in spans, the matrix's span (out_dim x
  // 4,096 floats, 1.75 MiB at 112-d) read from memory once per batch and
  // the vectors' from L1; each span's dot product is LanedDot's fixed
  // order, and the spans are added in order (SpanSums).
  std::vector<double> sums(static_cast<size_t>(n * out_dim_), 0.0);
  SpanSums(matrix_.data(), in, n, in_dim_, out_dim_, sums.data());
  for (int64_t i = 0; i < n * out_dim_; ++i) out[i] = static_cast<float>(sums[i]);
  for (int64_t i = 0; i < n; ++i) {
    const float* v = in + i * in_dim_;
    float* o = out + i * out_dim_;
    if (std::all_of(v, v + in_dim_, [](float x) { return x == 0.0f; })) {
      std::fill(o, o + out_dim_, 0.0f);
      continue;
    }
    double norm2 = 0;
    for (int64_t c = 0; c < out_dim_; ++c) {
      float y = o[c] - offset_[c];
      if (power_alpha_ != 1.0f) y = std::copysign(std::pow(std::fabs(y), power_alpha_), y);
      o[c] = y;
      norm2 += double{y} * y;
    }
    const float inv = norm2 > 0 ? static_cast<float>(1.0 / std::sqrt(norm2)) : 0.0f;
    for (int64_t c = 0; c < out_dim_; ++c) o[c] *= inv;
  }
}

}  // namespace lookalike
