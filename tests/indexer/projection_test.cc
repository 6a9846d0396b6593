// Tests of the PCA(-whitening) projection: the learned components against
// OpenCV's PCA as an independent oracle, whitening, the cap on components,
// float16 storage, the m:pca round trip with checksum corruption detection,
// identity for databases without one, and end to end through the pipeline and
// the searcher on generated images.
#include "indexer/projection.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <opencv2/core.hpp>
#include <random>
#include <string>
#include <vector>

#include "indexer/file_walker.h"
#include "indexer/pipeline.h"
#include "search/search_index.h"
#include "search/searcher.h"
#include "storage/encoding.h"
#include "storage/store.h"
#include "tests/indexer/small_index_options.h"
#include "tests/test_images.h"
#include "util/rows.h"

namespace lookalike {
namespace {

using testing::TempDir;

// n unit vectors of `dim` with a decaying spectrum (a few strong directions
// plus isotropic noise), like VLAD vectors; row `zero_row` (if >= 0) is zero.
std::vector<float> MakeVectors(int64_t n, int64_t dim, uint64_t seed, int64_t zero_row = -1) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int64_t rank = 12;
  std::vector<float> basis(rank * dim);
  for (float& b : basis) b = g(rng);
  std::vector<float> offset(dim);
  for (float& o : offset) o = 0.5f * g(rng);
  std::vector<float> x(n * dim);
  for (int64_t i = 0; i < n; ++i) {
    float* v = x.data() + i * dim;
    for (int64_t j = 0; j < dim; ++j) v[j] = offset[j] + 0.05f * g(rng);
    for (int64_t r = 0; r < rank; ++r) {
      const float c = g(rng) * 2.0f / static_cast<float>(r + 1);
      for (int64_t j = 0; j < dim; ++j) v[j] += c * basis[r * dim + j];
    }
    double norm2 = 0;
    for (int64_t j = 0; j < dim; ++j) norm2 += double{v[j]} * v[j];
    for (int64_t j = 0; j < dim; ++j) v[j] = static_cast<float>(v[j] / std::sqrt(norm2));
    if (i == zero_row) std::fill(v, v + dim, 0.0f);
  }
  return x;
}

// A 4-component projection learned from n of MakeVectors' dim-d vectors.
ProjectionRecord SmallProjection(int64_t n, int64_t dim, uint64_t seed) {
  const std::vector<float> x = MakeVectors(n, dim, seed);
  ProjectionOptions o;
  o.out_dim = 4;
  o.component_bits = 4;
  return LearnProjection(x.data(), n, dim, o);
}

double Dot(const float* a, const float* b, int64_t dim) {
  double s = 0;
  for (int64_t j = 0; j < dim; ++j) s += double{a[j]} * b[j];
  return s;
}

// Both regimes: fewer samples than dimensions (the Gram trick's case, as for
// VLAD) and more; dimensions that are not multiples of 32.
class LearnTest : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(LearnTest, MatchesOpenCvPcaWithOrthonormalRows) {
  const int64_t n = GetParam().first, dim = GetParam().second;
  const std::vector<float> x = MakeVectors(n, dim, 11);
  ProjectionOptions o;
  o.out_dim = 10;
  o.component_bits = 32;  // the learned matrix itself, not its stored code
  const ProjectionRecord p = LearnProjection(x.data(), n, dim, o);
  ASSERT_EQ(p.in_dim, dim);
  ASSERT_EQ(p.out_dim, 10u);
  EXPECT_EQ(p.num_samples, n);
  ASSERT_EQ(p.components.size(), static_cast<size_t>(10 * dim));
  // Orthonormal rows.
  for (int a = 0; a < 10; ++a)
    for (int b = 0; b <= a; ++b)
      EXPECT_NEAR(Dot(&p.components[a * dim], &p.components[b * dim], dim), a == b ? 1.0 : 0.0,
                  1e-4)
          << "rows " << a << ", " << b;
  // Oracle: OpenCV's PCA (covariance eigen-decomposition, in double).
  cv::Mat data(static_cast<int>(n), static_cast<int>(dim), CV_64F);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < dim; ++j) data.at<double>(i, j) = x[i * dim + j];
  const cv::PCA oracle(data, cv::noArray(), cv::PCA::DATA_AS_ROW, 10);
  for (int64_t j = 0; j < dim; ++j) EXPECT_NEAR(p.mean[j], oracle.mean.at<double>(0, j), 1e-5);
  for (int c = 0; c < 10; ++c) {
    // cv::PCA divides the covariance by n, as we do.
    EXPECT_NEAR(p.eigenvalues[c], oracle.eigenvalues.at<double>(c), 1e-4 * p.eigenvalues[0])
        << "eigenvalue " << c;
    if (c > 0) {
      EXPECT_GE(p.eigenvalues[c - 1], p.eigenvalues[c]);
    }
    double dot = 0;
    for (int64_t j = 0; j < dim; ++j)
      dot += p.components[c * dim + j] * oracle.eigenvectors.at<double>(c, static_cast<int>(j));
    // Components are defined up to sign; well-separated ones must agree.
    if (c < 6) {
      EXPECT_NEAR(std::fabs(dot), 1.0, 1e-3) << "component " << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LearnTest,
                         ::testing::Values(std::make_pair(40, 301), std::make_pair(200, 77)));

TEST(ProjectionTest, WhitenedTrainingDataHasUnitVariance) {
  const int64_t n = 80, dim = 150;
  const std::vector<float> x = MakeVectors(n, dim, 5);
  ProjectionOptions o;
  o.out_dim = 8;
  o.component_bits = 32;
  o.eigen_regularization = 0;  // full whitening
  const ProjectionRecord p = LearnProjection(x.data(), n, dim, o);
  ASSERT_EQ(p.out_dim, 8u);
  // Projected, whitened coordinates of the training data (before the final
  // L2): zero mean, identity covariance.
  std::vector<double> y(n * 8);
  for (int64_t i = 0; i < n; ++i)
    for (int c = 0; c < 8; ++c) {
      double s = 0;
      for (int64_t j = 0; j < dim; ++j)
        s += (double{x[i * dim + j]} - p.mean[j]) * p.components[c * dim + j];
      y[i * 8 + c] = s / std::sqrt(double{p.eigenvalues[c]});
    }
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b <= a; ++b) {
      double cov = 0;
      for (int64_t i = 0; i < n; ++i) cov += y[i * 8 + a] * y[i * 8 + b];
      EXPECT_NEAR(cov / n, a == b ? 1.0 : 0.0, 1e-3) << a << ", " << b;
    }
  // SearchProjection applies exactly that, then L2.
  const SearchProjection sp = SearchProjection::FromRecord(&p, dim);
  EXPECT_FALSE(sp.identity());
  EXPECT_EQ(sp.in_dim(), dim);
  EXPECT_EQ(sp.out_dim(), 8);
  std::vector<float> out(n * 8);
  sp.Apply(x.data(), n, out.data());
  for (int64_t i = 0; i < n; ++i) {
    double norm = 0;
    for (int c = 0; c < 8; ++c) norm += y[i * 8 + c] * y[i * 8 + c];
    norm = std::sqrt(norm);
    for (int c = 0; c < 8; ++c) EXPECT_NEAR(out[i * 8 + c], y[i * 8 + c] / norm, 1e-4);
  }
  // Regularised whitening: scale (eigenvalue + r x mean eigenvalue)^-1/2.
  ProjectionRecord regularised = p;
  regularised.eigen_regularization = 1.0f;
  double mean_eig = 0;
  for (float e : p.eigenvalues) mean_eig += e / 8.0;
  SearchProjection::FromRecord(&regularised, dim).Apply(x.data(), 1, out.data());
  {
    std::vector<double> z(8);
    double zn = 0;
    for (int c = 0; c < 8; ++c) {
      z[c] = y[c] * std::sqrt(p.eigenvalues[c] / (p.eigenvalues[c] + mean_eig));
      zn += z[c] * z[c];
    }
    for (int c = 0; c < 8; ++c) EXPECT_NEAR(out[c], z[c] / std::sqrt(zn), 1e-4);
  }
  // Without whitening the same directions, unscaled.
  ProjectionRecord plain = p;
  plain.whiten = false;
  const SearchProjection unwhitened = SearchProjection::FromRecord(&plain, dim);
  unwhitened.Apply(x.data(), 1, out.data());
  double norm = 0;
  for (int c = 0; c < 8; ++c) norm += y[c] * y[c] * p.eigenvalues[c];
  for (int c = 0; c < 8; ++c)
    EXPECT_NEAR(out[c], y[c] * std::sqrt(double{p.eigenvalues[c]}) / std::sqrt(norm), 1e-4);
}

TEST(ProjectionTest, ComponentsCappedAndZeroRowsIgnored) {
  const int64_t n = 9, dim = 64;
  const std::vector<float> x = MakeVectors(n, dim, 3, /*zero_row=*/4);
  ProjectionOptions o;
  o.out_dim = 500;
  o.component_bits = 4;
  const ProjectionRecord p = LearnProjection(x.data(), n, dim, o);
  EXPECT_EQ(p.num_samples, 8u) << "the zero row is not a sample";
  EXPECT_LE(p.out_dim, 7u) << "at most samples - 1 components carry variance";
  EXPECT_GE(p.out_dim, 6u);
  // Zero rows stay zero; others are unit length.
  const SearchProjection sp = SearchProjection::FromRecord(&p, dim);
  std::vector<float> out(n * sp.out_dim());
  sp.Apply(x.data(), n, out.data());
  for (int64_t i = 0; i < n; ++i) {
    const double norm2 = Dot(&out[i * sp.out_dim()], &out[i * sp.out_dim()], sp.out_dim());
    EXPECT_NEAR(norm2, i == 4 ? 0.0 : 1.0, 1e-5) << "row " << i;
  }
  EXPECT_THROW(LearnProjection(x.data(), 1, dim, o), std::invalid_argument);
  ProjectionOptions bad;
  bad.out_dim = -1;
  EXPECT_THROW(bad.Validate(), std::invalid_argument);
  bad = ProjectionOptions();
  bad.power_alpha = 0;
  EXPECT_THROW(bad.Validate(), std::invalid_argument);
  bad = ProjectionOptions();
  bad.eigen_regularization = -1;
  EXPECT_THROW(bad.Validate(), std::invalid_argument);
  bad = ProjectionOptions();
  bad.component_bits = 3;
  EXPECT_THROW(bad.Validate(), std::invalid_argument);
  bad = ProjectionOptions();
  bad.matrix_bytes_per_image = 0;
  EXPECT_THROW(bad.Validate(), std::invalid_argument);
  // Automatic bits are resolved by the caller, who knows the collection.
  o.component_bits = 0;
  EXPECT_THROW(LearnProjection(x.data(), n, dim, o), std::invalid_argument);
}

// 1- and 2-bit projections keep only the mean's projection on each row
// (m:pca format 4), and map vectors as the full mean does: the same 4-bit
// record with its mean replaced by the projected one gives the same outputs.
TEST(ProjectionTest, ProjectedMeanMapsLikeTheMean) {
  const int64_t n = 60, dim = 512;
  const std::vector<float> x = MakeVectors(n, dim, 33);
  ProjectionOptions o;
  o.out_dim = 16;
  o.power_alpha = 0.5f;
  for (int bits : {1, 2}) {
    o.component_bits = bits;
    const ProjectionRecord p = LearnProjection(x.data(), n, dim, o);
    EXPECT_TRUE(p.mean.empty()) << bits;
    EXPECT_EQ(p.projected_mean.size(), p.out_dim) << bits;
    EXPECT_EQ(p.format(), 4u) << bits;
  }
  o.component_bits = 4;
  const ProjectionRecord with_mean = LearnProjection(x.data(), n, dim, o);
  ASSERT_EQ(with_mean.mean.size(), static_cast<size_t>(dim));
  EXPECT_EQ(with_mean.format(), 2u) << "4-bit records keep the mean: older builds read them";
  ProjectionRecord projected = with_mean;
  projected.mean.clear();
  for (uint32_t c = 0; c < projected.out_dim; ++c)
    projected.projected_mean.push_back(static_cast<float>(
        Dot(&with_mean.components[uint64_t{c} * dim], with_mean.mean.data(), dim)));
  ASSERT_TRUE(projected.SizesConsistent());
  const SearchProjection a = SearchProjection::FromRecord(&with_mean, dim);
  const SearchProjection b = SearchProjection::FromRecord(&projected, dim);
  std::vector<float> ya(n * a.out_dim()), yb(n * b.out_dim());
  a.Apply(x.data(), n, ya.data());
  b.Apply(x.data(), n, yb.data());
  for (size_t i = 0; i < ya.size(); ++i) ASSERT_NEAR(ya[i], yb[i], 1e-5) << i;
  // Both, or neither, is not a record.
  projected.mean = with_mean.mean;
  EXPECT_FALSE(projected.SizesConsistent());
}

// A vector's projection is the same bits whatever else is in the batch and
// wherever it sits in it: a killed and resumed `index`, or shards merged,
// encode other batches than one uninterrupted run, and must store the same
// vectors. (OpenBLAS's sgemm, which Apply used, rounds a row differently
// with the number of rows on some CPUs; this test failed there with it.)
TEST(ProjectionTest, ARowsProjectionDoesNotDependOnItsBatch) {
  const int64_t n = 40;
  for (int64_t dim : {2048, 65536}) {
    const std::vector<float> x = MakeVectors(n, dim, 7);
    ProjectionOptions o;
    o.out_dim = 16;
    o.component_bits = 32;
    const ProjectionRecord p = LearnProjection(x.data(), 24, dim, o);
    const SearchProjection sp = SearchProjection::FromRecord(&p, dim);
    const int64_t out_dim = sp.out_dim();
    const std::vector<float> probe = MakeVectors(1, dim, 99);
    std::vector<float> alone(out_dim);
    sp.Apply(probe.data(), 1, alone.data());
    for (int64_t batch : {2, 7, 16, 40})
      for (int64_t at : {int64_t{0}, batch / 2, batch - 1}) {
        std::vector<float> in(x.begin(), x.begin() + batch * dim);
        std::copy(probe.begin(), probe.end(), in.begin() + at * dim);
        std::vector<float> out(batch * out_dim);
        sp.Apply(in.data(), batch, out.data());
        EXPECT_EQ(std::memcmp(out.data() + at * out_dim, alone.data(), out_dim * sizeof(float)), 0)
            << "dim " << dim << ", row " << at << " of " << batch;
      }
  }
}

// Apply's sums are LanedDot's over spans of 4,096 floats, added in order in
// double, then offset and normalised: computed here the plain way (this
// file is built for the baseline, Apply picks AVX2 where the CPU has it),
// they must agree bit for bit, ragged span included.
TEST(ProjectionTest, ApplyIsTheFixedOrderSum) {
  const int64_t dim = 2 * 4096 + 1000 + 5, n = 3;
  ProjectionRecord p;
  p.in_dim = static_cast<uint32_t>(dim);
  p.out_dim = 7;
  p.whiten = false;
  p.component_bits = 32;
  p.power_alpha = 1.0f;
  p.components = MakeVectors(p.out_dim, dim, 3);
  p.eigenvalues.assign(p.out_dim, 1.0f);
  p.mean = MakeVectors(1, dim, 4);
  const SearchProjection sp = SearchProjection::FromRecord(&p, dim);
  const std::vector<float> x = MakeVectors(n, dim, 5);
  std::vector<float> got(n * p.out_dim);
  sp.Apply(x.data(), n, got.data());
  for (int64_t i = 0; i < n; ++i) {
    std::vector<float> want(p.out_dim);
    double norm2 = 0;
    for (uint32_t c = 0; c < p.out_dim; ++c) {
      double sum = 0;
      for (int64_t j0 = 0; j0 < dim; j0 += 4096)
        sum += LanedDot(p.components.data() + c * dim + j0, x.data() + i * dim + j0,
                        std::min<int64_t>(4096, dim - j0));
      double offset = 0;
      for (int64_t j = 0; j < dim; ++j) offset += double{p.components[c * dim + j]} * p.mean[j];
      want[c] = static_cast<float>(sum) - static_cast<float>(offset);
      norm2 += double{want[c]} * want[c];
    }
    const float inv = static_cast<float>(1.0 / std::sqrt(norm2));
    for (uint32_t c = 0; c < p.out_dim; ++c)
      EXPECT_EQ(got[i * p.out_dim + c], want[c] * inv) << "row " << i << ", component " << c;
  }
}

// The automatic bits: the most of 4, 2, 1 whose matrix fits the budget per
// image. At the default sizes (112 x 65,536) that is 1 bit below 224 images,
// 2 below 448, then 4; an explicit choice is kept whatever the size.
TEST(ProjectionTest, AutomaticBitsFollowTheCollectionsSize) {
  ProjectionOptions o;
  ASSERT_EQ(o.component_bits, 0) << "automatic is the default";
  const int64_t vlad_dim = 512 * 128;
  EXPECT_EQ(ComponentBitsFor(o, 113, vlad_dim), 1);
  EXPECT_EQ(ComponentBitsFor(o, 223, vlad_dim), 1);
  EXPECT_EQ(ComponentBitsFor(o, 224, vlad_dim), 2);
  EXPECT_EQ(ComponentBitsFor(o, 447, vlad_dim), 2);
  EXPECT_EQ(ComponentBitsFor(o, 448, vlad_dim), 4);
  EXPECT_EQ(ComponentBitsFor(o, 100000000, vlad_dim), 4) << "never more than 4 automatically";
  EXPECT_EQ(ComponentBitsFor(o, 0, vlad_dim), 1);
  o.matrix_bytes_per_image = 16384;  // twice the budget: half the images
  EXPECT_EQ(ComponentBitsFor(o, 224, vlad_dim), 4);
  EXPECT_EQ(ComponentBitsFor(o, 112, vlad_dim), 2);
  o.out_dim = 56;  // half the matrix
  EXPECT_EQ(ComponentBitsFor(o, 112, vlad_dim), 4);
  for (int bits : {1, 2, 4, 16, 32}) {
    o.component_bits = bits;
    EXPECT_EQ(ComponentBitsFor(o, 1, vlad_dim), bits);
    EXPECT_EQ(ComponentBitsFor(o, 100000000, vlad_dim), bits);
  }
}

TEST(ProjectionTest, IdentityCopiesExactly) {
  const SearchProjection sp = SearchProjection::FromRecord(nullptr, 96);
  EXPECT_TRUE(sp.identity());
  EXPECT_EQ(sp.out_dim(), 96);
  const std::vector<float> x = MakeVectors(3, 96, 1);
  std::vector<float> out(3 * 96, -7.0f);
  sp.Apply(x.data(), 3, out.data());
  EXPECT_EQ(out, x);
}

TEST(ProjectionTest, HalfPrecisionConversion) {
  using encoding::FloatToHalf;
  using encoding::HalfToFloat;
  for (float v : {0.0f, 1.0f, -2.0f, 0.5f, 65504.0f, -65504.0f, 6.103515625e-05f,
                  5.9604644775390625e-08f, 0.099975586f})
    EXPECT_EQ(HalfToFloat(FloatToHalf(v)), v) << v;
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(1e6f))));
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(HalfToFloat(FloatToHalf(1e-9f)), 0.0f);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  // Round to nearest even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.0f + 0x1p-11f)), 1.0f);
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.0f + 0x1p-11f + 0x1p-20f)), 1.0f + 0x1p-10f);
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  for (int i = 0; i < 10000; ++i) {
    const float v = u(rng);
    const float r = HalfToFloat(FloatToHalf(v));
    EXPECT_LE(std::fabs(r - v), std::fabs(v) * 0x1p-11f + 0x1p-25f) << v;
  }
  // Subnormal halves round trip through the encoder too.
  for (uint16_t h = 1; h < 0x400; h += 37) EXPECT_EQ(FloatToHalf(HalfToFloat(h)), h);
}

// The matrix on a grid (4 bits, the default; 2 and 1 for small collections)
// is the float one on a per-row grid of 2^bits levels over +-3, +-2 or
// +-0.8 RMS: each value is step x (c - (2^bits - 1) / 2), and vectors
// projected through it keep their neighbours, fewer with fewer bits. If the
// grid were coarse or the values off it, the checks on codes or on
// neighbours would fail.
TEST(ProjectionTest, GriddedComponentsStayOnTheirGridAndKeepNeighbours) {
  const int64_t n = 300, dim = 2048;
  const std::vector<float> x = MakeVectors(n, dim, 21);
  ProjectionOptions o;
  o.out_dim = 32;
  o.component_bits = 32;
  const ProjectionRecord f = LearnProjection(x.data(), n, dim, o);
  EXPECT_TRUE(f.component_scales.empty());
  const SearchProjection sf = SearchProjection::FromRecord(&f, dim);
  std::vector<float> pf(n * 32);
  sf.Apply(x.data(), n, pf.data());
  struct Case {
    int bits;
    double reach_rms, min_cosine;
    int min_same_neighbours;  // of n
  };
  for (const Case& k : {Case{4, 3.0, 0.97, n * 9 / 10}, Case{2, 2.0, 0.95, n * 85 / 100},
                        Case{1, 0.8, 0.88, n * 8 / 10}}) {
    o.component_bits = k.bits;
    const ProjectionRecord q = LearnProjection(x.data(), n, dim, o);
    ASSERT_EQ(q.component_scales.size(), q.out_dim);
    const double half_levels = ((1 << k.bits) - 1) / 2.0;
    for (uint32_t c = 0; c < q.out_dim; ++c) {
      const float step = q.component_scales[c];
      // +-reach RMS of a unit row of `dim` values, over 2^bits - 1 steps.
      EXPECT_NEAR(step, k.reach_rms / std::sqrt(double{dim}) / half_levels, 1e-6)
          << k.bits << " bits, " << c;
      for (int64_t j = 0; j < dim; ++j) {
        const float code = q.components[c * dim + j] / step + static_cast<float>(half_levels);
        ASSERT_NEAR(code, std::round(code), 1e-3) << k.bits << " bits, " << c << "," << j;
        ASSERT_GE(code, -1e-3f);
        ASSERT_LE(code, 2 * half_levels + 1e-3);
      }
    }
    const SearchProjection sq = SearchProjection::FromRecord(&q, dim);
    std::vector<float> pq(n * 32);
    sq.Apply(x.data(), n, pq.data());
    int same_neighbour = 0;
    double worst = 1;
    for (int64_t i = 0; i < n; ++i) {
      worst = std::min(worst, Dot(&pq[i * 32], &pf[i * 32], 32));
      int64_t best_q = -1, best_f = -1;
      double top_q = -2, top_f = -2;
      for (int64_t j = 0; j < n; ++j) {
        if (j == i) continue;
        const double dq = Dot(&pq[i * 32], &pq[j * 32], 32), df = Dot(&pf[i * 32], &pf[j * 32], 32);
        if (dq > top_q) top_q = dq, best_q = j;
        if (df > top_f) top_f = df, best_f = j;
      }
      same_neighbour += best_q == best_f;
    }
    std::printf("%d bits: worst cosine to the float projection %.3f, same neighbour %d of %lld\n",
                k.bits, worst, same_neighbour, static_cast<long long>(n));
    EXPECT_GT(worst, k.min_cosine) << k.bits << " bits";
    EXPECT_GE(same_neighbour, k.min_same_neighbours) << k.bits << " bits";
  }
}

// A model with K = 4, d = 16 (64-d VLAD) for store tests.
ModelRecord SmallModel() {
  ModelRecord m;
  m.dim = 16;
  m.num_clusters = 4;
  m.max_side = 320;
  m.centroids.assign(m.vlad_dim(), 0.25f);
  m.codebook_hash = encoding::Fnv1a64(m.centroids.data(), m.centroids.size() * sizeof(float));
  return m;
}

TEST(ProjectionStoreTest, RoundTripAndCorruptionDetected) {
  for (const int bits : {1, 2, 4, 16, 32}) {
    TempDir tmp;
    const std::string db = tmp / "db";
    const std::vector<float> x = MakeVectors(30, 64, 2);
    ProjectionOptions o;
    o.out_dim = 12;
    o.component_bits = bits;
    o.eigen_regularization = 0.25f;
    o.power_alpha = 0.5f;
    const ProjectionRecord p = LearnProjection(x.data(), 30, 64, o);
    Store::Create(db, SmallModel(), &p);
    {
      auto store = Store::Open(db, Store::Mode::kReadOnly);
      const auto loaded = store->GetProjection();
      ASSERT_TRUE(loaded.has_value());
      EXPECT_EQ(loaded->in_dim, 64u);
      EXPECT_EQ(loaded->out_dim, 12u);
      EXPECT_EQ(loaded->num_samples, 30u);
      EXPECT_TRUE(loaded->whiten);
      EXPECT_EQ(loaded->component_bits, static_cast<uint32_t>(bits));
      EXPECT_EQ(loaded->component_scales, p.component_scales);
      EXPECT_EQ(loaded->eigen_regularization, 0.25f);
      EXPECT_EQ(loaded->power_alpha, 0.5f);
      EXPECT_EQ(loaded->mean, p.mean);
      EXPECT_EQ(loaded->eigenvalues, p.eigenvalues);
      ASSERT_EQ(loaded->components.size(), p.components.size());
      for (size_t i = 0; i < p.components.size(); ++i) {
        if (bits == 16)
          EXPECT_NEAR(loaded->components[i], p.components[i],
                      std::fabs(p.components[i]) * 0x1p-11f + 0x1p-24f);
        else
          EXPECT_EQ(loaded->components[i], p.components[i]);
      }
      EXPECT_TRUE(store->Verify().empty());
      const SearchProjection sp = SearchProjection::FromStore(*store);
      EXPECT_EQ(sp.out_dim(), 12);
    }
    // One flipped byte inside the matrix.
    {
      rocksdb::DB* raw = nullptr;
      ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), db, &raw).ok());
      std::unique_ptr<rocksdb::DB> guard(raw);
      std::string value;
      ASSERT_TRUE(raw->Get(rocksdb::ReadOptions(), "m:pca", &value).ok());
      value[value.size() - 8 - 100] ^= 0x04;
      ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), "m:pca", value).ok());
    }
    auto store = Store::Open(db, Store::Mode::kReadOnly);  // the model itself is fine
    try {
      store->GetProjection();
      FAIL() << "a flipped byte in m:pca went unnoticed";
    } catch (const StoreError& e) {
      EXPECT_EQ(e.kind(), StoreError::Kind::kCorrupt) << e.what();
      EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
    }
    EXPECT_THROW(SearchProjection::FromStore(*store), StoreError);
    const auto problems = store->Verify();
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems[0].find("projection"), std::string::npos) << problems[0];
  }
}

TEST(ProjectionStoreTest, DatabaseWithoutProjectionIsIdentity) {
  TempDir tmp;
  const std::string db = tmp / "db";
  Store::Create(db, SmallModel());
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  EXPECT_FALSE(store->GetProjection().has_value());
  EXPECT_TRUE(store->Verify().empty());
  const SearchProjection sp = SearchProjection::FromStore(*store);
  EXPECT_TRUE(sp.identity());
  EXPECT_EQ(sp.in_dim(), 64);
  EXPECT_EQ(sp.out_dim(), 64);
}

TEST(ProjectionStoreTest, ProjectionForAnotherModelIsRefused) {
  TempDir tmp;
  const std::string db = tmp / "db";
  const ProjectionRecord p = SmallProjection(10, 32, 2);  // 32-d, model is 64-d
  Store::Create(db, SmallModel(), &p);
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  EXPECT_THROW(store->GetProjection(), StoreError);
  EXPECT_FALSE(store->Verify().empty());
}

// End to end: a new database learns the projection from its training
// images; the searcher holds projected vectors and queries go through it.
TEST(ProjectionPipelineTest, ProjectedSearchFindsOriginals) {
  TempDir tmp;
  const std::string dir = tmp / "photos", db = tmp / "db";
  const int kImages = 14;
  const std::vector<std::string> paths = testing::WriteSyntheticSet(dir, kImages, 21, 320, 240);
  IndexOptions o = testing::SmallIndexOptions(dir, db);
  o.model.projection.out_dim = 8;
  o.model.projection.min_images = 0;
  const IndexSummary s = BuildIndex(o, nullptr);
  ASSERT_EQ(s.indexed, kImages);
  EXPECT_GT(s.stages.pca, 0.0);
  {
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    const auto p = store->GetProjection();
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->out_dim, 8u);
    EXPECT_EQ(p->num_samples, static_cast<uint32_t>(kImages));
    EXPECT_TRUE(store->Verify().empty());
  }
  SearchOptions so;
  so.k = 3;
  so.rerank.depth = 0;  // VLAD ranking alone
  so.backend = Backend::kCpu;
  auto searcher = Searcher::Open(db, so);
  EXPECT_EQ(searcher->num_indexed(), kImages);
  const auto results = searcher->SearchFiles(paths);
  for (size_t i = 0; i < paths.size(); ++i) {
    ASSERT_FALSE(results[i].hits.empty()) << paths[i];
    EXPECT_EQ(results[i].hits[0].path, AbsolutePath(paths[i]));
    EXPECT_NEAR(results[i].hits[0].score, 1.0f, 1e-3);
  }
  // A transformed copy, not in the training sample, finds its original.
  const std::string copy = tmp / "copy.jpg";
  testing::WriteImage(copy, testing::ApplyTransform(testing::MakeSyntheticImage(21 + 6, 320, 240),
                                                    testing::Transform::kBrightness));
  const auto r = searcher->SearchFiles({copy});
  ASSERT_FALSE(r[0].hits.empty());
  EXPECT_EQ(r[0].hits[0].path, AbsolutePath(paths[6]));
  EXPECT_LT(r[0].hits[0].score, 0.9999f) << "a copy is not bit-identical";
  // Re-indexing the same folder keeps the projection (the model is fixed).
  o.model.projection.out_dim = 4;
  BuildIndex(o, nullptr);
  EXPECT_EQ(Store::Open(db, Store::Mode::kReadOnly)->GetProjection()->out_dim, 8u);
}

// Training images whose descriptors were not kept are extracted again for
// the PCA, and give the same projection; below --pca-min-images there is none.
TEST(ProjectionPipelineTest, ReExtractedSampleAndMinImages) {
  TempDir tmp;
  const std::string dir = tmp / "photos";
  testing::WriteSyntheticSet(dir, 10, 40, 320, 240);
  auto build = [&](const std::string& db, size_t cache_bytes, int min_images) {
    IndexOptions o = testing::SmallIndexOptions(dir, db);
    o.model.training_cache_bytes = cache_bytes;
    o.model.projection.out_dim = 6;
    o.model.projection.min_images = min_images;
    o.model.projection.component_bits = 32;  // compares the learned components
    EXPECT_EQ(BuildIndex(o, nullptr).indexed, 10);
    return Store::Open(db, Store::Mode::kReadOnly)->GetProjection();
  };
  const auto cached = build(tmp / "cached", size_t{1} << 30, 10);
  const auto again = build(tmp / "again", 0, 10);
  ASSERT_TRUE(cached.has_value());
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(cached->num_samples, 10u);
  EXPECT_EQ(again->num_samples, 10u);
  ASSERT_EQ(cached->out_dim, again->out_dim);
  for (uint32_t c = 0; c < cached->out_dim; ++c) {
    EXPECT_NEAR(again->eigenvalues[c], cached->eigenvalues[c], 1e-4 * cached->eigenvalues[0]);
    if (c < 3) {
      const double dot = Dot(&cached->components[uint64_t{c} * cached->in_dim],
                             &again->components[uint64_t{c} * again->in_dim], cached->in_dim);
      EXPECT_NEAR(std::fabs(dot), 1.0, 1e-3) << "component " << c;
    }
  }
  EXPECT_FALSE(build(tmp / "few", size_t{1} << 30, 11).has_value())
      << "10 images < --pca-min-images 11: no projection";
  EXPECT_FALSE(build(tmp / "default", size_t{1} << 30, ProjectionOptions().min_images).has_value());
}

// The search vectors alone (no verification) rank each of `paths` first for
// its own file, and the database at `db` indexes exactly that many images.
void ExpectEachFindsItselfFirst(const std::string& db, const std::vector<std::string>& paths) {
  SearchOptions so;
  so.k = 3;
  so.rerank.depth = 0;
  so.backend = Backend::kCpu;
  auto searcher = Searcher::Open(db, so);
  EXPECT_EQ(searcher->num_indexed(), static_cast<int64_t>(paths.size()));
  const auto results = searcher->SearchFiles(paths);
  for (size_t i = 0; i < paths.size(); ++i) {
    ASSERT_FALSE(results[i].hits.empty()) << paths[i];
    EXPECT_EQ(results[i].hits[0].path, AbsolutePath(paths[i]));
  }
}

// A collection created below --pca-min-images has no projection; the run
// that brings it there learns one from its stored features and stores every
// image's search vector with it, and search then finds each image again.
TEST(ProjectionPipelineTest, AGrownCollectionLearnsItsProjection) {
  TempDir tmp;
  const std::string dir = tmp / "photos", db = tmp / "db";
  std::vector<std::string> paths = testing::WriteSyntheticSet(dir + "/a", 6, 60, 320, 240);
  IndexOptions o = testing::SmallIndexOptions(dir, db);
  o.model.projection.out_dim = 8;
  o.model.projection.min_images = 10;
  EXPECT_EQ(BuildIndex(o, nullptr).indexed, 6);
  {
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    EXPECT_FALSE(store->GetProjection().has_value());
    EXPECT_EQ(store->vector_dim(), 0u);
  }
  // 3 more: 9 images, still fewer than 10.
  for (const auto& p : testing::WriteSyntheticSet(dir + "/b", 3, 70, 320, 240)) paths.push_back(p);
  const IndexSummary below = BuildIndex(o, nullptr);
  EXPECT_EQ(below.indexed, 3);
  EXPECT_EQ(below.stages.pca, 0.0);
  EXPECT_FALSE(Store::Open(db, Store::Mode::kReadOnly)->GetProjection().has_value());
  // 5 more: 14 images, and the projection comes with them.
  for (const auto& p : testing::WriteSyntheticSet(dir + "/c", 5, 80, 320, 240)) paths.push_back(p);
  const IndexSummary grown = BuildIndex(o, nullptr);
  EXPECT_EQ(grown.indexed, 5);
  EXPECT_GT(grown.stages.pca, 0.0);
  ProjectionRecord learned;
  {
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    const auto p = store->GetProjection();
    ASSERT_TRUE(p.has_value());
    learned = *p;
    EXPECT_EQ(p->num_samples, 14u);
    EXPECT_EQ(p->out_dim, 8u);
    EXPECT_EQ(store->vector_dim(), 8u);
    EXPECT_TRUE(store->Verify().empty());
  }
  ASSERT_EQ(paths.size(), 14u);
  ExpectEachFindsItselfFirst(db, paths);
  // Later runs keep it, and it is learned once.
  for (const auto& p : testing::WriteSyntheticSet(dir + "/d", 2, 90, 320, 240)) paths.push_back(p);
  const IndexSummary after = BuildIndex(o, nullptr);
  EXPECT_EQ(after.indexed, 2);
  EXPECT_EQ(after.stages.pca, 0.0);
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  EXPECT_EQ(store->GetProjection()->mean, learned.mean);
  EXPECT_TRUE(store->Verify().empty());
}

// With automatic bits, a small collection stores a 1-bit matrix; the runs
// that take it to the sizes affording 2 and then 4 bits learn the projection
// again at those bits, replace every search vector and drop the persisted
// search index built from the old ones; search then finds every image again.
// A run that names its bits keeps what is stored.
TEST(ProjectionPipelineTest, AutomaticBitsAreLearnedAgainAsTheCollectionGrows) {
  TempDir tmp;
  const std::string dir = tmp / "photos", db = tmp / "db";
  std::vector<std::string> paths = testing::WriteSyntheticSet(dir + "/a", 3, 120, 320, 240);
  IndexOptions o = testing::SmallIndexOptions(dir, db);
  o.model.projection.out_dim = 8;
  o.model.projection.min_images = 2;
  // An 8 x 2,048 matrix: 8 KiB at 4 bits, so 4 bits from 8 images, 2 from 4.
  o.model.projection.matrix_bytes_per_image = 1024;
  ASSERT_EQ(o.model.projection.component_bits, 0);
  // One index run as `lookalike index` does it: images, then the persisted index.
  auto run = [&] {
    const IndexSummary s = BuildIndex(o, nullptr);
    auto store = Store::Open(db, Store::Mode::kReadWrite);
    UpdateSearchIndex(store.get(), SearchVectors(*store), VectorIndexOptions());
    return s;
  };
  auto expect_state = [&](uint32_t bits, size_t sample) {
    {
      auto store = Store::Open(db, Store::Mode::kReadOnly);
      const auto p = store->GetProjection();
      ASSERT_TRUE(p.has_value());
      EXPECT_EQ(p->component_bits, bits);
      EXPECT_EQ(p->power_alpha, 0.5f);
      EXPECT_EQ(p->num_samples, sample);
      // Capped at the sample's rank: one fewer than its images.
      EXPECT_EQ(p->out_dim, std::min<uint32_t>(8, static_cast<uint32_t>(sample) - 1));
      EXPECT_EQ(store->vector_dim(), p->out_dim);
      EXPECT_TRUE(store->GetSearchIndex().has_value());
      EXPECT_TRUE(store->Verify().empty());
    }
    ExpectEachFindsItselfFirst(db, paths);
  };
  o.model.projection.power_alpha = 0.5f;
  const IndexSummary created = run();
  EXPECT_EQ(created.projection_learned, 0) << "learned at creation, not grown";
  expect_state(1, 3);
  // Later runs' own PCA settings do not change the model: it is learned
  // again with the stored ones (its components were capped by its 3-image
  // sample, so the run's --pca-dim sets them, within the larger sample's cap).
  o.model.projection.power_alpha = 1.0f;

  for (const auto& p : testing::WriteSyntheticSet(dir + "/b", 2, 130, 320, 240)) paths.push_back(p);
  const uint64_t generation = Store::Open(db, Store::Mode::kReadOnly)->totals()->generation;
  const IndexSummary two = run();
  EXPECT_EQ(two.projection_learned, 4);
  EXPECT_EQ(two.projection_bits, 2);
  EXPECT_EQ(two.projection_replaced_bits, 1);
  EXPECT_GT(Store::Open(db, Store::Mode::kReadOnly)->totals()->generation, generation + 2)
      << "two images added, then every search vector replaced";
  expect_state(2, 5);

  // A run that names its bits keeps the stored 2 bits at 8 images.
  for (const auto& p : testing::WriteSyntheticSet(dir + "/c", 3, 140, 320, 240)) paths.push_back(p);
  o.model.projection.component_bits = 2;
  EXPECT_EQ(run().projection_learned, 0);
  expect_state(2, 5);
  // The next automatic one learns it at 4 bits, and the one after keeps them.
  o.model.projection.component_bits = 0;
  const IndexSummary four = run();
  EXPECT_EQ(four.indexed, 0);
  EXPECT_EQ(four.projection_bits, 4);
  EXPECT_EQ(four.projection_replaced_bits, 2);
  expect_state(4, 8);
  EXPECT_EQ(run().projection_learned, 0);
}

// --pca-dim 0 keeps a growing collection without one.
TEST(ProjectionPipelineTest, NoProjectionAskedNoneLearned) {
  TempDir tmp;
  const std::string dir = tmp / "photos", db = tmp / "db";
  testing::WriteSyntheticSet(dir + "/a", 4, 100, 320, 240);
  IndexOptions o = testing::SmallIndexOptions(dir, db);
  o.model.projection.min_images = 6;
  BuildIndex(o, nullptr);
  testing::WriteSyntheticSet(dir + "/b", 4, 110, 320, 240);
  o.model.projection.out_dim = 0;
  EXPECT_EQ(BuildIndex(o, nullptr).indexed, 4);
  EXPECT_FALSE(Store::Open(db, Store::Mode::kReadOnly)->GetProjection().has_value());
}

TEST(ProjectionStoreTest, AddProjectionNeedsEveryImageOnceAndNoProjectionYet) {
  TempDir tmp;
  const std::string db = tmp / "db";
  const ProjectionRecord p = SmallProjection(30, 64, 3);
  auto store = Store::Create(db, SmallModel());
  ASSERT_EQ(store->vector_dim(), 0u);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    ImageRecord r;
    r.path = "/p/" + std::to_string(i) + ".jpg";
    r.num_descriptors = 1;
    store->PutImage(&r, nullptr);
    ids.push_back(r.id);
  }
  const std::vector<float> v(3 * 4, 0.5f);
  EXPECT_THROW(store->AddProjection(p, {ids[0], ids[1]}, v.data()), std::invalid_argument);
  EXPECT_THROW(store->AddProjection(p, {ids[0], ids[1], ids[1]}, v.data()), std::invalid_argument);
  EXPECT_THROW(store->AddProjection(p, {ids[0], ids[1], ids[2] + 10}, v.data()),
               std::invalid_argument);
  EXPECT_EQ(store->vector_dim(), 0u) << "a refused projection writes nothing";
  EXPECT_FALSE(store->GetProjection().has_value());
  const uint64_t generation = store->totals()->generation;
  store->AddProjection(p, ids, v.data());
  EXPECT_EQ(store->vector_dim(), 4u);
  EXPECT_GT(store->totals()->generation, generation);
  EXPECT_THROW(store->AddProjection(p, ids, v.data()), std::invalid_argument);
  store.reset();
  auto reopened = Store::Open(db, Store::Mode::kReadOnly);
  EXPECT_EQ(reopened->vector_dim(), 4u);
  ASSERT_TRUE(reopened->GetProjection().has_value());
  EXPECT_TRUE(reopened->Verify().empty());
  const auto back = reopened->GetVector(ids[1]);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, std::vector<float>(4, 0.5f));
}

// ReplaceProjection needs a projection to replace, swaps it and every search
// vector, and deletes the persisted search index built from the old vectors
// (and the model's search quantizer learned from them), all in one write.
TEST(ProjectionStoreTest, ReplaceProjectionSwapsVectorsAndDropsTheSearchIndex) {
  TempDir tmp;
  const std::string db = tmp / "db";
  auto store = Store::Create(db, SmallModel(), nullptr, kSchemaVersion, "", "", "lists");
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    ImageRecord r;
    r.path = "/p/" + std::to_string(i) + ".jpg";
    r.num_descriptors = 1;
    store->PutImage(&r, nullptr);
    ids.push_back(r.id);
  }
  const ProjectionRecord first = SmallProjection(30, 64, 3);
  const std::vector<float> v(3 * 4, 0.5f);
  EXPECT_THROW(store->ReplaceProjection(first, ids, v.data()), std::invalid_argument)
      << "nothing to replace";
  store->AddProjection(first, ids, v.data());
  store->PutSearchIndex(std::string(5 << 20, 'x'));  // two chunks
  ASSERT_TRUE(store->GetSearchIndex().has_value());

  ProjectionOptions o;
  o.out_dim = 3;
  o.component_bits = 2;
  const std::vector<float> x = MakeVectors(30, 64, 4);
  const ProjectionRecord second = LearnProjection(x.data(), 30, 64, o);
  const std::vector<float> w = {-1, 0, 0, -1, 0, 0, -1, 0, 0};  // unit, exact in float16
  EXPECT_THROW(store->ReplaceProjection(second, {ids[0], ids[1]}, w.data()), std::invalid_argument);
  EXPECT_EQ(store->vector_dim(), 4u) << "a refused replacement writes nothing";
  EXPECT_TRUE(store->GetSearchIndex().has_value());
  EXPECT_EQ(store->GetModelSearchQuantizer(), "lists");
  const uint64_t generation = store->totals()->generation;
  store->ReplaceProjection(second, ids, w.data());
  EXPECT_EQ(store->vector_dim(), 3u);
  EXPECT_GT(store->totals()->generation, generation);
  EXPECT_FALSE(store->GetSearchIndex().has_value());
  EXPECT_FALSE(store->GetModelSearchQuantizer().has_value());
  store.reset();
  auto reopened = Store::Open(db, Store::Mode::kReadOnly);
  EXPECT_EQ(reopened->vector_dim(), 3u);
  EXPECT_EQ(reopened->GetProjection()->component_bits, 2u);
  EXPECT_FALSE(reopened->GetSearchIndex().has_value());
  EXPECT_EQ(reopened->Verify(), std::vector<std::string>());
  for (uint64_t id : ids) EXPECT_EQ(*reopened->GetVector(id), std::vector<float>({-1, 0, 0}));
  // No chunk of the old index is left behind.
  rocksdb::DB* raw = nullptr;
  reopened.reset();
  rocksdb::Options ro;
  ASSERT_TRUE(rocksdb::DB::OpenForReadOnly(ro, db, &raw).ok());
  std::unique_ptr<rocksdb::Iterator> it(raw->NewIterator(rocksdb::ReadOptions()));
  it->Seek("x:");
  EXPECT_FALSE(it->Valid() && it->key().starts_with("x:"));
  it.reset();
  delete raw;
}

}  // namespace
}  // namespace lookalike
