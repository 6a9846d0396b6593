#include "search/match_evidence.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <opencv2/calib3d.hpp>
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

// Share of `keypoints` that `h` maps inside a width x height frame, or
// within a quarter of their described region (`scale` b pixels per a
// pixel) or kContentMargin of the frame's size of it: a feature on a
// picture's edge, or on the edge of a rotated copy's blank corners, lies
// partly outside.
constexpr double kContentMargin = 0.02;
float ContentShare(const Homography& h, const std::vector<Keypoint>& keypoints, double scale,
                   int width, int height) {
  if (keypoints.empty()) return 0;
  int inside = 0;
  for (const Keypoint& k : keypoints) {
    const double mx = std::max(kContentMargin * width, 0.25 * k.size * scale);
    const double my = std::max(kContentMargin * height, 0.25 * k.size * scale);
    double u = 0, v = 0;
    if (Map(h, k.x, k.y, &u, &v) && u >= -mx && v >= -my && u <= width + mx && v <= height + my)
      ++inside;
  }
  return static_cast<float>(inside) / static_cast<float>(keypoints.size());
}

// The shape of `h` (a's frame to b's) into `e`: local scale, rotation,
// mirror and anisotropy at (cx, cy), perspective over `points` (a's
// inliers). h's denominator must be positive there.
void DescribeShape(const Homography& h, double cx, double cy,
                   const std::vector<cv::Point2f>& points, MatchEvidence* e) {
  const double den = Denominator(h, cx, cy);
  const double u = (h[0] * cx + h[1] * cy + h[2]) / den;
  const double v = (h[3] * cx + h[4] * cy + h[5]) / den;
  // Jacobian of the mapping there.
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
  for (const cv::Point2f& p : points) {
    const double w = Denominator(h, p.x, p.y);
    lo = std::min(lo, w);
    hi = std::max(hi, w);
  }
  e->perspective = lo > 0 ? static_cast<float>(hi / lo - 1) : std::numeric_limits<float>::max();
}

// The residuals of pb from pa mapped by the homography least squares fits
// to them, in b's pixels: their RMS, and the 90th percentile over the
// inliers of the magnitude of the mean residual vector of each inlier's
// StructureNeighbours(n) nearest (in a): noise averages out, a coherent
// shift (parallax, a thing that moved) does not. Zeros for fewer than 5
// pairs.
std::pair<double, double> Residuals(const std::vector<cv::Point2f>& pa,
                                    const std::vector<cv::Point2f>& pb) {
  const size_t n = pa.size();
  if (n < 5) return {0, 0};
  const cv::Mat fit = cv::findHomography(pa, pb, 0);
  if (fit.empty()) return {0, 0};
  std::vector<cv::Point2f> mapped;
  cv::perspectiveTransform(pa, mapped, fit);
  std::vector<cv::Point2f> r(n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    r[i] = pb[i] - mapped[i];
    sum += r[i].dot(r[i]);
  }
  const size_t k = static_cast<size_t>(StructureNeighbours(static_cast<int>(n)));
  std::vector<std::pair<float, size_t>> by_distance(n);
  std::vector<double> structured(n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const cv::Point2f d = pa[j] - pa[i];
      by_distance[j] = {d.dot(d), j};
    }
    std::nth_element(by_distance.begin(), by_distance.begin() + static_cast<std::ptrdiff_t>(k - 1),
                     by_distance.end());
    cv::Point2d mean(0, 0);
    for (size_t m = 0; m < k; ++m) mean += cv::Point2d(r[by_distance[m].second]);
    structured[i] = std::hypot(mean.x, mean.y) / static_cast<double>(k);
  }
  const auto p90 = structured.begin() + static_cast<std::ptrdiff_t>((n * 9) / 10);
  std::nth_element(structured.begin(), p90, structured.end());
  return {std::sqrt(sum / static_cast<double>(n)), *p90};
}

}  // namespace

MatchEvidence MeasureMatch(const Verification& v, const LocalFeatures& a, const LocalFeatures& b,
                           int min_inliers) {
  MatchEvidence e;
  e.matches = v.matches;
  e.inliers = std::max(0, v.inliers);
  e.verified = v.inliers >= min_inliers;
  e.consistent = ConsistentInliers(v, a, b);
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
  if (!v.homography || pa.empty() || a.width == 0 || a.height == 0 || b.width == 0 || b.height == 0)
    return e;
  const int aw = static_cast<int>(a.width), ah = static_cast<int>(a.height);
  const int bw = static_cast<int>(b.width), bh = static_cast<int>(b.height);
  cv::Point2f centre(0, 0);
  for (const cv::Point2f& p : pa) centre += p;
  centre *= 1.0f / static_cast<float>(pa.size());
  const Homography h = PositiveAt(*v.homography, centre.x, centre.y);
  // Every inlier in front of the camera: the map is a proper picture
  // transform over the matched content.
  for (const cv::Point2f& p : pa)
    if (!(Denominator(h, p.x, p.y) > 1e-12)) return e;
  const auto inv = Inverse(h);
  if (!inv) return e;
  e.homography = true;
  DescribeShape(h, centre.x, centre.y, pa, &e);
  double cu = 0, cv_ = 0;
  Map(h, centre.x, centre.y, &cu, &cv_);
  const Homography back = PositiveAt(*inv, cu, cv_);
  e.overlap_a = OverlapShare(h, aw, ah, bw, bh);
  e.overlap_b = OverlapShare(back, bw, bh, aw, ah);
  e.content_a = ContentShare(h, a.keypoints, e.scale, bw, bh);
  e.content_b = ContentShare(back, b.keypoints, 1.0 / std::max(1e-6f, e.scale), aw, ah);
  // In the coarser frame's pixels.
  const auto [rms, structured] = Residuals(pa, pb);
  const double coarser = std::max(1.0, static_cast<double>(e.scale));
  e.residual = static_cast<float>(rms / coarser);
  e.structured_residual = static_cast<float>(structured / coarser);
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

// The Gaussian both sides of an aligned correlation are smoothed with,
// target pixels.
constexpr double kAlignedBlur = 1.0;

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
  // Both sides low-passed on the target's grid: a thumbnail's finest detail
  // is aliasing that depends on where its pixel grid falls (a fine pattern
  // cropped by a few pixels shrinks to another moire), not content. The
  // outermost pixels, where the two blurs see different neighbours, are left
  // out.
  cv::Mat target_f = AsMat(target);
  target_f.convertTo(target_f, CV_32F);
  cv::GaussianBlur(target_f, target_f, cv::Size(), kAlignedBlur, kAlignedBlur,
                   cv::BORDER_REPLICATE);
  // The warped side only has pixels inside the mask: a normalised
  // convolution (the blur of the masked pixels over the blur of the mask).
  cv::Mat weight;
  mask.convertTo(weight, CV_32F, 1.0 / 255);
  warped = warped.mul(weight);
  cv::GaussianBlur(warped, warped, cv::Size(), kAlignedBlur, kAlignedBlur, cv::BORDER_CONSTANT);
  cv::GaussianBlur(weight, weight, cv::Size(), kAlignedBlur, kAlignedBlur, cv::BORDER_CONSTANT);
  warped /= cv::max(weight, 1e-3);
  cv::erode(mask, mask, cv::Mat(), cv::Point(-1, -1), 1);
  double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  int n = 0;
  for (int y = 0; y < target.height; ++y) {
    const float* w = warped.ptr<float>(y);
    const uint8_t* m = mask.ptr<uint8_t>(y);
    const float* t = target_f.ptr<float>(y);
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

namespace {

// The share of `t`'s textured pixels (thumbnail of a width x height frame)
// that `to_other` (frame to frame, positive at t's centre) maps inside an
// other_width x other_height frame, widened by half a pixel of
// `other_step` (the other thumbnail's pixel, in its frame's units) and
// kContentMargin of its size; nullopt with fewer than kMinTexturedPixels
// textured pixels.
std::optional<float> TexturedShare(const GreyThumbnail& t, int width, int height,
                                   const Homography& to_other, int other_width, int other_height,
                                   double other_step) {
  const Homography frame = ThumbnailToFrame(t.width, t.height, width, height);
  const double mx = std::max(kContentMargin * other_width, other_step);
  const double my = std::max(kContentMargin * other_height, other_step);
  int textured = 0, inside = 0;
  const auto at = [&t](int x, int y) {
    x = std::clamp(x, 0, t.width - 1);
    y = std::clamp(y, 0, t.height - 1);
    return static_cast<int>(t.pixels[static_cast<size_t>(y) * t.width + x]);
  };
  for (int y = 0; y < t.height; ++y) {
    for (int x = 0; x < t.width; ++x) {
      const int gx = at(x + 1, y) - at(x - 1, y), gy = at(x, y + 1) - at(x, y - 1);
      if (std::abs(gx) + std::abs(gy) < 2 * kTexturedGradient) continue;
      ++textured;
      double fx = 0, fy = 0, u = 0, v = 0;
      Map(frame, x, y, &fx, &fy);
      if (Map(to_other, fx, fy, &u, &v) && u >= -mx && v >= -my && u <= other_width + mx &&
          v <= other_height + my)
        ++inside;
    }
  }
  if (textured < kMinTexturedPixels) return std::nullopt;
  return static_cast<float>(inside) / static_cast<float>(textured);
}

}  // namespace

void MeasureThumbnails(const GreyThumbnail& a, int a_width, int a_height, const GreyThumbnail& b,
                       int b_width, int b_height, const std::array<double, 9>& a_to_b,
                       MatchEvidence* e) {
  if (!e->homography || a.empty() || b.empty() || a_width <= 0 || a_height <= 0 || b_width <= 0 ||
      b_height <= 0)
    return;
  e->aligned_correlation = AlignedCorrelation(a, a_width, a_height, b, b_width, b_height, a_to_b);
  const Homography h = PositiveAt(a_to_b, 0.5 * a_width, 0.5 * a_height);
  const auto inv = Inverse(h);
  if (!inv) return;
  double cu = 0, cv_ = 0;
  if (!Map(h, 0.5 * a_width, 0.5 * a_height, &cu, &cv_)) return;
  const Homography back = PositiveAt(*inv, cu, cv_);
  if (const auto share =
          TexturedShare(a, a_width, a_height, h, b_width, b_height, 0.5 * b_width / b.width))
    e->content_a = *share;
  if (const auto share =
          TexturedShare(b, b_width, b_height, back, a_width, a_height, 0.5 * a_width / a.width))
    e->content_b = *share;
}

}  // namespace lookalike
