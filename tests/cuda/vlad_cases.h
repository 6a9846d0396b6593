// Synthetic VLAD inputs for the emulator and GPU tests: the awkward cases of
// the CUDA backend (empty clusters, one cluster holding everything, every descriptor
// in its own cluster, a single descriptor, images without descriptors,
// sizes that are not multiples of 32, K = 1). Descriptors are drawn close to
// well-separated centroids so that every backend assigns the same labels.
#pragma once

#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "indexer/codebook.h"
#include "indexer/vlad.h"

namespace lookalike {
namespace testing_cases {

enum class Labels {
  kSubset,      // uniform over the first ~2/3 of the clusters: the rest empty
  kOneCluster,  // every descriptor in cluster K - 1
  kOwnCluster,  // descriptor j of each image in cluster j % K
};

struct VladCase {
  std::string name;
  int dim;
  int num_clusters;
  std::vector<int> image_sizes;  // descriptors per image
  Labels labels;
};

inline std::ostream& operator<<(std::ostream& os, const VladCase& c) { return os << c.name; }

inline std::vector<VladCase> AwkwardCases() {
  return {
      {"subset_d128_K16", 128, 16, {50, 37, 0, 61}, Labels::kSubset},
      {"one_cluster_d33_K8", 33, 8, {40, 1, 29}, Labels::kOneCluster},
      {"own_cluster_d70_K24", 70, 24, {24, 24}, Labels::kOwnCluster},
      {"single_descriptor_d5_K4", 5, 4, {1}, Labels::kSubset},
      {"empty_images_d31_K3", 31, 3, {0, 3, 0, 0, 5, 0}, Labels::kSubset},
      {"all_empty_d16_K2", 16, 2, {0, 0}, Labels::kSubset},
      {"K1_d300", 300, 1, {9, 20}, Labels::kSubset},
      {"d257_K5", 257, 5, {13, 2}, Labels::kOwnCluster},
  };
}

// Normalisation settings crossed with the cases.
inline std::vector<VladOptions> OptionVariants() {
  VladOptions a;  // signed square root + intra + L2 (Arandjelović & Zisserman)
  a.power_alpha = 0.5f;
  VladOptions b;  // plain: no power, no intra, L2 only
  b.power_alpha = 1.0f;
  b.intra_normalize = false;
  VladOptions c;  // another power, on normalised residuals
  c.power_alpha = 0.3f;
  c.residual_normalize = true;
  return {a, b, c};
}

// Inputs of one case: codebook, descriptors (row-major), image offsets and
// the labels the descriptors were drawn around.
struct VladInput {
  Codebook codebook;
  std::vector<float> descriptors;
  std::vector<int64_t> image_offsets;
  std::vector<int32_t> labels;
  int64_t num_images() const { return static_cast<int64_t>(image_offsets.size()) - 1; }
  int64_t num_descriptors() const { return image_offsets.back(); }
};

inline Codebook MakeCodebook(int num_clusters, int dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-10.0f, 10.0f);
  std::vector<float> c(static_cast<size_t>(num_clusters) * dim);
  for (float& v : c) v = u(rng);
  return Codebook(num_clusters, dim, std::move(c));
}

inline VladInput MakeInput(const VladCase& vc, uint32_t seed = 42) {
  VladInput in{MakeCodebook(vc.num_clusters, vc.dim, seed), {}, {0}, {}};
  std::mt19937 rng(seed + 1);
  std::uniform_real_distribution<float> noise(-0.5f, 0.5f);
  const int used = std::max(1, (2 * vc.num_clusters + 2) / 3);
  std::uniform_int_distribution<int> pick(0, used - 1);
  const std::vector<float>& c = in.codebook.centroids();
  for (int size : vc.image_sizes) {
    for (int j = 0; j < size; ++j) {
      int label = 0;
      switch (vc.labels) {
        case Labels::kSubset:
          label = pick(rng);
          break;
        case Labels::kOneCluster:
          label = vc.num_clusters - 1;
          break;
        case Labels::kOwnCluster:
          label = j % vc.num_clusters;
          break;
      }
      in.labels.push_back(label);
      for (int k = 0; k < vc.dim; ++k)
        in.descriptors.push_back(c[static_cast<size_t>(label) * vc.dim + k] + noise(rng));
    }
    in.image_offsets.push_back(in.image_offsets.back() + size);
  }
  return in;
}

// Comparison tolerance: grows with the dimension (sums of dim terms).
inline double Tolerance(int dim) { return 2e-6 * std::sqrt(double(dim)); }

}  // namespace testing_cases
}  // namespace lookalike
