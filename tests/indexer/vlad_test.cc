// Tests of VLAD encoding against a naive reference written here with
// double-precision loops: the CPU encoder end to end and each stage
// (SortBySegment, ReduceSegments, NormalizeVlad), over awkward sizes and the
// edge cases of STYLE.md (empty clusters, one cluster holding everything,
// one descriptor per cluster, a single descriptor, images without
// descriptors, K = 1, dims and batch sizes that are not multiples of 32).
//
// Error metric for residual sums. Component j of a segment's sum is
// S = sum_i t_i with t_i = x_ij - c_j. We require
//     |ours - ref| <= 1e-5 * max(|ref|, ||t||_2),   ||t||_2 = sqrt(sum_i t_i^2).
// Plain |ref| in the denominator is unsound: the residuals of a segment whose
// centroid is (close to) its mean cancel to ~0, and then any finite-precision
// sum has an unbounded relative error. ||t||_2 is the natural size of a sum
// of n terms with mixed signs (sqrt(n) times their RMS), never below the
// largest single term, so it keeps the test meaningful for cancelling sums
// while staying sqrt(n) times stricter than the classical sum_i |t_i| bound
// (which a naive float32 running sum would pass on long segments).
#include "indexer/vlad.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "indexer/codebook.h"

namespace lookalike {
namespace {

// ---- the naive reference ----------------------------------------------------

std::vector<int32_t> RefAssign(const std::vector<float>& x, int dim, const std::vector<float>& c,
                               int k) {
  const int64_t n = static_cast<int64_t>(x.size()) / std::max(dim, 1);
  std::vector<int32_t> labels(n);
  for (int64_t i = 0; i < n; ++i) {
    double best = std::numeric_limits<double>::infinity();
    for (int q = 0; q < k; ++q) {
      double d = 0;
      for (int j = 0; j < dim; ++j) {
        const double diff = double{x[i * dim + j]} - c[int64_t{q} * dim + j];
        d += diff * diff;
      }
      if (d < best) {
        best = d;
        labels[i] = q;
      }
    }
  }
  return labels;
}

// Residual sums (image, cluster, dim) in double, and ||t||_2 per component.
struct RefSums {
  std::vector<double> sum;
  std::vector<double> term_norm;
};

RefSums RefResidualSums(const std::vector<float>& x, const std::vector<int32_t>& labels,
                        const std::vector<int64_t>& image_offsets, int k, int dim,
                        const std::vector<float>& c, bool residual_normalize) {
  const int64_t num_images = static_cast<int64_t>(image_offsets.size()) - 1;
  RefSums r;
  r.sum.assign(num_images * k * dim, 0.0);
  r.term_norm.assign(num_images * k * dim, 0.0);
  std::vector<double> t(dim);
  for (int64_t image = 0; image < num_images; ++image) {
    for (int64_t i = image_offsets[image]; i < image_offsets[image + 1]; ++i) {
      const int q = labels[i];
      double norm2 = 0;
      for (int j = 0; j < dim; ++j) {
        t[j] = double{x[i * dim + j]} - c[int64_t{q} * dim + j];
        norm2 += t[j] * t[j];
      }
      const double inv = residual_normalize ? (norm2 > 0 ? 1.0 / std::sqrt(norm2) : 0.0) : 1.0;
      for (int j = 0; j < dim; ++j) {
        const int64_t at = (image * k + q) * dim + j;
        r.sum[at] += t[j] * inv;
        r.term_norm[at] += t[j] * inv * t[j] * inv;
      }
    }
  }
  for (double& v : r.term_norm) v = std::sqrt(v);
  return r;
}

std::vector<double> RefNormalize(std::vector<double> v, int64_t num_images, int k, int dim,
                                 const VladOptions& o) {
  const int64_t vd = int64_t{k} * dim;
  for (int64_t image = 0; image < num_images; ++image) {
    double* w = v.data() + image * vd;
    for (int64_t j = 0; j < vd; ++j) {
      const double a = std::pow(std::fabs(w[j]), double{o.power_alpha});
      w[j] = w[j] < 0 ? -a : a;
    }
    if (o.intra_normalize) {
      for (int q = 0; q < k; ++q) {
        double s = 0;
        for (int j = 0; j < dim; ++j) s += w[q * dim + j] * w[q * dim + j];
        if (s > 0)
          for (int j = 0; j < dim; ++j) w[q * dim + j] /= std::sqrt(s);
      }
    }
    double s = 0;
    for (int64_t j = 0; j < vd; ++j) s += w[j] * w[j];
    if (s > 0)
      for (int64_t j = 0; j < vd; ++j) w[j] /= std::sqrt(s);
  }
  return v;
}

// Largest |ours - ref| / max(|ref|, ||t||_2) (see the metric above); 0 when
// every term is 0 and ours is exactly 0.
double MaxSumError(const float* ours, const RefSums& ref) {
  double worst = 0;
  for (size_t i = 0; i < ref.sum.size(); ++i) {
    const double err = std::fabs(double{ours[i]} - ref.sum[i]);
    const double scale = std::max(std::fabs(ref.sum[i]), ref.term_norm[i]);
    if (scale == 0) {
      if (err != 0) return std::numeric_limits<double>::infinity();
      continue;
    }
    worst = std::max(worst, err / scale);
  }
  return worst;
}

// ---- generated problems -----------------------------------------------------

struct Problem {
  int k = 0, dim = 0;
  std::vector<float> centroids;        // k x dim
  std::vector<float> x;                // n x dim
  std::vector<int32_t> labels;         // intended cluster of each descriptor
  std::vector<int64_t> image_offsets;  // num_images + 1
  int64_t num_images() const { return static_cast<int64_t>(image_offsets.size()) - 1; }
};

enum class Labels { kRandom, kOneCluster, kEachOwn, kFewClusters };

// Centroids on a lattice far apart in the first coordinates, descriptors
// close to their intended centroid: nearest-centroid assignment is
// unambiguous, so the reference can use the intended labels.
Problem MakeProblem(int k, int dim, const std::vector<int64_t>& counts, Labels mode,
                    uint64_t seed) {
  Problem p;
  p.k = k;
  p.dim = dim;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  p.centroids.resize(int64_t{k} * dim);
  for (int q = 0; q < k; ++q)
    for (int j = 0; j < dim; ++j)
      p.centroids[int64_t{q} * dim + j] = 0.3f * u(rng) + (j == 0 ? 2.0f * q : 0.0f);
  p.image_offsets.assign(1, 0);
  for (int64_t c : counts) p.image_offsets.push_back(p.image_offsets.back() + c);
  const int64_t n = p.image_offsets.back();
  p.labels.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (mode) {
      case Labels::kRandom:
        p.labels[i] = static_cast<int32_t>(rng() % k);
        break;
      case Labels::kOneCluster:
        p.labels[i] = k / 2;
        break;
      case Labels::kEachOwn:
        p.labels[i] = static_cast<int32_t>(i % k);
        break;
      case Labels::kFewClusters: {
        const int32_t few[] = {1 % k, 5 % k, k - 1};
        p.labels[i] = few[rng() % 3];
        break;
      }
    }
  }
  p.x.resize(n * dim);
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < dim; ++j)
      p.x[i * dim + j] = p.centroids[int64_t{p.labels[i]} * dim + j] + 0.4f * (u(rng) - 0.5f);
  return p;
}

struct EncoderCase {
  const char* name;
  int k, dim;
  std::vector<int64_t> counts;
  Labels mode;
};

std::vector<int64_t> Counts(int num, int max_count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> c(num);
  for (auto& v : c) v = static_cast<int64_t>(rng() % (max_count + 1));
  return c;
}

const std::vector<EncoderCase>& EncoderCases() {
  static const std::vector<EncoderCase> kCases = {
      {"basic", 16, 128, {50, 0, 1, 300, 77}, Labels::kRandom},
      {"batch37_dim37", 5, 37, Counts(37, 40, 1), Labels::kRandom},
      {"k1", 1, 33, {1, 10, 0, 100}, Labels::kRandom},
      {"each_in_own_cluster", 20, 24, {20}, Labels::kEachOwn},
      {"all_in_one_cluster", 8, 130, {500, 3}, Labels::kOneCluster},
      {"single_descriptor", 4, 128, {1}, Labels::kRandom},
      {"empty_clusters", 64, 16, {200, 30, 0}, Labels::kFewClusters},
      {"no_descriptors", 6, 31, {0}, Labels::kRandom},
      {"only_empty_images", 3, 20, {0, 0, 0}, Labels::kRandom},
      {"dim1_batch33", 7, 1, Counts(33, 9, 2), Labels::kRandom},
  };
  return kCases;
}

struct NormCase {
  const char* name;
  VladOptions options;
};

VladOptions MakeOptions(float alpha, bool intra, bool residual) {
  VladOptions o;
  o.power_alpha = alpha;
  o.intra_normalize = intra;
  o.residual_normalize = residual;
  return o;
}

const std::vector<NormCase>& NormCases() {
  static const std::vector<NormCase> kCases = {
      {"default", VladOptions()},
      {"alpha1_nointra", MakeOptions(1.0f, false, false)},
      {"alpha05_nointra", MakeOptions(0.5f, false, false)},
      {"alpha1_intra", MakeOptions(1.0f, true, false)},
      {"residualnorm", MakeOptions(0.5f, true, true)},
      {"alpha03_residualnorm_nointra", MakeOptions(0.3f, false, true)},
  };
  return kCases;
}

// Tolerance on unit-norm outputs: sums agree to ~1e-7 relative, but the
// power normalisation has an unbounded slope at 0, so a component whose sum
// is near 0 can move by ~sqrt(error); 2e-5 absolute on a unit vector covers
// that and is still far below any real encoding difference.
constexpr double kUnitTolerance = 2e-5;

class VladEncoderTest : public ::testing::TestWithParam<std::tuple<size_t, size_t>> {};

TEST_P(VladEncoderTest, MatchesNaiveReference) {
  const EncoderCase& c = EncoderCases()[std::get<0>(GetParam())];
  const VladOptions& o = NormCases()[std::get<1>(GetParam())].options;
  const Problem p = MakeProblem(c.k, c.dim, c.counts, c.mode, 17 + c.k * 31 + c.dim);
  ASSERT_EQ(RefAssign(p.x, p.dim, p.centroids, p.k), p.labels) << "test data is ambiguous";

  const Codebook cb(p.k, p.dim, p.centroids);
  auto encoder = CreateVladEncoder(Backend::kCpu, cb, o);
  ASSERT_EQ(encoder->backend(), Backend::kCpu);
  ASSERT_EQ(encoder->vlad_dim(), int64_t{p.k} * p.dim);
  const int64_t vd = encoder->vlad_dim();
  std::vector<float> out(p.num_images() * vd, std::nanf(""));  // every value must be written
  encoder->Encode(p.x.data(), p.image_offsets.data(), p.num_images(), out.data());

  const RefSums sums = RefResidualSums(p.x, p.labels, p.image_offsets, p.k, p.dim, p.centroids,
                                       o.residual_normalize);
  const std::vector<double> ref = RefNormalize(sums.sum, p.num_images(), p.k, p.dim, o);
  for (int64_t image = 0; image < p.num_images(); ++image) {
    const bool empty = p.image_offsets[image + 1] == p.image_offsets[image];
    double norm2 = 0;
    for (int64_t j = 0; j < vd; ++j) {
      const float v = out[image * vd + j];
      ASSERT_TRUE(std::isfinite(v)) << "image " << image << " component " << j;
      if (empty) {
        ASSERT_EQ(v, 0.0f) << "image without descriptors must be all zero";
      }
      ASSERT_NEAR(v, ref[image * vd + j], kUnitTolerance)
          << "image " << image << " component " << j;
      norm2 += double{v} * v;
    }
    if (!empty) {
      EXPECT_NEAR(norm2, 1.0, 1e-5) << "image " << image;
    }
    if (!empty && o.intra_normalize) {
      // Every non-empty cluster block carries the same weight.
      int nonzero = 0;
      for (int q = 0; q < p.k; ++q) {
        double b = 0;
        for (int j = 0; j < p.dim; ++j) b += std::pow(out[image * vd + q * p.dim + j], 2);
        nonzero += b > 0;
      }
      for (int q = 0; q < p.k; ++q) {
        double b = 0;
        for (int j = 0; j < p.dim; ++j) b += std::pow(out[image * vd + q * p.dim + j], 2);
        if (b > 0) {
          EXPECT_NEAR(b, 1.0 / nonzero, 1e-5) << "image " << image << " cluster " << q;
        }
      }
    }
  }

  // Encoding each image alone gives the same vectors as the batch.
  for (int64_t image = 0; image < p.num_images(); ++image) {
    const int64_t begin = p.image_offsets[image], end = p.image_offsets[image + 1];
    const int64_t offsets[2] = {0, end - begin};
    std::vector<float> alone(vd, std::nanf(""));
    encoder->Encode(p.x.data() + begin * p.dim, offsets, 1, alone.data());
    for (int64_t j = 0; j < vd; ++j)
      ASSERT_NEAR(alone[j], out[image * vd + j], 1e-6) << "image " << image;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, VladEncoderTest,
                         // Every case x option set except 1-d with residual normalisation: there
                         // every normalised residual is exactly +-1, sums cancel to rounding noise
                         // and no comparison with the reference is meaningful.
                         ::testing::ValuesIn([] {
                           std::vector<std::tuple<size_t, size_t>> params;
                           for (size_t c = 0; c < EncoderCases().size(); ++c)
                             for (size_t o = 0; o < NormCases().size(); ++o)
                               if (!(EncoderCases()[c].dim == 1 &&
                                     NormCases()[o].options.residual_normalize))
                                 params.emplace_back(c, o);
                           return params;
                         }()),
                         [](const ::testing::TestParamInfo<std::tuple<size_t, size_t>>& info) {
                           return std::string(EncoderCases()[std::get<0>(info.param)].name) + "_" +
                                  NormCases()[std::get<1>(info.param)].name;
                         });

// ---- stages -----------------------------------------------------------------

TEST(SortBySegmentTest, OffsetsIncludeEmptySegmentsAndOrderIsStable) {
  const int k = 7;
  const std::vector<int64_t> counts = {13, 0, 1, 40, 0, 29};
  std::vector<int64_t> image_offsets = {0};
  for (int64_t c : counts) image_offsets.push_back(image_offsets.back() + c);
  const int64_t n = image_offsets.back();
  const int64_t num_images = static_cast<int64_t>(counts.size());
  std::mt19937_64 rng(3);
  std::vector<int32_t> labels(n);
  for (auto& l : labels) l = static_cast<int32_t>(rng() % 4) * 2;  // 0,2,4,6: odd clusters empty

  std::vector<int64_t> order, offsets;
  SortBySegment(labels.data(), image_offsets.data(), num_images, k, &order, &offsets);
  ASSERT_EQ(offsets.size(), static_cast<size_t>(num_images * k + 1));
  ASSERT_EQ(order.size(), static_cast<size_t>(n));
  EXPECT_EQ(offsets.front(), 0);
  EXPECT_EQ(offsets.back(), n);
  std::vector<int> seen(n, 0);
  for (int64_t image = 0; image < num_images; ++image) {
    for (int q = 0; q < k; ++q) {
      const int64_t s = image * k + q;
      // Reference count by loops.
      int64_t expected = 0;
      for (int64_t i = image_offsets[image]; i < image_offsets[image + 1]; ++i)
        expected += labels[i] == q;
      ASSERT_EQ(offsets[s + 1] - offsets[s], expected) << "image " << image << " cluster " << q;
      for (int64_t p = offsets[s]; p < offsets[s + 1]; ++p) {
        const int64_t i = order[p];
        ASSERT_GE(i, image_offsets[image]);
        ASSERT_LT(i, image_offsets[image + 1]);
        ASSERT_EQ(labels[i], q);
        if (p > offsets[s]) {
          ASSERT_LT(order[p - 1], i) << "not stable within a segment";
        }
        ++seen[i];
      }
    }
  }
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << "descriptor " << i;
}

TEST(SortBySegmentTest, EdgeCases) {
  std::vector<int64_t> order = {42}, offsets;
  const int64_t no_images[] = {0};
  SortBySegment(nullptr, no_images, 0, 5, &order, &offsets);
  EXPECT_EQ(offsets, std::vector<int64_t>{0});
  EXPECT_TRUE(order.empty());

  const int64_t two_empty[] = {0, 0, 0};
  SortBySegment(nullptr, two_empty, 2, 3, &order, &offsets);
  EXPECT_EQ(offsets, std::vector<int64_t>(7, 0));

  const int32_t bad[] = {0, 3};
  const int64_t one[] = {0, 2};
  EXPECT_THROW(SortBySegment(bad, one, 1, 3, &order, &offsets), std::out_of_range);
  const int32_t negative[] = {-1, 0};
  EXPECT_THROW(SortBySegment(negative, one, 1, 3, &order, &offsets), std::out_of_range);
}

class ReduceSegmentsTest : public ::testing::TestWithParam<std::tuple<size_t, bool>> {};

TEST_P(ReduceSegmentsTest, MatchesReference) {
  const EncoderCase& c = EncoderCases()[std::get<0>(GetParam())];
  const bool residual_normalize = std::get<1>(GetParam());
  Problem p = MakeProblem(c.k, c.dim, c.counts, c.mode, 99 + c.k);
  // Labels need not be nearest centroids for this stage: shuffle some.
  std::mt19937_64 rng(5);
  for (auto& l : p.labels)
    if (rng() % 3 == 0) l = static_cast<int32_t>(rng() % p.k);
  const Codebook cb(p.k, p.dim, p.centroids);
  std::vector<int64_t> order, offsets;
  SortBySegment(p.labels.data(), p.image_offsets.data(), p.num_images(), p.k, &order, &offsets);
  std::vector<float> out(p.num_images() * p.k * p.dim, std::nanf(""));
  ReduceSegments(p.x.data(), p.dim, order.data(), offsets, p.num_images(), cb, residual_normalize,
                 out.data());
  const RefSums ref =
      RefResidualSums(p.x, p.labels, p.image_offsets, p.k, p.dim, p.centroids, residual_normalize);
  EXPECT_LE(MaxSumError(out.data(), ref), 1e-5);
  // Empty segments are exactly zero.
  for (int64_t s = 0; s + 1 < static_cast<int64_t>(offsets.size()); ++s)
    if (offsets[s] == offsets[s + 1]) {
      for (int j = 0; j < p.dim; ++j) ASSERT_EQ(out[s * p.dim + j], 0.0f) << "segment " << s;
    }
}

INSTANTIATE_TEST_SUITE_P(Cases, ReduceSegmentsTest,
                         ::testing::Combine(::testing::Range<size_t>(0, EncoderCases().size()),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<size_t, bool>>& info) {
                           return std::string(EncoderCases()[std::get<0>(info.param)].name) +
                                  (std::get<1>(info.param) ? "_residualnorm" : "_plain");
                         });

// The long array: a million descriptors, almost all in one cluster, a few in
// small clusters that sort after it. Our per-segment double accumulation
// passes the 1e-5 metric; a float32 prefix sum over the sorted array followed
// by differences at the segment boundaries fails it by orders of magnitude.
TEST(ReduceSegmentsTest, LongArrayAgreesWhereFloatPrefixSumFails) {
  const int k = 5, dim = 12;
  const int64_t n = 1'000'000;
  for (const float value_range : {1.0f, 255.0f}) {  // RootSIFT-like and SIFT-like values
    SCOPED_TRACE(value_range);
    std::mt19937_64 rng(2024);
    std::uniform_real_distribution<float> u(0.0f, value_range);
    std::vector<float> centroids(k * dim);
    for (float& v : centroids) v = u(rng);
    std::vector<float> x(n * dim);
    for (float& v : x) v = value_range == 1.0f ? u(rng) : std::floor(u(rng));
    std::vector<int32_t> labels(n, 0);
    // 300 in cluster 1, 40 in cluster 2, 1 in cluster 3, cluster 4 empty,
    // scattered through the array.
    for (int i = 0; i < 341; ++i) labels[rng() % n] = i < 300 ? 1 : (i < 340 ? 2 : 3);
    const std::vector<int64_t> image_offsets = {0, n};
    const Codebook cb(k, dim, centroids);

    std::vector<int64_t> order, offsets;
    SortBySegment(labels.data(), image_offsets.data(), 1, k, &order, &offsets);
    std::vector<float> ours(k * dim);
    ReduceSegments(x.data(), dim, order.data(), offsets, 1, cb, false, ours.data());
    const RefSums ref = RefResidualSums(x, labels, image_offsets, k, dim, centroids, false);
    const double our_error = MaxSumError(ours.data(), ref);
    EXPECT_LE(our_error, 1e-5);

    // The forbidden trick: float32 running sum over the sorted array,
    // segment sum = P[end] - P[begin] - count * c.
    std::vector<float> prefix_result(k * dim);
    for (int j = 0; j < dim; ++j) {
      std::vector<float> at_offset(k + 1);
      float running = 0.0f;
      int next = 0;
      for (int64_t pos = 0; pos <= n; ++pos) {
        while (next <= k && offsets[next] == pos) at_offset[next++] = running;
        if (pos < n) running += x[order[pos] * dim + j];
      }
      for (int q = 0; q < k; ++q)
        prefix_result[q * dim + j] =
            (at_offset[q + 1] - at_offset[q]) -
            static_cast<float>(offsets[q + 1] - offsets[q]) * centroids[q * dim + j];
    }
    const double prefix_error = MaxSumError(prefix_result.data(), ref);
    EXPECT_GT(prefix_error, 1e-3) << "the float32 prefix-sum trick should be far off here";
    EXPECT_GT(prefix_error, 1000 * our_error);
    std::printf("[ info     ] values in [0, %g]: ours max error %.3g, float32 prefix-sum %.3g\n",
                value_range, our_error, prefix_error);
  }
}

TEST(VladEncoderTest, LongArrayEndToEnd) {
  const int k = 5, dim = 12;
  std::vector<int64_t> counts = {999'000, 0, 1'000};
  Problem p = MakeProblem(k, dim, counts, Labels::kOneCluster, 8);
  // A few descriptors of the big image in other clusters.
  for (int64_t i = 0; i < 200; ++i) {
    const int64_t at = i * 4999;
    const int32_t q = static_cast<int32_t>(i % k);
    p.labels[at] = q;
    for (int j = 0; j < dim; ++j) p.x[at * dim + j] = p.centroids[q * dim + j] + 0.01f * (i % 7);
  }
  const VladOptions o = MakeOptions(1.0f, false, false);
  auto encoder = CreateVladEncoder(Backend::kCpu, Codebook(k, dim, p.centroids), o);
  std::vector<float> out(3 * k * dim, std::nanf(""));
  encoder->Encode(p.x.data(), p.image_offsets.data(), 3, out.data());
  const RefSums sums = RefResidualSums(p.x, p.labels, p.image_offsets, k, dim, p.centroids, false);
  const std::vector<double> ref = RefNormalize(sums.sum, 3, k, dim, o);
  for (size_t j = 0; j < out.size(); ++j) ASSERT_NEAR(out[j], ref[j], 1e-6) << j;
  for (int j = 0; j < k * dim; ++j) EXPECT_EQ(out[k * dim + j], 0.0f);
}

TEST(NormalizeVladTest, MatchesReferenceAndKeepsZeros) {
  const int k = 9, dim = 35;  // neither a multiple of 32
  const int64_t num_images = 4;
  const int64_t vd = int64_t{k} * dim;
  std::mt19937_64 rng(12);
  std::normal_distribution<float> g(0.0f, 3.0f);
  std::vector<float> base(num_images * vd);
  for (float& v : base) v = g(rng);
  // Image 1: all zero. Image 2: clusters 0, 4 and 8 empty. Image 3: tiny values.
  std::fill(base.begin() + vd, base.begin() + 2 * vd, 0.0f);
  for (int q : {0, 4, 8}) std::fill_n(base.begin() + 2 * vd + q * dim, dim, 0.0f);
  for (int64_t j = 0; j < vd; ++j) base[3 * vd + j] *= 1e-20f;
  for (const NormCase& c : NormCases()) {
    SCOPED_TRACE(c.name);
    std::vector<float> v = base;
    NormalizeVlad(v.data(), num_images, k, dim, c.options);
    const std::vector<double> ref =
        RefNormalize(std::vector<double>(base.begin(), base.end()), num_images, k, dim, c.options);
    for (int64_t image = 0; image < num_images; ++image) {
      double norm2 = 0;
      for (int64_t j = 0; j < vd; ++j) {
        const float w = v[image * vd + j];
        ASSERT_TRUE(std::isfinite(w));
        ASSERT_NEAR(w, ref[image * vd + j], 1e-6) << "image " << image << " component " << j;
        // Signs survive every normalisation.
        if (base[image * vd + j] != 0.0f) {
          ASSERT_EQ(w > 0, base[image * vd + j] > 0);
        }
        norm2 += double{w} * w;
      }
      if (image == 1)
        EXPECT_EQ(norm2, 0.0) << "zero vector must stay zero";
      else
        EXPECT_NEAR(norm2, 1.0, 1e-6) << "image " << image;
    }
    // Empty clusters stay exactly zero.
    for (int q : {0, 4, 8})
      for (int j = 0; j < dim; ++j) EXPECT_EQ(v[2 * vd + q * dim + j], 0.0f);
    if (c.options.power_alpha == 1.0f && !c.options.intra_normalize) {
      // Only the global L2: ratios between components are kept.
      EXPECT_NEAR(v[7] / v[3], base[7] / base[3], 1e-5);
    }
  }
}

TEST(NormalizeVladTest, PowerNormalisationIsSignedRoot) {
  // One cluster, dim 2, no intra: (9, -16) -> (3, -4) -> (0.6, -0.8).
  std::vector<float> v = {9.0f, -16.0f};
  NormalizeVlad(v.data(), 1, 1, 2, MakeOptions(0.5f, false, false));
  EXPECT_NEAR(v[0], 0.6f, 1e-7);
  EXPECT_NEAR(v[1], -0.8f, 1e-7);
  v = {3.0f, -4.0f};
  NormalizeVlad(v.data(), 1, 1, 2, MakeOptions(1.0f, false, false));
  EXPECT_NEAR(v[0], 0.6f, 1e-7);
  EXPECT_NEAR(v[1], -0.8f, 1e-7);
  // Intra-normalisation equalises clusters: (30, 40 | 0.3, 0.4) -> each block
  // unit, then 1/sqrt(2) overall.
  v = {30.0f, 40.0f, 0.3f, 0.4f};
  NormalizeVlad(v.data(), 1, 2, 2, MakeOptions(1.0f, true, false));
  const float s = 1.0f / std::sqrt(2.0f);
  EXPECT_NEAR(v[0], 0.6f * s, 1e-6);
  EXPECT_NEAR(v[1], 0.8f * s, 1e-6);
  EXPECT_NEAR(v[2], 0.6f * s, 1e-6);
  EXPECT_NEAR(v[3], 0.8f * s, 1e-6);
}

// ---- options and backends -----------------------------------------------------

TEST(VladOptionsTest, ValidateNamesTheField) {
  for (float bad : {0.0f, -0.5f, 1.01f, std::nanf("")}) {
    VladOptions o;
    o.power_alpha = bad;
    try {
      o.Validate();
      ADD_FAILURE() << "accepted power " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("power"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(VladOptions().Validate());
  EXPECT_NO_THROW(MakeOptions(1.0f, false, false).Validate());
}

TEST(BackendTest, ParseAndResolve) {
  EXPECT_EQ(ParseBackend("auto"), Backend::kAuto);
  EXPECT_EQ(ParseBackend("cpu"), Backend::kCpu);
  EXPECT_EQ(ParseBackend("cuda"), Backend::kCuda);
  for (const char* bad : {"", "gpu", "CPU", "cuda ", "opencl"}) {
    try {
      ParseBackend(bad);
      ADD_FAILURE() << "accepted backend '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("'" + std::string(bad) + "'"), std::string::npos)
          << e.what();
    }
  }
  for (Backend b : {Backend::kAuto, Backend::kCpu, Backend::kCuda})
    EXPECT_EQ(ParseBackend(BackendName(b)), b);

  EXPECT_EQ(ResolveBackend(Backend::kCpu), Backend::kCpu);
  const BackendReport report = ProbeBackends();
  EXPECT_FALSE(report.detail.empty());
  if (!report.cuda_compiled) {
    EXPECT_FALSE(report.cuda_usable);
  }
  EXPECT_EQ(ResolveBackend(Backend::kAuto), report.cuda_usable ? Backend::kCuda : Backend::kCpu);
  if (!report.cuda_usable) {
    try {
      ResolveBackend(Backend::kCuda);
      FAIL() << "explicit cuda without a usable device must not fall back";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("--backend cpu"), std::string::npos) << e.what();
    }
  }
  const Codebook cb(3, 4, std::vector<float>(12, 0.0f));
  EXPECT_EQ(CreateVladEncoder(Backend::kCpu, cb, VladOptions())->backend(), Backend::kCpu);
}

}  // namespace
}  // namespace lookalike
