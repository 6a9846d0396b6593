// Tests of the crop-tolerant thumbnail correlation: an image matches itself,
// a degraded copy and a crop of it; unrelated images and flat ones do not.
#include "search/thumbnail_match.h"

#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "tests/test_images.h"

namespace lookalike {
namespace {

GreyThumbnail Stored(const cv::Mat& bgr) {
  return MakeGreyThumbnail(testing::ToGrayImage(bgr), kThumbnailSide);
}
ThumbnailMatcher Query(const cv::Mat& bgr) {
  return ThumbnailMatcher(MakeGreyThumbnail(testing::ToGrayImage(bgr), kQueryThumbnailSide));
}

// A tiny, blurred, heavily compressed copy: what local features cannot verify.
cv::Mat Degraded(const cv::Mat& image, double scale) {
  cv::Mat small, blurred;
  cv::resize(image, small, cv::Size(), scale, scale, cv::INTER_AREA);
  cv::GaussianBlur(small, blurred, cv::Size(0, 0), 1.5);
  std::vector<uint8_t> jpeg;
  cv::imencode(".jpg", blurred, jpeg, {cv::IMWRITE_JPEG_QUALITY, 12});
  return cv::imdecode(jpeg, cv::IMREAD_COLOR);
}

TEST(ThumbnailMatchTest, AnImageAndItsDegradedCopyCorrelateAlmostPerfectly) {
  const cv::Mat image = testing::MakeSyntheticImage(11);
  EXPECT_GT(Query(image).Match(Stored(image)), 0.99f);
  EXPECT_GT(Query(Degraded(image, 0.2)).Match(Stored(image)), 0.9f);
}

TEST(ThumbnailMatchTest, ACropMatchesWhereItLiesInTheStoredImage) {
  const cv::Mat image = testing::MakeSyntheticImage(12);
  // The centre 60 % of each side: 36 % of the area, one of the placements.
  const cv::Mat crop = image(cv::Rect(128, 96, 384, 288)).clone();
  const float cropped = Query(Degraded(crop, 0.3)).Match(Stored(image));
  EXPECT_GT(cropped, 0.85f);
  // Without crop placements (the whole image only), the crop would not match:
  // the unrelated images below set the level of chance.
  for (uint64_t seed = 100; seed < 110; ++seed)
    EXPECT_LT(Query(crop).Match(Stored(testing::MakeSyntheticImage(seed))), cropped - 0.1f)
        << "unrelated image " << seed;
}

TEST(ThumbnailMatchTest, UnrelatedImagesStayBelowTheThreshold) {
  const cv::Mat query = testing::MakeSyntheticImage(21);
  for (uint64_t seed = 200; seed < 220; ++seed)
    EXPECT_LT(Query(query).Match(Stored(testing::MakeSyntheticImage(seed))), 0.85f)
        << "unrelated image " << seed;
}

// One matcher serves a whole query: its placements, kept per stored size,
// give what a fresh matcher gives, whatever came before.
TEST(ThumbnailMatchTest, OneMatcherForManyCandidatesScoresAsFreshOnes) {
  const cv::Mat query = Degraded(testing::MakeSyntheticImage(41), 0.3);
  std::vector<GreyThumbnail> stored;
  for (const auto& [w, h] : std::vector<std::pair<int, int>>{{640, 480}, {480, 640}, {600, 300}})
    stored.push_back(Stored(testing::MakeSyntheticImage(41, w, h)));
  stored.push_back(stored[0]);
  ThumbnailMatcher shared = Query(query);
  for (const GreyThumbnail& t : stored) EXPECT_EQ(shared.Match(t), Query(query).Match(t));
}

// Search correlates a query's candidates on several threads with one
// matcher: from threads, thumbnails of many sizes (placements made
// concurrently, each size once) score exactly as on one thread.
TEST(ThumbnailMatchTest, OneMatcherOnManyThreadsScoresAsOnOne) {
  const cv::Mat query = Degraded(testing::MakeSyntheticImage(43), 0.3);
  std::vector<GreyThumbnail> stored;
  for (int i = 0; i < 64; ++i)  // from 1:4 to 5:2, most sizes once
    stored.push_back(Stored(testing::MakeSyntheticImage(43 + i % 3, 120 + 17 * i, 480)));
  std::vector<float> alone(stored.size()), coarse_alone(stored.size());
  ThumbnailMatcher serial = Query(query);
  for (size_t i = 0; i < stored.size(); ++i) {
    alone[i] = serial.Match(stored[i]);
    coarse_alone[i] = serial.CoarseMatch(stored[i]);
  }
  for (int round = 0; round < 4; ++round) {
    ThumbnailMatcher shared = Query(query);
    std::vector<float> threaded(stored.size()), coarse_threaded(stored.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(8)
    for (size_t i = 0; i < stored.size(); ++i) {
      threaded[i] = shared.Match(stored[i]);
      coarse_threaded[i] = shared.CoarseMatch(stored[i]);
    }
    EXPECT_EQ(threaded, alone);
    EXPECT_EQ(coarse_threaded, coarse_alone);
  }
}

// The half-resolution score picks, among many candidates, the ones the full
// correlation ranks highest: a degraded crop's original comes first among 40
// unrelated images, and the coarse and full scores of those agree in order
// (the deep candidates of search are chosen by it).
TEST(ThumbnailMatchTest, CoarseMatchRanksAsMatchDoes) {
  const cv::Mat image = testing::MakeSyntheticImage(51);
  const cv::Mat crop = image(cv::Rect(100, 80, 420, 315)).clone();  // 43 % of the area
  ThumbnailMatcher query = Query(Degraded(crop, 0.3));
  std::vector<GreyThumbnail> stored = {Stored(image)};
  for (uint64_t seed = 300; seed < 340; ++seed)
    stored.push_back(Stored(testing::MakeSyntheticImage(seed)));
  std::vector<float> coarse, full;
  for (const GreyThumbnail& t : stored) {
    coarse.push_back(query.CoarseMatch(t));
    full.push_back(query.Match(t));
  }
  EXPECT_GT(full[0], 0.85f);
  for (size_t i = 1; i < stored.size(); ++i)
    EXPECT_LT(coarse[i], coarse[0]) << "unrelated image " << i << " outranks the original";
  // Rank agreement over all pairs (Kendall's tau): well above chance.
  int concordant = 0, pairs = 0;
  for (size_t i = 0; i < stored.size(); ++i)
    for (size_t j = i + 1; j < stored.size(); ++j, ++pairs)
      concordant += (coarse[i] - coarse[j]) * (full[i] - full[j]) > 0;
  EXPECT_GT(static_cast<double>(concordant) / pairs, 0.7);
  EXPECT_EQ(query.CoarseMatch(GreyThumbnail()), -1.0f);
}

// The direct correlation is OpenCV's TM_CCOEFF_NORMED at its best position,
// for every template size the placements produce on the stored sizes.
TEST(ThumbnailMatchTest, DirectCorrelationIsOpenCVsBest) {
  cv::RNG rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    const int W = 24 + trial % 25, H = 24 + (trial * 7) % 25;
    cv::Mat target(H, W, CV_32FC1), templ;
    rng.fill(target, cv::RNG::UNIFORM, 0, 255);
    cv::GaussianBlur(target, target, cv::Size(0, 0), 1.0 + trial % 3);
    const int w = 6 + trial % (W - 5), h = 6 + (trial * 3) % (H - 5);
    if (trial % 2 == 0) {  // a noisy piece of the target: a high best
      templ = target(cv::Rect(rng.uniform(0, W - w + 1), rng.uniform(0, H - h + 1), w, h)).clone();
      cv::Mat noise(h, w, CV_32FC1);
      rng.fill(noise, cv::RNG::NORMAL, 0, 4);
      templ += noise;
    } else {  // unrelated: a low best
      templ.create(h, w, CV_32FC1);
      rng.fill(templ, cv::RNG::UNIFORM, 0, 255);
      cv::GaussianBlur(templ, templ, cv::Size(0, 0), 1.5);
    }
    cv::Mat scores;
    cv::matchTemplate(target, templ, scores, cv::TM_CCOEFF_NORMED);
    double expected = 0;
    cv::minMaxLoc(scores, nullptr, &expected);
    EXPECT_NEAR(BestNormalisedCorrelation(target, templ), expected, 1e-4)
        << "trial " << trial << ": " << w << "x" << h << " on " << W << "x" << H;
  }
}

// The vectorised correlation (8 positions per vector) finds what the
// portable one does, to float rounding: targets wide enough for one to six
// vectors of positions (two groups past 32), every template size from 6 px
// up, flat windows among textured ones.
TEST(ThumbnailMatchTest, VectorisedCorrelationIsThePortableOne) {
  cv::RNG rng(11);
  float best = 0;
  const cv::Mat probe(8, 8, CV_32FC1, cv::Scalar(1));
  if (!BestNormalisedCorrelationAvx2(probe, probe, &best))
    GTEST_SKIP() << "this CPU or build has no AVX2 and FMA";
  int compared = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int W = 8 + trial % 44, H = 8 + (trial * 5) % 30;
    cv::Mat target(H, W, CV_32FC1);
    rng.fill(target, cv::RNG::UNIFORM, 0, 255);
    cv::GaussianBlur(target, target, cv::Size(0, 0), 1.0);
    if (trial % 5 == 0) target(cv::Rect(0, 0, W / 2, H)) = cv::Scalar(90);  // flat half
    const int w = 6 + trial % (W - 5), h = 6 + (trial * 3) % (H - 5);
    cv::Mat templ =
        target(cv::Rect(rng.uniform(0, W - w + 1), rng.uniform(0, H - h + 1), w, h)).clone();
    cv::Mat noise(h, w, CV_32FC1);
    rng.fill(noise, cv::RNG::NORMAL, 0, trial % 3 == 0 ? 60 : 4);
    templ += noise;
    const float portable = BestNormalisedCorrelationPortable(target, templ);
    ASSERT_TRUE(BestNormalisedCorrelationAvx2(target, templ, &best));
    EXPECT_NEAR(best, portable, 1e-5f)
        << "trial " << trial << ": " << w << "x" << h << " on " << W << "x" << H;
    compared += portable > -1.0f;
  }
  EXPECT_GT(compared, 150);
}

// Where the target is flat, there is nothing to correlate: a template that
// OpenCV would call a perfect match on the flat half is judged on the rest.
TEST(ThumbnailMatchTest, FlatWindowsAreSkipped) {
  cv::Mat target(36, 48, CV_32FC1, cv::Scalar(120));
  cv::Mat textured = target(cv::Rect(24, 0, 24, 36));
  cv::RNG(3).fill(textured, cv::RNG::UNIFORM, 0, 255);
  cv::Mat templ(12, 12, CV_32FC1, cv::Scalar(120));
  templ.at<float>(5, 5) = 121;
  EXPECT_LT(BestNormalisedCorrelation(target, templ), 0.5f);
  EXPECT_EQ(BestNormalisedCorrelation(cv::Mat(36, 48, CV_32FC1, cv::Scalar(7)), templ), -1.0f);
}

TEST(ThumbnailMatchTest, EmptyOrFlatThumbnailsSayNothing) {
  const cv::Mat image = testing::MakeSyntheticImage(31);
  EXPECT_EQ(Query(image).Match(GreyThumbnail()), -1.0f);
  EXPECT_EQ(ThumbnailMatcher(GreyThumbnail()).Match(Stored(image)), -1.0f);
  const cv::Mat flat(480, 640, CV_8UC3, cv::Scalar(90, 90, 90));
  EXPECT_LT(Query(flat).Match(Stored(image)), 0.5f);
  EXPECT_LT(Query(image).Match(Stored(flat)), 0.5f);
}

}  // namespace
}  // namespace lookalike
