#include "indexer/seed_distances.h"

#include <faiss/utils/distances.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace lookalike {
namespace {

// Seeded values spread over six orders of magnitude, so that a sum taken in
// another order, or with a fused multiply-add, rounds differently.
std::vector<float> SpreadValues(int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-3.0f, 3.0f);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = unit(rng) * std::pow(10.0f, exponent(rng));
  return v;
}

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// The seeding's running minima after several seeds, against the same
// minima of faiss::fvec_L2sqr_ny's distances, bit for bit, for point counts
// around the blocks of eight (and the AVX2 path's groups of four blocks)
// and for several dimensions (SIFT's 128 among them), a seed among the
// points (distance 0) included; the AVX2 path where the CPU has it and the
// portable one.
TEST(SeedDistancesTest, MatchesFaissBitForBit) {
  for (const bool portable : {false, true})
    for (const int dim : {1, 8, 13, 64, 128}) {
      for (const int64_t n :
           {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{9}, int64_t{33}, int64_t{1003}}) {
        const std::vector<float> points = SpreadValues(n * dim, 11 + dim);
        const std::vector<float> seeds = SpreadValues(4 * dim, 97 + n);
        SeedDistances distances(points.data(), n, dim);
        ASSERT_EQ(distances.size(), n);
        std::vector<float> expected(static_cast<size_t>(n), std::numeric_limits<float>::infinity());
        std::vector<float> dist(static_cast<size_t>(n));
        for (int s = 0; s < 5; ++s) {
          // The fifth seed is a point itself, as the seeding's seeds are.
          const float* seed = s < 4 ? seeds.data() + s * dim : points.data() + (n / 2) * dim;
          distances.Lower(seed, portable);
          faiss::fvec_L2sqr_ny(dist.data(), seed, points.data(), dim, n);
          for (int64_t i = 0; i < n; ++i) expected[i] = std::min(expected[i], dist[i]);
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(Bits(distances.nearest()[i]), Bits(expected[i]))
                << (portable ? "portable, " : "") << "dim " << dim << ", n " << n << ", seed " << s
                << ", point " << i << ": " << distances.nearest()[i] << " vs " << expected[i];
        }
        EXPECT_EQ(distances.nearest()[n / 2], 0.0f);
      }
    }
}

}  // namespace
}  // namespace lookalike
