// The codes of product quantisation: for each slice of a vector, the index of
// its nearest of 256 centroids. Exactly the codes FAISS's
// ProductQuantizer::compute_codes gives for slices of fewer than 16
// dimensions (its direct path: each distance a sum over the slice's
// dimensions in order, the first of equal distances winning), several times
// faster: the FAISS we link is built for the x86-64 baseline, where each of
// those 256 distances per slice is one call of its scalar fvec_L2sqr_ref
// (about a fifth of `index`'s CPU time at 16 slices of 8 dimensions).
// Slices of 16 dimensions or more go through FAISS, whose BLAS tables round
// differently.
#pragma once

#include <cstdint>
#include <vector>

namespace lookalike {

// Which code computes the distances: the AVX path when the CPU has AVX2, or
// the portable one (both give the same codes; tests compare them).
enum class SliceKernel { kAuto, kPortable };

// Immutable after construction; Encode is thread-safe.
class SliceCoder {
 public:
  static constexpr int kCentroids = 256;  // 8-bit codes
  // Slices of this many dimensions are coded here (FAISS's direct path).
  static bool Handles(int slice_dim) { return slice_dim >= 1 && slice_dim < 16; }

  // `centroids`: slices x kCentroids x slice_dim floats, FAISS's layout
  // (ProductQuantizer::centroids). slice_dim must satisfy Handles (asserted).
  SliceCoder(const float* centroids, int slices, int slice_dim);

  // n rows of slices x slice_dim floats -> n x slices codes (one byte each).
  void Encode(const float* x, int64_t n, uint8_t* codes,
              SliceKernel kernel = SliceKernel::kAuto) const;

 private:
  int slices_;
  int slice_dim_;
  // Each slice's centroids dimension-major: slices x slice_dim x kCentroids,
  // so that one load holds the same dimension of 8 centroids.
  std::vector<float> by_dim_;
};

}  // namespace lookalike
