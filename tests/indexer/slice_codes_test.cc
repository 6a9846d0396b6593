#include "indexer/slice_codes.h"

#include <faiss/impl/ProductQuantizer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace lookalike {
namespace {

constexpr int kK = SliceCoder::kCentroids;

// Centroid pairs rewritten as p -/+ delta around a dyadic p (every value
// exact in float), so that a row at p is at exactly the same distance from
// both; the lower index must win, whichever comes first in the pair.
constexpr int kTiedPairs[][2] = {{3, 4}, {17, 230}, {100, 106}, {255, 1}};

// Centroids 30..69 in pairs a, b offset from a centre by the same values
// in reverse order: the same distance from the centre in exact arithmetic,
// so that which one is nearer depends only on how the sums are rounded.
constexpr int kReversedFirst = 30;
constexpr int kReversedPairs = 20;

struct Case {
  std::vector<float> centroids;  // slices x kK x slice_dim
  std::vector<float> rows;       // n x (slices x slice_dim)
  int64_t n = 0;
  std::vector<int64_t> tie_rows;  // row of each kTiedPairs entry
};

// Seeded uniform centroids with two exact duplicates per slice (as k-means
// leaves when it splits a cluster), the tied pairs, and rows that put every
// rounding and tie rule to work: random ones, the centroids themselves (the
// duplicates at distance 0), the tied midpoints, and those midpoints moved
// by a few float steps, where only the order of the sums decides.
Case MakeCase(int slices, int slice_dim, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::uniform_int_distribution<int> step(-60, 60);
  std::uniform_int_distribution<int> ulps(-3, 3);
  Case c;
  c.centroids.resize(static_cast<size_t>(slices) * kK * slice_dim);
  for (float& v : c.centroids) v = u(rng);
  auto at = [&](int m, int k) {
    return c.centroids.data() + (static_cast<size_t>(m) * kK + k) * slice_dim;
  };
  std::vector<std::vector<float>> mid(std::size(kTiedPairs));
  for (int m = 0; m < slices; ++m) {
    std::copy_n(at(m, 130), slice_dim, at(m, 133));
    std::copy_n(at(m, 9), slice_dim, at(m, 250));
    for (size_t p = 0; p < std::size(kTiedPairs); ++p)
      for (int j = 0; j < slice_dim; ++j) {
        const float centre = static_cast<float>(step(rng)) / 128.0f;
        const float delta = static_cast<float>(1 + j % 3) / 65536.0f;
        at(m, kTiedPairs[p][0])[j] = centre - delta;
        at(m, kTiedPairs[p][1])[j] = centre + delta;
        mid[p].push_back(centre);
      }
  }
  auto add_row = [&](const std::vector<float>& r) {
    c.rows.insert(c.rows.end(), r.begin(), r.end());
    ++c.n;
  };
  const size_t d = static_cast<size_t>(slices) * slice_dim;
  for (int i = 0; i < 2000; ++i) {
    std::vector<float> r(d);
    for (float& v : r) v = u(rng);
    add_row(r);
  }
  for (int k : {0, 9, 130, 133, 250, 255}) {
    std::vector<float> r;
    for (int m = 0; m < slices; ++m) r.insert(r.end(), at(m, k), at(m, k) + slice_dim);
    add_row(r);
  }
  std::uniform_real_distribution<float> offset(0.005f, 0.02f);
  for (int q = 0; q < kReversedPairs; ++q) {
    std::vector<float> r;
    for (int m = 0; m < slices; ++m) {
      std::vector<float> delta(slice_dim);
      for (float& v : delta) v = (rng() & 1 ? 1.0f : -1.0f) * offset(rng);
      for (int j = 0; j < slice_dim; ++j) {
        const float centre = u(rng);
        at(m, kReversedFirst + 2 * q)[j] = centre + delta[j];
        at(m, kReversedFirst + 2 * q + 1)[j] = centre + delta[slice_dim - 1 - j];
        r.push_back(centre);
      }
    }
    add_row(r);
  }
  for (size_t p = 0; p < std::size(kTiedPairs); ++p) {
    c.tie_rows.push_back(c.n);
    add_row(mid[p]);
    for (int i = 0; i < 200; ++i) {
      std::vector<float> r = mid[p];
      for (float& v : r)
        for (int s = ulps(rng); s != 0; s += s > 0 ? -1 : 1)
          v = std::nextafter(v, s > 0 ? 1.0f : -1.0f);
      add_row(r);
    }
  }
  return c;
}

// FAISS's codes for rows x under `centroids`.
std::vector<uint8_t> FaissCodes(const std::vector<float>& centroids, int slices, int slice_dim,
                                const std::vector<float>& x, int64_t n) {
  faiss::ProductQuantizer pq(static_cast<size_t>(slices) * slice_dim, slices, 8);
  pq.centroids = centroids;
  std::vector<uint8_t> codes(static_cast<size_t>(n) * slices);
  pq.compute_codes(x.data(), codes.data(), static_cast<size_t>(n));
  return codes;
}

void ExpectFaissCodes(int slices, int slice_dim) {
  SCOPED_TRACE("slices of " + std::to_string(slice_dim) + " dimensions");
  const Case c = MakeCase(slices, slice_dim, 1000 + slice_dim);
  const std::vector<uint8_t> want = FaissCodes(c.centroids, slices, slice_dim, c.rows, c.n);
  const SliceCoder coder(c.centroids.data(), slices, slice_dim);
  for (SliceKernel kernel : {SliceKernel::kAuto, SliceKernel::kPortable}) {
    SCOPED_TRACE(kernel == SliceKernel::kAuto ? "auto" : "portable");
    std::vector<uint8_t> got(want.size(), 0xff);
    coder.Encode(c.rows.data(), c.n, got.data(), kernel);
    int64_t differ = 0;
    for (size_t i = 0; i < want.size(); ++i) differ += got[i] != want[i];
    EXPECT_EQ(differ, 0) << "of " << want.size() << " codes";
    // The tied midpoints: the lower index of each pair, in every slice
    // where the pair is nearest (exact distances, in double).
    int64_t ties = 0;
    for (size_t p = 0; p < std::size(kTiedPairs); ++p)
      for (int m = 0; m < slices; ++m) {
        const float* x = c.rows.data() + (c.tie_rows[p] * slices + m) * slice_dim;
        auto dist = [&](int k) {
          double s = 0;
          for (int j = 0; j < slice_dim; ++j) {
            const double t =
                double{x[j]} - c.centroids[(static_cast<size_t>(m) * kK + k) * slice_dim + j];
            s += t * t;
          }
          return s;
        };
        const double tie = dist(kTiedPairs[p][0]);
        bool nearest = true;
        for (int k = 0; k < kK; ++k)
          if (k != kTiedPairs[p][0] && k != kTiedPairs[p][1]) nearest = nearest && dist(k) > tie;
        if (!nearest) continue;
        ++ties;
        EXPECT_EQ(got[c.tie_rows[p] * slices + m], std::min(kTiedPairs[p][0], kTiedPairs[p][1]));
      }
    EXPECT_GE(ties, 2 * slices) << "too few tied slices to check";
  }
}

}  // namespace

TEST(SliceCoderTest, CodesAreFaissCodesBitForBit) {
  ExpectFaissCodes(16, 8);  // the default: 16 bytes per 128-d descriptor
  ExpectFaissCodes(128, 1);
  ExpectFaissCodes(64, 2);
  ExpectFaissCodes(32, 4);
  ExpectFaissCodes(3, 15);
}

TEST(SliceCoderTest, CodesOnlyWhatFaissCodesDirectly) {
  EXPECT_TRUE(SliceCoder::Handles(1));
  EXPECT_TRUE(SliceCoder::Handles(15));
  // FAISS codes slices of 16 and more through BLAS distance tables, which
  // round differently: those stay FAISS's.
  EXPECT_FALSE(SliceCoder::Handles(16));
  EXPECT_FALSE(SliceCoder::Handles(0));
}

TEST(SliceCoderTest, NoRowsNoCodes) {
  const Case c = MakeCase(16, 8, 7);
  const SliceCoder coder(c.centroids.data(), 16, 8);
  uint8_t untouched = 0xab;
  coder.Encode(c.rows.data(), 0, &untouched);
  EXPECT_EQ(untouched, 0xab);
}

}  // namespace lookalike
