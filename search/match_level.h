// How two images are related, as a user would say it: the same pixels, the
// same picture edited, a part of it, another shot of the same scene, or
// nothing. Decided from evidence (verified geometry, how much of each image
// the match covers, the pixels after alignment), never from the fused
// ranking score, whose scale mixes global similarities that unrelated
// images also reach. Search gives every hit a level, dedup every pair.
//
// This header is vocabulary only (no OpenCV, no store): the evidence is
// measured by search/match_evidence.h from a Verification, and classified
// here.
#pragma once

#include <optional>
#include <string>

namespace lookalike {

// Ordered: a >= b means "a is at least as strong a match as b".
enum class MatchLevel {
  kNone,       // no evidence that the images are related
  kView,       // the same scene or object, another shot (viewpoint, moment, light)
  kPart,       // one shows a part of the other: a large crop, a picture pasted into another
  kCopy,       // the same picture, edited: re-encoded, resized, recoloured, cropped a
               // little, rotated, mirrored
  kIdentical,  // the same pixels: same file bytes, or equal decoded pixels
};

// "none", "view", "part", "copy", "identical".
const char* MatchLevelName(MatchLevel level);

// The level named `name` (as MatchLevelName gives it). Throws
// std::invalid_argument naming the value and the accepted ones.
MatchLevel ParseMatchLevel(const std::string& name);

// What verification measured for one pair of images, a and b (a = the query
// in search, the pair's first image in dedup). Shares are of each image's
// own area (its keypoint frame), in [0, 1].
struct MatchEvidence {
  // Same content hash (byte-identical files) or equal decoded pixels.
  bool identical = false;
  // Enough inliers for the caller's threshold (search's min_inliers, dedup's).
  bool verified = false;
  int matches = 0;  // one-to-one ratio-test matches
  int inliers = 0;  // of those, consistent with the homography
  // inliers / (keypoints of the image with fewer keypoints): how much of the
  // poorer image the other explains (dedup's pair score). 0 if unknown.
  float coverage = 0;
  // Convex hull of the inliers, over each image's area.
  float hull_a = 0, hull_b = 0;

  // The homography from a's frame to b's (verification's model). The
  // properties below are meaningful only when `homography` is true: a
  // fitted model that keeps both images' outlines in front of the camera
  // (no corner mapped through the horizon).
  bool homography = false;
  // Share of a's area that maps inside b, and of b's inside a: 1 and 1 for
  // an uncropped copy; ~1 and small for a picture pasted into a larger one.
  float overlap_a = 0, overlap_b = 0;
  // The local scale at a's centre (b pixels per a pixel, the square root of
  // the Jacobian's determinant) and rotation (degrees, (-180, 180], of the
  // similarity nearest the Jacobian; mirror-free part when mirrored).
  float scale = 1;
  float rotation = 0;
  // The transform reverses orientation (a mirror image): determinant < 0,
  // or the match was found between mirrored features.
  bool mirrored = false;
  // How far the transform is from a similarity: 1 - the ratio of the
  // Jacobian's smaller to larger singular value at a's centre (0 = no shear
  // or stretch; a 2:1 stretch gives 0.5).
  float anisotropy = 0;
  // How far from affine: max / min over a's corners of the homography's
  // projective denominator, minus 1 (0 = affine; a wall photographed at 30
  // degrees is typically 0.2-0.6). Local scale varies by that ratio across a.
  float perspective = 0;

  // Pearson correlation of the two images' grey pixels over their overlap
  // after warping one onto the other by the homography, [-1, 1]; nullopt
  // when not measured (no thumbnails, or the overlap is too small). An edit
  // keeps its pixels where they were mapped; another shot of the scene does
  // not (parallax, moving things, another moment).
  std::optional<float> aligned_correlation;
};

// Thresholds of ClassifyMatch; defaults calibrated as search/README.md
// ("Match levels") describes.
struct MatchLevelOptions {
  // copy: both images map mostly inside each other ...
  float copy_min_overlap = 0.70f;
  // ... with inliers spread over each (share of each image's area) ...
  float copy_min_hull = 0.25f;
  // ... by a transform close to a similarity ...
  float copy_max_anisotropy = 0.15f;
  float copy_max_perspective = 0.10f;
  // ... that explains most matches (a second shot's parallax leaves many
  // matches off any one homography) ...
  float copy_min_inlier_ratio = 0.40f;
  // ... and whose aligned pixels agree, when they could be compared.
  float copy_min_aligned_correlation = 0.90f;
  // part: one image maps almost entirely inside the other ...
  float part_min_overlap = 0.85f;
  // ... with inliers spread over that image ...
  float part_min_hull = 0.25f;
  // ... and its aligned pixels agree, when they could be compared.
  float part_min_aligned_correlation = 0.80f;
  // Throws std::invalid_argument naming the offending field.
  void Validate() const;
};

// The rule, strongest level first:
//  - identical: `identical` (same bytes or pixels), whatever else was seen;
//  - none: not verified. A fused score, a colour or a thumbnail similarity
//    never make a level on their own (a rotated copy's thumbnail can
//    correlate with an unrelated photo's);
//  - copy: one image maps onto the other by a near-similarity transform
//    (anisotropy and perspective small) under which each image lies mostly
//    inside the other (overlap), the inliers are spread over both (hull),
//    most matches are inliers, and the aligned pixels agree: an edit of the
//    same picture. Another shot of a scene fails at least one of these:
//    perspective, parallax (matches off the homography), or pixels that
//    differ once aligned;
//  - part: one image lies almost entirely inside the other (its overlap),
//    the inliers spread over it, and its aligned pixels agree: a crop, or a
//    picture pasted into another (any homography: pasted in perspective);
//  - view: any other verified pair: the same scene or object, another shot.
MatchLevel ClassifyMatch(const MatchEvidence& evidence,
                         const MatchLevelOptions& options = MatchLevelOptions());

}  // namespace lookalike
