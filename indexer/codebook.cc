#include "indexer/codebook.h"

#include <faiss/Clustering.h>
#include <faiss/IndexFlat.h>
#include <omp.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

#include "cuda/vlad_math.h"
#include "indexer/nearest_flat_l2.h"
#include "indexer/seed_distances.h"
#include "storage/encoding.h"
#include "util/blas.h"

namespace lookalike {
namespace {

// FAISS 1.7.3's exhaustive search runs its SGEMMs on the calling thread, so
// k-means would use one core. This index splits the queries into one block
// per OpenMP thread and searches the blocks in parallel (k-means of the dev
// set, K = 512 on 2 cores: 7.0 s -> 4.7 s). Results are identical: each
// query's nearest centroid does not depend on the blocking.
class ParallelFlatL2 final : public NearestFlatL2 {
 public:
  using NearestFlatL2::NearestFlatL2;
  void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
              const faiss::SearchParameters* params = nullptr) const override {
    const int threads = omp_get_max_threads();
    if (threads <= 1 || n < 4096) {
      NearestFlatL2::search(n, x, k, distances, labels, params);
      return;
    }
    const idx_t block = (n + threads - 1) / threads;
#pragma omp parallel for schedule(static, 1) num_threads(threads)
    for (int t = 0; t < threads; ++t) {
      const idx_t begin = t * block, end = std::min(n, begin + block);
      if (begin < end)
        NearestFlatL2::search(end - begin, x + begin * d, k, distances + begin * k,
                              labels + begin * k, params);
    }
  }
};

}  // namespace

void CodebookOptions::Validate() const {
  if (num_clusters < 1 || num_clusters > 65536)
    throw std::invalid_argument("clusters must be in 1..65536, got " +
                                std::to_string(num_clusters));
  if (num_iterations < 1 || num_iterations > 1000)
    throw std::invalid_argument("k-means iterations must be in 1..1000, got " +
                                std::to_string(num_iterations));
  if (max_points_per_cluster < 39)
    throw std::invalid_argument("max points per cluster must be >= 39, got " +
                                std::to_string(max_points_per_cluster));
}

Codebook::Codebook(int num_clusters, int dim, std::vector<float> centroids)
    : num_clusters_(num_clusters), dim_(dim), centroids_(std::move(centroids)) {
  // The shape was checked where it came from: CodebookOptions::Validate for
  // a trained codebook, the model decoder for a stored one.
  assert(num_clusters >= 1 && dim >= 1 &&
         centroids_.size() == static_cast<size_t>(num_clusters) * dim);
  norms2_.resize(num_clusters);
  for (int k = 0; k < num_clusters; ++k) {
    double s = 0;
    for (int j = 0; j < dim; ++j) {
      const float v = centroids_[static_cast<size_t>(k) * dim + j];
      if (!std::isfinite(v))
        throw std::invalid_argument("codebook: centroid " + std::to_string(k) +
                                    " has a non-finite value");
      s += static_cast<double>(v) * v;
    }
    norms2_[k] = static_cast<float>(s);
  }
  neg_half_norms2_.resize(num_clusters);
  augmented_.resize(static_cast<size_t>(num_clusters) * (dim + 1));
  for (int k = 0; k < num_clusters; ++k) {
    const float* c = centroids_.data() + static_cast<size_t>(k) * dim;
    neg_half_norms2_[k] = vlad_math::NegHalfSquaredNorm(c, dim);
    max_half_norm2_ = std::max(max_half_norm2_, -neg_half_norms2_[k]);
    std::copy_n(c, dim, augmented_.data() + static_cast<size_t>(k) * (dim + 1));
    augmented_[static_cast<size_t>(k) * (dim + 1) + dim] = neg_half_norms2_[k];
  }
}

Codebook Codebook::Train(const float* descriptors, int64_t num, int dim,
                         const CodebookOptions& options) {
  // Options were validated where they entered (IndexOptions::Validate).
  assert(options.num_clusters >= 1 && options.num_iterations >= 1);
  if (num < options.num_clusters)
    throw std::runtime_error("codebook: need at least as many descriptors as clusters (" +
                             std::to_string(options.num_clusters) + "), got " +
                             std::to_string(num) + "; index more images or lower --clusters");
  // k-means++ seeding (Arthur & Vassilvitskii, SODA 2007) on a seeded
  // subsample: FAISS's own initialisation picks K random points, which often
  // puts two centroids in one mode of the data and none in another, a local
  // optimum Lloyd iterations never leave. 64 points per centroid are plenty to
  // place the seeds and keep this step small next to the Lloyd iterations.
  std::vector<float> init;
  {
    std::mt19937_64 rng(options.seed);
    const int64_t k = options.num_clusters;
    const int64_t m = std::min<int64_t>(num, k * 64);
    std::vector<int64_t> pick(num);
    for (int64_t i = 0; i < num; ++i) pick[i] = i;
    for (int64_t i = 0; i < m && m < num; ++i)
      std::swap(pick[i], pick[std::uniform_int_distribution<int64_t>(i, num - 1)(rng)]);
    std::vector<float> sample(static_cast<size_t>(m) * dim);
    for (int64_t i = 0; i < m; ++i)
      std::copy(descriptors + pick[i] * dim, descriptors + (pick[i] + 1) * dim,
                sample.begin() + i * dim);
    const float* row0 = sample.data();
    init.reserve(static_cast<size_t>(k) * dim);
    // FAISS's distances, computed eight points at a time on this thread
    // (indexer/seed_distances.h).
    SeedDistances distances(row0, m, dim);
    const float* nearest = distances.nearest();
    int64_t chosen = std::uniform_int_distribution<int64_t>(0, m - 1)(rng);
    for (int64_t c = 0; c < k; ++c) {
      const float* centre = row0 + chosen * dim;
      init.insert(init.end(), centre, centre + dim);
      if (c + 1 == k) break;
      distances.Lower(centre);
      double total = 0;
      for (int64_t i = 0; i < m; ++i) total += nearest[i];
      // Next centre with probability proportional to the squared distance to
      // the nearest chosen one; uniformly if every point is already a centre.
      double target = std::uniform_real_distribution<double>(0.0, total)(rng);
      chosen = std::uniform_int_distribution<int64_t>(0, m - 1)(rng);
      for (int64_t i = 0; i < m && total > 0; ++i) {
        if (nearest[i] > 0) chosen = i;  // rounding fallback: last candidate
        target -= nearest[i];
        if (target < 0 && nearest[i] > 0) break;
      }
    }
  }
  faiss::ClusteringParameters params;
  params.niter = options.num_iterations;
  params.seed = static_cast<int>(options.seed & 0x7fffffff);
  params.max_points_per_centroid = options.max_points_per_cluster;
  params.min_points_per_centroid = 1;  // small collections are legitimate
  params.verbose = false;
  faiss::Clustering clustering(dim, options.num_clusters, params);
  clustering.centroids = std::move(init);  // FAISS starts from given centroids
  ParallelFlatL2 index(dim);
  clustering.train(num, descriptors, index);
  return Codebook(options.num_clusters, dim, std::move(clustering.centroids));
}

void Codebook::Assign(const float* descriptors, int64_t num, int32_t* labels) const {
  // The nearest centroid maximises x.c - ||c||^2 / 2. One SGEMM of the
  // descriptors extended with a constant 1 against the augmented centroids
  // yields it directly, so the pass after it only reads (a separate
  // ||c||^2 - 2 x.c pass that wrote its distances back was 9 % slower at
  // K = 512). Blocks of 1024 rows keep the block x K matrix (2 MiB at K = 512)
  // near the cache between the SGEMM that writes it and the pass that reads
  // it; 4096-row blocks (8 MiB) were slower.
  //
  // The SGEMM only shortlists (vlad_math.h, "Assignment"): BLAS does not
  // promise a row the same rounding wherever it sits (OpenBLAS on an AMD
  // EPYC rounded a row by the rows around it, so a near-tie, and the image's
  // vector, depended on the images encoded with it). Every centroid within
  // AssignmentSlack of the best score is rescored with AssignmentDot; a
  // shortlist of one, almost every row, needs nothing more.
  constexpr int64_t kBlock = 1024;
  constexpr int kLanes = 16;
  const int k = num_clusters_, d = dim_, da = dim_ + 1;
  const int64_t block = std::min(num, kBlock);
  std::vector<float> scores(static_cast<size_t>(block) * k);
  std::vector<float> extended(static_cast<size_t>(block) * da);
  std::vector<float> slack(static_cast<size_t>(block));
  const float one = 1.0f, zero = 0.0f;
  for (int64_t start = 0; start < num; start += kBlock) {
    const int rows = static_cast<int>(std::min(kBlock, num - start));
    for (int r = 0; r < rows; ++r) {
      const float* x = descriptors + (start + r) * d;
      std::copy_n(x, d, extended.data() + static_cast<size_t>(r) * da);
      extended[static_cast<size_t>(r) * da + d] = 1.0f;
      double norm2 = 0;
      for (int j = 0; j < d; ++j) norm2 += double{x[j]} * x[j];
      slack[r] = vlad_math::AssignmentSlack(norm2, max_half_norm2_, d);
    }
    // Column-major view: scores (K x rows) = A (K x da as da x K transposed) ^T *
    // X (da x rows).
    sgemm_("T", "N", &k, &rows, &da, &one, augmented_.data(), &da, extended.data(), &da, &zero,
           scores.data(), &k);
    for (int r = 0; r < rows; ++r) {
      const float* row = scores.data() + static_cast<size_t>(r) * k;
      // The maximum over kLanes independent lanes (vectorised), then the
      // first cluster at it.
      float lane_max[kLanes];
      for (int j = 0; j < kLanes; ++j) lane_max[j] = -std::numeric_limits<float>::infinity();
      int c = 0;
      for (; c + kLanes <= k; c += kLanes)
        for (int j = 0; j < kLanes; ++j)
          lane_max[j] = row[c + j] > lane_max[j] ? row[c + j] : lane_max[j];
      float best_value = -std::numeric_limits<float>::infinity();
      for (; c < k; ++c) best_value = row[c] > best_value ? row[c] : best_value;
      for (int j = 0; j < kLanes; ++j)
        best_value = lane_max[j] > best_value ? lane_max[j] : best_value;
      const float floor = best_value - slack[r];
      int in_reach = 0;
      for (int j = 0; j < k; ++j) in_reach += row[j] >= floor;
      int best = 0;
      if (in_reach <= 1) {
        while (best < k - 1 && !(row[best] >= best_value)) ++best;
      } else {
        const float* x = descriptors + (start + r) * d;
        float best_rescored = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < k; ++j) {
          if (!(row[j] >= floor)) continue;
          const float rescored = vlad_math::AssignmentScore(
              vlad_math::AssignmentDot(x, centroids_.data() + static_cast<size_t>(j) * d, d),
              neg_half_norms2_[j]);
          if (rescored > best_rescored) best_rescored = rescored, best = j;
        }
      }
      labels[start + r] = best;
    }
  }
}

uint64_t Codebook::Fingerprint() const {
  return encoding::Fnv1a64(centroids_.data(), centroids_.size() * sizeof(float));
}

}  // namespace lookalike
