#include "indexer/descriptor_quantizer.h"

#include <faiss/VectorTransform.h>
#include <faiss/impl/ProductQuantizer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "indexer/local_features.h"
#include "storage/encoding.h"
#include "util/threads.h"

namespace lookalike {
namespace {

constexpr int kDim = 128;

// RootSIFT-like rows: the square root of L1-normalised non-negative values,
// a few strong bins and many weak ones, so rows are unit length.
std::vector<float> RootSiftLike(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::gamma_distribution<float> g(0.3f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n) * kDim);
  for (int64_t i = 0; i < n; ++i) {
    float* row = x.data() + i * kDim;
    double sum = 0;
    for (int j = 0; j < kDim; ++j) sum += row[j] = g(rng);
    for (int j = 0; j < kDim; ++j) row[j] = std::sqrt(static_cast<float>(row[j] / sum));
  }
  return x;
}

// `num` RootSIFT-like descriptors with keypoints at the origin.
Descriptors MakeDescriptors(int num, uint64_t seed) {
  Descriptors d;
  d.num = num;
  d.dim = kDim;
  d.values = RootSiftLike(num, seed);
  d.keypoints.resize(num);
  return d;
}

double SquaredDistance(const float* a, const float* b) {
  double d = 0;
  for (int j = 0; j < kDim; ++j) d += double{a[j] - b[j]} * (a[j] - b[j]);
  return d;
}

QuantizerOptions Bytes(int bytes) {
  QuantizerOptions o;
  o.bytes = bytes;
  return o;
}

TEST(DescriptorQuantizerTest, ValidatesBytes) {
  EXPECT_NO_THROW(Bytes(0).Validate(kDim));
  EXPECT_NO_THROW(Bytes(16).Validate(kDim));
  EXPECT_NO_THROW(Bytes(32).Validate(kDim));
  EXPECT_THROW(Bytes(7).Validate(kDim), std::invalid_argument);
  EXPECT_THROW(Bytes(-1).Validate(kDim), std::invalid_argument);
  EXPECT_THROW(Bytes(256).Validate(kDim), std::invalid_argument);
}

TEST(DescriptorQuantizerTest, TooFewDescriptorsAreRefused) {
  const auto x = RootSiftLike(kQuantizerMinDescriptors - 1, 1);
  EXPECT_THROW(DescriptorQuantizer::Train(x.data(), kQuantizerMinDescriptors - 1, kDim, Bytes(16)),
               std::invalid_argument);
}

TEST(DescriptorQuantizerTest, SixteenBytesKeepMostOfEachDescriptor) {
  const auto train = RootSiftLike(20000, 1);
  const auto q = DescriptorQuantizer::Train(train.data(), 20000, kDim, Bytes(16));
  EXPECT_EQ(q.dim(), kDim);
  EXPECT_EQ(q.code_bytes(), 16);
  // Unseen rows: the reconstruction error is a small part of the spread
  // between rows, and a row's nearest reconstruction is its own.
  const int64_t n = 500;
  const auto x = RootSiftLike(n, 2);
  std::vector<uint8_t> codes(n * 16);
  q.Encode(x.data(), n, codes.data());
  std::vector<float> y(x.size());
  q.Decode(codes.data(), n, y.data());
  double error = 0, spread = 0;
  int own_nearest = 0;
  for (int64_t i = 0; i < n; ++i) {
    error += SquaredDistance(x.data() + i * kDim, y.data() + i * kDim);
    spread += SquaredDistance(x.data() + i * kDim, x.data() + ((i + 1) % n) * kDim);
    int64_t best = -1;
    double best_d = 1e30;
    for (int64_t j = 0; j < n; ++j) {
      const double d = SquaredDistance(x.data() + i * kDim, y.data() + j * kDim);
      if (d < best_d) best_d = d, best = j;
    }
    own_nearest += best == i;
  }
  EXPECT_LT(error / spread, 0.35) << "relative reconstruction error";
  EXPECT_GE(own_nearest, n * 95 / 100);
}

TEST(DescriptorQuantizerTest, SerialisedQuantizerCodesAlike) {
  const auto train = RootSiftLike(4000, 3);
  const auto q = DescriptorQuantizer::Train(train.data(), 4000, kDim, Bytes(16));
  const std::string blob = q.Serialize();
  EXPECT_EQ(blob.size(), 16 + (kDim * kDim + 16 * 256 * 8) * 4u);
  const auto back = DescriptorQuantizer::Deserialize(blob);
  EXPECT_EQ(back.Serialize(), blob);
  const auto x = RootSiftLike(50, 4);
  std::vector<uint8_t> a(50 * 16), b(50 * 16);
  q.Encode(x.data(), 50, a.data());
  back.Encode(x.data(), 50, b.data());
  EXPECT_EQ(a, b);
  // Learning is deterministic for a seed.
  EXPECT_EQ(DescriptorQuantizer::Train(train.data(), 4000, kDim, Bytes(16)).Serialize(), blob);
}

// What Train learned before it trained the slices itself: FAISS's PCAMatrix
// rotation, then ProductQuantizer::train over all slices in turn, serialised
// in DescriptorQuantizer's format.
std::string FaissTrained(const std::vector<float>& x, int64_t n, int bytes, uint64_t seed) {
  const ScopedOmpThreads one_thread(1);
  faiss::PCAMatrix pca(kDim, kDim, 0.0f, false);
  pca.balanced_bins = bytes;
  pca.train(n, x.data());
  faiss::LinearTransform rotation(kDim, kDim, false);
  rotation.A = pca.A;
  rotation.is_trained = true;
  std::vector<float> rotated(x.size());
  rotation.apply_noalloc(n, x.data(), rotated.data());
  faiss::ProductQuantizer pq(kDim, bytes, 8);
  pq.cp.seed = static_cast<int>(seed & 0x7fffffff);
  pq.cp.verbose = false;
  pq.cp.niter = 16;
  pq.cp.max_points_per_centroid = 64;
  pq.cp.min_points_per_centroid = 1;
  pq.train(static_cast<size_t>(n), rotated.data());
  std::string blob;
  for (uint32_t v : {2u, static_cast<uint32_t>(kDim), static_cast<uint32_t>(bytes), 8u})
    encoding::PutFixed32(&blob, v);
  encoding::PutFloats(&blob, pca.A.data(), pca.A.size());
  encoding::PutFloats(&blob, pq.centroids.data(), pq.centroids.size());
  return blob;
}

TEST(DescriptorQuantizerTest, SlicesTrainedInParallelAreFaissOwn) {
  // More points than FAISS keeps per slice (64 x 256), so its seeded
  // subsampling is part of what must agree.
  const int64_t n = 17000;
  const auto x = RootSiftLike(n, 11);
  QuantizerOptions o = Bytes(16);
  o.seed = 77;
  const std::string want = FaissTrained(x, n, o.bytes, o.seed);
  for (int threads : {1, 3}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    EXPECT_TRUE(DescriptorQuantizer::Train(x.data(), n, kDim, o, threads).Serialize() == want);
  }
}

TEST(DescriptorQuantizerTest, MalformedBlobsAreCorrupt) {
  const auto train = RootSiftLike(1000, 5);
  const std::string blob =
      DescriptorQuantizer::Train(train.data(), 1000, kDim, Bytes(16)).Serialize();
  EXPECT_THROW(DescriptorQuantizer::Deserialize(blob.substr(0, blob.size() - 4)),
               encoding::CorruptValue);
  EXPECT_THROW(DescriptorQuantizer::Deserialize(blob.substr(0, 10)), encoding::CorruptValue);
  std::string wrong_bytes = blob;
  wrong_bytes[8] = 7;  // 7 bytes do not divide 128
  EXPECT_THROW(DescriptorQuantizer::Deserialize(wrong_bytes), encoding::CorruptValue);
  std::string skewed = blob;
  encoding::Reader r(skewed.data() + 16, 4, "test");
  const float a00 = r.Float();
  std::string f;
  encoding::PutFloat(&f, a00 + 0.5f);  // the rotation is no longer orthonormal
  skewed.replace(16, 4, f);
  EXPECT_THROW(DescriptorQuantizer::Deserialize(skewed), encoding::CorruptValue);
}

TEST(CompactFeaturesTest, RoundTripKeepsGeometryAndQuantisedDescriptors) {
  const auto train = RootSiftLike(2000, 6);
  const auto q = DescriptorQuantizer::Train(train.data(), 2000, kDim, Bytes(16));
  Descriptors d = MakeDescriptors(40, 7);
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<float> u(0, 1);
  for (int i = 0; i < d.num; ++i)
    d.keypoints[i] = Keypoint{u(rng) * 511, u(rng) * 383, 1.5f + u(rng) * 60, u(rng) * 360};
  std::vector<float> reconstructed;
  const std::string blob = EncodeCompactFeatures(d, 512, 384, q, &reconstructed);
  EXPECT_EQ(blob.size(), 24u + 40u * (6 + 16)) << "6 bytes of geometry and 16 of code a keypoint";
  ASSERT_EQ(reconstructed.size(), d.values.size());
  const LocalFeatures f = DecodeLocalFeatures(blob, &q);
  ASSERT_EQ(f.num(), d.num);
  EXPECT_EQ(f.width, 512u);
  EXPECT_EQ(f.height, 384u);
  EXPECT_EQ(f.descriptors, reconstructed);
  for (int i = 0; i < d.num; ++i) {
    const Keypoint &a = d.keypoints[i], &b = f.keypoints[i];
    EXPECT_NEAR(b.x, a.x, 512.0 / 65535);
    EXPECT_NEAR(b.y, a.y, 384.0 / 65535);
    EXPECT_NEAR(b.size / a.size, 1.0, 0.015);
    const float turn = std::fmod(std::fabs(b.angle - a.angle), 360.0f);
    EXPECT_LE(std::min(turn, 360 - turn), 360.0f / 512 + 1e-3f);
  }
  // Queries keep their exact descriptors (unit rows) against such a database.
  const LocalFeatures query = MakeLocalFeatures(d, 512, 384, &q);
  EXPECT_EQ(query.descriptors.size(), d.values.size());
  for (size_t j = 0; j < d.values.size(); ++j) EXPECT_NEAR(query.descriptors[j], d.values[j], 1e-5);
}

TEST(CompactFeaturesTest, NeedTheirOwnQuantizer) {
  const auto train = RootSiftLike(2000, 9);
  const auto q16 = DescriptorQuantizer::Train(train.data(), 2000, kDim, Bytes(16));
  const auto q8 = DescriptorQuantizer::Train(train.data(), 2000, kDim, Bytes(8));
  const Descriptors d = MakeDescriptors(3, 10);
  const std::string blob = EncodeCompactFeatures(d, 100, 100, q16);
  EXPECT_THROW(DecodeLocalFeatures(blob), encoding::CorruptValue);
  EXPECT_THROW(DecodeLocalFeatures(blob, &q8), encoding::CorruptValue);
  EXPECT_THROW(DecodeLocalFeatures(blob.substr(0, blob.size() - 1), &q16), encoding::CorruptValue);
  // The older format decodes with or without a quantizer.
  const std::string old = EncodeLocalFeatures(d, 100, 100);
  EXPECT_EQ(DecodeLocalFeatures(old).num(), 3);
  EXPECT_EQ(DecodeLocalFeatures(old, &q16).num(), 3);
}

// Matching in the quantizer's frame (the query rotated once, stored
// descriptors decoded without un-rotating them) must see the dot products of
// the original frame, for compact and format-1 blobs alike.
TEST(CompactFeaturesTest, QuantizerFrameKeepsDotProducts) {
  const auto train = RootSiftLike(2000, 11);
  const auto q = DescriptorQuantizer::Train(train.data(), 2000, kDim, Bytes(16));
  const Descriptors d = MakeDescriptors(30, 12);
  const std::vector<float> query = RootSiftLike(20, 13);
  std::vector<float> query_rotated(query.size());
  q.Rotate(query.data(), 20, query_rotated.data());
  for (const std::string& blob :
       {EncodeCompactFeatures(d, 64, 64, q), EncodeLocalFeatures(d, 64, 64)}) {
    const LocalFeatures original = DecodeLocalFeatures(blob, &q);
    const LocalFeatures rotated = DecodeLocalFeatures(blob, &q, DescriptorFrame::kQuantizer);
    ASSERT_EQ(rotated.num(), original.num());
    EXPECT_EQ(rotated.keypoints.size(), original.keypoints.size());
    double moved = 0;
    for (int i = 0; i < 20; ++i)
      for (int j = 0; j < d.num; ++j) {
        double a = 0, b = 0;
        for (int k = 0; k < kDim; ++k) {
          a += double{query[i * kDim + k]} * original.descriptors[j * kDim + k];
          b += double{query_rotated[i * kDim + k]} * rotated.descriptors[j * kDim + k];
        }
        EXPECT_NEAR(a, b, 1e-5);
      }
    // Not the identity: the frames differ, only dot products agree.
    for (size_t k = 0; k < original.descriptors.size(); ++k)
      moved += std::fabs(original.descriptors[k] - rotated.descriptors[k]);
    EXPECT_GT(moved, 1.0);
  }
  EXPECT_THROW(
      DecodeLocalFeatures(EncodeLocalFeatures(d, 64, 64), nullptr, DescriptorFrame::kQuantizer),
      std::invalid_argument);
}

}  // namespace
}  // namespace lookalike
