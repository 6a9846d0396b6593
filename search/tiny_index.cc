#include "search/tiny_index.h"

#include <algorithm>
#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <stdexcept>
#include <string>
#include <utility>

namespace lookalike {
namespace {

// A tiny image whose grey levels vary by less than this (standard deviation,
// 0-255) is flat: its correlation with anything is noise.
constexpr double kMinDeviation = 2.0;

}  // namespace

TinyIndex::Row TinyIndex::RowOf(const GreyThumbnail& thumbnail) {
  Row row{};
  if (thumbnail.empty()) return row;
  const cv::Mat grey(thumbnail.height, thumbnail.width, CV_8UC1,
                     const_cast<uint8_t*>(thumbnail.pixels.data()));
  cv::Mat small;
  cv::resize(grey, small, cv::Size(kSide, kSide), 0, 0, cv::INTER_AREA);
  double v[kRowBytes], mean = 0;
  for (int i = 0; i < kRowBytes; ++i) mean += v[i] = small.data[i];
  mean /= kRowBytes;
  double norm2 = 0;
  for (double& x : v) {
    x -= mean;
    norm2 += x * x;
  }
  if (norm2 < kRowBytes * kMinDeviation * kMinDeviation) return row;
  const double scale = 254.0 / std::sqrt(norm2);
  for (int i = 0; i < kRowBytes; ++i)
    row[i] = static_cast<int8_t>(std::clamp(std::lround(v[i] * scale), -127L, 127L));
  return row;
}

bool TinyIndex::IsZero(const Row& row) {
  return std::all_of(row.begin(), row.end(), [](int8_t x) { return x == 0; });
}

void TinyIndex::Append(uint64_t id, const Row& row) {
  if (!ids_.empty() && id <= ids_.back())
    throw std::invalid_argument("TinyIndex::Append: id " + std::to_string(id) + " after " +
                                std::to_string(ids_.back()));
  ids_.push_back(id);
  table_.insert(table_.end(), row.begin(), row.end());
}

void TinyIndex::Assign(std::vector<uint64_t> ids, std::vector<int8_t> table) {
  if (table.size() != ids.size() * kRowBytes)
    throw std::invalid_argument("TinyIndex::Assign: " + std::to_string(table.size()) +
                                " bytes for " + std::to_string(ids.size()) + " rows");
  for (size_t i = 1; i < ids.size(); ++i)
    if (ids[i] <= ids[i - 1]) throw std::invalid_argument("TinyIndex::Assign: ids out of order");
  ids_ = std::move(ids);
  table_ = std::move(table);
}

TinyIndex::Row TinyIndex::RowAt(int64_t r) const {
  Row row;
  std::copy(table_.begin() + r * kRowBytes, table_.begin() + (r + 1) * kRowBytes, row.begin());
  return row;
}

std::vector<uint64_t> TinyIndex::Search(const Row& query, int n) const {
  if (n <= 0 || IsZero(query)) return {};
  Scored scored;
  Scan(query, ids_.data(), table_.data(), rows(), n, &scored);
  return Best(std::move(scored), n);
}

void TinyIndex::Scan(const Row& query, const uint64_t* ids, const int8_t* rows, int64_t n, int keep,
                     Scored* scored) {
  if (keep <= 0 || IsZero(query)) return;
  for (int64_t r = 0; r < n; ++r) {
    const int8_t* row = rows + r * kRowBytes;
    int32_t dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int i = 0; i < kRowBytes; ++i) dot += int32_t{row[i]} * query[i];
    if (dot > 0) scored->emplace_back(-dot, ids[r]);
  }
  TrimScoredIds(scored, keep);
}

std::vector<uint64_t> TinyIndex::Best(Scored scored, int keep) {
  return BestScoredIds(std::move(scored), keep);
}

}  // namespace lookalike
