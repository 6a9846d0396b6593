// Tests of verification's nearest-neighbour shortlists: both
// implementations (the BLAS product and the fused AVX2 kernel) give every
// query row its most similar candidate rows, best first, the lower row first
// among equals. Small integer components make every product exact in float,
// so the expected lists are exact too, ties included.
#include "search/subspace_shortlist.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

namespace lookalike {
namespace {

std::vector<float> IntegerRows(int n, int dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> value(-3, 3);
  std::vector<float> rows(static_cast<size_t>(n) * dim);
  for (float& x : rows) x = static_cast<float>(value(rng));
  return rows;
}

// By sorting every product: the definition the implementations must meet.
std::vector<int> Reference(const std::vector<float>& q, int nq, const std::vector<float>& c, int nc,
                           int dim, int shortlist) {
  std::vector<int> top(static_cast<size_t>(nq) * shortlist, -1);
  for (int i = 0; i < nq; ++i) {
    std::vector<double> dot(nc);
    for (int j = 0; j < nc; ++j)
      for (int k = 0; k < dim; ++k)
        dot[j] += double{q[static_cast<size_t>(i) * dim + k]} * c[static_cast<size_t>(j) * dim + k];
    std::vector<int> order(nc);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return dot[a] > dot[b]; });
    for (int k = 0; k < std::min(nc, shortlist); ++k)
      top[static_cast<size_t>(i) * shortlist + k] = order[k];
  }
  return top;
}

struct Shape {
  int nq, nc, dim, shortlist;
};

// Sizes that are not multiples of the kernel's 4 x 16 blocks, odd
// dimensions, the shortlist's bounds, and fewer candidates than it.
const Shape kShapes[] = {{37, 1003, 32, 4}, {4, 16, 32, 4},  {1, 5, 17, 2},
                         {9, 3, 32, 4},     {50, 200, 8, 1}, {6, 300, 32, 64}};

TEST(SubspaceShortlistTest, BlasListsAreTheBestFirstLowerRowFirstAmongEquals) {
  for (const Shape& s : kShapes) {
    const auto q = IntegerRows(s.nq, s.dim, 1), c = IntegerRows(s.nc, s.dim, 2);
    std::vector<int> top(static_cast<size_t>(s.nq) * s.shortlist, 7);
    SubspaceShortlistsBlas(q.data(), s.nq, c.data(), s.nc, s.dim, s.shortlist, top.data());
    EXPECT_EQ(top, Reference(q, s.nq, c, s.nc, s.dim, s.shortlist))
        << s.nq << " x " << s.nc << " x " << s.dim << ", shortlist " << s.shortlist;
  }
}

TEST(SubspaceShortlistTest, FusedKernelGivesTheSameListsAsBlas) {
  for (const Shape& s : kShapes) {
    const auto q = IntegerRows(s.nq, s.dim, 3), c = IntegerRows(s.nc, s.dim, 4);
    std::vector<int> fused(static_cast<size_t>(s.nq) * s.shortlist, 7);
    if (!SubspaceShortlistsFused(q.data(), s.nq, c.data(), s.nc, s.dim, s.shortlist, fused.data()))
      GTEST_SKIP() << "this CPU or build has no AVX2 and FMA";
    EXPECT_EQ(fused, Reference(q, s.nq, c, s.nc, s.dim, s.shortlist))
        << s.nq << " x " << s.nc << " x " << s.dim << ", shortlist " << s.shortlist;
  }
}

// Many exact ties (components in {0, 1} over 4 dimensions: only 16 distinct
// rows): the lower row comes first among equals in both.
TEST(SubspaceShortlistTest, TiesGoToTheLowerRowInBoth) {
  const int nq = 13, nc = 250, dim = 4, shortlist = 8;
  std::vector<float> q(static_cast<size_t>(nq) * dim), c(static_cast<size_t>(nc) * dim);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>((i * 7 + 3) % 2);
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>((i * i + i / 5) % 2);
  const std::vector<int> expected = Reference(q, nq, c, nc, dim, shortlist);
  std::vector<int> top(static_cast<size_t>(nq) * shortlist);
  SubspaceShortlistsBlas(q.data(), nq, c.data(), nc, dim, shortlist, top.data());
  EXPECT_EQ(top, expected);
  if (SubspaceShortlistsFused(q.data(), nq, c.data(), nc, dim, shortlist, top.data())) {
    EXPECT_EQ(top, expected);
  }
}

TEST(SubspaceShortlistTest, RefusesAShortlistOutsideItsBounds) {
  const auto q = IntegerRows(2, 8, 5), c = IntegerRows(20, 8, 6);
  std::vector<int> top(2 * 65);
  EXPECT_THROW(SubspaceShortlists(q.data(), 2, c.data(), 20, 8, 0, top.data()),
               std::invalid_argument);
  EXPECT_THROW(SubspaceShortlists(q.data(), 2, c.data(), 20, 8, 65, top.data()),
               std::invalid_argument);
  SubspaceShortlists(q.data(), 2, c.data(), 0, 8, 3, top.data());  // no candidates
  EXPECT_EQ(std::vector<int>(top.begin(), top.begin() + 6), std::vector<int>(6, -1));
}

}  // namespace
}  // namespace lookalike
