#include "search/verifier.h"

#include <algorithm>
#include <limits>
#include <opencv2/calib3d.hpp>
#include <opencv2/core.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "storage/encoding.h"
#include "util/blas.h"

namespace lookalike {

void VerifyOptions::Validate() const {
  if (!(ratio > 0 && ratio <= 1))
    throw std::invalid_argument("ratio must be in (0, 1], got " + std::to_string(ratio));
  if (!(ransac_threshold > 0))
    throw std::invalid_argument("RANSAC threshold must be > 0, got " +
                                std::to_string(ransac_threshold));
  if (min_matches < 5)
    throw std::invalid_argument(
        "min matches must be >= 5 (four matches always fit a "
        "homography), got " +
        std::to_string(min_matches));
  if (ransac_iterations < 1)
    throw std::invalid_argument("RANSAC iterations must be >= 1, got " +
                                std::to_string(ransac_iterations));
}

Verification VerifyPair(const LocalFeatures& query, const LocalFeatures& candidate,
                        const VerifyOptions& options) {
  Verification v;
  const int nq = static_cast<int>(query.num()), nc = static_cast<int>(candidate.num());
  if (nq < 2 || nc < 2 || query.dim != candidate.dim) return v;
  const int dim = query.dim;

  // Best and second-best candidate feature of every query feature, by dot
  // product of unit rows (largest dot = smallest distance), in row blocks so
  // the similarity block stays in cache-friendly bounds.
  constexpr int kBlock = 256;
  std::vector<float> sims(static_cast<size_t>(kBlock) * nc);
  std::vector<int> best(nq);
  std::vector<float> best_dist(nq), second_dist(nq);
  const float one = 1.0f, zero = 0.0f;
  for (int q0 = 0; q0 < nq; q0 += kBlock) {
    const int rows = std::min(kBlock, nq - q0);
    // Column-major view: sims(nc x rows) = C (nc x dim) * Q^T.
    sgemm_("T", "N", &nc, &rows, &dim, &one, candidate.descriptors.data(), &dim,
           query.descriptors.data() + static_cast<size_t>(q0) * dim, &dim, &zero, sims.data(), &nc);
    for (int r = 0; r < rows; ++r) {
      const float* s = sims.data() + static_cast<size_t>(r) * nc;
      float s1 = -std::numeric_limits<float>::infinity(), s2 = s1;
      int j1 = -1;
      for (int j = 0; j < nc; ++j) {
        if (s[j] > s1) {
          s2 = s1;
          s1 = s[j];
          j1 = j;
        } else if (s[j] > s2) {
          s2 = s[j];
        }
      }
      best[q0 + r] = j1;
      best_dist[q0 + r] = std::sqrt(std::max(0.0f, 2.0f - 2.0f * s1));
      second_dist[q0 + r] = std::sqrt(std::max(0.0f, 2.0f - 2.0f * s2));
    }
  }
  // Ratio test, then one-to-one: a candidate feature keeps its closest query feature.
  std::vector<int> owner(nc, -1);
  for (int i = 0; i < nq; ++i) {
    if (!(best_dist[i] < options.ratio * second_dist[i])) continue;
    int& o = owner[best[i]];
    if (o < 0 || best_dist[i] < best_dist[o]) o = i;
  }
  std::vector<cv::Point2f> src, dst;
  std::vector<std::pair<int, int>> matched;
  for (int j = 0; j < nc; ++j) {
    if (owner[j] < 0) continue;
    matched.emplace_back(owner[j], j);
    const Keypoint& a = query.keypoints[owner[j]];
    const Keypoint& b = candidate.keypoints[j];
    src.emplace_back(a.x, a.y);
    dst.emplace_back(b.x, b.y);
  }
  v.matches = static_cast<int>(src.size());
  if (v.matches < options.min_matches) return v;
  cv::Mat mask;
  const cv::Mat h = cv::findHomography(src, dst, cv::RANSAC, options.ransac_threshold, mask,
                                       options.ransac_iterations, 0.999);
  if (h.empty() || mask.empty()) return v;
  v.inliers = cv::countNonZero(mask);
  for (size_t i = 0; i < matched.size(); ++i)
    if (mask.at<uchar>(static_cast<int>(i))) v.inlier_pairs.push_back(matched[i]);
  return v;
}

FeatureReader::FeatureReader(const Store& store)
    : store_(store), quantizer_(LoadDescriptorQuantizer(store)) {}

std::optional<LocalFeatures> FeatureReader::Read(uint64_t id) const {
  const auto blob = store_.GetFeatures(id);
  if (!blob) return std::nullopt;
  return DecodeLocalFeatures(*blob, quantizer());
}

}  // namespace lookalike
