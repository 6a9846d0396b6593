// Tests of the colour histogram and its similarity (indexer/colour.h).
#include "indexer/colour.h"

#include <gtest/gtest.h>

#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "tests/test_images.h"

namespace lookalike {
namespace {

cv::Mat Solid(int b, int g, int r, int w = 200, int h = 150) {
  return cv::Mat(h, w, CV_8UC3, cv::Scalar(b, g, r));
}

// Bin of one BGR colour, as OpenCV's 8-bit HSV conversion places it.
int BinOf(int b, int g, int r) {
  cv::Mat hsv;
  cv::cvtColor(Solid(b, g, r, 1, 1), hsv, cv::COLOR_BGR2HSV);
  const cv::Vec3b p = hsv.at<cv::Vec3b>(0, 0);
  return ((p[0] * kColourHueBins / 180) * kColourSatBins + p[1] * kColourSatBins / 256) *
             kColourValBins +
         p[2] * kColourValBins / 256;
}

TEST(ColourTest, SolidColourFillsOneBinWithUnitNorm) {
  const std::vector<uint8_t> h = ColourHistogram(Solid(20, 40, 220));  // red
  ASSERT_EQ(h.size(), static_cast<size_t>(kColourBins));
  int nonzero = 0;
  for (uint8_t v : h) nonzero += v != 0;
  EXPECT_EQ(nonzero, 1);
  EXPECT_EQ(h[BinOf(20, 40, 220)], 255);
}

TEST(ColourTest, HalfAndHalfSplitsByTheSquareRoot) {
  cv::Mat img = Solid(20, 40, 220);
  img(cv::Rect(0, 0, 100, 150)).setTo(cv::Scalar(220, 60, 20));  // left half blue
  const std::vector<uint8_t> h = ColourHistogram(img);
  // sqrt(1/2) x 255 = 180.3 in each of the two bins.
  EXPECT_NEAR(h[BinOf(20, 40, 220)], 180, 1);
  EXPECT_NEAR(h[BinOf(220, 60, 20)], 180, 1);
}

TEST(ColourTest, SimilarityIsOneForTheSameColoursAndZeroForDisjointOnes) {
  const cv::Mat photo = testing::MakeSyntheticImage(3);
  const std::vector<uint8_t> a = ColourHistogram(photo);
  EXPECT_NEAR(ColourSimilarity(a, a), 1.0f, 1e-6);
  // A resized copy keeps its colour distribution.
  cv::Mat small;
  cv::resize(photo, small, cv::Size(), 0.3, 0.3, cv::INTER_AREA);
  EXPECT_GT(ColourSimilarity(a, ColourHistogram(small)), 0.95f);
  const std::vector<uint8_t> red = ColourHistogram(Solid(20, 40, 220));
  const std::vector<uint8_t> blue = ColourHistogram(Solid(220, 60, 20));
  EXPECT_EQ(ColourSimilarity(red, blue), 0.0f);
  EXPECT_EQ(ColourSimilarity(red, blue), ColourSimilarity(blue, red));
  const float partial = ColourSimilarity(a, red);
  EXPECT_GE(partial, 0.0f);
  EXPECT_LE(partial, 1.0f);
}

TEST(ColourTest, GreyImagesHaveNoSaturation) {
  cv::Mat grey(100, 100, CV_8UC1);
  cv::randu(grey, 0, 256);
  const std::vector<uint8_t> h = ColourHistogram(grey);
  ASSERT_EQ(h.size(), static_cast<size_t>(kColourBins));
  for (int i = 0; i < kColourBins; ++i) {
    const int sat = (i / kColourValBins) % kColourSatBins;
    if (sat != 0) {
      EXPECT_EQ(h[i], 0) << "bin " << i;
    }
  }
  // The same picture in BGR form gives the same histogram.
  cv::Mat bgr;
  cv::cvtColor(grey, bgr, cv::COLOR_GRAY2BGR);
  EXPECT_EQ(ColourHistogram(bgr), h);
}

TEST(ColourTest, MissingColourIsNoEvidence) {
  const std::vector<uint8_t> a = ColourHistogram(Solid(1, 2, 3));
  EXPECT_TRUE(ColourHistogram(cv::Mat()).empty());
  EXPECT_EQ(ColourSimilarity(a, {}), 0.0f);
  EXPECT_EQ(ColourSimilarity({}, {}), 0.0f);
  EXPECT_EQ(ColourSimilarity(a, std::vector<uint8_t>(10, 1)), 0.0f);
  EXPECT_EQ(ColourSimilarity(a, std::vector<uint8_t>(kColourBins, 0)), 0.0f);
}

}  // namespace
}  // namespace lookalike
