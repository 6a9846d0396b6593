// Tests of descriptor extraction: RootSIFT is sqrt(L1-normalised SIFT) row by
// row, flat images give no descriptors, and the detector settings act.
#include "indexer/extractor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <stdexcept>
#include <string>

#include "tests/test_images.h"

namespace lookalike {
namespace {

Descriptors Extract(const std::string& type, const GrayImage& image, float contrast = 0.02f,
                    int max_features = 0, int min_keypoints = 0) {
  ExtractorOptions o;
  o.type = type;
  o.contrast_threshold = contrast;
  o.max_features = max_features;
  o.min_keypoints = min_keypoints;
  return CreateExtractor(o)->Extract(image);
}

class ExtractorTest : public ::testing::Test {
 protected:
  // OpenCV's SIFT detects in parallel and concatenates per-thread keypoint
  // lists, so row order can depend on scheduling; the pipeline runs it
  // single-threaded and so do these row-by-row comparisons.
  void SetUp() override {
    saved_threads_ = cv::getNumThreads();
    cv::setNumThreads(1);
  }
  void TearDown() override { cv::setNumThreads(saved_threads_); }
  int saved_threads_ = 1;
};

TEST_F(ExtractorTest, RootSiftIsSqrtOfL1NormalisedSift) {
  // Awkward size; the image is rich enough for hundreds of keypoints.
  const GrayImage image = testing::ToGrayImage(testing::MakeSyntheticImage(21, 333, 251));
  const Descriptors sift = Extract("sift", image);
  const Descriptors root = Extract("rootsift", image);
  ASSERT_GT(sift.num, 50);
  ASSERT_EQ(root.num, sift.num);
  ASSERT_EQ(root.dim, 128);
  ASSERT_EQ(sift.dim, 128);
  ASSERT_EQ(root.values.size(), static_cast<size_t>(root.num) * 128);
  for (int64_t i = 0; i < root.num; ++i) {
    const float* r = root.values.data() + i * 128;
    const float* s = sift.values.data() + i * 128;
    double l1 = 0, norm2 = 0;
    for (int j = 0; j < 128; ++j) l1 += std::fabs(s[j]);
    ASSERT_GT(l1, 0) << "row " << i;
    for (int j = 0; j < 128; ++j) {
      ASSERT_GE(r[j], 0.0f) << "row " << i << " col " << j;
      ASSERT_GE(s[j], 0.0f) << "SIFT itself is non-negative";
      const double expected = std::sqrt(s[j] / l1);
      ASSERT_NEAR(r[j], expected, 1e-6) << "row " << i << " col " << j;
      norm2 += double{r[j]} * r[j];
    }
    // sum_j (sqrt(s_j / l1))^2 = 1: RootSIFT rows have unit L2 norm.
    ASSERT_NEAR(norm2, 1.0, 1e-5) << "row " << i;
  }
}

TEST(RootSiftInPlaceTest, MatchesDefinitionAndKeepsZeroRows) {
  // 3 rows of an awkward dim (37): ordinary, all zero, one non-zero entry.
  const int dim = 37;
  std::vector<float> d(3 * dim, 0.0f);
  for (int j = 0; j < dim; ++j) d[j] = static_cast<float>((j * 7) % 11);
  d[2 * dim + 5] = 42.0f;
  std::vector<float> original = d;
  RootSiftInPlace(d.data(), 3, dim);
  double l1 = 0;
  for (int j = 0; j < dim; ++j) l1 += original[j];
  for (int j = 0; j < dim; ++j) EXPECT_NEAR(d[j], std::sqrt(original[j] / l1), 1e-7);
  for (int j = 0; j < dim; ++j) EXPECT_EQ(d[dim + j], 0.0f) << "zero row must stay zero, not NaN";
  for (int j = 0; j < dim; ++j) EXPECT_EQ(d[2 * dim + j], j == 5 ? 1.0f : 0.0f);
}

TEST_F(ExtractorTest, FlatAndTinyImagesGiveNoDescriptors) {
  GrayImage flat;
  flat.width = 320;
  flat.height = 240;
  flat.pixels.assign(320 * 240, 128);
  for (const char* type : {"rootsift", "sift"}) {
    const Descriptors d = Extract(type, flat);
    EXPECT_EQ(d.num, 0) << type;
    EXPECT_TRUE(d.values.empty()) << type;
    EXPECT_EQ(d.dim, 128);
  }
  // A textured but tiny image (below SIFT's useful size).
  const GrayImage tiny = testing::ToGrayImage(testing::MakeSyntheticImage(22, 15, 15));
  EXPECT_EQ(Extract("rootsift", tiny).num, 0);
  GrayImage empty;
  EXPECT_EQ(Extract("rootsift", empty).num, 0);
}

TEST_F(ExtractorTest, LowerContrastThresholdFindsMoreKeypoints) {
  const GrayImage image = testing::ToGrayImage(testing::MakeSyntheticImage(23, 320, 240));
  const int64_t strict = Extract("rootsift", image, 0.08f).num;
  const int64_t normal = Extract("rootsift", image, 0.04f).num;
  const int64_t loose = Extract("rootsift", image, 0.01f).num;
  EXPECT_GT(strict, 0);
  EXPECT_LT(strict, normal);
  EXPECT_LT(normal, loose);
}

TEST_F(ExtractorTest, SparseImagesAreRedetectedAtLowerThresholds) {
  // A small, blurred, low-contrast copy: what a heavily degraded query looks like.
  cv::Mat faint;
  cv::GaussianBlur(testing::MakeSyntheticImage(25, 160, 120), faint, cv::Size(0, 0), 2.0);
  faint.convertTo(faint, -1, 0.25, 96);
  const GrayImage image = testing::ToGrayImage(faint);
  const int64_t plain = Extract("rootsift", image, 0.04f).num;
  const Descriptors retried = Extract("rootsift", image, 0.04f, 0, 200);
  ASSERT_LT(plain, 200) << "the test image must be sparse at the default threshold";
  EXPECT_GT(retried.num, plain);
  EXPECT_EQ(retried.values.size(), static_cast<size_t>(retried.num) * 128);
  EXPECT_EQ(retried.keypoints.size(), static_cast<size_t>(retried.num));
  // The retries stop at the floor: an unreachable target ends with the
  // keypoints of the lowest threshold (0.04 halved three times = 0.005).
  EXPECT_EQ(Extract("rootsift", image, 0.04f, 0, 100000).num,
            Extract("rootsift", image, kMinContrastThreshold).num);
  // An image that already has enough keypoints is not re-detected.
  const GrayImage rich = testing::ToGrayImage(testing::MakeSyntheticImage(24, 320, 240));
  const int64_t rich_plain = Extract("rootsift", rich, 0.04f).num;
  ASSERT_GE(rich_plain, 50);
  EXPECT_EQ(Extract("rootsift", rich, 0.04f, 0, 50).num, rich_plain);
}

TEST_F(ExtractorTest, MaxFeaturesCaps) {
  const GrayImage image = testing::ToGrayImage(testing::MakeSyntheticImage(24, 320, 240));
  const int64_t all = Extract("rootsift", image).num;
  ASSERT_GT(all, 120);
  for (int cap : {1, 37, 100}) {
    const Descriptors d = Extract("rootsift", image, 0.02f, cap);
    EXPECT_LE(d.num, cap);
    EXPECT_GE(d.num, cap * 9 / 10) << "the cap keeps the strongest keypoints, not none";
    EXPECT_EQ(d.values.size(), static_cast<size_t>(d.num) * 128);
  }
}

TEST(ExtractorOptionsTest, ValidateNamesTheField) {
  auto expect_error = [](ExtractorOptions o, const std::string& needle) {
    try {
      o.Validate();  // the one check; CreateExtractor trusts validated options
      ADD_FAILURE() << "accepted invalid options (" << needle << ")";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  ExtractorOptions o;
  o.type = "surf";
  expect_error(o, "descriptor type");
  o = ExtractorOptions();
  o.contrast_threshold = 0.0f;
  expect_error(o, "contrast threshold");
  o.contrast_threshold = 1.0f;
  expect_error(o, "contrast threshold");
  o.contrast_threshold = std::nanf("");
  expect_error(o, "contrast threshold");
  o = ExtractorOptions();
  o.max_features = -1;
  expect_error(o, "max features");
  o = ExtractorOptions();
  o.min_keypoints = -1;
  expect_error(o, "min keypoints");
  EXPECT_NO_THROW(ExtractorOptions().Validate());
  EXPECT_EQ(CreateExtractor(ExtractorOptions())->dim(), 128);
}

}  // namespace
}  // namespace lookalike
