#include "indexer/nearest_flat_l2.h"

#include <faiss/IndexFlat.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace lookalike {
namespace {

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

struct Shape {
  int dim;
  int64_t centroids;
  int64_t queries;
};

// Every label and distance of a k = 1 search equals faiss::IndexFlatL2's,
// bit for bit: the codebook's shape (128-d, 512 centroids) and a slice's
// (8-d, 256), queries over two of FAISS's 4,096-query blocks, more centroids
// than one 1,024-centroid block with a ragged last group of eight, and
// queries few enough for FAISS's non-BLAS path. The centroids include exact
// copies, in the same lane of eight and in another (ties: the lower index
// wins; it fails when a lane keeps its last smallest), and the queries
// include centroids themselves (distance 0 after the clamp) and points
// halfway between two; the AVX2 pass where the CPU has it and the portable
// one.
TEST(NearestFlatL2Test, SameLabelsAndDistancesAsFaiss) {
  for (const Shape& s : {Shape{128, 512, 5000}, Shape{8, 256, 4100}, Shape{16, 1100, 300},
                         Shape{8, 77, 64}, Shape{12, 37, 19}}) {
    std::mt19937_64 rng(static_cast<uint64_t>(s.dim * 1000 + s.centroids));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> c(static_cast<size_t>(s.centroids * s.dim));
    for (float& v : c) v = normal(rng);
    // Copies of centroid 2 in another lane (5) and in its own, in the next
    // register (10) and the same one a pass later (18).
    for (int64_t j = 0; j < s.dim; ++j)
      c[5 * s.dim + j] = c[10 * s.dim + j] = c[18 * s.dim + j] = c[2 * s.dim + j];
    std::vector<float> x(static_cast<size_t>(s.queries * s.dim));
    for (float& v : x) v = normal(rng) * 0.9f;
    for (int64_t i = 0; i < s.queries; i += 7) {
      const int64_t a = (i / 7) % s.centroids, b = (i / 7 + 1) % s.centroids;
      for (int64_t j = 0; j < s.dim; ++j)
        x[i * s.dim + j] =
            (i / 7) % 2 ? c[a * s.dim + j] : 0.5f * (c[a * s.dim + j] + c[b * s.dim + j]);
    }
    for (int64_t j = 0; j < s.dim; ++j) x[3 * s.dim + j] = c[18 * s.dim + j];  // label 2
    faiss::IndexFlatL2 reference(s.dim);
    NearestFlatL2 nearest(s.dim);
    reference.add(s.centroids, c.data());
    nearest.add(s.centroids, c.data());
    std::vector<float> d_ref(s.queries), d_new(s.queries);
    std::vector<faiss::Index::idx_t> l_ref(s.queries), l_new(s.queries, -7);
    reference.search(s.queries, x.data(), 1, d_ref.data(), l_ref.data());
    for (const bool portable : {false, true}) {
      nearest.set_portable(portable);
      nearest.search(s.queries, x.data(), 1, d_new.data(), l_new.data());
      for (int64_t i = 0; i < s.queries; ++i) {
        ASSERT_EQ(l_new[i], l_ref[i])
            << (portable ? "portable, " : "") << "dim " << s.dim << ", query " << i;
        ASSERT_EQ(Bits(d_new[i]), Bits(d_ref[i]))
            << (portable ? "portable, " : "") << "dim " << s.dim << ", query " << i << ": "
            << d_new[i] << " vs " << d_ref[i];
      }
    }
  }
}

}  // namespace
}  // namespace lookalike
