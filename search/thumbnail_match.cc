#include "search/thumbnail_match.h"

#include "util/cpu_features.h"

#ifdef LOOKALIKE_X86_DISPATCH
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <utility>
#include <vector>

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
    cv::copyMakeBorder(pixels, padded, 0, 0, 0, kPadding, cv::BORDER_CONSTANT, cv::Scalar(0));
  }
  // Zero columns on the right of `padded`: a vector of 8 positions may
  // start at the last one and reads 7 beyond.
  static constexpr int kPadding = 8;
  cv::Mat pixels, sum, sum2, padded;
};

// A template's positions on a target, and what both implementations of
// BestOver judge each window by: its variance from the integral images (four
// lookups), and the correlation a dot product with it gives.
struct Windows {
  Windows(const Target& target, const cv::Mat& zero_mean, double norm)
      : target(target),
        w(zero_mean.cols),
        h(zero_mean.rows),
        positions_x(target.pixels.cols - w + 1),
        positions_y(target.pixels.rows - h + 1),
        n(static_cast<double>(w) * h),
        min_variance(n * kMinWindowDeviation * kMinWindowDeviation),
        norm(norm) {}
  // No position, or a flat template: nothing to correlate.
  bool none() const {
    return w <= 0 || h <= 0 || positions_x <= 0 || positions_y <= 0 || !(norm > 0);
  }
  // The variances times n of row y's windows, or -1 for a flat one, into
  // variance[0 .. positions_x - 1].
  void RowVariances(int y, double* variance) const {
    const double* s0 = target.sum.ptr<double>(y);
    const double* s1 = target.sum.ptr<double>(y + h);
    const double* q0 = target.sum2.ptr<double>(y);
    const double* q1 = target.sum2.ptr<double>(y + h);
    for (int x = 0; x < positions_x; ++x) {
      const double s = s1[x + w] - s0[x + w] - s1[x] + s0[x];
      const double s2 = q1[x + w] - q0[x + w] - q1[x] + q0[x];
      const double v = s2 - s * s / n;
      variance[x] = v < min_variance ? -1.0 : v;
    }
  }
  // The template has zero mean, so its dot product with a window is the
  // covariance (times n) without subtracting the window's mean.
  float Correlation(float dot, double variance) const {
    return std::min(static_cast<float>(dot / (norm * std::sqrt(variance))), 1.0f);
  }

  const Target& target;
  const int w, h, positions_x, positions_y;
  const double n, min_variance;  // min_variance times n
  const double norm;
};

// The best correlation over every position of a template (zero_mean: its
// grey levels minus their mean; norm: their L2 norm) in `target`. Computed
// directly rather than with cv::matchTemplate: at thumbnail sizes (templates
// of 26 x 20 to 46 x 35 on 48 x 36) OpenCV's DFT costs 1.5-2x more, on
// threads of its own.
float BestOver(const Target& target, const cv::Mat& zero_mean, double norm) {
  const Windows windows(target, zero_mean, norm);
  if (windows.none()) return -1.0f;
  const int w = windows.w, h = windows.h;
  std::vector<double> variance(static_cast<size_t>(windows.positions_x));
  float best = -1.0f;
  for (int y = 0; y < windows.positions_y; ++y) {
    windows.RowVariances(y, variance.data());
    for (int x = 0; x < windows.positions_x; ++x) {
      if (variance[x] < 0) continue;
      float dot = 0.0f;
      for (int r = 0; r < h; ++r) {
        const float* a = zero_mean.ptr<float>(r);
        const float* b = target.pixels.ptr<float>(y + r) + x;
        float row = 0.0f;
#pragma omp simd reduction(+ : row)
        for (int c = 0; c < w; ++c) row += a[c] * b[c];
        dot += row;
      }
      best = std::max(best, windows.Correlation(dot, variance[x]));
    }
  }
  return best;
}

#ifdef LOOKALIKE_X86_DISPATCH

// The dot products of the template with the windows at positions x0 ..
// x0 + 8 kChunks - 1 of row y, into dots: each chunk of 8 positions is one
// vector, the template's rows alternate between two accumulators (four
// chunks x two: enough independent sums to keep both FMA units busy).
template <int kChunks>
__attribute__((target("avx2,fma"))) void WindowDots(const cv::Mat& padded, const cv::Mat& templ,
                                                    int y, int x0, float* dots) {
  __m256 even[kChunks], odd[kChunks];
  for (int k = 0; k < kChunks; ++k) even[k] = odd[k] = _mm256_setzero_ps();
  const int w = templ.cols, h = templ.rows;
  // Two rows at a time, each into its own accumulators, named rather than
  // chosen through a pointer: a pointer kept them in memory, reloaded and
  // stored at every product, as soon as the caller grew (2x slower).
  int r = 0;
  for (; r + 1 < h; r += 2) {
    const float* a0 = templ.ptr<float>(r);
    const float* a1 = templ.ptr<float>(r + 1);
    const float* b0 = padded.ptr<float>(y + r) + x0;
    const float* b1 = padded.ptr<float>(y + r + 1) + x0;
    for (int c = 0; c < w; ++c) {
      const __m256 t0 = _mm256_broadcast_ss(a0 + c), t1 = _mm256_broadcast_ss(a1 + c);
      for (int k = 0; k < kChunks; ++k) {
        even[k] = _mm256_fmadd_ps(t0, _mm256_loadu_ps(b0 + 8 * k + c), even[k]);
        odd[k] = _mm256_fmadd_ps(t1, _mm256_loadu_ps(b1 + 8 * k + c), odd[k]);
      }
    }
  }
  if (r < h) {  // an odd row count's last row
    const float* a = templ.ptr<float>(r);
    const float* b = padded.ptr<float>(y + r) + x0;
    for (int c = 0; c < w; ++c) {
      const __m256 t = _mm256_broadcast_ss(a + c);
      for (int k = 0; k < kChunks; ++k)
        even[k] = _mm256_fmadd_ps(t, _mm256_loadu_ps(b + 8 * k + c), even[k]);
    }
  }
  for (int k = 0; k < kChunks; ++k) _mm256_storeu_ps(dots + 8 * k, _mm256_add_ps(even[k], odd[k]));
}

// BestOver with the dot products of 8 positions per vector instead of one
// position's products summed across the template's columns: 3-4x fewer
// instructions at thumbnail sizes. Sums in
// another order, so its floats differ from BestOver's by rounding only.
__attribute__((target("avx2,fma"))) float BestOverAvx2(const Target& target,
                                                       const cv::Mat& zero_mean, double norm) {
  const Windows windows(target, zero_mean, norm);
  if (windows.none()) return -1.0f;
  std::vector<double> variance(static_cast<size_t>(windows.positions_x));
  float best = -1.0f;
  alignas(32) float dots[32];
  for (int y = 0; y < windows.positions_y; ++y) {
    windows.RowVariances(y, variance.data());
    for (int x0 = 0; x0 < windows.positions_x; x0 += 32) {
      const int count = std::min(32, windows.positions_x - x0);
      switch ((count + 7) / 8) {
        case 1:
          WindowDots<1>(target.padded, zero_mean, y, x0, dots);
          break;
        case 2:
          WindowDots<2>(target.padded, zero_mean, y, x0, dots);
          break;
        case 3:
          WindowDots<3>(target.padded, zero_mean, y, x0, dots);
          break;
        default:
          WindowDots<4>(target.padded, zero_mean, y, x0, dots);
          break;
      }
      for (int i = 0; i < count; ++i) {
        const double v = variance[x0 + i];
        if (v >= 0) best = std::max(best, windows.Correlation(dots[i], v));
      }
    }
  }
  return best;
}

#endif  // LOOKALIKE_X86_DISPATCH

// BestOver, or BestOverAvx2 where the CPU has it.
float BestOverOnThisCpu(const Target& target, const cv::Mat& zero_mean, double norm) {
#ifdef LOOKALIKE_X86_DISPATCH
  if (CpuHasAvx2Fma()) return BestOverAvx2(target, zero_mean, norm);
#endif
  return BestOver(target, zero_mean, norm);
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
  return BestOverOnThisCpu(Target(target.clone()), zero_mean, norm);
}

float BestNormalisedCorrelationPortable(const cv::Mat& target, const cv::Mat& templ) {
  const auto [zero_mean, norm] = ZeroMean(templ);
  return BestOver(Target(target.clone()), zero_mean, norm);
}

bool BestNormalisedCorrelationAvx2(const cv::Mat& target, const cv::Mat& templ, float* best) {
#ifdef LOOKALIKE_X86_DISPATCH
  if (!CpuHasAvx2Fma()) return false;
  const auto [zero_mean, norm] = ZeroMean(templ);
  *best = BestOverAvx2(Target(target.clone()), zero_mean, norm);
  return true;
#else
  (void)target, (void)templ, (void)best;
  return false;
#endif
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
      best = std::max(best, BestOverOnThisCpu(target, placed.zero_mean, placed.norm));
  return best;
}

}  // namespace lookalike
