#include "search/image_traits.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <stdexcept>

#include "indexer/image_codecs.h"

namespace lookalike {
namespace {

uint32_t BigEndian(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

// The IJG library's standard luminance quantisation table (JPEG standard,
// Annex K), which encoders scale by quality. Only its sum is used, so the
// order (natural or zigzag) does not matter.
constexpr int kStandardLuminanceSum =
    16 + 11 + 10 + 16 + 24 + 40 + 51 + 61 + 12 + 12 + 14 + 19 + 26 + 58 + 60 + 55 + 14 + 13 + 16 +
    24 + 40 + 57 + 69 + 56 + 14 + 17 + 22 + 29 + 51 + 87 + 80 + 62 + 18 + 22 + 37 + 56 + 68 + 109 +
    103 + 77 + 24 + 35 + 55 + 64 + 81 + 104 + 113 + 92 + 49 + 64 + 78 + 87 + 103 + 121 + 120 + 101 +
    72 + 92 + 95 + 98 + 112 + 100 + 103 + 99;

// Quality from the sum of a luminance table: the inverse of IJG's
// scale = quality < 50 ? 5000 / quality : 200 - 2 quality (percent).
int QualityFromTableSum(double sum) {
  const double scale = 100.0 * sum / kStandardLuminanceSum;
  const double quality = scale <= 100 ? (200 - scale) / 2 : 5000 / scale;
  return std::clamp(static_cast<int>(std::lround(quality)), 1, 100);
}

// EXIF and the luminance table of a JPEG: its marker segments up to the
// first scan.
void ReadJpegHeaders(const unsigned char* d, size_t n, ImageTraits* t) {
  size_t pos = 2;
  while (pos + 4 <= n) {
    if (d[pos] != 0xFF) return;  // not a marker: a corrupt stream
    const unsigned char marker = d[pos + 1];
    if (marker == 0xFF) {  // fill byte
      ++pos;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) return;  // start of scan, end of image
    if ((marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) {
      pos += 2;
      continue;
    }
    const size_t length = BigEndian(d + pos + 2, 2);
    if (length < 2 || pos + 2 + length > n) return;
    const unsigned char* seg = d + pos + 4;
    const size_t seg_size = length - 2;
    if (marker == 0xE1 && seg_size >= 6 && std::memcmp(seg, "Exif\0\0", 6) == 0) t->exif = true;
    if (marker == 0xDB) {
      size_t q = 0;
      while (q < seg_size) {
        const int precision = seg[q] >> 4, id = seg[q] & 15;
        const size_t entry = precision ? 2 : 1;
        if (q + 1 + 64 * entry > seg_size) break;
        if (id == 0) {
          double sum = 0;
          for (int i = 0; i < 64; ++i)
            sum += BigEndian(seg + q + 1 + i * entry, static_cast<int>(entry));
          t->jpeg_quality = QualityFromTableSum(sum);
        }
        q += 1 + 64 * entry;
      }
    }
    pos += 2 + length;
  }
}

// EXIF of a PNG: an eXIf chunk anywhere among its chunks.
void ReadPngHeaders(const unsigned char* d, size_t n, ImageTraits* t) {
  size_t pos = 8;
  while (pos + 8 <= n) {
    const size_t length = BigEndian(d + pos, 4);
    if (std::memcmp(d + pos + 4, "eXIf", 4) == 0) t->exif = true;
    if (std::memcmp(d + pos + 4, "IEND", 4) == 0) return;
    pos += 12 + length;  // length, type, data, CRC
  }
}

// Mean absolute step between neighbouring pixels across the 8-pixel grid of
// a JPEG's blocks over the mean step elsewhere, both directions.
float BlockEdges(const cv::Mat& grey) {
  if (grey.cols < 32 || grey.rows < 32) return 0;
  double edge = 0, inner = 0;
  int64_t num_edge = 0, num_inner = 0;
  for (int y = 0; y < grey.rows; ++y) {
    const uint8_t* row = grey.ptr<uint8_t>(y);
    const uint8_t* next = y + 1 < grey.rows ? grey.ptr<uint8_t>(y + 1) : nullptr;
    for (int x = 0; x < grey.cols; ++x) {
      if (x + 1 < grey.cols) {
        const int step = std::abs(row[x + 1] - row[x]);
        if (x % 8 == 7) {
          edge += step;
          ++num_edge;
        } else {
          inner += step;
          ++num_inner;
        }
      }
      if (next) {
        const int step = std::abs(next[x] - row[x]);
        if (y % 8 == 7) {
          edge += step;
          ++num_edge;
        } else {
          inner += step;
          ++num_inner;
        }
      }
    }
  }
  if (num_edge == 0 || num_inner == 0 || inner <= 0) return 0;
  return static_cast<float>((edge / num_edge) / (inner / num_inner));
}

// The content mask of a small BGR image: uniform regions reached from the
// frame's corners (within kTolerance of the corner's colour, and flat) are
// margins; everything else is content.
void ContentMask(const cv::Mat& small, ImageTraits* t) {
  constexpr int kTolerance = 10;      // per channel, of the seed colour
  constexpr double kMaxSpread = 4;    // a margin's standard deviation, per channel
  constexpr double kMaxMargin = 0.9;  // a larger "margin" is a flat picture, not a border
  cv::Mat filled = cv::Mat::zeros(small.rows + 2, small.cols + 2, CV_8U);
  const cv::Point corners[] = {
      {0, 0}, {small.cols - 1, 0}, {0, small.rows - 1}, {small.cols - 1, small.rows - 1}};
  cv::Mat margin = cv::Mat::zeros(small.size(), CV_8U);
  for (const cv::Point& c : corners) {
    if (filled.at<uint8_t>(c.y + 1, c.x + 1)) continue;
    cv::Mat region = cv::Mat::zeros(small.rows + 2, small.cols + 2, CV_8U);
    const cv::Scalar tol(kTolerance, kTolerance, kTolerance);
    cv::floodFill(small, region, c, cv::Scalar(), nullptr, tol, tol,
                  4 | cv::FLOODFILL_FIXED_RANGE | cv::FLOODFILL_MASK_ONLY | (1 << 8));
    filled |= region;
    const cv::Mat inside = region(cv::Rect(1, 1, small.cols, small.rows));
    cv::Scalar mean, spread;
    cv::meanStdDev(small, mean, spread, inside);
    if (std::max({spread[0], spread[1], spread[2]}) <= kMaxSpread) margin |= inside;
  }
  const double margin_share =
      static_cast<double>(cv::countNonZero(margin)) / (static_cast<double>(small.total()));
  if (margin_share > kMaxMargin) margin.setTo(0);
  t->mask_width = small.cols;
  t->mask_height = small.rows;
  t->mask.assign(small.total(), 1);
  for (int y = 0; y < small.rows; ++y)
    for (int x = 0; x < small.cols; ++x)
      if (margin.at<uint8_t>(y, x)) t->mask[static_cast<size_t>(y) * small.cols + x] = 0;
  t->content = static_cast<float>(1.0 - (margin_share > kMaxMargin ? 0 : margin_share));
}

// Greyness over the content of a BGR image, and its clipped tones per mask
// cell.
void Tones(const cv::Mat& bgr, ImageTraits* t) {
  cv::Mat grey, high, low;
  cv::cvtColor(bgr, grey, cv::COLOR_BGR2GRAY);
  cv::Mat(grey >= 253).convertTo(high, CV_32F, 1.0 / 255);
  cv::Mat(grey <= 2).convertTo(low, CV_32F, 1.0 / 255);
  const cv::Size cells(t->mask_width, t->mask_height);
  cv::Mat high_cells, low_cells;
  cv::resize(high, high_cells, cells, 0, 0, cv::INTER_AREA);
  cv::resize(low, low_cells, cells, 0, 0, cv::INTER_AREA);
  t->highlights.resize(cells.area());
  t->shadows.resize(cells.area());
  for (int y = 0; y < cells.height; ++y)
    for (int x = 0; x < cells.width; ++x) {
      const size_t i = static_cast<size_t>(y) * cells.width + x;
      t->highlights[i] = cv::saturate_cast<uint8_t>(255 * high_cells.at<float>(y, x));
      t->shadows[i] = cv::saturate_cast<uint8_t>(255 * low_cells.at<float>(y, x));
    }
  cv::Mat smooth;
  cv::blur(grey, smooth, cv::Size(3, 3));
  t->darkest.assign(cells.area(), 255);
  t->lightest.assign(cells.area(), 0);
  for (int y = 0; y < smooth.rows; ++y) {
    const uint8_t* row = smooth.ptr<uint8_t>(y);
    const size_t cell_row = static_cast<size_t>(y * cells.height / smooth.rows) * cells.width;
    for (int x = 0; x < smooth.cols; ++x) {
      const size_t i = cell_row + static_cast<size_t>(x * cells.width / smooth.cols);
      t->darkest[i] = std::min(t->darkest[i], row[x]);
      t->lightest[i] = std::max(t->lightest[i], row[x]);
    }
  }
  cv::Mat mask_small(t->mask_height, t->mask_width, CV_8U, t->mask.data()), mask;
  cv::resize(mask_small, mask, bgr.size(), 0, 0, cv::INTER_NEAREST);
  int64_t content = 0;
  double chroma = 0;
  for (int y = 0; y < bgr.rows; ++y) {
    const cv::Vec3b* row = bgr.ptr<cv::Vec3b>(y);
    const uint8_t* m = mask.ptr<uint8_t>(y);
    for (int x = 0; x < bgr.cols; ++x) {
      if (!m[x]) continue;
      const cv::Vec3b p = row[x];
      chroma += std::max({p[0], p[1], p[2]}) - std::min({p[0], p[1], p[2]});
      ++content;
    }
  }
  if (content > 0) t->grey = chroma / static_cast<double>(content) < 1.5;
}

}  // namespace

ImageTraits AnalyseImageBytes(const std::string& bytes) {
  ImageTraits t;
  const auto* d = reinterpret_cast<const unsigned char*>(bytes.data());
  t.format = DetectImageFormat(d, bytes.size());
  if (t.format == ImageFormat::kUnknown) return t;
  if (t.format == ImageFormat::kJpeg) ReadJpegHeaders(d, bytes.size(), &t);
  if (t.format == ImageFormat::kPng) ReadPngHeaders(d, bytes.size(), &t);
  const cv::Mat data(1, static_cast<int>(bytes.size()), CV_8U, const_cast<char*>(bytes.data()));
  cv::Mat bgr;
  try {
    if (t.format == ImageFormat::kJpeg) {
      // Decoded as the indexer does (EXIF orientation applied), at a reduced
      // scale that still leaves the mask and tone statistics enough pixels.
      bgr = DecodeImage(data, ColourDecodeFlags(t.format, ReadHeaderSize(t.format, d, bytes.size()),
                                                2 * kMaskSide));
    } else {
      cv::Mat any = DecodeImage(data, cv::IMREAD_UNCHANGED);
      if (any.empty()) return t;
      if (any.depth() != CV_8U) any.convertTo(any, CV_8U, any.depth() == CV_16U ? 1.0 / 257 : 1);
      if (any.channels() == 4) {
        std::vector<cv::Mat> planes;
        cv::split(any, planes);
        double lowest = 0;
        cv::minMaxLoc(planes[3], &lowest);
        t.opaque_alpha = lowest >= 255;
        cv::cvtColor(any, bgr, cv::COLOR_BGRA2BGR);
      } else if (any.channels() == 1) {
        cv::cvtColor(any, bgr, cv::COLOR_GRAY2BGR);
      } else {
        bgr = any;
      }
      cv::Mat grey;
      cv::cvtColor(bgr, grey, cv::COLOR_BGR2GRAY);
      t.block_edges = BlockEdges(grey);
    }
  } catch (const cv::Exception&) {
    return t;
  } catch (const std::runtime_error&) {  // the codecs module could not be loaded
    return t;
  }
  if (bgr.empty()) return t;
  const double scale = static_cast<double>(kMaskSide) / std::max(bgr.cols, bgr.rows);
  cv::Mat small;
  cv::resize(bgr, small,
             cv::Size(std::max(1, static_cast<int>(std::lround(bgr.cols * scale))),
                      std::max(1, static_cast<int>(std::lround(bgr.rows * scale)))),
             0, 0, cv::INTER_AREA);
  ContentMask(small, &t);
  Tones(bgr, &t);
  t.read = true;
  return t;
}

}  // namespace lookalike
