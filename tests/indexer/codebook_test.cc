// Tests of the codebook: k-means recovers well-separated clusters, and the
// BLAS assignment equals a brute-force double-precision nearest-centroid
// reference (ties to the lower index) over awkward sizes.
#include "indexer/codebook.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace lookalike {
namespace {

std::vector<float> Uniform(int64_t n, int dim, uint64_t seed, float lo = 0.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n) * dim);
  for (float& x : v) x = u(rng);
  return v;
}

// Reference: exact squared distances in double, strict < so ties go to the
// lower index.
std::vector<int32_t> BruteForceAssign(const std::vector<float>& x, int64_t n, int dim,
                                      const std::vector<float>& c, int k,
                                      std::vector<double>* all_distances) {
  std::vector<int32_t> labels(n);
  all_distances->assign(static_cast<size_t>(n) * k, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    double best = std::numeric_limits<double>::infinity();
    for (int j = 0; j < k; ++j) {
      double d = 0;
      for (int t = 0; t < dim; ++t) {
        const double diff = double{x[i * dim + t]} - c[static_cast<size_t>(j) * dim + t];
        d += diff * diff;
      }
      (*all_distances)[i * k + j] = d;
      if (d < best) {
        best = d;
        labels[i] = j;
      }
    }
  }
  return labels;
}

TEST(CodebookTest, TrainRecoversSeparatedClusters) {
  const int dim = 16, true_k = 8, per_cluster = 300;
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<float> center_dist(-20.0f, 20.0f);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  std::vector<float> centers(true_k * dim);
  // Centres far apart compared with the noise (checked below).
  for (float& v : centers) v = center_dist(rng);
  for (int a = 0; a < true_k; ++a)
    for (int b = a + 1; b < true_k; ++b) {
      double d2 = 0;
      for (int t = 0; t < dim; ++t) d2 += std::pow(centers[a * dim + t] - centers[b * dim + t], 2);
      ASSERT_GT(std::sqrt(d2), 10.0);
    }
  // Interleave the clusters so input order carries no information.
  const int64_t n = int64_t{true_k} * per_cluster;
  std::vector<float> x(n * dim);
  std::vector<int> truth(n);
  std::vector<double> mean(true_k * dim, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    truth[i] = static_cast<int>(i % true_k);
    for (int t = 0; t < dim; ++t) {
      x[i * dim + t] = centers[truth[i] * dim + t] + noise(rng);
      mean[truth[i] * dim + t] += x[i * dim + t] / per_cluster;
    }
  }
  CodebookOptions options;
  options.num_clusters = true_k;
  options.seed = 1234;
  const Codebook cb = Codebook::Train(x.data(), n, dim, options);
  ASSERT_EQ(cb.num_clusters(), true_k);
  ASSERT_EQ(cb.dim(), dim);
  std::vector<int32_t> labels(n);
  cb.Assign(x.data(), n, labels.data());
  std::map<int, std::set<int32_t>> to_centroid;
  for (int64_t i = 0; i < n; ++i) to_centroid[truth[i]].insert(labels[i]);
  std::set<int32_t> used;
  for (const auto& [cluster, centroids] : to_centroid) {
    ASSERT_EQ(centroids.size(), 1u) << "true cluster " << cluster << " split over centroids";
    used.insert(*centroids.begin());
    // The centroid is the cluster's mean.
    const int32_t k = *centroids.begin();
    for (int t = 0; t < dim; ++t)
      EXPECT_NEAR(cb.centroids()[k * dim + t], mean[cluster * dim + t], 1e-3);
  }
  EXPECT_EQ(used.size(), static_cast<size_t>(true_k)) << "two true clusters share a centroid";

  // Same seed, same codebook.
  const Codebook again = Codebook::Train(x.data(), n, dim, options);
  EXPECT_EQ(again.Fingerprint(), cb.Fingerprint());
  EXPECT_EQ(again.centroids(), cb.centroids());
}

struct AssignCase {
  int64_t n;
  int k;
  int dim;
};

class AssignTest : public ::testing::TestWithParam<AssignCase> {};

TEST_P(AssignTest, EqualsBruteForceReference) {
  const AssignCase c = GetParam();
  const std::vector<float> x = Uniform(c.n, c.dim, 1000 + c.n);
  const std::vector<float> centroids = Uniform(c.k, c.dim, 2000 + c.k);
  const Codebook cb(c.k, c.dim, centroids);
  std::vector<int32_t> labels(c.n, -1);
  cb.Assign(x.data(), c.n, labels.data());
  std::vector<double> dist;
  const std::vector<int32_t> ref = BruteForceAssign(x, c.n, c.dim, centroids, c.k, &dist);
  // The SGEMM path computes ||c||^2 - 2 x.c in float: when two centroids are
  // within float rounding of each other it may legitimately pick the other
  // one. A disagreement is only accepted if the two reference distances are
  // that close (relative 1e-5 of ||x||^2 + ||c||^2, far above float
  // rounding for these sizes, far below real distance gaps).
  int64_t disagreements = 0;
  for (int64_t i = 0; i < c.n; ++i) {
    ASSERT_GE(labels[i], 0);
    ASSERT_LT(labels[i], c.k);
    if (labels[i] == ref[i]) continue;
    ++disagreements;
    double x2 = 0;
    for (int t = 0; t < c.dim; ++t) x2 += double{x[i * c.dim + t]} * x[i * c.dim + t];
    const double scale = x2 + cb.centroid_norms2()[labels[i]];
    EXPECT_LE(dist[i * c.k + labels[i]] - dist[i * c.k + ref[i]], 1e-5 * scale)
        << "descriptor " << i << ": got " << labels[i] << ", reference " << ref[i];
  }
  EXPECT_LE(disagreements, c.n / 1000) << "too many near-ties to be rounding";
}

INSTANTIATE_TEST_SUITE_P(AwkwardSizes, AssignTest,
                         ::testing::Values(AssignCase{1, 1, 128}, AssignCase{1, 3, 128},
                                           AssignCase{1, 64, 128}, AssignCase{31, 1, 128},
                                           AssignCase{31, 3, 37}, AssignCase{31, 64, 128},
                                           AssignCase{4097, 1, 128}, AssignCase{4097, 3, 128},
                                           AssignCase{4097, 64, 33}, AssignCase{10000, 1, 7},
                                           AssignCase{10000, 3, 128}, AssignCase{10000, 64, 128}),
                         [](const ::testing::TestParamInfo<AssignCase>& info) {
                           return "n" + std::to_string(info.param.n) + "_k" +
                                  std::to_string(info.param.k) + "_d" +
                                  std::to_string(info.param.dim);
                         });

TEST(CodebookTest, AssignTiesGoToTheLowerIndex) {
  const int dim = 5;
  // c0 = -e0, c1 = +e0 (equidistant from any x with x0 = 0), c2 a copy of
  // c1 (exact duplicate), c3 far away.
  std::vector<float> c(4 * dim, 0.0f);
  c[0 * dim] = -1.0f;
  c[1 * dim] = 1.0f;
  c[2 * dim] = 1.0f;
  c[3 * dim + 4] = 100.0f;
  const Codebook cb(4, dim, c);
  std::vector<float> x = {0,      0.5f, -2, 1, 0,   // tie c0/c1/c2 -> 0
                          3,      0,    0,  0, 0,   // c1 and c2 tie -> 1
                          0,      0,    0,  0, 99,  // c3
                          -0.25f, 0,    0,  0, 0};  // c0
  std::vector<int32_t> labels(4);
  cb.Assign(x.data(), 4, labels.data());
  EXPECT_EQ(labels, (std::vector<int32_t>{0, 1, 3, 0}));

  // Reversed duplicate order: the lower index still wins.
  std::vector<float> c2(2 * dim, 0.0f);
  c2[0] = 2.0f;
  c2[dim] = 2.0f;
  const Codebook dup(2, dim, c2);
  std::vector<int32_t> l2(4);
  dup.Assign(x.data(), 4, l2.data());
  EXPECT_EQ(l2, (std::vector<int32_t>{0, 0, 0, 0}));
}

// The vectorised argmin works on lanes of 16 clusters plus a tail, and on
// blocks of rows: a K that is not a multiple of 16 and more rows than one
// block must still give the exact nearest centroid (lowest index on ties).
TEST(CodebookTest, AssignMatchesBruteForceAcrossLanesAndBlocks) {
  const int dim = 8, k = 37;
  const int64_t n = 2500;
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> c(static_cast<size_t>(k) * dim), x(static_cast<size_t>(n) * dim);
  for (float& v : c) v = g(rng);
  for (float& v : x) v = g(rng);
  // Rows that copy a centroid exactly, including the last one (tail lane).
  for (int j = 0; j < dim; ++j) {
    x[j] = c[(k - 1) * dim + j];
    x[(n - 1) * dim + j] = c[20 * dim + j];
  }
  const Codebook cb(k, dim, c);
  std::vector<int32_t> labels(n);
  cb.Assign(x.data(), n, labels.data());
  int mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    int best = 0;
    double best_d = std::numeric_limits<double>::infinity();
    for (int cl = 0; cl < k; ++cl) {
      double d = 0;
      for (int j = 0; j < dim; ++j) {
        const double diff = double(x[i * dim + j]) - c[cl * dim + j];
        d += diff * diff;
      }
      if (d < best_d) best_d = d, best = cl;
    }
    if (labels[i] != best) ++mismatches;
  }
  // Float rounding of ||c||^2 - 2 x.c may flip a near-tie; nothing more.
  EXPECT_LE(mismatches, 2);
  EXPECT_EQ(labels[0], k - 1);
  EXPECT_EQ(labels[n - 1], 20);
}

// A descriptor's label must not depend on the rows it is assigned with: the
// index encodes images in batches whose make-up depends on what finished
// first, so a killed-and-resumed or merged index would otherwise store other
// vectors than one uninterrupted run. BLAS may round a row's x.c differently
// at another place in another call (seen with OpenBLAS on an AMD EPYC), which
// decides a near-tie. Descriptors on the bisector of two neighbouring
// centroids make such near-ties; each must get the label it gets alone at
// every place of batches of several sizes, across the 1024-row blocks.
TEST(CodebookTest, ADescriptorsLabelDoesNotDependOnItsBatch) {
  const int k = 512, dim = 128, num_probes = 64;
  std::vector<float> c = Uniform(k, dim, 31);
  for (int j = 0; j < k; ++j) {  // unit rows, like RootSIFT centroids
    double s = 0;
    for (int t = 0; t < dim; ++t) s += double{c[j * dim + t]} * c[j * dim + t];
    for (int t = 0; t < dim; ++t)
      c[j * dim + t] = static_cast<float>(c[j * dim + t] / std::sqrt(s));
  }
  const Codebook cb(k, dim, c);
  std::vector<float> probes(static_cast<size_t>(num_probes) * dim);
  for (int p = 0; p < num_probes; ++p) {
    // Midpoint of centroid p and its nearest other centroid.
    int nearest = -1;
    double nearest_d = std::numeric_limits<double>::infinity();
    for (int j = 0; j < k; ++j) {
      if (j == p) continue;
      double d = 0;
      for (int t = 0; t < dim; ++t) {
        const double diff = double{c[p * dim + t]} - c[j * dim + t];
        d += diff * diff;
      }
      if (d < nearest_d) nearest_d = d, nearest = j;
    }
    for (int t = 0; t < dim; ++t)
      probes[p * dim + t] = 0.5f * (c[p * dim + t] + c[nearest * dim + t]);
  }
  std::vector<int32_t> alone(num_probes);
  for (int p = 0; p < num_probes; ++p) cb.Assign(probes.data() + p * dim, 1, &alone[p]);
  const std::vector<float> background = Uniform(1500, dim, 32);
  for (int64_t batch : {64, 71, 100, 1030, 1500})
    for (int64_t at : {int64_t{0}, (batch - num_probes) / 2, batch - num_probes}) {
      std::vector<float> x(background.begin(), background.begin() + batch * dim);
      std::copy(probes.begin(), probes.end(), x.begin() + at * dim);
      std::vector<int32_t> labels(batch);
      cb.Assign(x.data(), batch, labels.data());
      for (int p = 0; p < num_probes; ++p)
        EXPECT_EQ(labels[at + p], alone[p])
            << "probe " << p << " at row " << at + p << " of " << batch;
    }
}

TEST(CodebookTest, AssignZeroDescriptorsIsANoOp) {
  const Codebook cb(3, 4, Uniform(3, 4, 1));
  int32_t sentinel = 12345;
  cb.Assign(nullptr, 0, &sentinel);
  EXPECT_EQ(sentinel, 12345);
}

TEST(CodebookTest, ValidateNamesTheField) {
  auto expect = [](CodebookOptions o, const std::string& needle) {
    try {
      o.Validate();
      ADD_FAILURE() << "accepted invalid options (" << needle << ")";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  CodebookOptions o;
  o.num_clusters = 0;
  expect(o, "clusters");
  o.num_clusters = 65537;
  expect(o, "clusters");
  o = CodebookOptions();
  o.num_iterations = 0;
  expect(o, "iterations");
  o.num_iterations = 1001;
  expect(o, "iterations");
  o = CodebookOptions();
  o.max_points_per_cluster = 38;
  expect(o, "max points per cluster");
  EXPECT_NO_THROW(CodebookOptions().Validate());
}

TEST(CodebookTest, ConstructorChecksValues) {
  std::vector<float> c(12, 0.5f);
  c[7] = std::numeric_limits<float>::infinity();
  try {
    Codebook(3, 4, c);
    FAIL() << "accepted a non-finite centroid";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("centroid 1"), std::string::npos) << e.what();
  }
  const Codebook ok(3, 4, std::vector<float>(12, 0.5f));
  for (float n2 : ok.centroid_norms2()) EXPECT_FLOAT_EQ(n2, 1.0f);
}

TEST(CodebookTest, TrainWithFewerPointsThanClustersThrows) {
  const std::vector<float> x = Uniform(15, 8, 4);
  CodebookOptions o;
  o.num_clusters = 16;
  try {
    Codebook::Train(x.data(), 15, 8, o);
    FAIL() << "trained 16 clusters from 15 points";
  } catch (const std::runtime_error& e) {  // data, not options: a runtime error
    EXPECT_NE(std::string(e.what()).find("16"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("15"), std::string::npos) << e.what();
  }
  o.num_clusters = 15;  // exactly enough is fine
  EXPECT_NO_THROW(Codebook::Train(x.data(), 15, 8, o));
}

TEST(CodebookTest, FingerprintDependsOnEveryByte) {
  std::vector<float> c = Uniform(4, 6, 9);
  const uint64_t base = Codebook(4, 6, c).Fingerprint();
  EXPECT_EQ(Codebook(4, 6, c).Fingerprint(), base);
  c[23] = std::nextafter(c[23], 2.0f);
  EXPECT_NE(Codebook(4, 6, c).Fingerprint(), base);
}

}  // namespace
}  // namespace lookalike
