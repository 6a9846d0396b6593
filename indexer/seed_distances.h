// The k-means++ seeding's distance pass (Codebook::Train): after each new
// seed, every sampled point's squared distance to its nearest seed so far.
// The points are copied once into blocks of eight, dimension-major, so one
// AVX2 register holds eight points' running sums; each sum is still taken
// in dimension order, the difference, its square and the sum each rounded
// to float as FAISS's baseline fvec_L2sqr_ny (fvec_L2sqr_ref) rounds them,
// without fused multiply-add (the file is compiled with -ffp-contract=off).
// So the seeds, and the codebook, are the bits FAISS's distances gave
// (SeedDistancesTest.MatchesFaissBitForBit), in a fraction of the time and
// on one thread: the pass is too small per seed (512 seeds, 32,768 points)
// for OpenMP, whose workers spun through the serial pick between seeds.
#pragma once

#include <cstdint>
#include <vector>

namespace lookalike {

class SeedDistances {
 public:
  // `n` points of `dim` floats, row-major; they are copied. nearest() starts
  // at +infinity.
  SeedDistances(const float* points, int64_t n, int dim);

  // nearest[i] = std::min(nearest[i], ||seed - point_i||^2) for every point,
  // the distance as faiss::fvec_L2sqr_ny(.., seed, points, dim, n) gives it.
  // An AVX2 path where the CPU has it; `portable` (tests) forces the other.
  void Lower(const float* seed, bool portable = false);

  // The n running minima, in point order.
  const float* nearest() const { return nearest_.data(); }
  int64_t size() const { return n_; }

 private:
  int64_t n_;
  int dim_;
  std::vector<float> blocks_;   // block b: dim rows of 8 points' values
  std::vector<float> nearest_;  // n rounded up to a multiple of 8
};

}  // namespace lookalike
