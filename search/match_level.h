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

#include <algorithm>
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
  // Of those, the most whose keypoints turn and scale alike
  // (ConsistentInliers, search/verifier.h).
  int consistent = 0;
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
  // The same for content: the share of a's keypoints that map inside b (a
  // border or a rotated copy's blank corners hold none), and of b's inside
  // a.
  float content_a = 0, content_b = 0;
  // Root mean square distance of the inliers from the homography refitted
  // to them by least squares, in pixels of the coarser image's keypoint
  // frame: an edit maps every point exactly (keypoint noise, about half a
  // pixel), another shot of a 3-D scene leaves parallax.
  float residual = 0;
  // The part of it that is coherent across neighbouring inliers: the 90th
  // percentile over the inliers of the magnitude of the mean residual
  // vector of each one's StructureNeighbours(inliers) nearest inliers (same
  // unit). Keypoint noise averages out (to about 1.52 / sqrt(neighbours) of
  // the RMS); a region that moved between two moments, or parallax between
  // two viewpoints, keeps its shift, as long as it holds a tenth of the
  // inliers.
  float structured_residual = 0;
  // The local scale at the centre of a's inliers (b pixels per a pixel, the
  // square root of the Jacobian's determinant) and rotation (degrees,
  // (-180, 180], of the similarity nearest the Jacobian; mirror-free part
  // when mirrored).
  float scale = 1;
  float rotation = 0;
  // The transform reverses orientation (a mirror image): determinant < 0,
  // or the match was found between mirrored features.
  bool mirrored = false;
  // How far the transform is from a similarity: 1 - the ratio of the
  // Jacobian's smaller to larger singular value there (0 = no shear or
  // stretch; a 2:1 stretch gives 0.5).
  float anisotropy = 0;
  // How far from affine over the matched content: max / min over a's
  // inliers of the homography's projective denominator, minus 1 (0 =
  // affine). Local scale varies by up to that ratio across the match.
  float perspective = 0;

  // Pearson correlation of the two images' grey pixels over their overlap
  // after warping one onto the other by the homography, [-1, 1]; nullopt
  // when not measured (no thumbnails, or the overlap is too small). An edit
  // keeps its pixels where they were mapped; another shot of the scene does
  // not (parallax, moving things, another moment).
  std::optional<float> aligned_correlation;
};

// How many nearest inliers (itself included) the structured residual
// averages over for `inliers` inliers: 9, or half of them when fewer than
// 18 (a mean over all of them is 0 by the least squares fit).
inline int StructureNeighbours(int inliers) { return inliers >= 18 ? 9 : std::max(1, inliers / 2); }

// Thresholds of ClassifyMatch; defaults chosen as search/match_levels.md
// describes.
struct MatchLevelOptions {
  // The same pixels, mapped (copy and part): the inliers' structured
  // residual is at most this many times what keypoint noise alone leaves
  // (the 90th percentile of the length of the mean of n independent noise
  // vectors is 1.52 / sqrt(n) of their RMS) ...
  float same_max_structure = 1.6f;
  // ... or at most this many pixels: a strong JPEG's 8-pixel blocks shift
  // neighbouring keypoints together by a fraction of a pixel (0.4-0.57 px
  // between two stored copies at quality 30), where a thing that moved or
  // parallax shifts them by a pixel or more (0.84 px and up among the dev
  // set's other shots);
  float same_structured_floor = 0.6f;
  // most matches are on the homography (a chance verification of unrelated
  // images explains a few of many);
  float same_min_inlier_ratio = 0.50f;
  // the aligned thumbnails correlate at least this much, when they could be
  // compared;
  float same_min_aligned_correlation = 0.90f;
  // and the inliers spread over at least this share of the area of the
  // image that lies inside the other (both, for a copy): a shared logo or
  // watermark is packed into a corner.
  float same_min_hull = 0.15f;
  // copy: each image keeps at least this share of its content (keypoints)
  // inside the other: a crop that keeps 70 % of a picture is still a copy,
  // one that keeps half is a part ...
  float copy_min_content = 0.70f;
  // ... and more than half of its area (overlap): a half crop that cut
  // away only a plain background keeps all its content but is a part ...
  float copy_min_overlap = 0.55f;
  // ... by a transform close to a similarity (how far: MatchEvidence's
  // anisotropy and perspective).
  float copy_max_anisotropy = 0.10f;
  float copy_max_perspective = 0.15f;
  // part: one image keeps at least this share of its content inside the
  // other.
  float part_min_content = 0.85f;
  // Throws std::invalid_argument naming the offending field.
  void Validate() const;
};

// The rule, strongest level first:
//  - identical: `identical` (same bytes or pixels), whatever else was seen;
//  - none: not verified. A fused score, a colour or a thumbnail similarity
//    never make a level on their own (a rotated copy's thumbnail can
//    correlate with an unrelated photo's);
//  - copy: the same pixels, mapped (below), by a near-similarity transform
//    under which each image keeps most of its content inside the other:
//    an edit of one picture
//    (re-encoded, resized, recoloured, cropped a little, rotated, mirrored,
//    written on);
//  - part: the same pixels, mapped, with one image almost entirely inside
//    the other, by any homography: a large crop, a picture pasted into
//    another (also in perspective);
//  - view: any other verified pair: the same scene or object in another
//    shot.
// "The same pixels, mapped": most matches are inliers, the homography maps
// every inlier exactly, up to keypoint noise (no structured residual:
// parallax between viewpoints, or things that moved between two moments,
// leave neighbouring inliers shifted alike), the thumbnails agree once
// aligned, and the inliers spread over the picture. Two shots of one scene fail at least one of
// these, or the near-similarity a copy needs.
MatchLevel ClassifyMatch(const MatchEvidence& evidence,
                         const MatchLevelOptions& options = MatchLevelOptions());

}  // namespace lookalike
