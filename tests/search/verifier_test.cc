// Tests of spatial verification: a transformed copy verifies with many
// inliers, unrelated images stay below the search's inlier threshold, and
// the options act (ratio test, minimum matches before RANSAC).
#include "search/verifier.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "indexer/extractor.h"
#include "indexer/local_features.h"
#include "search/searcher.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

LocalFeatures Features(const cv::Mat& bgr) {
  const GrayImage g = testing::ToGrayImage(bgr);
  const Descriptors d = CreateExtractor(ExtractorOptions())->Extract(g);
  return MakeLocalFeatures(d, static_cast<uint32_t>(g.width), static_cast<uint32_t>(g.height));
}

class VerifierTest : public ::testing::Test {
 protected:
  void SetUp() override { cv::setNumThreads(1); }
};

TEST_F(VerifierTest, TransformedCopiesVerifyUnrelatedImagesDoNot) {
  const cv::Mat original = testing::MakeSyntheticImage(31, 480, 360);
  const LocalFeatures a = Features(original);
  ASSERT_GT(a.num(), 100);
  const int threshold = SearchOptions().min_inliers;
  for (testing::Transform t : {testing::Transform::kCrop, testing::Transform::kScale,
                               testing::Transform::kRotate, testing::Transform::kJpeg}) {
    const Verification v =
        VerifyPair(Features(testing::ApplyTransform(original, t)), a, VerifyOptions());
    EXPECT_GE(v.inliers, 3 * threshold) << testing::TransformName(t);
    EXPECT_LE(v.inliers, v.matches) << testing::TransformName(t);
    EXPECT_EQ(v.inlier_pairs.size(), static_cast<size_t>(v.inliers));
  }
  for (uint64_t seed : {32, 33, 34}) {
    const Verification v =
        VerifyPair(Features(testing::MakeSyntheticImage(seed, 480, 360)), a, VerifyOptions());
    EXPECT_LT(v.inliers, threshold) << "unrelated image " << seed;
  }
}

TEST_F(VerifierTest, ImageVerifiesAgainstItselfWithEveryDistinctFeature) {
  const LocalFeatures a = Features(testing::MakeSyntheticImage(35, 400, 300));
  const Verification v = VerifyPair(a, a, VerifyOptions());
  // Orientation duplicates share a position, so not every row is a
  // distinct match, but most are.
  EXPECT_GT(v.matches, a.num() / 2);
  EXPECT_GE(v.inliers, v.matches * 9 / 10);
}

TEST_F(VerifierTest, FewerMatchesThanMinMatchesSkipRansac) {
  const cv::Mat original = testing::MakeSyntheticImage(36, 480, 360);
  const LocalFeatures a = Features(original);
  const LocalFeatures b = Features(testing::ApplyTransform(original, testing::Transform::kRotate));
  const Verification full = VerifyPair(b, a, VerifyOptions());
  ASSERT_GT(full.inliers, 0);
  VerifyOptions o;
  o.min_matches = full.matches + 1;
  const Verification skipped = VerifyPair(b, a, o);
  EXPECT_EQ(skipped.matches, full.matches) << "matching is unchanged";
  EXPECT_EQ(skipped.inliers, 0) << "no RANSAC below min_matches";
  o.min_matches = full.matches;
  EXPECT_EQ(VerifyPair(b, a, o).inliers, full.inliers);
}

TEST_F(VerifierTest, StricterRatioKeepsFewerMatches) {
  const cv::Mat original = testing::MakeSyntheticImage(37, 480, 360);
  const LocalFeatures a = Features(original);
  const LocalFeatures b = Features(testing::ApplyTransform(original, testing::Transform::kBlur));
  VerifyOptions loose, strict;
  strict.ratio = 0.5f;
  EXPECT_LT(VerifyPair(b, a, strict).matches, VerifyPair(b, a, loose).matches);
}

TEST_F(VerifierTest, EmptyOrTinyFeatureSetsGiveNothing) {
  const LocalFeatures a = Features(testing::MakeSyntheticImage(38, 320, 240));
  const LocalFeatures none;
  EXPECT_EQ(VerifyPair(none, a, VerifyOptions()).matches, 0);
  EXPECT_EQ(VerifyPair(a, none, VerifyOptions()).inliers, 0);
}

TEST(VerifyOptionsTest, ValidateNamesTheField) {
  auto expect_error = [](VerifyOptions o, const std::string& needle) {
    try {
      o.Validate();
      ADD_FAILURE() << "accepted invalid options (" << needle << ")";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  VerifyOptions o;
  o.ratio = 0;
  expect_error(o, "ratio");
  o = VerifyOptions();
  o.ransac_threshold = -1;
  expect_error(o, "RANSAC threshold");
  o = VerifyOptions();
  o.ransac_iterations = 0;
  expect_error(o, "RANSAC iterations");
  o = VerifyOptions();
  o.min_matches = 4;
  expect_error(o, "min matches");
  EXPECT_NO_THROW(VerifyOptions().Validate());
}

}  // namespace
}  // namespace lookalike
