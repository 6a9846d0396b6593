#include "search/match_evidence.h"

#include <algorithm>
#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <vector>

namespace lookalike {

namespace {

using Homography = std::array<double, 9>;

// Grid points per side sampled to measure how much of an image maps inside
// the other: 1/1024 of the area, finer than any threshold on it.
constexpr int kOverlapGrid = 32;

// The homography's projective denominator at (x, y).
double Denominator(const Homography& h, double x, double y) { return h[6] * x + h[7] * y + h[8]; }

bool Map(const Homography& h, double x, double y, double* u, double* v) {
  const double w = Denominator(h, x, y);
  if (!(w > 1e-12)) return false;
  *u = (h[0] * x + h[1] * y + h[2]) / w;
  *v = (h[3] * x + h[4] * y + h[5]) / w;
  return true;
}

std::optional<Homography> Inverse(const Homography& h) {
  const cv::Matx33d m(h.data());
  if (std::abs(cv::determinant(m)) < 1e-18) return std::nullopt;
  const cv::Matx33d inv = m.inv();
  Homography out;
  for (int i = 0; i < 9; ++i) out[static_cast<size_t>(i)] = inv.val[i];
  return out;
}

// Scales h so that its denominator is positive at (x, y) (a homography is
// defined up to scale, its sign included).
Homography PositiveAt(Homography h, double x, double y) {
  if (Denominator(h, x, y) < 0)
    for (double& value : h) value = -value;
  return h;
}

// Share of the grid points of a w x h frame that `h` maps inside a
// target_w x target_h frame.
float OverlapShare(const Homography& hom, int w, int h, int target_w, int target_h) {
  int inside = 0;
  for (int gy = 0; gy < kOverlapGrid; ++gy) {
    for (int gx = 0; gx < kOverlapGrid; ++gx) {
      const double x = (gx + 0.5) * w / kOverlapGrid, y = (gy + 0.5) * h / kOverlapGrid;
      double u = 0, v = 0;
      if (Map(hom, x, y, &u, &v) && u >= 0 && v >= 0 && u <= target_w && v <= target_h) ++inside;
    }
  }
  return static_cast<float>(inside) / (kOverlapGrid * kOverlapGrid);
}

float HullShare(const std::vector<cv::Point2f>& points, uint32_t width, uint32_t height) {
  if (points.size() < 3 || width == 0 || height == 0) return 0;
  std::vector<cv::Point2f> hull;
  cv::convexHull(points, hull);
  const double area = cv::contourArea(hull);
  return static_cast<float>(
      std::clamp(area / (static_cast<double>(width) * static_cast<double>(height)), 0.0, 1.0));
}

// The shape of `h` (a's frame to b's) into `e`: local scale, rotation,
// mirror, anisotropy at a's centre, perspective over a's corners.
void DescribeShape(const Homography& h, int w, int hgt, MatchEvidence* e) {
  const double cx = 0.5 * w, cy = 0.5 * hgt;
  const double den = Denominator(h, cx, cy);
  const double u = (h[0] * cx + h[1] * cy + h[2]) / den;
  const double v = (h[3] * cx + h[4] * cy + h[5]) / den;
  // Jacobian of the mapping at the centre.
  const double a = (h[0] - u * h[6]) / den, b = (h[1] - u * h[7]) / den;
  const double c = (h[3] - v * h[6]) / den, d = (h[4] - v * h[7]) / den;
  const double det = a * d - b * c;
  e->mirrored = det < 0;
  e->scale = static_cast<float>(std::sqrt(std::abs(det)));
  // Singular values of [[a, b], [c, d]] from its similarity and
  // anti-similarity parts.
  const double q = std::hypot((a + d) / 2, (c - b) / 2);
  const double r = std::hypot((a - d) / 2, (c + b) / 2);
  const double s1 = q + r, s2 = std::abs(q - r);
  e->anisotropy = s1 > 0 ? static_cast<float>(1 - s2 / s1) : 1.0f;
  // Rotation of the nearest similarity; of the Jacobian times a mirror in x
  // when it reverses orientation.
  const double ra = e->mirrored ? -a : a, rc = e->mirrored ? -c : c;
  constexpr double kDegrees = 180.0 / 3.14159265358979323846;
  e->rotation = static_cast<float>(std::atan2((rc - b) / 2, (ra + d) / 2) * kDegrees);
  double lo = den, hi = den;
  for (const auto& [x, y] : {std::pair<double, double>{0, 0}, {w, 0}, {w, hgt}, {0, hgt}}) {
    const double wc = Denominator(h, x, y);
    lo = std::min(lo, wc);
    hi = std::max(hi, wc);
  }
  e->perspective = static_cast<float>(hi / lo - 1);
}

}  // namespace

MatchEvidence MeasureMatch(const Verification& v, const LocalFeatures& a, const LocalFeatures& b,
                           int min_inliers) {
  MatchEvidence e;
  e.matches = v.matches;
  e.inliers = std::max(0, v.inliers);
  e.verified = v.inliers >= min_inliers;
  const int64_t poorer = std::min(a.num(), b.num());
  if (poorer > 0)
    e.coverage = std::min(1.0f, static_cast<float>(e.inliers) / static_cast<float>(poorer));
  std::vector<cv::Point2f> pa, pb;
  for (const auto& [i, j] : v.inlier_pairs) {
    if (i < 0 || i >= a.num() || j < 0 || j >= b.num()) continue;
    pa.emplace_back(a.keypoints[static_cast<size_t>(i)].x, a.keypoints[static_cast<size_t>(i)].y);
    pb.emplace_back(b.keypoints[static_cast<size_t>(j)].x, b.keypoints[static_cast<size_t>(j)].y);
  }
  e.hull_a = HullShare(pa, a.width, a.height);
  e.hull_b = HullShare(pb, b.width, b.height);
  if (!v.homography || a.width == 0 || a.height == 0 || b.width == 0 || b.height == 0) return e;
  const int aw = static_cast<int>(a.width), ah = static_cast<int>(a.height);
  const int bw = static_cast<int>(b.width), bh = static_cast<int>(b.height);
  const Homography h = PositiveAt(*v.homography, 0.5 * aw, 0.5 * ah);
  // Every corner of a in front of the camera: the map is a proper picture
  // transform over the whole of a.
  for (const auto& [x, y] : {std::pair<int, int>{0, 0}, {aw, 0}, {aw, ah}, {0, ah}})
    if (!(Denominator(h, x, y) > 1e-12)) return e;
  const auto inv = Inverse(h);
  if (!inv) return e;
  e.homography = true;
  DescribeShape(h, aw, ah, &e);
  e.overlap_a = OverlapShare(h, aw, ah, bw, bh);
  e.overlap_b = OverlapShare(PositiveAt(*inv, 0.5 * bw, 0.5 * bh), bw, bh, aw, ah);
  return e;
}

namespace {

// The homography from thumbnail pixel centres of one frame to another's:
// frame = (pixel + 0.5) * frame / thumb.
Homography ThumbnailToFrame(int thumb_w, int thumb_h, int frame_w, int frame_h) {
  const double sx = static_cast<double>(frame_w) / thumb_w,
               sy = static_cast<double>(frame_h) / thumb_h;
  return {sx, 0, 0.5 * sx, 0, sy, 0.5 * sy, 0, 0, 1};
}

Homography Compose(const Homography& outer, const Homography& inner) {
  const cv::Matx33d m = cv::Matx33d(outer.data()) * cv::Matx33d(inner.data());
  Homography out;
  for (int i = 0; i < 9; ++i) out[static_cast<size_t>(i)] = m.val[i];
  return out;
}

cv::Mat AsMat(const GreyThumbnail& t) {
  return cv::Mat(t.height, t.width, CV_8U, const_cast<uint8_t*>(t.pixels.data())).clone();
}

// Correlation of `target` with `source` warped onto it by `target_to_source`
// (thumbnail pixels), over the target pixels that land inside the source.
// `source_step` is how many source pixels one target pixel spans (> 1: the
// source is smoothed first so that the warp does not alias).
std::optional<float> WarpedCorrelation(const GreyThumbnail& target, const GreyThumbnail& source,
                                       const Homography& target_to_source, double source_step) {
  cv::Mat src = AsMat(source);
  src.convertTo(src, CV_32F);
  if (source_step > 1.25) {
    const double sigma = 0.5 * std::sqrt(source_step * source_step - 1);
    cv::GaussianBlur(src, src, cv::Size(), sigma, sigma, cv::BORDER_REPLICATE);
  }
  const cv::Mat map(3, 3, CV_64F, const_cast<double*>(target_to_source.data()));
  cv::Mat warped, mask;
  cv::warpPerspective(src, warped, map, cv::Size(target.width, target.height),
                      cv::INTER_LINEAR | cv::WARP_INVERSE_MAP, cv::BORDER_CONSTANT, 0);
  cv::warpPerspective(cv::Mat(source.height, source.width, CV_8U, cv::Scalar(255)), mask, map,
                      cv::Size(target.width, target.height),
                      cv::INTER_NEAREST | cv::WARP_INVERSE_MAP, cv::BORDER_CONSTANT, 0);
  double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  int n = 0;
  for (int y = 0; y < target.height; ++y) {
    const float* w = warped.ptr<float>(y);
    const uint8_t* m = mask.ptr<uint8_t>(y);
    const uint8_t* t = target.pixels.data() + static_cast<size_t>(y) * target.width;
    for (int x = 0; x < target.width; ++x) {
      if (!m[x]) continue;
      const double p = t[x], q = w[x];
      sx += p;
      sy += q;
      sxx += p * p;
      syy += q * q;
      sxy += p * q;
      ++n;
    }
  }
  if (n < kMinAlignedPixels) return std::nullopt;
  const double vx = sxx - sx * sx / n, vy = syy - sy * sy / n;
  // Flat on either side (under one grey level of deviation): nothing to compare.
  if (vx < n * 1.0 || vy < n * 1.0) return std::nullopt;
  return static_cast<float>((sxy - sx * sy / n) / std::sqrt(vx * vy));
}

}  // namespace

std::optional<float> AlignedCorrelation(const GreyThumbnail& a, int a_width, int a_height,
                                        const GreyThumbnail& b, int b_width, int b_height,
                                        const std::array<double, 9>& a_to_b) {
  if (a.empty() || b.empty() || a_width <= 0 || a_height <= 0 || b_width <= 0 || b_height <= 0)
    return std::nullopt;
  const Homography ta = ThumbnailToFrame(a.width, a.height, a_width, a_height);
  const Homography tb = ThumbnailToFrame(b.width, b.height, b_width, b_height);
  const auto tb_inv = Inverse(tb);
  const auto ta_inv = Inverse(ta);
  if (!tb_inv || !ta_inv) return std::nullopt;
  // a's thumbnail pixels to b's thumbnail pixels.
  const Homography ab = Compose(*tb_inv, Compose(a_to_b, ta));
  const auto ba = Inverse(ab);
  if (!ba) return std::nullopt;
  // How many b pixels an a pixel spans at a's centre: the local scale.
  const double cx = 0.5 * a.width, cy = 0.5 * a.height;
  double u0 = 0, v0 = 0, u1 = 0, v1 = 0, u2 = 0, v2 = 0;
  const Homography abp = PositiveAt(ab, cx, cy);
  if (!Map(abp, cx, cy, &u0, &v0) || !Map(abp, cx + 1, cy, &u1, &v1) ||
      !Map(abp, cx, cy + 1, &u2, &v2))
    return std::nullopt;
  const double step = std::sqrt(std::abs((u1 - u0) * (v2 - v0) - (v1 - v0) * (u2 - u0)));
  // The target is the side with the coarser sampling of the shared content.
  if (step >= 1) return WarpedCorrelation(a, b, ab, step);
  return WarpedCorrelation(b, a, PositiveAt(*ba, 0.5 * b.width, 0.5 * b.height), 1 / step);
}

}  // namespace lookalike
