// Visual vocabulary: K centroids in descriptor space, learned with FAISS
// k-means, used to hard-assign descriptors to their nearest centroid.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lookalike {

// Settings of codebook training. Defaults measured on the development set (indexer/README.md).
struct CodebookOptions {
  // K, number of visual words; 1..65536. 512 measured best for its size on the
  // development set (indexer/README.md, "The encoding").
  int num_clusters = 512;
  int num_iterations = 25;           // k-means (Lloyd) iterations; 1..1000
  uint64_t seed = 1234;              // seed of the k-means initialisation
  int max_points_per_cluster = 512;  // k-means subsamples to K * this; >= 39

  // Throws std::invalid_argument naming the offending field.
  void Validate() const;
};

// K x dim centroids, row-major. Immutable after construction; all const
// methods are thread-safe.
class Codebook {
 public:
  // Wraps existing centroids (e.g. loaded from a database): num_clusters x
  // dim of them (asserted; the model decoder checks a stored model's shape).
  // Throws std::invalid_argument if a value is not finite.
  Codebook(int num_clusters, int dim, std::vector<float> centroids);

  // Learns a codebook from `num` row-major descriptors of `dim` floats with
  // FAISS k-means. `options` must have passed Validate() (asserted). Throws
  // std::runtime_error when num < num_clusters.
  static Codebook Train(const float* descriptors, int64_t num, int dim,
                        const CodebookOptions& options);

  int num_clusters() const { return num_clusters_; }
  int dim() const { return dim_; }
  const std::vector<float>& centroids() const { return centroids_; }
  // ||c_k||^2 per centroid, precomputed.
  const std::vector<float>& centroid_norms2() const { return norms2_; }
  // -||c_k||^2 / 2 per centroid (vlad_math::NegHalfSquaredNorm): the constant
  // of the assignment score, also uploaded by the CUDA encoder.
  const std::vector<float>& neg_half_norms2() const { return neg_half_norms2_; }
  // max ||c||^2 / 2, the bound vlad_math::AssignmentSlack takes (the CUDA
  // encoder derives it the same way from its neg_half_norms2).
  float max_half_norm2() const { return max_half_norm2_; }

  // Nearest centroid (squared L2) of each of `num` descriptors: the argmax of
  // vlad_math's assignment score x.c - ||c||^2 / 2, shortlisted with one SGEMM
  // in blocks (BLAS) and decided by vlad_math::AssignmentDot where centroids
  // are within rounding of the best, so a descriptor's label does not depend
  // on the other rows of the call; ties go to the lower index. labels must
  // hold num entries.
  void Assign(const float* descriptors, int64_t num, int32_t* labels) const;

  // 64-bit FNV-1a hash of the centroid bytes: the codebook's identity, as
  // stored in ModelRecord::codebook_hash.
  uint64_t Fingerprint() const;

 private:
  int num_clusters_;
  int dim_;
  std::vector<float> centroids_;
  std::vector<float> norms2_;
  std::vector<float> neg_half_norms2_;
  // K x (dim + 1): each centroid followed by -||c||^2 / 2, so one SGEMM of
  // descriptors extended with a 1 gives x.c - ||c||^2 / 2 directly, whose
  // argmax is the nearest centroid (Assign).
  std::vector<float> augmented_;
  float max_half_norm2_ = 0;
};

}  // namespace lookalike
