// Tests of spatial verification: a transformed copy verifies with many
// inliers, unrelated images stay below the search's inlier threshold, and
// the options act (ratio test, minimum matches before RANSAC).
#include "search/verifier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <set>
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
  const int threshold = SearchOptions().rerank.min_inliers;
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

TEST_F(VerifierTest, LoRansacVerifiesCopiesAsClassicRansacDoes) {
  const cv::Mat original = testing::MakeSyntheticImage(44, 480, 360);
  const LocalFeatures a = Features(original);
  const int threshold = SearchOptions().rerank.min_inliers;
  VerifyOptions classic, usac;
  usac.ransac = RansacMethod::kUsac;
  for (testing::Transform t : {testing::Transform::kCrop, testing::Transform::kScale,
                               testing::Transform::kRotate, testing::Transform::kJpeg}) {
    const LocalFeatures b = Features(testing::ApplyTransform(original, t));
    const Verification c = VerifyPair(b, a, classic), u = VerifyPair(b, a, usac);
    EXPECT_EQ(u.matches, c.matches) << "matching does not depend on the fit";
    // Local optimisation refits on the inliers: never far below RANSAC's.
    EXPECT_GE(u.inliers, c.inliers * 9 / 10) << testing::TransformName(t);
    EXPECT_GE(u.inliers, 3 * threshold) << testing::TransformName(t);
    EXPECT_EQ(u.inlier_pairs.size(), static_cast<size_t>(u.inliers));
  }
  for (uint64_t seed : {45, 46, 47}) {
    const LocalFeatures u = Features(testing::MakeSyntheticImage(seed, 480, 360));
    EXPECT_LT(VerifyPair(u, a, usac).inliers, threshold) << "unrelated image " << seed;
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

// The matches of two verifications as (query row, candidate row) pairs.
std::set<std::pair<int, int>> Inliers(const Verification& v) {
  return {v.inlier_pairs.begin(), v.inlier_pairs.end()};
}

TEST_F(VerifierTest, PrincipalComponentMatchingAgreesWithExactMatching) {
  const cv::Mat original = testing::MakeSyntheticImage(39, 480, 360);
  const LocalFeatures a = Features(original);
  VerifyOptions exact, projected;
  projected.match_dims = 32;
  for (testing::Transform t : {testing::Transform::kCrop, testing::Transform::kScale,
                               testing::Transform::kRotate, testing::Transform::kBlur}) {
    const LocalFeatures b = Features(testing::ApplyTransform(original, t));
    const Verification e = VerifyPair(b, a, exact);
    const Verification p = PreparedQuery(b, projected).Verify(a);
    ASSERT_GE(e.inliers, 24) << testing::TransformName(t);
    // The shortlist keeps nearly every exact nearest neighbour; a missed
    // second neighbour only loosens the ratio test, so matches can grow.
    std::set<std::pair<int, int>> common;
    const auto ei = Inliers(e), pi = Inliers(p);
    std::set_intersection(ei.begin(), ei.end(), pi.begin(), pi.end(),
                          std::inserter(common, common.begin()));
    EXPECT_GE(common.size(), ei.size() * 9 / 10) << testing::TransformName(t);
    EXPECT_GE(p.inliers, e.inliers * 9 / 10) << testing::TransformName(t);
    EXPECT_LE(p.inliers, e.inliers * 11 / 10 + 2) << testing::TransformName(t);
  }
  const int threshold = SearchOptions().rerank.min_inliers;
  for (uint64_t seed : {40, 41, 42}) {
    const LocalFeatures u = Features(testing::MakeSyntheticImage(seed, 480, 360));
    EXPECT_LT(PreparedQuery(u, projected).Verify(a).inliers, threshold) << "unrelated " << seed;
  }
  // One prepared query serves many candidates with the same answers as
  // preparing it for each.
  const LocalFeatures b = Features(testing::ApplyTransform(original, testing::Transform::kScale));
  const PreparedQuery prepared(b, projected);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(Inliers(prepared.Verify(a)), Inliers(VerifyPair(b, a, projected)));
  }
}

TEST(StrongestFeaturesTest, KeepsTheStrongestInTheirOrder) {
  LocalFeatures f;
  f.dim = 2;
  f.width = 10;
  f.height = 20;
  const float responses[] = {0.1f, 0.5f, 0.3f, 0.5f, 0.2f};
  for (int i = 0; i < 5; ++i) {
    Keypoint k;
    k.x = static_cast<float>(i);
    k.response = responses[i];
    f.keypoints.push_back(k);
    f.descriptors.push_back(static_cast<float>(i));
    f.descriptors.push_back(-static_cast<float>(i));
  }
  const LocalFeatures s = StrongestFeatures(f, 3);
  ASSERT_EQ(s.num(), 3);
  EXPECT_EQ(s.width, 10u);
  EXPECT_EQ(s.height, 20u);
  EXPECT_EQ(s.keypoints[0].x, 1);  // 0.5
  EXPECT_EQ(s.keypoints[1].x, 2);  // 0.3
  EXPECT_EQ(s.keypoints[2].x, 3);  // 0.5, after the earlier tie
  EXPECT_EQ(s.descriptors, (std::vector<float>{1, -1, 2, -2, 3, -3}));
  EXPECT_EQ(StrongestFeatures(f, 0).num(), 5) << "0 = no limit";
  EXPECT_EQ(StrongestFeatures(f, 5).num(), 5);
  EXPECT_EQ(StrongestFeatures(f, 2).keypoints[1].x, 3) << "ties keep the earlier feature";
}

TEST_F(VerifierTest, ExtractorKeepsTheResponse) {
  const LocalFeatures a = Features(testing::MakeSyntheticImage(43, 320, 240));
  ASSERT_GT(a.num(), 0);
  for (const Keypoint& k : a.keypoints) EXPECT_GT(k.response, 0);
}

TEST(VerifyOptionsTest, ValidateNamesTheField) {
  // Default options with one field set out of range must be refused, naming it.
  auto expect_error = [](void (*set)(VerifyOptions*), const std::string& needle) {
    VerifyOptions o;
    set(&o);
    try {
      o.Validate();
      ADD_FAILURE() << "accepted invalid options (" << needle << ")";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([](VerifyOptions* o) { o->ratio = 0; }, "verify.ratio");
  expect_error([](VerifyOptions* o) { o->ransac_threshold = -1; }, "verify.ransac_threshold");
  expect_error([](VerifyOptions* o) { o->ransac_iterations = 0; }, "verify.ransac_iterations");
  expect_error([](VerifyOptions* o) { o->min_matches = 4; }, "verify.min_matches");
  expect_error([](VerifyOptions* o) { o->match_dims = -1; }, "verify.match_dims (--match-dims)");
  expect_error([](VerifyOptions* o) { o->match_shortlist = 1; }, "verify.match_shortlist");
  EXPECT_NO_THROW(VerifyOptions().Validate());
}

// Weak geometric consistency: inliers whose keypoints all turn by one angle
// and scale by one factor are consistent, wrap-around at 360 degrees
// included; scattered orientations or sizes are not.
TEST(ConsistentInliersTest, CountsTheInliersThatTurnAndScaleAlike) {
  LocalFeatures a, b;
  Verification v;
  for (int i = 0; i < 6; ++i) {
    Keypoint p;
    p.x = 10.0f * i;
    p.size = 4.0f;
    p.angle = 350.0f + 2.0f * i;  // 350 .. 360: wraps past 0 once turned
    a.keypoints.push_back(p);
    p.size = 8.0f + 0.5f * i;  // x2 .. x2.6: within 1.5 of one another
    p.angle = std::fmod(p.angle + 30.0f, 360.0f);
    b.keypoints.push_back(p);
    v.inlier_pairs.emplace_back(i, i);
  }
  v.inliers = 6;
  EXPECT_EQ(ConsistentInliers(v, a, b), 6);
  // Three of them turned the other way: the largest agreeing group is 3.
  for (int i = 3; i < 6; ++i)
    b.keypoints[i].angle = std::fmod(a.keypoints[i].angle + 150.0f, 360.0f);
  EXPECT_EQ(ConsistentInliers(v, a, b), 3);
  // Asked whether it reaches `enough`: the same answer to that question.
  EXPECT_GE(ConsistentInliers(v, a, b, 2), 2);
  EXPECT_EQ(ConsistentInliers(v, a, b, 4), 3);
  // Each turned differently: alone.
  for (int i = 0; i < 6; ++i) b.keypoints[i].angle = 60.0f * i;
  EXPECT_EQ(ConsistentInliers(v, a, b), 1);
  // The same turn, sizes scattered by factors of 3: alone again.
  for (int i = 0; i < 6; ++i) {
    b.keypoints[i].angle = a.keypoints[i].angle;
    b.keypoints[i].size = 4.0f * std::pow(3.0f, static_cast<float>(i));
  }
  EXPECT_EQ(ConsistentInliers(v, a, b), 1);
  // Pairs naming keypoints that do not exist are skipped.
  v.inlier_pairs.emplace_back(6, 99);
  EXPECT_EQ(ConsistentInliers(v, a, b), 1);
  EXPECT_EQ(ConsistentInliers(Verification(), a, b), 0);
}

}  // namespace
}  // namespace lookalike
