#include "search/thumbnail_match.h"

#include <algorithm>
#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <utility>

namespace lookalike {
namespace {

// The shares of a stored image's area a query may show: whole, or cropped to
// as little as a third (the dev set's hard crops keep 30-50 %), at a 1.4x step.
constexpr float kAreaFractions[] = {1.0f, 0.7f, 0.5f, 0.35f};
constexpr double kBlurSigma = 1.0;  // px: JPEG blocks and resampling noise
constexpr int kMinPlacementSide = 6;
// A placed query whose grey levels vary less than this (standard deviation,
// 0-255) is flat: its normalised correlation is rounding noise (OpenCV's
// matchTemplate reported a flat template as a perfect match).
constexpr double kMinQueryDeviation = 4.0;

// A stored window whose grey levels vary less than this (standard deviation)
// is flat: its correlation with anything is rounding noise.
constexpr double kMinWindowDeviation = 0.5;

cv::Mat Blurred(const cv::Mat& m) {
  cv::Mat out;
  cv::GaussianBlur(m, out, cv::Size(0, 0), kBlurSigma);
  return out;
}

// A thumbnail to slide templates over: its grey levels (CV_32FC1) and the
// integral images of them and of their squares, so that every window's mean
// and variance cost four lookups.
struct Target {
  explicit Target(cv::Mat grey) : pixels(std::move(grey)) {
    cv::integral(pixels, sum, sum2, CV_64F, CV_64F);
  }
  cv::Mat pixels, sum, sum2;
};

// The best correlation over every position of a template (zero_mean: its
// grey levels minus their mean; norm: their L2 norm) in `target`. Computed
// directly rather than with cv::matchTemplate: at thumbnail sizes (templates
// of 26 x 20 to 46 x 35 on 48 x 36) OpenCV's DFT costs 1.5-2x more, on
// threads of its own (search/README.md, "Thumbnail correlation").
float BestOver(const Target& target, const cv::Mat& zero_mean, double norm) {
  const int w = zero_mean.cols, h = zero_mean.rows;
  const int positions_x = target.pixels.cols - w + 1, positions_y = target.pixels.rows - h + 1;
  if (w <= 0 || h <= 0 || positions_x <= 0 || positions_y <= 0 || !(norm > 0)) return -1.0f;
  const double n = static_cast<double>(w) * h;
  const double min_variance = n * kMinWindowDeviation * kMinWindowDeviation;  // times n
  float best = -1.0f;
  for (int y = 0; y < positions_y; ++y) {
    const double* s0 = target.sum.ptr<double>(y);
    const double* s1 = target.sum.ptr<double>(y + h);
    const double* q0 = target.sum2.ptr<double>(y);
    const double* q1 = target.sum2.ptr<double>(y + h);
    for (int x = 0; x < positions_x; ++x) {
      const double s = s1[x + w] - s0[x + w] - s1[x] + s0[x];
      const double s2 = q1[x + w] - q0[x + w] - q1[x] + q0[x];
      const double variance = s2 - s * s / n;  // times n
      if (variance < min_variance) continue;
      // The template has zero mean, so its dot product with the window is
      // the covariance (times n) without subtracting the window's mean.
      float dot = 0.0f;
      for (int r = 0; r < h; ++r) {
        const float* a = zero_mean.ptr<float>(r);
        const float* b = target.pixels.ptr<float>(y + r) + x;
        float row = 0.0f;
#pragma omp simd reduction(+ : row)
        for (int c = 0; c < w; ++c) row += a[c] * b[c];
        dot += row;
      }
      best = std::max(best, std::min(static_cast<float>(dot / (norm * std::sqrt(variance))), 1.0f));
    }
  }
  return best;
}

// `templ` minus its mean, and the L2 norm of that.
std::pair<cv::Mat, double> ZeroMean(const cv::Mat& templ) {
  cv::Mat zero_mean;
  templ.convertTo(zero_mean, CV_32F, 1.0, -cv::mean(templ)[0]);
  return {zero_mean, cv::norm(zero_mean)};
}

}  // namespace

float BestNormalisedCorrelation(const cv::Mat& target, const cv::Mat& templ) {
  const auto [zero_mean, norm] = ZeroMean(templ);
  return BestOver(Target(target.clone()), zero_mean, norm);
}

ThumbnailMatcher::ThumbnailMatcher(const GreyThumbnail& query)
    : width_(query.width),
      height_(query.height),
      pixels_(query.pixels.begin(), query.pixels.end()) {}

const std::vector<ThumbnailMatcher::Placement>& ThumbnailMatcher::Placements(int width,
                                                                             int height) {
  // Made under the lock: a few sizes per query, each once.
  const std::lock_guard<std::mutex> lock(placements_mutex_);
  const auto found = placements_.find({width, height});
  if (found != placements_.end()) return found->second;
  std::vector<Placement> placed;
  const cv::Mat query(height_, width_, CV_32FC1, pixels_.data());
  const double W = width, H = height, aspect = static_cast<double>(width_) / height_;
  for (const float fraction : kAreaFractions) {
    const double w = std::sqrt(fraction * W * H * aspect), h = w / aspect;
    const double fit = std::min({1.0, W / w, H / h});  // inside the stored image
    const int tw = static_cast<int>(w * fit), th = static_cast<int>(h * fit);
    Placement p;
    if (tw >= kMinPlacementSide && th >= kMinPlacementSide) {
      cv::Mat shrunk;
      cv::resize(query, shrunk, cv::Size(tw, th), 0, 0, cv::INTER_AREA);
      auto [zero_mean, norm] = ZeroMean(Blurred(shrunk));
      // norm / sqrt(pixels) is the placement's standard deviation.
      if (norm >= kMinQueryDeviation * std::sqrt(static_cast<double>(tw) * th)) {
        p.zero_mean = std::move(zero_mean);
        p.norm = norm;
      }
    }
    placed.push_back(std::move(p));
  }
  return placements_.emplace(std::make_pair(width, height), std::move(placed)).first->second;
}

float ThumbnailMatcher::Match(const GreyThumbnail& stored) { return Correlate(stored, false); }

float ThumbnailMatcher::CoarseMatch(const GreyThumbnail& stored) { return Correlate(stored, true); }

float ThumbnailMatcher::Correlate(const GreyThumbnail& stored, bool halved) {
  if (pixels_.empty() || stored.empty()) return -1.0f;
  cv::Mat grey;
  cv::Mat(stored.height, stored.width, CV_8UC1, const_cast<uint8_t*>(stored.pixels.data()))
      .convertTo(grey, CV_32F);
  cv::Mat blurred = Blurred(grey);
  if (halved) {
    cv::Mat half;
    cv::resize(blurred, half, cv::Size(std::max(1, grey.cols / 2), std::max(1, grey.rows / 2)), 0,
               0, cv::INTER_AREA);
    blurred = half;
  }
  const Target target(blurred);
  float best = -1.0f;
  for (const Placement& placed : Placements(target.pixels.cols, target.pixels.rows))
    if (!placed.zero_mean.empty())
      best = std::max(best, BestOver(target, placed.zero_mean, placed.norm));
  return best;
}

}  // namespace lookalike
