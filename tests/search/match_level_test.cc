// Tests of match levels: names, parsing, the classification rule on
// hand-made evidence, and the evidence measured from a homography and from
// aligned thumbnails.
#include "search/match_level.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <opencv2/imgproc.hpp>
#include <random>
#include <stdexcept>
#include <string>

#include "indexer/grey_thumbnail.h"
#include "search/match_evidence.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

TEST(MatchLevelTest, NamesRoundTripAndOrder) {
  for (MatchLevel l : {MatchLevel::kNone, MatchLevel::kView, MatchLevel::kPart, MatchLevel::kCopy,
                       MatchLevel::kIdentical})
    EXPECT_EQ(ParseMatchLevel(MatchLevelName(l)), l);
  EXPECT_STREQ(MatchLevelName(MatchLevel::kCopy), "copy");
  EXPECT_TRUE(MatchLevel::kIdentical > MatchLevel::kCopy);
  EXPECT_TRUE(MatchLevel::kCopy > MatchLevel::kPart);
  EXPECT_TRUE(MatchLevel::kPart > MatchLevel::kView);
  EXPECT_TRUE(MatchLevel::kView > MatchLevel::kNone);
}

TEST(MatchLevelTest, ParseNamesTheAcceptedValues) {
  try {
    ParseMatchLevel("dupe");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("dupe"), std::string::npos) << what;
    EXPECT_NE(what.find("none, view, part, copy or identical"), std::string::npos) << what;
  }
  EXPECT_THROW(ParseMatchLevel("Copy"), std::invalid_argument);
}

TEST(MatchLevelTest, OptionsValidateNamesTheField) {
  MatchLevelOptions o;
  EXPECT_NO_THROW(o.Validate());
  o.copy_min_content = 1.5f;
  try {
    o.Validate();
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("copy min content"), std::string::npos) << e.what();
  }
}

// Evidence of an uncropped, re-encoded copy.
MatchEvidence CopyEvidence() {
  MatchEvidence e;
  e.verified = true;
  e.matches = 300;
  e.inliers = 280;
  e.coverage = 0.6f;
  e.hull_a = e.hull_b = 0.85f;
  e.homography = true;
  e.overlap_a = e.overlap_b = 1.0f;
  e.content_a = e.content_b = 1.0f;
  e.scale = 0.5f;
  e.residual = 0.4f;
  e.structured_residual = 0.15f;
  e.aligned_correlation = 0.97f;
  return e;
}

TEST(MatchLevelTest, ClassifiesTheLevels) {
  EXPECT_EQ(ClassifyMatch(CopyEvidence()), MatchLevel::kCopy);

  MatchEvidence identical;
  identical.identical = true;
  EXPECT_EQ(ClassifyMatch(identical), MatchLevel::kIdentical);

  // A crop keeping 80 % of the picture is still a copy ...
  MatchEvidence small_crop = CopyEvidence();
  small_crop.content_b = 0.8f;
  EXPECT_EQ(ClassifyMatch(small_crop), MatchLevel::kCopy);
  // ... one keeping 40 % a part: a lies inside b, b is mostly outside a.
  MatchEvidence crop = CopyEvidence();
  crop.content_b = 0.4f;
  crop.hull_b = 0.3f;
  EXPECT_EQ(ClassifyMatch(crop), MatchLevel::kPart);
  // A half crop that cut away only a plain background keeps most of the
  // content but half the area: a part.
  MatchEvidence plain_half = CopyEvidence();
  plain_half.content_b = 0.72f;
  plain_half.overlap_b = 0.49f;
  EXPECT_EQ(ClassifyMatch(plain_half), MatchLevel::kPart);
  // The same the other way round (b inside a), pasted in perspective.
  MatchEvidence pasted = CopyEvidence();
  pasted.content_a = 0.2f;
  pasted.hull_a = 0.05f;
  pasted.perspective = 0.4f;
  EXPECT_EQ(ClassifyMatch(pasted), MatchLevel::kPart);
  // A shared logo: inliers packed into a corner of either image.
  MatchEvidence logo = CopyEvidence();
  logo.hull_a = logo.hull_b = 0.02f;
  EXPECT_EQ(ClassifyMatch(logo), MatchLevel::kView);

  // The whole picture in perspective: not a copy; a part (a photographed
  // print) while its pixels agree.
  MatchEvidence tilted = CopyEvidence();
  tilted.perspective = 0.3f;
  EXPECT_EQ(ClassifyMatch(tilted), MatchLevel::kPart);
  MatchEvidence stretched = CopyEvidence();
  stretched.anisotropy = 0.3f;
  EXPECT_EQ(ClassifyMatch(stretched), MatchLevel::kPart);
  // Another shot: parallax or moved things (a structured residual), or
  // pixels that differ once aligned.
  MatchEvidence parallax = CopyEvidence();
  parallax.residual = 1.5f;
  parallax.structured_residual = 1.6f;
  EXPECT_EQ(ClassifyMatch(parallax), MatchLevel::kView);
  MatchEvidence moved = CopyEvidence();
  moved.aligned_correlation = 0.5f;
  EXPECT_EQ(ClassifyMatch(moved), MatchLevel::kView);
  // Many matches off the homography: a chance verification.
  MatchEvidence loose = CopyEvidence();
  loose.inliers = 100;
  EXPECT_EQ(ClassifyMatch(loose), MatchLevel::kView);
  // Shifted framing: neither keeps most of its content inside the other.
  MatchEvidence shifted = CopyEvidence();
  shifted.content_a = shifted.content_b = 0.6f;
  EXPECT_EQ(ClassifyMatch(shifted), MatchLevel::kView);
}

TEST(MatchLevelTest, AStructuredResidualBelowTheFloorOrKeypointNoiseIsExact) {
  EXPECT_EQ(StructureNeighbours(280), 9);
  EXPECT_EQ(StructureNeighbours(18), 9);
  EXPECT_EQ(StructureNeighbours(17), 8);
  EXPECT_EQ(StructureNeighbours(8), 4);
  // Noise alone: the neighbourhood means keep about half of the RMS.
  MatchEvidence noisy = CopyEvidence();
  noisy.residual = 2.0f;
  noisy.structured_residual = 1.0f;
  EXPECT_EQ(ClassifyMatch(noisy), MatchLevel::kCopy);
  // Coherent: as large as the RMS.
  noisy.structured_residual = 1.9f;
  EXPECT_EQ(ClassifyMatch(noisy), MatchLevel::kView);
  // Below the floor whatever the ratio.
  MatchEvidence tiny = CopyEvidence();
  tiny.residual = 0.1f;
  tiny.structured_residual = 0.25f;
  EXPECT_EQ(ClassifyMatch(tiny), MatchLevel::kCopy);
  // A strong JPEG's blocks: a coherent but sub-pixel shift is a copy; a
  // video frame's moving parts (1.1 px at an RMS of 1.0) are not.
  MatchEvidence blocky = CopyEvidence();
  blocky.residual = 0.64f;
  blocky.structured_residual = 0.57f;
  EXPECT_EQ(ClassifyMatch(blocky), MatchLevel::kCopy);
  MatchEvidence frames = CopyEvidence();
  frames.residual = 1.0f;
  frames.structured_residual = 1.1f;
  EXPECT_EQ(ClassifyMatch(frames), MatchLevel::kView);
}

TEST(MatchLevelTest, UnverifiedIsNoneWhateverElseAgrees) {
  MatchEvidence e = CopyEvidence();
  e.verified = false;
  e.aligned_correlation = 0.99f;
  EXPECT_EQ(ClassifyMatch(e), MatchLevel::kNone);
  e.identical = true;
  EXPECT_EQ(ClassifyMatch(e), MatchLevel::kIdentical);
}

TEST(MatchLevelTest, UnmeasuredPixelsLeaveGeometryToDecide) {
  MatchEvidence e = CopyEvidence();
  e.aligned_correlation.reset();
  EXPECT_EQ(ClassifyMatch(e), MatchLevel::kCopy);
}

// Features of a w x h frame with keypoints at `points`.
LocalFeatures FrameWith(uint32_t w, uint32_t h, const std::vector<cv::Point2f>& points) {
  LocalFeatures f;
  f.width = w;
  f.height = h;
  f.dim = 1;
  for (const auto& p : points) {
    Keypoint k;
    k.x = p.x;
    k.y = p.y;
    f.keypoints.push_back(k);
    f.descriptors.push_back(1);
  }
  return f;
}

// Verification of a (w x h) against its image under `h`, with inliers at
// a grid of points covering a.
struct Mapped {
  LocalFeatures a, b;
  Verification v;
};
Mapped MapGrid(uint32_t aw, uint32_t ah, uint32_t bw, uint32_t bh, const cv::Matx33d& h) {
  std::vector<cv::Point2f> pa, pb;
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 5; ++x) pa.emplace_back((x + 0.5f) * aw / 5, (y + 0.5f) * ah / 5);
  cv::perspectiveTransform(pa, pb, cv::Mat(h));
  Mapped m{FrameWith(aw, ah, pa), FrameWith(bw, bh, pb), {}};
  m.v.matches = m.v.inliers = static_cast<int>(pa.size());
  for (int i = 0; i < m.v.inliers; ++i) m.v.inlier_pairs.emplace_back(i, i);
  std::array<double, 9> hom;
  for (int i = 0; i < 9; ++i) hom[static_cast<size_t>(i)] = h.val[i];
  m.v.homography = hom;
  return m;
}

TEST(MatchEvidenceTest, MeasuresAHalfSizeQuarterTurn) {
  // a (400 x 300) rotated 90 degrees and halved: b is 150 x 200.
  const cv::Matx33d h(0, -0.5, 150, 0.5, 0, 0, 0, 0, 1);
  const Mapped m = MapGrid(400, 300, 150, 200, h);
  const MatchEvidence e = MeasureMatch(m.v, m.a, m.b, 8);
  EXPECT_TRUE(e.verified);
  EXPECT_TRUE(e.homography);
  EXPECT_FALSE(e.mirrored);
  EXPECT_NEAR(e.scale, 0.5, 1e-4);
  EXPECT_NEAR(std::abs(e.rotation), 90, 1e-3);
  EXPECT_NEAR(e.anisotropy, 0, 1e-4);
  EXPECT_NEAR(e.perspective, 0, 1e-6);
  EXPECT_NEAR(e.overlap_a, 1, 1e-6);
  EXPECT_NEAR(e.overlap_b, 1, 1e-6);
  // The grid's hull: 4/5 of each side.
  EXPECT_NEAR(e.hull_a, 0.64, 0.01);
  EXPECT_NEAR(e.hull_b, 0.64, 0.01);
  EXPECT_FLOAT_EQ(e.coverage, 1.0f);
}

TEST(MatchEvidenceTest, MeasuresAMirrorACropAndPerspective) {
  const cv::Matx33d mirror(-1, 0, 400, 0, 1, 0, 0, 0, 1);
  const Mapped flipped = MapGrid(400, 300, 400, 300, mirror);
  const MatchEvidence f = MeasureMatch(flipped.v, flipped.a, flipped.b, 8);
  EXPECT_TRUE(f.mirrored);
  EXPECT_NEAR(f.rotation, 0, 1e-3);
  EXPECT_NEAR(f.overlap_a, 1, 1e-6);

  // a is the middle half (each side) of b, enlarged twice: a maps inside b
  // entirely, b only a quarter inside a.
  const cv::Matx33d crop(0.5, 0, 100, 0, 0.5, 75, 0, 0, 1);
  Mapped part = MapGrid(400, 300, 400, 300, crop);
  // b's own keypoints, all over it (a 5 x 5 grid), besides the matched ones.
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 5; ++x) {
      Keypoint k;
      k.x = (x + 0.5f) * 80;
      k.y = (y + 0.5f) * 60;
      part.b.keypoints.push_back(k);
    }
  const MatchEvidence p = MeasureMatch(part.v, part.a, part.b, 8);
  EXPECT_NEAR(p.overlap_a, 1, 1e-6);
  EXPECT_NEAR(p.overlap_b, 0.25, 0.01);
  EXPECT_NEAR(p.content_a, 1, 1e-6);
  // b's keypoints inside a: the 25 matched, and of its own grid those in
  // its middle half (within 2 % of it), 9 of 25.
  EXPECT_NEAR(p.content_b, (25.0 + 9.0) / 50, 1e-6);
  EXPECT_EQ(ClassifyMatch(p), MatchLevel::kPart);

  // A wall seen at an angle: the projective denominator varies by 1.4x
  // over the inliers (x from 40 to 360).
  const cv::Matx33d tilt(1, 0, 0, 0, 1, 0, 0.5 / 400, 0, 1);
  const Mapped wall = MapGrid(400, 300, 400, 300, tilt);
  const MatchEvidence w = MeasureMatch(wall.v, wall.a, wall.b, 8);
  EXPECT_NEAR(w.perspective, 1.45 / 1.05 - 1, 1e-4);
  EXPECT_GT(w.anisotropy, 0.1);
  // Never a copy; a part (a picture pasted in perspective) unless its
  // pixels, once aligned, disagree.
  EXPECT_EQ(ClassifyMatch(w), MatchLevel::kPart);
  MatchEvidence w_pixels = w;
  w_pixels.aligned_correlation = 0.3f;
  EXPECT_EQ(ClassifyMatch(w_pixels), MatchLevel::kView);

  // Too few inliers: not verified.
  EXPECT_FALSE(MeasureMatch(wall.v, wall.a, wall.b, 26).verified);
}

// a's 20 x 15 grid of inliers matched in b at the same place moved by
// `shift`(point).
template <typename Shift>
Mapped Shifted(Shift shift) {
  std::vector<cv::Point2f> pa, pb;
  for (int y = 0; y < 15; ++y)
    for (int x = 0; x < 20; ++x) {
      pa.emplace_back(10.0f + 20 * x, 10.0f + 20 * y);
      pb.push_back(pa.back() + shift(pa.back()));
    }
  Mapped m{FrameWith(400, 300, pa), FrameWith(400, 300, pb), {}};
  m.v.matches = m.v.inliers = static_cast<int>(pa.size());
  for (int i = 0; i < m.v.inliers; ++i) m.v.inlier_pairs.emplace_back(i, i);
  m.v.homography = std::array<double, 9>{1, 0, 0, 0, 1, 0, 0, 0, 1};
  return m;
}

TEST(MatchEvidenceTest, TellsKeypointNoiseFromAShiftedRegion) {
  // Independent noise of about a pixel: the neighbourhood means keep about
  // a third of it.
  std::mt19937 rng(3);
  std::normal_distribution<float> noise(0.0f, 0.7f);
  const Mapped noisy = Shifted([&](cv::Point2f) { return cv::Point2f(noise(rng), noise(rng)); });
  const MatchEvidence n = MeasureMatch(noisy.v, noisy.a, noisy.b, 8);
  EXPECT_NEAR(n.residual, 1.0, 0.15);
  EXPECT_LT(n.structured_residual, 0.7f * n.residual);
  EXPECT_EQ(ClassifyMatch(n), MatchLevel::kCopy);
  // A thing in the middle moved 2 pixels between two frames (a sixth of
  // the inliers): the residual is small overall, coherent where it is.
  const Mapped moved = Shifted([](cv::Point2f p) {
    const bool inside = std::abs(p.x - 200) < 90 && std::abs(p.y - 150) < 70;
    return inside ? cv::Point2f(2.0f, 0.0f) : cv::Point2f(0.0f, 0.0f);
  });
  const MatchEvidence m = MeasureMatch(moved.v, moved.a, moved.b, 8);
  EXPECT_GT(m.structured_residual, 1.2f);
  EXPECT_GT(m.structured_residual, m.residual);
  EXPECT_EQ(ClassifyMatch(m), MatchLevel::kView);
}

TEST(MatchEvidenceTest, WithoutAHomographyOnlyCountsAreMeasured) {
  Mapped m = MapGrid(400, 300, 400, 300, cv::Matx33d::eye());
  m.v.homography.reset();
  const MatchEvidence e = MeasureMatch(m.v, m.a, m.b, 8);
  EXPECT_TRUE(e.verified);
  EXPECT_FALSE(e.homography);
  EXPECT_EQ(ClassifyMatch(e), MatchLevel::kView);
}

GreyThumbnail Thumb(const cv::Mat& bgr, int side) {
  return MakeGreyThumbnail(testing::ToGrayImage(bgr), side);
}

TEST(MatchEvidenceTest, AlignedThumbnailsOfACopyCorrelateAndOfAnotherPictureDoNot) {
  const cv::Mat a = testing::MakeSyntheticImage(7, 480, 360);
  // b: a rotated by 90 degrees and halved (180 x 240).
  cv::Mat b;
  cv::rotate(a, b, cv::ROTATE_90_CLOCKWISE);
  cv::resize(b, b, cv::Size(180, 240), 0, 0, cv::INTER_AREA);
  // a's frame (480 x 360) to b's (180 x 240): (x, y) -> (180 - y / 2, x / 2).
  const std::array<double, 9> h = {0, -0.5, 180, 0.5, 0, 0, 0, 0, 1};
  const GreyThumbnail ta = Thumb(a, kQueryThumbnailSide), tb = Thumb(b, kThumbnailSide);
  const auto same = AlignedCorrelation(ta, 480, 360, tb, 180, 240, h);
  ASSERT_TRUE(same.has_value());
  EXPECT_GT(*same, 0.9f);
  // A wrong alignment (no rotation) of the same two thumbnails.
  const std::array<double, 9> wrong = {0.375, 0, 0, 0, 0.375 * 240 / 180, 0, 0, 0, 1};
  const auto misaligned = AlignedCorrelation(ta, 480, 360, tb, 180, 240, wrong);
  ASSERT_TRUE(misaligned.has_value());
  EXPECT_LT(*misaligned, 0.5f);
  // Another picture at the right alignment.
  cv::Mat other;
  cv::rotate(testing::MakeSyntheticImage(8, 480, 360), other, cv::ROTATE_90_CLOCKWISE);
  cv::resize(other, other, cv::Size(180, 240), 0, 0, cv::INTER_AREA);
  const auto unrelated =
      AlignedCorrelation(ta, 480, 360, Thumb(other, kThumbnailSide), 180, 240, h);
  ASSERT_TRUE(unrelated.has_value());
  EXPECT_LT(*unrelated, 0.5f);
}

TEST(MatchEvidenceTest, AlignedCorrelationOfACropComparesTheSharedPart) {
  const cv::Mat b = testing::MakeSyntheticImage(9, 640, 480);
  // a: the middle quarter of b (320 x 240), the query side at full size.
  const cv::Mat a = b(cv::Rect(160, 120, 320, 240)).clone();
  const std::array<double, 9> h = {1, 0, 160, 0, 1, 120, 0, 0, 1};
  const auto c = AlignedCorrelation(Thumb(a, kQueryThumbnailSide), 320, 240,
                                    Thumb(b, kThumbnailSide), 640, 480, h);
  ASSERT_TRUE(c.has_value());
  EXPECT_GT(*c, 0.85f);
  // No overlap at all: nothing to compare.
  const std::array<double, 9> away = {1, 0, 5000, 0, 1, 0, 0, 0, 1};
  EXPECT_FALSE(AlignedCorrelation(Thumb(a, kQueryThumbnailSide), 320, 240, Thumb(b, kThumbnailSide),
                                  640, 480, away)
                   .has_value());
}

MatchEvidence WithHomography() {
  MatchEvidence e;
  e.verified = true;
  e.homography = true;
  return e;
}

TEST(MatchEvidenceTest, ThumbnailContentCountsTexturedPixels) {
  // A picture (400 x 300) pasted at (120, 90) into another, textured one
  // (640 x 480), half its size: a quarter of the composite's area. a is the
  // composite, b the picture; a -> b: (x, y) -> (2 (x - 120), 2 (y - 90)).
  const cv::Mat picture = testing::MakeSyntheticImage(21, 400, 300);
  cv::Mat composite = testing::MakeSyntheticImage(22, 640, 480), half;
  cv::resize(picture, half, cv::Size(200, 150), 0, 0, cv::INTER_AREA);
  half.copyTo(composite(cv::Rect(120, 90, 200, 150)));
  const std::array<double, 9> paste = {2, 0, -240, 0, 2, -180, 0, 0, 1};
  MatchEvidence e = WithHomography();
  MeasureThumbnails(Thumb(composite, kQueryThumbnailSide), 640, 480, Thumb(picture, kThumbnailSide),
                    400, 300, paste, &e);
  ASSERT_TRUE(e.aligned_correlation.has_value());
  EXPECT_GT(*e.aligned_correlation, 0.85f);
  EXPECT_NEAR(e.content_a, 0.1, 0.08);  // the pasted tenth of the composite
  EXPECT_GT(e.content_b, 0.95f);

  // A picture rotated 10 degrees on a black canvas grown to hold it: its
  // blank corners hold no texture, so all of its content lies inside.
  const cv::Point2f centre(199.5f, 149.5f);
  cv::Mat m = cv::getRotationMatrix2D(centre, 10, 1);
  m.at<double>(0, 2) += 30;
  m.at<double>(1, 2) += 40;
  cv::Mat rotated;
  cv::warpAffine(picture, rotated, m, cv::Size(460, 380));
  // rotated -> picture: the inverse of m.
  cv::Mat inv;
  cv::invertAffineTransform(m, inv);
  const std::array<double, 9> back = {inv.at<double>(0, 0),
                                      inv.at<double>(0, 1),
                                      inv.at<double>(0, 2),
                                      inv.at<double>(1, 0),
                                      inv.at<double>(1, 1),
                                      inv.at<double>(1, 2),
                                      0,
                                      0,
                                      1};
  MatchEvidence r = WithHomography();
  MeasureThumbnails(Thumb(rotated, kQueryThumbnailSide), 460, 380, Thumb(picture, kThumbnailSide),
                    400, 300, back, &r);
  EXPECT_GT(r.content_a, 0.95f);
  EXPECT_GT(r.content_b, 0.95f);
  ASSERT_TRUE(r.aligned_correlation.has_value());
  EXPECT_GT(*r.aligned_correlation, 0.9f);

  // Flat thumbnails: too little texture to count; the shares are left.
  MatchEvidence flat = WithHomography();
  flat.content_a = flat.content_b = 0.5f;
  const cv::Mat grey(300, 400, CV_8UC3, cv::Scalar(90, 90, 90));
  MeasureThumbnails(Thumb(grey, kQueryThumbnailSide), 400, 300, Thumb(grey, kThumbnailSide), 400,
                    300, {1, 0, 0, 0, 1, 0, 0, 0, 1}, &flat);
  EXPECT_FLOAT_EQ(flat.content_a, 0.5f);
  EXPECT_FALSE(flat.aligned_correlation.has_value());
}

}  // namespace
}  // namespace lookalike
