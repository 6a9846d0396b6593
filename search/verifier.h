// Spatial verification of a candidate match between two images: nearest-
// neighbour matching of local descriptors with Lowe's ratio test, one-to-one
// matches, then a RANSAC homography (OpenCV). The number of inliers is the
// evidence that two images show the same planar scene or a copy.
//
// One-to-one matching matters: without it, a text overlay or a repeated
// pattern sends many query features to one candidate feature, and RANSAC
// finds degenerate "homographies" with dozens of inliers between unrelated
// images (measured on the dev set: 99.9th percentile of unrelated pairs 36
// inliers many-to-one, 5 one-to-one; search/README.md, "Re-ranking").
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "indexer/local_features.h"
#include "storage/store.h"

namespace lookalike {

struct VerifyOptions {
  float ratio = 0.8f;             // Lowe's ratio test on descriptor distances, (0, 1]
  float ransac_threshold = 5.0f;  // reprojection error, pixels of the downscaled frame
  int ransac_iterations = 2000;
  // Fewer one-to-one matches than this are not worth a RANSAC fit: the pair
  // could not reach the caller's inlier threshold anyway (45 % of the pairs
  // search re-ranks on the dev set). At least 5: four matches always fit a
  // homography exactly.
  int min_matches = 5;
  // Throws std::invalid_argument naming the offending field.
  void Validate() const;
};

struct Verification {
  int matches = 0;  // one-to-one matches passing the ratio test
  int inliers = 0;  // of those, consistent with the RANSAC homography
  // (query keypoint, candidate keypoint) index of each inlier, for callers
  // that ask where the evidence lies (dedup: is it spread over the image or
  // one logo?). `inliers` entries.
  std::vector<std::pair<int, int>> inlier_pairs;
};

// Thread-safe (no shared state); single-threaded inside.
Verification VerifyPair(const LocalFeatures& query, const LocalFeatures& candidate,
                        const VerifyOptions& options);

// The stored local features of a database's images, decoded: what search
// re-ranking and dedup verify against. Thread-safe (concurrent store reads).
class FeatureReader {
 public:
  // Loads the database's descriptor quantizer, if it has one. Throws
  // StoreError(kCorrupt) if it is unreadable.
  explicit FeatureReader(const Store& store);
  // Image `id`'s features; nullopt when it has none (no keypoints, or a
  // database indexed before they were kept). Throws StoreError or
  // encoding::CorruptValue (a corrupt blob).
  std::optional<LocalFeatures> Read(uint64_t id) const;
  // The quantizer of a compact database (queries keep exact descriptors
  // then); null for the older layout.
  const DescriptorQuantizer* quantizer() const { return quantizer_ ? &*quantizer_ : nullptr; }

 private:
  const Store& store_;
  std::optional<DescriptorQuantizer> quantizer_;
};

}  // namespace lookalike
