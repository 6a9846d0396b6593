#include "search/match_level.h"

#include <algorithm>
#include <cmath>
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
  if (!(same_max_structure >= 0))
    throw std::invalid_argument("same max structure must be >= 0, got " +
                                std::to_string(same_max_structure));
  CheckShare(same_min_inlier_ratio, "same min inlier ratio");
  if (!(same_structured_floor >= 0))
    throw std::invalid_argument("same structured floor must be >= 0, got " +
                                std::to_string(same_structured_floor));
  CheckCorrelation(same_min_aligned_correlation, "same min aligned correlation");
  CheckShare(same_min_hull, "same min hull");
  CheckShare(copy_min_content, "copy min content");
  CheckShare(copy_min_overlap, "copy min overlap");
  CheckShare(copy_max_anisotropy, "copy max anisotropy");
  if (!(copy_max_perspective >= 0))
    throw std::invalid_argument("copy max perspective must be >= 0, got " +
                                std::to_string(copy_max_perspective));
  CheckShare(part_min_content, "part min content");
}

MatchLevel ClassifyMatch(const MatchEvidence& e, const MatchLevelOptions& o) {
  if (e.identical) return MatchLevel::kIdentical;
  if (!e.verified) return MatchLevel::kNone;
  if (!e.homography) return MatchLevel::kView;
  const float inlier_ratio =
      e.matches > 0 ? static_cast<float>(e.inliers) / static_cast<float>(e.matches) : 0.0f;
  // What keypoint noise alone leaves in the structured residual.
  const float noise =
      1.52f * e.residual / std::sqrt(static_cast<float>(StructureNeighbours(e.inliers)));
  const bool exact =
      e.structured_residual <= std::max(o.same_structured_floor, o.same_max_structure * noise);
  if (!exact || inlier_ratio < o.same_min_inlier_ratio ||
      !PixelsAgree(e, o.same_min_aligned_correlation))
    return MatchLevel::kView;
  if (std::min(e.content_a, e.content_b) >= o.copy_min_content &&
      std::min(e.overlap_a, e.overlap_b) >= o.copy_min_overlap &&
      std::min(e.hull_a, e.hull_b) >= o.same_min_hull && e.anisotropy <= o.copy_max_anisotropy &&
      e.perspective <= o.copy_max_perspective)
    return MatchLevel::kCopy;
  // The image that lies inside the other: the one keeping more content.
  const bool a_inside = e.content_a >= e.content_b;
  if ((a_inside ? e.content_a : e.content_b) >= o.part_min_content &&
      (a_inside ? e.hull_a : e.hull_b) >= o.same_min_hull)
    return MatchLevel::kPart;
  return MatchLevel::kView;
}

}  // namespace lookalike
