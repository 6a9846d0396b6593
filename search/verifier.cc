#include "search/verifier.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <opencv2/calib3d.hpp>
#include <opencv2/core.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "search/subspace_shortlist.h"
#include "storage/encoding.h"
#include "util/blas.h"
#include "util/option_checks.h"
#include "util/rows.h"

namespace lookalike {

void VerifyOptions::Validate() const {
  CheckAbove({"verify.ratio"}, ratio, 0.0f);
  CheckAtMost({"verify.ratio"}, ratio, 1.0f);
  CheckAbove({"verify.ransac_threshold"}, ransac_threshold, 0.0f);
  CheckAtLeast({"verify.min_matches"}, min_matches, 5, "four matches always fit a homography");
  CheckAtLeast({"verify.match_dims", "--match-dims"}, match_dims, 0);
  CheckInRange({"verify.match_shortlist"}, match_shortlist, 2, 64);
  CheckAtLeast({"verify.ransac_iterations"}, ransac_iterations, 1);
}

namespace {

// The nearest and second-nearest candidate feature of every query feature.
struct NearestTwo {
  std::vector<int> best;
  std::vector<float> best_dist, second_dist;  // Euclidean, of unit rows
  explicit NearestTwo(int nq) : best(nq, -1), best_dist(nq), second_dist(nq) {}
  void Set(int i, int j1, float s1, float s2) {
    best[i] = j1;
    best_dist[i] = std::sqrt(std::max(0.0f, 2.0f - 2.0f * s1));
    second_dist[i] = std::sqrt(std::max(0.0f, 2.0f - 2.0f * s2));
  }
};

// Exact: every query row against every candidate row, by dot product of unit
// rows (largest dot = smallest distance).
void ExactNearestTwo(const LocalFeatures& query, const LocalFeatures& candidate, NearestTwo* nn) {
  const int nq = static_cast<int>(query.num()), nc = static_cast<int>(candidate.num());
  const int dim = query.dim;
  std::vector<float> sims(static_cast<size_t>(kSimilarityBlockRows) * nc);
  for (int q0 = 0; q0 < nq; q0 += kSimilarityBlockRows) {
    const int rows = std::min(kSimilarityBlockRows, nq - q0);
    SimilarityBlock(candidate.descriptors.data(), nc,
                    query.descriptors.data() + static_cast<size_t>(q0) * dim, rows, dim,
                    sims.data());
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
      nn->Set(q0 + r, j1, s1, s2);
    }
  }
}

}  // namespace

PreparedQuery::PreparedQuery(const LocalFeatures& features, const VerifyOptions& options)
    : features_(features), options_(options) {
  const int nq = static_cast<int>(features.num()), dim = features.dim;
  if (options.match_dims <= 0 || options.match_dims >= dim || nq < 2) return;
  const int r = options.match_dims;
  // The query's principal axes (uncentred: the directions that best keep its
  // rows' dot products): eigenvectors of Q^T Q, largest eigenvalues last.
  std::vector<float> gram(static_cast<size_t>(dim) * dim);
  const float one = 1.0f, zero = 0.0f;
  sgemm_("N", "T", &dim, &dim, &nq, &one, features.descriptors.data(), &dim,
         features.descriptors.data(), &dim, &zero, gram.data(), &dim);
  std::vector<double> a(gram.begin(), gram.end()), w(static_cast<size_t>(dim));
  if (SymmetricEigen(dim, a.data(), w.data()) != 0) return;  // exact matching then
  basis_.resize(static_cast<size_t>(r) * dim);
  for (int i = 0; i < r; ++i)
    for (int k = 0; k < dim; ++k)
      basis_[static_cast<size_t>(i) * dim + k] =
          static_cast<float>(a[static_cast<size_t>(dim - 1 - i) * dim + k]);
  projected_ = Project(features.descriptors.data(), nq);
}

std::vector<float> PreparedQuery::Project(const float* rows, int n) const {
  const int dim = features_.dim, r = options_.match_dims;
  std::vector<float> out(static_cast<size_t>(n) * r);
  const float one = 1.0f, zero = 0.0f;
  // out^T (r x n) = basis (r x dim) * rows^T (dim x n).
  sgemm_("T", "N", &r, &n, &dim, &one, basis_.data(), &dim, rows, &dim, &zero, out.data(), &r);
  return out;
}

int ConsistentInliers(const Verification& v, const LocalFeatures& query,
                      const LocalFeatures& candidate, int enough) {
  // Each inlier's change of orientation (degrees) and of log size.
  std::vector<std::pair<float, float>> change;
  change.reserve(v.inlier_pairs.size());
  for (const auto& [i, j] : v.inlier_pairs) {
    if (i < 0 || static_cast<size_t>(i) >= query.keypoints.size() || j < 0 ||
        static_cast<size_t>(j) >= candidate.keypoints.size())
      continue;
    const Keypoint& a = query.keypoints[static_cast<size_t>(i)];
    const Keypoint& b = candidate.keypoints[static_cast<size_t>(j)];
    if (a.size <= 0 || b.size <= 0) continue;
    change.emplace_back(b.angle - a.angle, std::log(b.size / a.size));
  }
  const float max_log_scale = std::log(kConsistentScale);
  int best = 0;
  for (const auto& [angle, scale] : change) {
    int agree = 0;
    for (const auto& [other_angle, other_scale] : change) {
      // (fmod only past a full turn: it was 2 % of a query's CPU, and
      // keypoint angles lie in [0, 360), so their differences seldom do.)
      float turn = std::abs(other_angle - angle);
      if (turn >= 360.0f) turn = std::fmod(turn, 360.0f);
      turn = std::min(turn, 360.0f - turn);
      if (turn <= kConsistentAngle && std::abs(other_scale - scale) <= max_log_scale) ++agree;
    }
    best = std::max(best, agree);
    if (best >= enough) break;
  }
  return best;
}

Verification PreparedQuery::Verify(const LocalFeatures& candidate) const {
  Verification v;
  const LocalFeatures& query = features_;
  const int nq = static_cast<int>(query.num()), nc = static_cast<int>(candidate.num());
  if (nq < 2 || nc < 2 || query.dim != candidate.dim) return v;
  const int dim = query.dim;
  NearestTwo nn(nq);
  const int shortlist = options_.match_shortlist;
  if (basis_.empty() || nc <= 2 * shortlist) {
    ExactNearestTwo(query, candidate, &nn);
  } else {
    // Approximate: the `shortlist` nearest candidate rows in the query's
    // principal subspace, re-scored exactly; the best two of those are the
    // nearest two (the second can only be overestimated in distance, which
    // makes the ratio test slightly more permissive).
    const int r = options_.match_dims;
    const std::vector<float> cand = Project(candidate.descriptors.data(), nc);
    std::vector<int> top(static_cast<size_t>(nq) * shortlist);
    SubspaceShortlists(projected_.data(), nq, cand.data(), nc, r, shortlist, top.data());
    for (int i = 0; i < nq; ++i) {
      const float* qrow = query.descriptors.data() + static_cast<size_t>(i) * dim;
      float s1 = -std::numeric_limits<float>::infinity(), s2 = s1;
      int j1 = -1;
      for (int k = 0; k < shortlist; ++k) {
        const int j = top[static_cast<size_t>(i) * shortlist + k];
        if (j < 0) break;
        const float e =
            LanedDot(qrow, candidate.descriptors.data() + static_cast<size_t>(j) * dim, dim);
        if (e > s1 || (e == s1 && j < j1)) {
          s2 = s1;
          s1 = e;
          j1 = j;
        } else if (e > s2) {
          s2 = e;
        }
      }
      nn.Set(i, j1, s1, s2);
    }
  }
  // Ratio test, then one-to-one: a candidate feature keeps its closest query feature.
  std::vector<int> owner(nc, -1);
  for (int i = 0; i < nq; ++i) {
    if (nn.best[i] < 0 || !(nn.best_dist[i] < options_.ratio * nn.second_dist[i])) continue;
    int& o = owner[nn.best[i]];
    if (o < 0 || nn.best_dist[i] < nn.best_dist[o]) o = i;
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
  if (v.matches < options_.min_matches) return v;
  cv::Mat mask;
  const int method = options_.ransac == RansacMethod::kUsac ? cv::USAC_DEFAULT : cv::RANSAC;
  const cv::Mat h = cv::findHomography(src, dst, method, options_.ransac_threshold, mask,
                                       options_.ransac_iterations, 0.999);
  if (h.empty() || mask.empty()) return v;
  v.inliers = cv::countNonZero(mask);
  std::array<double, 9> hom;
  for (int i = 0; i < 9; ++i) hom[static_cast<size_t>(i)] = h.at<double>(i / 3, i % 3);
  v.homography = hom;
  for (size_t i = 0; i < matched.size(); ++i)
    if (mask.at<uchar>(static_cast<int>(i))) v.inlier_pairs.push_back(matched[i]);
  return v;
}

Verification VerifyPair(const LocalFeatures& query, const LocalFeatures& candidate,
                        const VerifyOptions& options) {
  return PreparedQuery(query, options).Verify(candidate);
}

LocalFeatures StrongestFeatures(const LocalFeatures& f, int64_t max_keypoints) {
  if (max_keypoints <= 0 || f.num() <= max_keypoints) return f;
  std::vector<int64_t> order(static_cast<size_t>(f.num()));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&f](int64_t a, int64_t b) {
    return f.keypoints[static_cast<size_t>(a)].response >
           f.keypoints[static_cast<size_t>(b)].response;
  });
  order.resize(static_cast<size_t>(max_keypoints));
  std::sort(order.begin(), order.end());
  LocalFeatures out;
  out.width = f.width;
  out.height = f.height;
  out.dim = f.dim;
  out.keypoints.reserve(order.size());
  out.descriptors.reserve(order.size() * static_cast<size_t>(f.dim));
  for (int64_t i : order) {
    out.keypoints.push_back(f.keypoints[static_cast<size_t>(i)]);
    const float* row = f.descriptors.data() + i * f.dim;
    out.descriptors.insert(out.descriptors.end(), row, row + f.dim);
  }
  return out;
}

FeatureReader::FeatureReader(const Store& store)
    : store_(store), quantizer_(LoadDescriptorQuantizer(store)) {}

std::optional<LocalFeatures> FeatureReader::Read(uint64_t id, DescriptorFrame frame) const {
  const auto blob = store_.GetFeatures(id);
  if (!blob) return std::nullopt;
  return DecodeLocalFeatures(*blob, quantizer(), frame);
}

LocalFeatures FeatureReader::InMatchingFrame(LocalFeatures features) const {
  return quantizer_ ? InQuantizerFrame(std::move(features), *quantizer_) : features;
}

}  // namespace lookalike
