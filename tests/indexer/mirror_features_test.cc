// Tests of mirrored features: SIFT extracted on a flipped image agrees with
// the original's features mirrored (keypoints reflected, descriptor bins
// permuted), which is what lets search look for mirrored copies without a
// second extraction; and thumbnails flipped alike.
#include "indexer/mirror_features.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <opencv2/core.hpp>
#include <set>
#include <stdexcept>
#include <vector>

#include "tests/test_images.h"

namespace lookalike {
namespace {

// Euclidean distance of the two rows, each scaled to unit length (SIFT's
// rows are not).
float Distance(const float* a, const float* b, int dim) {
  float na = 0, nb = 0;
  for (int i = 0; i < dim; ++i) {
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  na = std::sqrt(std::max(na, 1e-12f));
  nb = std::sqrt(std::max(nb, 1e-12f));
  float s = 0;
  for (int i = 0; i < dim; ++i) s += (a[i] / na - b[i] / nb) * (a[i] / na - b[i] / nb);
  return std::sqrt(s);
}

float AngleGap(float a, float b) {
  const float d = std::fmod(std::abs(a - b), 360.0f);
  return std::min(d, 360.0f - d);
}

TEST(MirrorFeaturesTest, BinPermutationIsAnInvolution) {
  std::set<int> image;
  for (int i = 0; i < kSiftDim; ++i) {
    const int j = MirroredSiftBin(i);
    ASSERT_GE(j, 0);
    ASSERT_LT(j, kSiftDim);
    image.insert(j);
    EXPECT_EQ(MirroredSiftBin(j), i);
  }
  EXPECT_EQ(image.size(), static_cast<size_t>(kSiftDim));
  // Cell (row 0, column 1), orientation 1 -> cell (row 3, column 1),
  // orientation 7.
  EXPECT_EQ(MirroredSiftBin((0 * 4 + 1) * 8 + 1), (3 * 4 + 1) * 8 + 7);
}

// SIFT on the flipped image against the original's descriptors mirrored:
// keypoint by keypoint (each original keypoint mirrored and paired with the
// flipped extraction's nearest of the same size), the mirrored descriptor
// is close to the one extracted, and much closer than the same descriptor
// unpermuted.
TEST(MirrorFeaturesTest, FlippedExtractionMatchesMirroredDescriptors) {
  for (const char* type : {"rootsift", "sift"}) {
    ExtractorOptions options;
    options.type = type;
    const auto extractor = CreateExtractor(options);
    const cv::Mat image = testing::MakeSyntheticImage(5, 481, 361);
    cv::Mat flipped;
    cv::flip(image, flipped, 1);
    const Descriptors d = extractor->Extract(testing::ToGrayImage(image));
    const Descriptors f = extractor->Extract(testing::ToGrayImage(flipped));
    ASSERT_GT(d.num, 200) << type;
    const Descriptors m = MirrorDescriptors(d, 481);
    std::vector<float> permuted, unpermuted;
    int angle_agrees = 0;
    for (int64_t i = 0; i < m.num; ++i) {
      const Keypoint& k = m.keypoints[i];
      int64_t best = -1;
      float best_gap = 0.5f;  // pixels
      for (int64_t j = 0; j < f.num; ++j) {
        const Keypoint& q = f.keypoints[j];
        const float gap = std::hypot(q.x - k.x, q.y - k.y);
        if (gap < best_gap && std::abs(q.size - k.size) < 0.1f * k.size &&
            AngleGap(q.angle, k.angle) < 10.0f) {
          best_gap = gap;
          best = j;
        }
      }
      if (best < 0) continue;
      ++angle_agrees;
      permuted.push_back(
          Distance(m.values.data() + i * m.dim, f.values.data() + best * f.dim, m.dim));
      unpermuted.push_back(
          Distance(d.values.data() + i * d.dim, f.values.data() + best * f.dim, d.dim));
    }
    // Most keypoints reappear where the mirror puts them, with the mirrored
    // orientation.
    EXPECT_GT(angle_agrees, d.num / 3) << type;
    auto median = [](std::vector<float> v) {
      std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
      return v[v.size() / 2];
    };
    const float p = median(permuted), u = median(unpermuted);
    // Unit rows: distances in [0, 2]. Unrelated descriptors sit near 1.
    EXPECT_LT(p, 0.15f) << type;
    EXPECT_LT(p, 0.25f * u) << type << ": permuted " << p << ", unpermuted " << u;
  }
}

TEST(MirrorFeaturesTest, MirrorsLocalFeaturesAndRefusesOtherDescriptors) {
  LocalFeatures f;
  f.width = 100;
  f.height = 50;
  f.dim = kSiftDim;
  Keypoint k;
  k.x = 10;
  k.y = 20;
  k.size = 4;
  k.angle = 30;
  f.keypoints.push_back(k);
  f.descriptors.assign(kSiftDim, 0.0f);
  f.descriptors[1] = 1.0f;
  const LocalFeatures m = MirrorFeatures(f);
  ASSERT_EQ(m.num(), 1);
  EXPECT_FLOAT_EQ(m.keypoints[0].x, 89.0f);
  EXPECT_FLOAT_EQ(m.keypoints[0].y, 20.0f);
  EXPECT_FLOAT_EQ(m.keypoints[0].angle, 150.0f);
  EXPECT_FLOAT_EQ(m.descriptors[MirroredSiftBin(1)], 1.0f);
  // Twice is the identity.
  const LocalFeatures back = MirrorFeatures(m);
  EXPECT_FLOAT_EQ(back.keypoints[0].x, 10.0f);
  EXPECT_FLOAT_EQ(back.keypoints[0].angle, 30.0f);
  EXPECT_EQ(back.descriptors, f.descriptors);
  f.dim = 64;
  f.descriptors.assign(64, 0.0f);
  EXPECT_THROW(MirrorFeatures(f), std::invalid_argument);
}

TEST(MirrorFeaturesTest, MirrorsThumbnails) {
  GreyThumbnail t;
  t.width = 3;
  t.height = 2;
  t.pixels = {1, 2, 3, 4, 5, 6};
  const GreyThumbnail m = MirrorThumbnail(t);
  EXPECT_EQ(m.width, 3);
  EXPECT_EQ(m.height, 2);
  EXPECT_EQ(m.pixels, (std::vector<uint8_t>{3, 2, 1, 6, 5, 4}));
  EXPECT_EQ(t.pixels, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6})) << "the input is left alone";
  EXPECT_TRUE(MirrorThumbnail(GreyThumbnail()).empty());
}

}  // namespace
}  // namespace lookalike
