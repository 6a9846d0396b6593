// Tests of the tiny images behind thumbnail candidates: a shrunk, blurred,
// compressed copy's tiny image correlates with its original's far above
// unrelated images', and Search finds the original first among them.
#include "search/tiny_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <stdexcept>
#include <vector>

#include "tests/test_images.h"

namespace lookalike {
namespace {

GreyThumbnail ThumbnailOf(const cv::Mat& bgr, int side = kThumbnailSide) {
  return MakeGreyThumbnail(testing::ToGrayImage(bgr), side);
}

// A tiny, blurred, heavily compressed copy: what local features cannot verify.
cv::Mat Degraded(const cv::Mat& image) {
  cv::Mat small, blurred;
  cv::resize(image, small, cv::Size(), 0.25, 0.25, cv::INTER_AREA);
  cv::GaussianBlur(small, blurred, cv::Size(0, 0), 1.5);
  std::vector<uint8_t> jpeg;
  cv::imencode(".jpg", blurred, jpeg, {cv::IMWRITE_JPEG_QUALITY, 15});
  return cv::imdecode(jpeg, cv::IMREAD_COLOR);
}

int32_t Dot(const TinyIndex::Row& a, const TinyIndex::Row& b) {
  int32_t d = 0;
  for (int i = 0; i < TinyIndex::kRowBytes; ++i) d += int32_t{a[i]} * b[i];
  return d;
}

TEST(TinyIndexTest, ACopysRowCorrelatesWithItsOriginalsFarAboveUnrelatedOnes) {
  const cv::Mat image = testing::MakeSyntheticImage(61);
  const TinyIndex::Row original = TinyIndex::RowOf(ThumbnailOf(image));
  const TinyIndex::Row copy = TinyIndex::RowOf(ThumbnailOf(Degraded(image), kQueryThumbnailSide));
  const double unit = 254.0 * 254.0;  // a row's squared length
  EXPECT_NEAR(Dot(original, original) / unit, 1.0, 0.02);
  EXPECT_GT(Dot(original, copy) / unit, 0.9);
  for (uint64_t seed = 600; seed < 620; ++seed)
    EXPECT_LT(Dot(TinyIndex::RowOf(ThumbnailOf(testing::MakeSyntheticImage(seed))), copy) / unit,
              0.8)
        << "unrelated image " << seed;
}

TEST(TinyIndexTest, FlatAndEmptyThumbnailsGiveZeroRows) {
  EXPECT_TRUE(TinyIndex::IsZero(TinyIndex::RowOf(GreyThumbnail())));
  const cv::Mat flat(240, 320, CV_8UC3, cv::Scalar(90, 90, 90));
  EXPECT_TRUE(TinyIndex::IsZero(TinyIndex::RowOf(ThumbnailOf(flat))));
}

TEST(TinyIndexTest, SearchRanksTheOriginalFirstAndNeverReturnsZeroRows) {
  TinyIndex index;
  for (uint64_t seed = 700; seed < 730; ++seed)
    index.Append(seed, TinyIndex::RowOf(ThumbnailOf(testing::MakeSyntheticImage(seed))));
  index.Append(800, TinyIndex::Row{});  // no thumbnail
  const TinyIndex::Row query = TinyIndex::RowOf(
      ThumbnailOf(Degraded(testing::MakeSyntheticImage(715)), kQueryThumbnailSide));
  const std::vector<uint64_t> top = index.Search(query, 5);
  ASSERT_FALSE(top.empty());
  EXPECT_EQ(top[0], 715u);
  EXPECT_LE(top.size(), 5u);
  for (uint64_t id : index.Search(query, 100)) EXPECT_NE(id, 800u) << "a zero row matched";
  EXPECT_TRUE(index.Search(TinyIndex::Row{}, 5).empty());
  EXPECT_TRUE(index.Search(query, 0).empty());
  EXPECT_THROW(index.Append(800, query), std::invalid_argument) << "ids ascend";
  EXPECT_THROW(index.Assign({1, 2}, std::vector<int8_t>(64)), std::invalid_argument);
  EXPECT_THROW(index.Assign({2, 1}, std::vector<int8_t>(128)), std::invalid_argument);
}

// Scan over a table in blocks, keeping a bounded list, then Best: what
// Search gives over the whole table (the persisted tables are read so).
TEST(TinyIndexTest, ScanInBlocksGivesWhatSearchGives) {
  std::mt19937 rng(11);
  TinyIndex index;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 5000; ++i) {
    TinyIndex::Row row{};
    if (i % 89 != 0)
      for (int8_t& v : row) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    ids.push_back(2 * i + 5);
    index.Append(ids.back(), row);
  }
  TinyIndex::Row query{};
  for (int8_t& v : query) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  for (int keep : {1, 20, 6000}) {
    TinyIndex::Scored scored;
    for (int64_t at = 0; at < index.rows(); at += 257) {
      const int64_t n = std::min<int64_t>(257, index.rows() - at);
      TinyIndex::Scan(query, ids.data() + at, index.table().data() + at * TinyIndex::kRowBytes, n,
                      keep, &scored);
    }
    const std::vector<uint64_t> best = TinyIndex::Best(std::move(scored), keep);
    EXPECT_EQ(best, index.Search(query, keep)) << keep;
    EXPECT_FALSE(best.empty());
  }
}

}  // namespace
}  // namespace lookalike
