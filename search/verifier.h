// Spatial verification of a candidate match between two images: nearest-
// neighbour matching of local descriptors with Lowe's ratio test, one-to-one
// matches, then a RANSAC homography (OpenCV). The number of inliers is the
// evidence that two images show the same planar scene or a copy.
//
// One-to-one matching matters: without it, a text overlay or a repeated
// pattern sends many query features to one candidate feature, and RANSAC
// finds degenerate "homographies" with dozens of inliers between unrelated
// images (measured on the dev set: 99.9th percentile of unrelated pairs 36
// inliers many-to-one, 5 one-to-one).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "indexer/local_features.h"
#include "storage/store.h"

namespace lookalike {

// How the homography is fitted to the matches.
enum class RansacMethod {
  kClassic,  // OpenCV's RANSAC (cv::RANSAC): what dedup was calibrated with
  // OpenCV's USAC framework (cv::USAC_DEFAULT): LO-RANSAC, whose local
  // optimisation refits on the inliers, with the SPRT test that abandons a
  // hopeless model early. What search uses: a third less time per fitted
  // pair and no fewer verified matches.
  kUsac,
};

struct VerifyOptions {
  float ratio = 0.8f;             // Lowe's ratio test on descriptor distances, (0, 1]
  float ransac_threshold = 5.0f;  // reprojection error, pixels of the downscaled frame
  int ransac_iterations = 2000;
  RansacMethod ransac = RansacMethod::kClassic;
  // Fewer one-to-one matches than this are not worth a RANSAC fit: the pair
  // could not reach the caller's inlier threshold anyway (45 % of the pairs
  // search re-ranks on the dev set). At least 5: four matches always fit a
  // homography exactly.
  int min_matches = 5;
  // Nearest neighbours: 0 = exact (every query descriptor against every
  // candidate descriptor, one matrix product). > 0 = in the query's top
  // `match_dims` principal components (a quarter of the products at 32 of
  // SIFT's 128), the `match_shortlist` nearest there re-scored exactly
  // (PreparedQuery). CheaperVerifyOptions sets it.
  int match_dims = 0;
  int match_shortlist = 4;  // 2..64
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
  // The RANSAC homography from the query's keypoint frame to the
  // candidate's, row-major (x' = (h0 x + h1 y + h2) / (h6 x + h7 y + h8));
  // nullopt when none was fitted. What match levels measure the pair's
  // geometry from (search/match_evidence.h).
  std::optional<std::array<double, 9>> homography;
};

// The cheaper verification search and dedup use: nearest neighbours searched
// in the query's 32 principal components, the 4 nearest there re-scored
// exactly (match_dims), and the homography fitted by LO-RANSAC
// (RansacMethod::kUsac). Measured against exact matching and classic RANSAC
// on the dev set with and without 10,000 distractors: the same or better
// search mAP, half the CPU per query; for dedup, the same pair precision
// and recall (search/README.md, "Verification").
inline VerifyOptions CheaperVerifyOptions() {
  VerifyOptions v;
  v.match_dims = 32;
  v.match_shortlist = 4;
  v.ransac = RansacMethod::kUsac;
  return v;
}

// Weak geometric consistency of a verification's inliers (after Jégou,
// Douze & Schmid's WGC, ECCV 2008): the most inliers whose keypoints agree
// on one change of orientation (within kConsistentAngle degrees of one
// another's) and of size (within a factor kConsistentScale), the pair
// `query` (v.inlier_pairs' first indices) to `candidate`. The inliers of a
// true match, another shot of a scene included, turn and scale together;
// those of a chance homography through a few unrelated matches do not.
// The count is quadratic in the inliers; a caller that only asks whether it
// reaches `enough` gets an answer >= enough as soon as one inlier has that
// many agreeing (a true match's first few do), not the maximum.
inline constexpr float kConsistentAngle = 20.0f;
inline constexpr float kConsistentScale = 1.5f;
int ConsistentInliers(const Verification& v, const LocalFeatures& query,
                      const LocalFeatures& candidate, int enough = std::numeric_limits<int>::max());

// One query's features prepared for verification against many candidates:
// with options.match_dims > 0, its principal axes and its descriptors
// projected on them, computed once. Borrows `features`, which must outlive
// it. Verify is thread-safe (const, no shared state) and single-threaded
// inside.
class PreparedQuery {
 public:
  PreparedQuery(const LocalFeatures& features, const VerifyOptions& options);
  Verification Verify(const LocalFeatures& candidate) const;

 private:
  // n rows of features_.dim floats -> n x match_dims, on the basis.
  std::vector<float> Project(const float* rows, int n) const;

  const LocalFeatures& features_;
  VerifyOptions options_;
  std::vector<float> basis_;      // match_dims x dim, row-major; empty = exact matching
  std::vector<float> projected_;  // the query's descriptors on the basis, num x match_dims
};

// PreparedQuery(query, options).Verify(candidate), for one pair.
// Thread-safe (no shared state); single-threaded inside.
Verification VerifyPair(const LocalFeatures& query, const LocalFeatures& candidate,
                        const VerifyOptions& options);

// The `max_keypoints` features of `features` with the strongest detector
// response (Keypoint::response; ties and unknown responses keep the earlier
// feature), in their original order; all of them when there are no more
// than that (0 = no limit). Verification's cost grows with the product of
// the two images' feature counts, and a detailed 512-px photo can have
// 4,000: its strongest features are what a copy or another view shares.
LocalFeatures StrongestFeatures(const LocalFeatures& features, int64_t max_keypoints);

// The stored local features of a database's images, decoded: what search
// re-ranking and dedup verify against. Thread-safe (concurrent store reads).
class FeatureReader {
 public:
  // Loads the database's descriptor quantizer, if it has one. Throws
  // StoreError(kCorrupt) if it is unreadable.
  explicit FeatureReader(const Store& store);
  // Image `id`'s features, descriptors in `frame` (kQuantizer needs
  // quantizer()); nullopt when it has none (no keypoints, or a database
  // indexed before they were kept). Throws StoreError or
  // encoding::CorruptValue (a corrupt blob).
  std::optional<LocalFeatures> Read(uint64_t id,
                                    DescriptorFrame frame = DescriptorFrame::kOriginal) const;
  // The quantizer of a compact database (queries keep exact descriptors
  // then); null for the older layout.
  const DescriptorQuantizer* quantizer() const { return quantizer_ ? &*quantizer_ : nullptr; }
  // The frame matching is cheapest in: the quantizer's when there is one
  // (stored descriptors are reconstructed there without un-rotating them;
  // the other side is rotated once with InMatchingFrame).
  DescriptorFrame matching_frame() const {
    return quantizer_ ? DescriptorFrame::kQuantizer : DescriptorFrame::kOriginal;
  }
  // `features` (of the original frame) with their descriptors in
  // matching_frame(). Throws std::invalid_argument if their dimension does
  // not fit the quantizer.
  LocalFeatures InMatchingFrame(LocalFeatures features) const;

 private:
  const Store& store_;
  std::optional<DescriptorQuantizer> quantizer_;
};

}  // namespace lookalike
