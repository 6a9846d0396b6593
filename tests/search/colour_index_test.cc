// ColourIndex: 4-bit rows; the images most like a query's colour, best
// first, whatever their order in the table; similarities as
// ColourSimilarity computes them up to the rounding; zero rows and a query
// without colour give none.
#include "search/colour_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

namespace lookalike {
namespace {

// A histogram with `weight` in bin `bin` and 1 elsewhere.
std::vector<uint8_t> Peak(int bin, uint8_t weight, uint8_t elsewhere = 1) {
  std::vector<uint8_t> c(ColourIndex::kBins, elsewhere);
  c[bin] = weight;
  return c;
}

// Rows keep 4 bits a bin, two bins a byte, the even bin low: 0 and 255 stay
// the ends, 17 (one step of 255 / 15) is 1.
TEST(ColourIndexTest, RowsRoundEachBinToFourBits) {
  std::vector<uint8_t> c(ColourIndex::kBins, 0);
  c[0] = 255;
  c[1] = 17;
  c[2] = 8;  // rounds down to 0
  c[3] = 9;  // rounds up to 1
  c[ColourIndex::kBins - 1] = 128;
  const std::vector<uint8_t> row = ColourIndex::Row(c);
  ASSERT_EQ(row.size(), static_cast<size_t>(ColourIndex::kRowBytes));
  EXPECT_EQ(row[0], 0x1f);
  EXPECT_EQ(row[1], 0x10);
  EXPECT_EQ(row[ColourIndex::kRowBytes - 1], 0x80);
  EXPECT_EQ(ColourIndex::Row({}), std::vector<uint8_t>(ColourIndex::kRowBytes, 0));
}

TEST(ColourIndexTest, MostSimilarFirst) {
  ColourIndex index;
  index.Append(10, Peak(5, 100, 40));
  index.Append(11, {});  // no colour
  index.Append(12, Peak(9, 200, 40));
  index.Append(13, Peak(5, 255, 20));
  index.Append(14, Peak(5, 150, 40));
  ASSERT_EQ(index.rows(), 5);
  EXPECT_EQ(index.Search(ColourIndex::Prepare(Peak(5, 255, 20)), 3),
            (std::vector<uint64_t>{13, 14, 10}));
  EXPECT_EQ(index.Search(ColourIndex::Prepare(Peak(9, 255, 40)), 1), (std::vector<uint64_t>{12}));
  // More asked than there are images with colour: each of them, never the
  // one without.
  EXPECT_EQ(index.Search(ColourIndex::Prepare(Peak(5, 255)), 10).size(), 4u);
  EXPECT_TRUE(index.Search(ColourIndex::Prepare({}), 10).empty());
  EXPECT_TRUE(index.Search(ColourIndex::Prepare(Peak(5, 255)), 0).empty());
}

// Similarity is the cosine of the query's 8-bit bins with the row's 4-bit
// ones, over the query's with its own row: an image's own colour gives 1,
// and it stays near the 8-bit cosine.
TEST(ColourIndexTest, SimilarityIsTheCosineWithTheRoundedRow) {
  const std::vector<uint8_t> a = Peak(5, 200, 30), b = Peak(40, 180, 25);
  ColourIndex index;
  index.Append(3, a);
  index.Append(8, {});
  auto cosine = [](const std::vector<double>& x, const std::vector<double>& y) {
    double xy = 0, xx = 0, yy = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      xy += x[i] * y[i];
      xx += x[i] * x[i];
      yy += y[i] * y[i];
    }
    return xy / std::sqrt(xx * yy);
  };
  auto bins = [](const std::vector<uint8_t>& c) { return std::vector<double>(c.begin(), c.end()); };
  auto rounded = [](const std::vector<uint8_t>& c) {
    std::vector<double> out;
    for (uint8_t byte : ColourIndex::Row(c)) {
      out.push_back(byte & 15);
      out.push_back(byte >> 4);
    }
    return out;
  };
  ASSERT_TRUE(index.Similarity(3, ColourIndex::Prepare(a)).has_value());
  EXPECT_NEAR(*index.Similarity(3, ColourIndex::Prepare(a)), 1.0, 1e-6);
  const float ba = *index.Similarity(3, ColourIndex::Prepare(b));
  EXPECT_NEAR(ba, cosine(bins(b), rounded(a)) / cosine(bins(b), rounded(b)), 1e-5);
  EXPECT_NEAR(ba, cosine(bins(a), bins(b)), 0.1);
  EXPECT_LT(ba, 0.95f);
  EXPECT_EQ(index.Similarity(8, ColourIndex::Prepare(a)), 0.0f);           // held, without colour
  EXPECT_EQ(index.Similarity(3, ColourIndex::Prepare({})), 0.0f);          // a query without colour
  EXPECT_FALSE(index.Similarity(4, ColourIndex::Prepare(a)).has_value());  // not held
}

TEST(ColourIndexTest, EqualScoresKeepIdOrder) {
  ColourIndex index;
  for (uint64_t id = 1; id <= 4; ++id) index.Append(id, Peak(7, 50));
  EXPECT_EQ(index.Search(ColourIndex::Prepare(Peak(7, 50)), 4),
            (std::vector<uint64_t>{1, 2, 3, 4}));
}

TEST(ColourIndexTest, RejectsWrongSizesAndOrder) {
  ColourIndex index;
  EXPECT_THROW(index.Append(1, std::vector<uint8_t>(17, 1)), std::invalid_argument);
  EXPECT_THROW(index.Append(1, std::vector<uint8_t>(ColourIndex::kRowBytes, 1)),
               std::invalid_argument);
  index.Append(5, Peak(1, 9));
  EXPECT_THROW(index.Append(5, Peak(1, 9)), std::invalid_argument);
  EXPECT_THROW(index.Assign({1}, std::vector<uint8_t>(ColourIndex::kRowBytes + 1, 1)),
               std::invalid_argument);
  EXPECT_THROW(index.Assign({2, 1}, std::vector<uint8_t>(2 * ColourIndex::kRowBytes, 1)),
               std::invalid_argument);
  index.Assign({1, 2}, std::vector<uint8_t>(2 * ColourIndex::kRowBytes, 3));
  EXPECT_EQ(index.rows(), 2);
  EXPECT_TRUE(index.Similarity(2, ColourIndex::Prepare(Peak(1, 9))).has_value());
}

// Scan over a table in blocks, keeping a bounded list, then Best: what
// Search gives over the whole table (the persisted tables are read so).
TEST(ColourIndexTest, ScanInBlocksGivesWhatSearchGives) {
  std::mt19937 rng(7);
  ColourIndex index;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 5000; ++i) {
    std::vector<uint8_t> colour(ColourIndex::kBins, 0);
    for (int b = 0; b < 12; ++b) colour[rng() % colour.size()] = static_cast<uint8_t>(rng() % 256);
    if (i % 97 == 0) colour.clear();  // no colour: never a candidate
    ids.push_back(3 * i + 1);
    index.Append(ids.back(), colour);
  }
  std::vector<uint8_t> query(ColourIndex::kBins, 0);
  for (int b = 0; b < 20; ++b) query[rng() % query.size()] = static_cast<uint8_t>(rng() % 256);
  const ColourIndex::Query q = ColourIndex::Prepare(query);
  for (int keep : {1, 50, 6000}) {
    ColourIndex::Scored scored;
    for (int64_t at = 0; at < index.rows(); at += 333) {
      const int64_t n = std::min<int64_t>(333, index.rows() - at);
      ColourIndex::Scan(q, ids.data() + at, index.table().data() + at * ColourIndex::kRowBytes, n,
                        keep, &scored);
    }
    const std::vector<uint64_t> best = ColourIndex::Best(std::move(scored), keep);
    EXPECT_EQ(best, index.Search(q, keep)) << keep;
    ASSERT_FALSE(best.empty());
    // RowSimilarity of a row held elsewhere is Similarity's value.
    const int64_t r = static_cast<int64_t>((best[0] - 1) / 3);
    const auto row = index.table().begin() + r * ColourIndex::kRowBytes;
    EXPECT_EQ(
        ColourIndex::RowSimilarity(std::vector<uint8_t>(row, row + ColourIndex::kRowBytes), q),
        *index.Similarity(best[0], q));
  }
}

}  // namespace
}  // namespace lookalike
