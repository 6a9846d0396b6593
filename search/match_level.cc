#include "search/match_level.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace lookalike {

namespace {

constexpr const char* kNames[] = {"none", "view", "part", "copy", "identical"};

void CheckShare(float value, const char* field) {
  if (!(value >= 0 && value <= 1))
    throw std::invalid_argument(std::string(field) + " must be in [0, 1], got " +
                                std::to_string(value));
}

void CheckCorrelation(float value, const char* field) {
  if (!(value >= -1 && value <= 1))
    throw std::invalid_argument(std::string(field) + " must be in [-1, 1], got " +
                                std::to_string(value));
}

// The aligned pixels agree, or could not be compared (geometry decides then).
bool PixelsAgree(const MatchEvidence& e, float min_correlation) {
  return !e.aligned_correlation || *e.aligned_correlation >= min_correlation;
}

}  // namespace

const char* MatchLevelName(MatchLevel level) {
  const int i = static_cast<int>(level);
  if (i < 0 || i > static_cast<int>(MatchLevel::kIdentical)) return "unknown";
  return kNames[i];
}

MatchLevel ParseMatchLevel(const std::string& name) {
  for (int i = 0; i <= static_cast<int>(MatchLevel::kIdentical); ++i)
    if (name == kNames[i]) return static_cast<MatchLevel>(i);
  throw std::invalid_argument("unknown match level '" + name +
                              "': expected none, view, part, copy or identical");
}

void MatchLevelOptions::Validate() const {
  CheckShare(copy_min_overlap, "copy min overlap");
  CheckShare(copy_min_hull, "copy min hull");
  CheckShare(copy_max_anisotropy, "copy max anisotropy");
  if (!(copy_max_perspective >= 0))
    throw std::invalid_argument("copy max perspective must be >= 0, got " +
                                std::to_string(copy_max_perspective));
  CheckShare(copy_min_inlier_ratio, "copy min inlier ratio");
  CheckCorrelation(copy_min_aligned_correlation, "copy min aligned correlation");
  CheckShare(part_min_overlap, "part min overlap");
  CheckShare(part_min_hull, "part min hull");
  CheckCorrelation(part_min_aligned_correlation, "part min aligned correlation");
}

MatchLevel ClassifyMatch(const MatchEvidence& e, const MatchLevelOptions& o) {
  if (e.identical) return MatchLevel::kIdentical;
  if (!e.verified) return MatchLevel::kNone;
  if (!e.homography) return MatchLevel::kView;
  const float inlier_ratio =
      e.matches > 0 ? static_cast<float>(e.inliers) / static_cast<float>(e.matches) : 0.0f;
  const bool near_similarity =
      e.anisotropy <= o.copy_max_anisotropy && e.perspective <= o.copy_max_perspective;
  if (near_similarity && std::min(e.overlap_a, e.overlap_b) >= o.copy_min_overlap &&
      std::min(e.hull_a, e.hull_b) >= o.copy_min_hull && inlier_ratio >= o.copy_min_inlier_ratio &&
      PixelsAgree(e, o.copy_min_aligned_correlation))
    return MatchLevel::kCopy;
  // The image that lies inside the other: the one with the larger overlap.
  const bool a_inside = e.overlap_a >= e.overlap_b;
  const float inside_overlap = a_inside ? e.overlap_a : e.overlap_b;
  const float inside_hull = a_inside ? e.hull_a : e.hull_b;
  if (inside_overlap >= o.part_min_overlap && inside_hull >= o.part_min_hull &&
      PixelsAgree(e, o.part_min_aligned_correlation))
    return MatchLevel::kPart;
  return MatchLevel::kView;
}

}  // namespace lookalike
