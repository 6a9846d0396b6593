// Per-element VLAD arithmetic shared by the CPU encoder (indexer/), the CUDA
// kernels (cuda/*.cu) and the SIMT-emulator tests. Every function here is
// compiled for host and device so that the CPU oracle and the GPU path run the
// same arithmetic; only the loops around them differ.
//
// VLAD: Jégou et al., "Aggregating local descriptors into a compact image
// representation", CVPR 2010. Power and intra-normalisation: Arandjelović &
// Zisserman, "All about VLAD", CVPR 2013.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define LOOKALIKE_HD __host__ __device__ __forceinline__
#else
#define LOOKALIKE_HD inline
#endif

namespace lookalike {
namespace vlad_math {

// Assignment, the one formula of both encoders: a descriptor x goes to the
// centroid c that maximises the score x.c - ||c||^2 / 2 (since
// ||x - c||^2 = ||x||^2 - 2 score, that is the nearest centroid); ties go to
// the lowest index. The CPU (Codebook::Assign) evaluates the score inside one
// SGEMM, each centroid augmented with NegHalfSquaredNorm and each descriptor
// with a 1, and rescores the centroids within rounding of the best with a
// fixed-order dot product, so a label does not depend on the batch. The GPU
// adds NegHalfSquaredNorm to cuBLAS's x.c with AssignmentScore. The two round
// differently (the constant enters the sum at another point), so where two
// scores lie within a few ulps of each other the encoders may pick different
// centroids; tests/cuda bounds how often and by how much that moves the
// vector (cuda/README.md, "Assignment").
LOOKALIKE_HD float AssignmentScore(float dot, float neg_half_norm2) { return dot + neg_half_norm2; }

// -||c||^2 / 2 of a centroid of `dim` floats: summed in double, rounded once,
// then halved (exact).
LOOKALIKE_HD float NegHalfSquaredNorm(const float* centroid, int dim) {
  double s = 0;
  for (int j = 0; j < dim; ++j) s += static_cast<double>(centroid[j]) * centroid[j];
  return -0.5f * static_cast<float>(s);
}

// Dimension of a VLAD vector: K blocks of the descriptor dimension. The one
// definition of the encoders (CPU, CUDA, kernel bodies); a stored model's is
// ModelRecord::vlad_dim (storage/model_record.h), since storage sits below.
LOOKALIKE_HD int64_t VladDim(int num_clusters, int dim) {
  return static_cast<int64_t>(num_clusters) * dim;
}

// Sort key of a descriptor of image `image` (local to its batch) assigned to
// cluster `label`: keys order descriptors by (image, cluster).
LOOKALIKE_HD uint32_t SegmentKey(uint32_t image, uint32_t label, uint32_t num_clusters) {
  return image * num_clusters + label;
}

// Number of low key bits a radix sort must look at for keys < num_keys.
LOOKALIKE_HD int KeyBits(uint64_t num_keys) {
  int bits = 0;
  while (bits < 64 && (uint64_t{1} << bits) < num_keys) ++bits;
  return bits == 0 ? 1 : bits;
}

// Finishes one VLAD component from the sum of `count` descriptors' values in
// dimension j (accumulated in double) and the centroid's value there:
// sum_i (x_ij - c_j) = sum_i x_ij - count * c_j, rounded once.
LOOKALIKE_HD float ResidualFromSum(double sum_x, int64_t count, float centroid_value) {
  return static_cast<float>(sum_x - static_cast<double>(count) * centroid_value);
}

// Power normalisation: sign(v) * |v|^alpha. alpha = 0.5 is the signed square
// root; alpha = 1 is the identity.
LOOKALIKE_HD float PowerNormalize(float v, float alpha) {
  if (alpha == 1.0f) return v;
  const float a = alpha == 0.5f ? sqrtf(fabsf(v)) : powf(fabsf(v), alpha);
  return v < 0.0f ? -a : a;
}

// Inverse of the L2 norm given the sum of squares; 0 for an all-zero (or
// degenerate) block so that empty clusters and images without descriptors
// stay exactly zero instead of becoming NaN.
LOOKALIKE_HD float InverseNorm(float sum_squares) {
  return sum_squares > 1e-30f ? 1.0f / sqrtf(sum_squares) : 0.0f;
}

// Same in double precision, used where the sum was accumulated in double.
LOOKALIKE_HD double InverseNormD(double sum_squares) {
  return sum_squares > 1e-60 ? 1.0 / sqrt(sum_squares) : 0.0;
}

}  // namespace vlad_math
}  // namespace lookalike
