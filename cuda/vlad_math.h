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
// the lowest index. Both encoders get the scores from an SGEMM (the CPU's
// with the constant inside, each centroid augmented with NegHalfSquaredNorm
// and each descriptor with a 1; the GPU's adding it with AssignmentScore),
// and a BLAS rounds a row differently with the rows around it. So the SGEMM
// only shortlists: every centroid within AssignmentSlack of the best score
// is rescored with AssignmentDot, whose order is fixed, and the best
// rescored one wins. The label is then the argmax of AssignmentScore(
// AssignmentDot(x, c), NegHalfSquaredNorm(c)) whatever the batch, the same
// on the CPU and the GPU (cuda/README.md, "Assignment").
LOOKALIKE_HD float AssignmentScore(float dot, float neg_half_norm2) { return dot + neg_half_norm2; }

// A product and a sum rounded separately, as the host computes them (x86-64
// without -march has no FMA): nvcc would otherwise fuse them into one FMA,
// and the GPU's AssignmentDot would differ from the CPU's in the last bit.
LOOKALIKE_HD float ProductRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
LOOKALIKE_HD float SumRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// x.c over `dim` floats in a fixed order: eight partial sums over blocks of
// eight, the tail, then the partial sums in order (util/rows.h's LanedDot
// order, which the host compiler vectorises).
LOOKALIKE_HD float AssignmentDot(const float* x, const float* c, int dim) {
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= dim; i += 8)
    for (int k = 0; k < 8; ++k) part[k] = SumRn(part[k], ProductRn(x[i + k], c[i + k]));
  float sum = 0;
  for (; i < dim; ++i) sum = SumRn(sum, ProductRn(x[i], c[i]));
  for (int k = 0; k < 8; ++k) sum = SumRn(sum, part[k]);
  return sum;
}

// How far below the best SGEMM score a centroid may be and still be the best
// by AssignmentDot. A float sum of n terms, in any order, is within
// gamma_n S of the exact sum, S the sum of the terms' magnitudes and
// gamma_n <= n eps / 2; here n = dim + 1 and S <= ||x|| max||c|| +
// max ||c||^2 / 2. The SGEMM and AssignmentDot are each that close to the
// exact score, so the winner by AssignmentDot is at most (dim + 1) eps S
// below the best SGEMM score; the slack is twice that, against the rounding
// of the bound itself. x_norm2 = ||x||^2; max_half_norm2 = max ||c||^2 / 2,
// the largest -NegHalfSquaredNorm (max ||c|| is the square root of twice
// it: the halving is exact).
LOOKALIKE_HD float AssignmentSlack(double x_norm2, float max_half_norm2, int dim) {
  constexpr double kFloatEpsilon = 1.1920928955078125e-7;  // 2^-23
  return static_cast<float>(2.0 * (dim + 1) * kFloatEpsilon *
                            (sqrt(x_norm2) * sqrt(2.0 * max_half_norm2) + max_half_norm2));
}

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
