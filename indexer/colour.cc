#include "indexer/colour.h"

#include <algorithm>
#include <cmath>
#include <opencv2/imgproc.hpp>

namespace lookalike {

cv::Mat ColourPreview(const cv::Mat& image) {
  const int longest = std::max(image.cols, image.rows);
  if (longest <= kColourPreviewSide) return image;
  const double scale = static_cast<double>(kColourPreviewSide) / longest;
  cv::Mat small;
  cv::resize(image, small,
             cv::Size(std::max(1, static_cast<int>(image.cols * scale + 0.5)),
                      std::max(1, static_cast<int>(image.rows * scale + 0.5))),
             0, 0, cv::INTER_AREA);
  return small;
}

std::vector<uint8_t> ColourHistogram(const cv::Mat& image) {
  if (image.empty() || image.depth() != CV_8U || (image.channels() != 1 && image.channels() != 3))
    return {};
  const cv::Mat small = ColourPreview(image);
  cv::Mat bgr = small;
  if (small.channels() == 1) cv::cvtColor(small, bgr, cv::COLOR_GRAY2BGR);
  cv::Mat hsv;
  cv::cvtColor(bgr, hsv, cv::COLOR_BGR2HSV);  // 8-bit: H in [0, 180), S and V in [0, 256)
  double counts[kColourBins] = {};
  for (int y = 0; y < hsv.rows; ++y) {
    const uint8_t* p = hsv.ptr<uint8_t>(y);
    for (int x = 0; x < hsv.cols; ++x, p += 3) {
      const int h = std::min(kColourHueBins - 1, p[0] * kColourHueBins / 180);
      const int s = p[1] * kColourSatBins / 256;
      const int v = p[2] * kColourValBins / 256;
      counts[(h * kColourSatBins + s) * kColourValBins + v] += 1;
    }
  }
  const double total = static_cast<double>(hsv.rows) * hsv.cols;
  std::vector<uint8_t> out(kColourBins);
  for (int i = 0; i < kColourBins; ++i)
    out[i] = static_cast<uint8_t>(std::lround(255.0 * std::sqrt(counts[i] / total)));
  return out;
}

float ColourSimilarity(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.empty() || a.size() != b.size()) return 0.0f;
  // Normalise by the quantised norms so rounding cannot push the result past 1.
  uint64_t ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += uint32_t{a[i]} * b[i];
    aa += uint32_t{a[i]} * a[i];
    bb += uint32_t{b[i]} * b[i];
  }
  if (aa == 0 || bb == 0) return 0.0f;
  return static_cast<float>(static_cast<double>(ab) /
                            std::sqrt(static_cast<double>(aa) * static_cast<double>(bb)));
}

}  // namespace lookalike
