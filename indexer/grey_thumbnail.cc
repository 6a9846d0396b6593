#include "indexer/grey_thumbnail.h"

#include <algorithm>
#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <stdexcept>

#include "storage/encoding.h"

namespace lookalike {

namespace {
constexpr uint8_t kFormat = 1;
}  // namespace

GreyThumbnail MakeGreyThumbnail(const GrayImage& gray, int side) {
  GreyThumbnail t;
  if (gray.width <= 0 || gray.height <= 0 || gray.pixels.empty()) return t;
  if (side < kThumbnailMinSide || side > 255)
    throw std::invalid_argument("thumbnail side must be in 8..255, got " + std::to_string(side));
  const double scale = std::min(1.0, static_cast<double>(side) / std::max(gray.width, gray.height));
  t.width = std::clamp(static_cast<int>(std::lround(gray.width * scale)), kThumbnailMinSide, side);
  t.height =
      std::clamp(static_cast<int>(std::lround(gray.height * scale)), kThumbnailMinSide, side);
  const cv::Mat in(gray.height, gray.width, CV_8UC1, const_cast<uint8_t*>(gray.pixels.data()));
  cv::Mat out;
  cv::resize(in, out, cv::Size(t.width, t.height), 0, 0,
             scale < 1.0 ? cv::INTER_AREA : cv::INTER_LINEAR);
  t.pixels.assign(out.datastart, out.dataend);
  return t;
}

std::string EncodeGreyThumbnail(const GreyThumbnail& t) {
  if (t.width < 1 || t.width > 255 || t.height < 1 || t.height > 255 ||
      t.pixels.size() != static_cast<size_t>(t.width) * t.height)
    throw std::invalid_argument("thumbnail: sides must be 1..255 and match the pixels");
  std::string s;
  s.reserve(3 + t.pixels.size());
  s.push_back(static_cast<char>(kFormat));
  s.push_back(static_cast<char>(t.width));
  s.push_back(static_cast<char>(t.height));
  s.append(t.pixels.begin(), t.pixels.end());
  return s;
}

GreyThumbnail DecodeGreyThumbnail(const std::string& value) {
  if (value.size() < 3) throw encoding::CorruptValue("thumbnail: shorter than its header");
  if (static_cast<uint8_t>(value[0]) != kFormat)
    throw encoding::CorruptValue("thumbnail: format " +
                                 std::to_string(static_cast<uint8_t>(value[0])) +
                                 ", this build reads 1");
  GreyThumbnail t;
  t.width = static_cast<uint8_t>(value[1]);
  t.height = static_cast<uint8_t>(value[2]);
  if (t.width == 0 || t.height == 0 || value.size() != 3 + static_cast<size_t>(t.width) * t.height)
    throw encoding::CorruptValue("thumbnail: " + std::to_string(value.size() - 3) +
                                 " pixel bytes for " + std::to_string(t.width) + " x " +
                                 std::to_string(t.height));
  t.pixels.assign(value.begin() + 3, value.end());
  return t;
}

}  // namespace lookalike
