#include "search/colour_index.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace lookalike {

std::vector<uint8_t> ColourIndex::Row(const std::vector<uint8_t>& colour) {
  std::vector<uint8_t> row(kRowBytes, 0);
  if (colour.empty()) return row;
  if (colour.size() != static_cast<size_t>(kBins))
    throw std::invalid_argument("colour histogram of " + std::to_string(colour.size()) +
                                " bytes, expected " + std::to_string(kBins));
  // 0..255 to 0..15, rounded. Linear on purpose: it drops the bins below
  // 1/30 of the scale, and colour fusion ranks no worse without them (on the
  // dev set 0.923 mAP against 0.913 with every bin in 8 bits, and 0.856 with
  // a companded code that keeps the small bins).
  auto nibble = [](uint8_t v) { return static_cast<uint8_t>((v * 15 + 127) / 255); };
  for (int j = 0; j < kRowBytes; ++j)
    row[j] = static_cast<uint8_t>(nibble(colour[2 * j]) | nibble(colour[2 * j + 1]) << 4);
  return row;
}

void ColourIndex::Append(uint64_t id, const std::vector<uint8_t>& colour) {
  if (!ids_.empty() && id <= ids_.back())
    throw std::invalid_argument("colour index: image " + std::to_string(id) + " after " +
                                std::to_string(ids_.back()));
  const std::vector<uint8_t> row = Row(colour);
  ids_.push_back(id);
  table_.insert(table_.end(), row.begin(), row.end());
  AddNorm(rows() - 1);
}

void ColourIndex::Assign(std::vector<uint64_t> ids, std::vector<uint8_t> table) {
  if (table.size() != ids.size() * kRowBytes)
    throw std::invalid_argument("colour table of " + std::to_string(table.size()) + " bytes for " +
                                std::to_string(ids.size()) + " images of " +
                                std::to_string(kRowBytes) + " bytes");
  for (size_t i = 1; i < ids.size(); ++i)
    if (ids[i] <= ids[i - 1]) throw std::invalid_argument("colour index: ids not ascending");
  ids_ = std::move(ids);
  table_ = std::move(table);
  inverse_norm_.clear();
  inverse_norm_.reserve(ids_.size());
  for (int64_t r = 0; r < rows(); ++r) AddNorm(r);
}

float ColourIndex::InverseNorm(const uint8_t* row) {
  double norm2 = 0;
  for (int j = 0; j < kRowBytes; ++j) {
    const int lo = row[j] & 15, hi = row[j] >> 4;
    norm2 += lo * lo + hi * hi;
  }
  return norm2 > 0 ? static_cast<float>(1.0 / std::sqrt(norm2)) : 0.0f;
}

void ColourIndex::AddNorm(int64_t r) {
  inverse_norm_.push_back(InverseNorm(table_.data() + r * kRowBytes));
}

ColourIndex::Query ColourIndex::Prepare(const std::vector<uint8_t>& colour) {
  Query q;
  if (colour.empty()) return q;
  const std::vector<uint8_t> own = Row(colour);
  double norm2 = 0;
  for (uint8_t v : colour) norm2 += static_cast<double>(v) * v;
  const double own_similarity =
      Dot(own.data(), colour.data()) * InverseNorm(own.data()) / std::sqrt(std::max(norm2, 1.0));
  if (own_similarity <= 0) return q;  // every bin rounds to 0: no colour to compare
  q.colour = colour;
  q.scale = static_cast<float>(1.0 / (std::sqrt(norm2) * own_similarity));
  return q;
}

int32_t ColourIndex::Dot(const uint8_t* row, const uint8_t* q) {
  int32_t dot = 0;
  for (int j = 0; j < kRowBytes; ++j)
    dot += int32_t{row[j] & 15} * q[2 * j] + int32_t{row[j] >> 4} * q[2 * j + 1];
  return dot;
}

std::optional<float> ColourIndex::Similarity(uint64_t id, const Query& query) const {
  const auto it = std::lower_bound(ids_.begin(), ids_.end(), id);
  if (it == ids_.end() || *it != id) return std::nullopt;
  if (query.colour.empty()) return 0.0f;
  const int64_t r = it - ids_.begin();
  return std::min(1.0f, Dot(table_.data() + r * kRowBytes, query.colour.data()) * inverse_norm_[r] *
                            query.scale);
}

std::vector<uint64_t> ColourIndex::Search(const Query& query, int n) const {
  if (n <= 0 || query.colour.empty()) return {};
  // The query's norm is the same for every row: rows compare by dot / |row|.
  Scored scored;
  scored.reserve(static_cast<size_t>(rows()));
  for (int64_t r = 0; r < rows(); ++r) {
    const int32_t dot = Dot(table_.data() + r * kRowBytes, query.colour.data());
    if (dot > 0) scored.emplace_back(-dot * inverse_norm_[r], ids_[r]);
  }
  return Best(std::move(scored), n);
}

void ColourIndex::Scan(const Query& query, const uint64_t* ids, const uint8_t* rows, int64_t n,
                       int keep, Scored* scored) {
  if (keep <= 0 || query.colour.empty()) return;
  const uint8_t* q = query.colour.data();
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* row = rows + r * kRowBytes;
    // Dot and the squared norm in one pass, in integers: the norm is
    // InverseNorm's exactly (its double sum of small integers is exact).
    int32_t dot = 0, norm2 = 0;
    for (int j = 0; j < kRowBytes; ++j) {
      const int32_t lo = row[j] & 15, hi = row[j] >> 4;
      dot += lo * q[2 * j] + hi * q[2 * j + 1];
      norm2 += lo * lo + hi * hi;
    }
    if (dot <= 0) continue;
    const float inverse_norm =
        norm2 > 0 ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(norm2))) : 0.0f;
    scored->emplace_back(-dot * inverse_norm, ids[r]);
  }
  TrimScoredIds(scored, keep);
}

std::vector<uint64_t> ColourIndex::Best(Scored scored, int keep) {
  return BestScoredIds(std::move(scored), keep);
}

float ColourIndex::RowSimilarity(const std::vector<uint8_t>& row, const Query& query) {
  if (query.colour.empty() || row.size() != static_cast<size_t>(kRowBytes)) return 0.0f;
  return std::min(1.0f,
                  Dot(row.data(), query.colour.data()) * InverseNorm(row.data()) * query.scale);
}

}  // namespace lookalike
