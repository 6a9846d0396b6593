// Measures the evidence ClassifyMatch (search/match_level.h) decides on,
// from what verification found for a pair: the homography's shape, how much
// of each image it maps inside the other, how the inliers spread, and
// whether the two images' thumbnails agree once aligned by it.
#pragma once

#include <array>
#include <optional>

#include "indexer/grey_thumbnail.h"
#include "indexer/local_features.h"
#include "search/match_level.h"
#include "search/verifier.h"

namespace lookalike {

// The geometric evidence of `v`, a verification of `a` (the query side,
// whose keypoints v.inlier_pairs' first indices name) against `b`: matches,
// inliers, coverage, each image's inlier hull and, when v has a homography,
// its shape, the overlaps and the content shares by keypoints. `verified`
// is v.inliers >= min_inliers; `identical` and `aligned_correlation` are
// left for the caller (hashes and thumbnails live elsewhere:
// MeasureThumbnails). Thread-safe.
MatchEvidence MeasureMatch(const Verification& v, const LocalFeatures& a, const LocalFeatures& b,
                           int min_inliers);

// Pearson correlation of two images' grey thumbnails after aligning them by
// `a_to_b`, a homography (row-major) from a's keypoint frame (a_width x
// a_height) to b's, over the pixels where both images are; each thumbnail
// is the image shrunk to its own size (same aspect as its frame). The image
// whose overlap has the fewer thumbnail pixels is the target, the other is
// smoothed to its resolution and warped onto it. nullopt when fewer than
// kMinAlignedPixels pixels overlap, or either thumbnail is empty or flat
// there. Thread-safe.
inline constexpr int kMinAlignedPixels = 64;
std::optional<float> AlignedCorrelation(const GreyThumbnail& a, int a_width, int a_height,
                                        const GreyThumbnail& b, int b_width, int b_height,
                                        const std::array<double, 9>& a_to_b);

// Completes `e` (measured by MeasureMatch from a verification whose
// homography is `a_to_b`) with what the two images' thumbnails tell, each
// the image shrunk to its own size: aligned_correlation (AlignedCorrelation)
// and, for an image with at least kMinTexturedPixels textured thumbnail
// pixels, its content share (content_a, content_b) measured on them: the
// share of its textured pixels (grey-level gradient above
// kTexturedGradient) that map inside the other image. A uniform border or a
// rotated copy's blank corners hold no texture; keypoints, which the shares
// are counted on otherwise, crowd where a picture is most detailed (a
// detailed picture pasted onto a plainer one keeps most of the composite's
// keypoints). Does nothing without a homography in `e`. Thread-safe.
inline constexpr int kMinTexturedPixels = 32;
inline constexpr int kTexturedGradient = 1;
void MeasureThumbnails(const GreyThumbnail& a, int a_width, int a_height, const GreyThumbnail& b,
                       int b_width, int b_height, const std::array<double, 9>& a_to_b,
                       MatchEvidence* e);

}  // namespace lookalike
