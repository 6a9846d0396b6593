// ColourIndex: the rows most like a query's colour, best first, whatever
// their order in the table; zero rows and a query without colour give none.
#include "search/colour_index.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace lookalike {
namespace {

// A histogram with `weight` in bin `bin` and 1 elsewhere.
std::vector<uint8_t> Peak(int bin, uint8_t weight) {
  std::vector<uint8_t> c(ColourIndex::kRowBytes, 1);
  c[bin] = weight;
  return c;
}

TEST(ColourIndexTest, MostSimilarRowsFirst) {
  ColourIndex index;
  index.Append(Peak(5, 100));  // row 0
  index.Append({});            // row 1: no colour
  index.Append(Peak(9, 200));  // row 2
  index.Append(Peak(5, 200));  // row 3
  index.Append(Peak(5, 150));  // row 4
  ASSERT_EQ(index.rows(), 5);
  EXPECT_EQ(index.Search(Peak(5, 255), 3), (std::vector<int64_t>{3, 4, 0}));
  EXPECT_EQ(index.Search(Peak(9, 255), 1), (std::vector<int64_t>{2}));
  // More asked than there are rows with colour: every such row, never the
  // zero one.
  EXPECT_EQ(index.Search(Peak(5, 255), 10).size(), 4u);
  EXPECT_TRUE(index.Search({}, 10).empty());
  EXPECT_TRUE(index.Search(Peak(5, 255), 0).empty());
}

TEST(ColourIndexTest, EqualScoresKeepTableOrder) {
  ColourIndex index;
  for (int i = 0; i < 4; ++i) index.Append(Peak(7, 50));
  EXPECT_EQ(index.Search(Peak(7, 50), 4), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(ColourIndexTest, RejectsWrongSizes) {
  ColourIndex index;
  EXPECT_THROW(index.Append(std::vector<uint8_t>(17, 1)), std::invalid_argument);
  EXPECT_THROW(index.Assign(std::vector<uint8_t>(ColourIndex::kRowBytes + 1, 1)),
               std::invalid_argument);
  index.Assign(std::vector<uint8_t>(2 * ColourIndex::kRowBytes, 3));
  EXPECT_EQ(index.rows(), 2);
}

}  // namespace
}  // namespace lookalike
