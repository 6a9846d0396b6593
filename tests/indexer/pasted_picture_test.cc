// Tests of finding and rectifying a picture pasted onto a uniform border
// (indexer/pasted_picture.h).
#include "indexer/pasted_picture.h"

#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <vector>

#include "tests/test_images.h"

namespace lookalike {
namespace {

cv::Mat Grey(const cv::Mat& bgr) {
  cv::Mat grey;
  cv::cvtColor(bgr, grey, cv::COLOR_BGR2GRAY);
  return grey;
}

// Zero-mean normalised correlation of two grey images of one size.
double Correlation(const cv::Mat& a, const cv::Mat& b) {
  cv::Mat r;
  cv::matchTemplate(a, b, r, cv::TM_CCOEFF_NORMED);
  return r.at<float>(0, 0);
}

// The rectified picture, resized to the original's size, correlates with it.
double RectifiedCorrelation(const cv::Mat& pasted, const cv::Mat& original) {
  const auto found = FindPastedPicture(Grey(pasted));
  if (!found) return -2;
  const cv::Mat upright = RectifyPastedPicture(pasted, *found);
  if (upright.empty()) return -3;
  cv::Mat resized;
  cv::resize(upright, resized, original.size(), 0, 0, cv::INTER_AREA);
  return Correlation(Grey(resized), Grey(original));
}

TEST(PastedPictureTest, ARotatedPasteIsFoundAndRectified) {
  const cv::Mat picture = testing::MakeSyntheticImage(3, 320, 240);
  for (const double degrees : {-26.0, -8.0, 3.0, 15.0, 29.0}) {
    const cv::Mat pasted = testing::PasteRotated(picture, degrees, cv::Size(420, 400));
    EXPECT_GT(RectifiedCorrelation(pasted, picture), 0.9) << degrees << " degrees";
  }
}

TEST(PastedPictureTest, APerspectivePasteOnAGreyBorderIsRectified) {
  const cv::Mat picture = testing::MakeSyntheticImage(4, 300, 300);
  const cv::Mat pasted = testing::PasteAt(picture, {{60, 30}, {330, 70}, {300, 340}, {20, 290}},
                                          cv::Size(360, 380), 40);
  EXPECT_GT(RectifiedCorrelation(pasted, picture), 0.85);
  // The corners come back in the picture's order: top-left first, clockwise.
  const auto found = FindPastedPicture(Grey(pasted));
  ASSERT_TRUE(found);
  const cv::Point2f expected[4] = {{60, 30}, {330, 70}, {300, 340}, {20, 290}};
  for (int i = 0; i < 4; ++i) EXPECT_LT(cv::norm(found->corners[i] - expected[i]), 4.0) << i;
}

// The paste clipped by the image's frame (its corners outside) and a text
// band drawn across the border are both tolerated.
TEST(PastedPictureTest, AClippedPasteAndAnOverlayAcrossTheBorderAreTolerated) {
  const cv::Mat picture = testing::MakeSyntheticImage(5, 320, 320);
  const cv::Mat clipped = testing::PasteRotated(picture, 24, {360, 360});
  EXPECT_GT(RectifiedCorrelation(clipped, picture), 0.8);

  cv::Mat banded = testing::PasteRotated(picture, -20, {460, 460});
  cv::rectangle(banded, cv::Rect(0, 200, 460, 28), cv::Scalar(60, 60, 60), cv::FILLED);
  cv::putText(banded, "vacances", {250, 222}, cv::FONT_HERSHEY_SIMPLEX, 0.7,
              cv::Scalar(255, 255, 255), 2);
  EXPECT_GT(RectifiedCorrelation(banded, picture), 0.8);
}

TEST(PastedPictureTest, PhotosWithoutAPastedPictureAreLeftAlone) {
  const cv::Mat photo = testing::MakeSyntheticImage(6, 320, 240);
  EXPECT_FALSE(FindPastedPicture(Grey(photo)));
  // A black band along one side (letterboxing) is no paste: the picture
  // keeps three of the frame's sides.
  cv::Mat letterbox = photo.clone();
  letterbox(cv::Rect(0, 0, 320, 60)).setTo(cv::Scalar::all(0));
  EXPECT_FALSE(FindPastedPicture(Grey(letterbox)));
  // A thin black frame, slightly skewed (a camera's undistortion border): the
  // picture rectified would be the image again.
  const cv::Mat framed =
      testing::PasteAt(photo, {{6, 3}, {313, 7}, {316, 236}, {3, 232}}, {320, 240});
  EXPECT_FALSE(FindPastedPicture(Grey(framed)));
  // A dark but textured surround (a night sky with stars) is not uniform.
  cv::Mat night(400, 420, CV_8UC3);
  cv::randu(night, cv::Scalar::all(0), cv::Scalar::all(40));
  testing::PasteRotated(photo, 20, {420, 400})
      .copyTo(night, Grey(testing::PasteRotated(
                         cv::Mat(photo.size(), CV_8UC3, cv::Scalar::all(255)), 20, {420, 400})));
  EXPECT_FALSE(FindPastedPicture(Grey(night)));
  // Flat, tiny and empty images.
  EXPECT_FALSE(FindPastedPicture(cv::Mat(200, 200, CV_8UC1, cv::Scalar(0))));
  EXPECT_FALSE(FindPastedPicture(cv::Mat(10, 10, CV_8UC1, cv::Scalar(0))));
  EXPECT_FALSE(FindPastedPicture(cv::Mat()));
}

TEST(PastedPictureTest, RectifyScalesCornersToAnotherSizeOfTheImage) {
  const cv::Mat picture = testing::MakeSyntheticImage(7, 320, 240);
  const cv::Mat pasted = testing::PasteRotated(picture, 12, {420, 400});
  const auto found = FindPastedPicture(Grey(pasted));
  ASSERT_TRUE(found);
  cv::Mat half;
  cv::resize(pasted, half, cv::Size(210, 200), 0, 0, cv::INTER_AREA);
  const cv::Mat upright = RectifyPastedPicture(half, *found, 0.5);
  EXPECT_NEAR(upright.cols, 160, 3);
  EXPECT_NEAR(upright.rows, 120, 3);
  EXPECT_TRUE(RectifyPastedPicture(half, *found, 0.01).empty()) << "smaller than 8 px";
}

}  // namespace
}  // namespace lookalike
