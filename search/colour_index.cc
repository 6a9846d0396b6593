#include "search/colour_index.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace lookalike {

void ColourIndex::Append(const std::vector<uint8_t>& colour) {
  if (colour.empty()) {
    table_.resize(table_.size() + kRowBytes, 0);
    return;
  }
  if (colour.size() != static_cast<size_t>(kRowBytes))
    throw std::invalid_argument("colour histogram of " + std::to_string(colour.size()) +
                                " bytes, expected " + std::to_string(kRowBytes));
  table_.insert(table_.end(), colour.begin(), colour.end());
}

void ColourIndex::Assign(std::vector<uint8_t> table) {
  if (table.size() % kRowBytes != 0)
    throw std::invalid_argument("colour table of " + std::to_string(table.size()) +
                                " bytes is not a whole number of " + std::to_string(kRowBytes) +
                                "-byte rows");
  table_ = std::move(table);
}

std::vector<int64_t> ColourIndex::Search(const std::vector<uint8_t>& colour, int n) const {
  if (n <= 0 || colour.size() != static_cast<size_t>(kRowBytes)) return {};
  // Histograms are square-rooted and scaled to bytes, so the byte dot
  // product orders rows as the Bhattacharyya coefficient does (ColourSimilarity).
  std::vector<std::pair<int32_t, int64_t>> scored;  // (-dot, row): ascending = best first
  scored.reserve(static_cast<size_t>(rows()));
  const uint8_t* q = colour.data();
  for (int64_t r = 0; r < rows(); ++r) {
    const uint8_t* t = table_.data() + r * kRowBytes;
    int32_t dot = 0;
    for (int j = 0; j < kRowBytes; ++j) dot += static_cast<int32_t>(t[j]) * q[j];
    if (dot > 0) scored.emplace_back(-dot, r);
  }
  const size_t m = std::min(scored.size(), static_cast<size_t>(n));
  std::partial_sort(scored.begin(), scored.begin() + m, scored.end());
  std::vector<int64_t> out(m);
  for (size_t i = 0; i < m; ++i) out[i] = scored[i].second;
  return out;
}

}  // namespace lookalike
