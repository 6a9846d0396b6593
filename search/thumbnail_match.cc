#include "search/thumbnail_match.h"

#include <algorithm>
#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

namespace lookalike {
namespace {

// The shares of a stored image's area a query may show: whole, or cropped to
// as little as a third (the dev set's hard crops keep 30-50 %), at a 1.4x step.
constexpr float kAreaFractions[] = {1.0f, 0.7f, 0.5f, 0.35f};
constexpr double kBlurSigma = 1.0;  // px: JPEG blocks and resampling noise
constexpr int kMinPlacementSide = 6;
// A placed query whose grey levels vary less than this (standard deviation,
// 0-255) is flat: its normalised correlation is rounding noise, and OpenCV
// reports it as a perfect match.
constexpr double kMinQueryDeviation = 4.0;

cv::Mat Blurred(const cv::Mat& m) {
  cv::Mat out;
  cv::GaussianBlur(m, out, cv::Size(0, 0), kBlurSigma);
  return out;
}

}  // namespace

ThumbnailMatcher::ThumbnailMatcher(const GreyThumbnail& query)
    : width_(query.width),
      height_(query.height),
      pixels_(query.pixels.begin(), query.pixels.end()) {}

const std::vector<cv::Mat>& ThumbnailMatcher::Placements(int width, int height) {
  const auto found = placements_.find({width, height});
  if (found != placements_.end()) return found->second;
  std::vector<cv::Mat> placed;
  const cv::Mat query(height_, width_, CV_32FC1, pixels_.data());
  const double W = width, H = height, aspect = double{width_} / height_;
  for (const float fraction : kAreaFractions) {
    const double w = std::sqrt(fraction * W * H * aspect), h = w / aspect;
    const double fit = std::min({1.0, W / w, H / h});  // inside the stored image
    const int tw = static_cast<int>(w * fit), th = static_cast<int>(h * fit);
    cv::Mat p;
    if (tw >= kMinPlacementSide && th >= kMinPlacementSide) {
      cv::resize(query, p, cv::Size(tw, th), 0, 0, cv::INTER_AREA);
      p = Blurred(p);
      cv::Scalar mean, deviation;
      cv::meanStdDev(p, mean, deviation);
      if (deviation[0] < kMinQueryDeviation) p = cv::Mat();
    }
    placed.push_back(p);
  }
  return placements_.emplace(std::make_pair(width, height), std::move(placed)).first->second;
}

float ThumbnailMatcher::Match(const GreyThumbnail& stored) {
  if (pixels_.empty() || stored.empty()) return -1.0f;
  cv::Mat target;
  cv::Mat(stored.height, stored.width, CV_8UC1, const_cast<uint8_t*>(stored.pixels.data()))
      .convertTo(target, CV_32F);
  target = Blurred(target);
  float best = -1.0f;
  for (const cv::Mat& placed : Placements(stored.width, stored.height)) {
    if (placed.empty()) continue;
    cv::Mat scores;
    cv::matchTemplate(target, placed, scores, cv::TM_CCOEFF_NORMED);
    // A flat region of the stored image divides by zero: it says nothing.
    for (int r = 0; r < scores.rows; ++r) {
      const float* row = scores.ptr<float>(r);
      for (int c = 0; c < scores.cols; ++c)
        if (std::isfinite(row[c])) best = std::max(best, std::min(row[c], 1.0f));
    }
  }
  return best;
}

}  // namespace lookalike
