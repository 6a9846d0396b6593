// Tests of the stored grey thumbnail: its size rules, its encoding and the
// refusal of corrupt values.
#include "indexer/grey_thumbnail.h"

#include <gtest/gtest.h>

#include <string>

#include "storage/encoding.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

GrayImage Gray(int width, int height) {
  return testing::ToGrayImage(testing::MakeSyntheticImage(3, width, height));
}

TEST(GreyThumbnailTest, LongestSideShrinksToTheSideKeepingTheAspect) {
  const GreyThumbnail t = MakeGreyThumbnail(Gray(640, 480), kThumbnailSide);
  EXPECT_EQ(t.width, 48);
  EXPECT_EQ(t.height, 36);
  EXPECT_EQ(t.pixels.size(), 48u * 36u);
  const GreyThumbnail portrait = MakeGreyThumbnail(Gray(300, 600), kQueryThumbnailSide);
  EXPECT_EQ(portrait.width, 48);
  EXPECT_EQ(portrait.height, 96);
}

TEST(GreyThumbnailTest, SmallImagesAreNotEnlargedAndThinOnesKeepRows) {
  const GreyThumbnail small = MakeGreyThumbnail(Gray(30, 20), kThumbnailSide);
  EXPECT_EQ(small.width, 30);
  EXPECT_EQ(small.height, 20);
  const GreyThumbnail thin = MakeGreyThumbnail(Gray(1200, 40), kThumbnailSide);
  EXPECT_EQ(thin.width, 48);
  EXPECT_EQ(thin.height, kThumbnailMinSide);
  EXPECT_TRUE(MakeGreyThumbnail(GrayImage(), kThumbnailSide).empty());
}

TEST(GreyThumbnailTest, AreaAveragingKeepsTheMeanBrightness) {
  const GrayImage g = Gray(640, 480);
  double image_mean = 0, thumb_mean = 0;
  for (uint8_t p : g.pixels) image_mean += p;
  const GreyThumbnail t = MakeGreyThumbnail(g, kThumbnailSide);
  for (uint8_t p : t.pixels) thumb_mean += p;
  EXPECT_NEAR(thumb_mean / t.pixels.size(), image_mean / g.pixels.size(), 1.0);
}

TEST(GreyThumbnailTest, EncodingRoundTripsAndCorruptValuesAreRefused) {
  const GreyThumbnail t = MakeGreyThumbnail(Gray(640, 480), kThumbnailSide);
  const std::string value = EncodeGreyThumbnail(t);
  EXPECT_EQ(value.size(), 3u + 48u * 36u);
  const GreyThumbnail back = DecodeGreyThumbnail(value);
  EXPECT_EQ(back.width, t.width);
  EXPECT_EQ(back.height, t.height);
  EXPECT_EQ(back.pixels, t.pixels);

  EXPECT_THROW(DecodeGreyThumbnail(value.substr(0, value.size() - 1)), encoding::CorruptValue);
  EXPECT_THROW(DecodeGreyThumbnail(value + "x"), encoding::CorruptValue);
  EXPECT_THROW(DecodeGreyThumbnail("\x01"), encoding::CorruptValue);
  std::string newer = value;
  newer[0] = 2;
  EXPECT_THROW(DecodeGreyThumbnail(newer), encoding::CorruptValue);
  EXPECT_THROW(EncodeGreyThumbnail(GreyThumbnail()), std::invalid_argument);
}

}  // namespace
}  // namespace lookalike
