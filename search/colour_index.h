// Every indexed image's colour histogram (indexer/colour.h) in memory, for
// two uses per query that then read no record:
//   - colour candidates: the images whose colour is most like the query's,
//     over the whole collection, join the short list wherever VLAD ranked
//     them. A copy shrunk to a thumbnail, blurred and cropped keeps too few
//     local features for its VLAD vector or visual words to say anything,
//     but its colours survive; among thousands of unrelated images its VLAD
//     rank is random, so colour fusion, which sees the short list only,
//     never met it;
//   - colour fusion's similarity c of every short-list candidate
//     (search/ranking.h), which otherwise reads each candidate's record.
// Rows keep each bin in 4 bits (the query's stay 8-bit): 144 bytes per
// image, which the persisted search index holds too, plus its id and norm.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "search/scored_ids.h"

namespace lookalike {

class ColourIndex {
 public:
  // indexer/colour.h's kColourBins (checked where both are seen: this
  // library does not build against OpenCV).
  static constexpr int kBins = 288;
  // A row: two bins per byte, the even bin in the low nibble.
  static constexpr int kRowBytes = kBins / 2;

  // The row kept for `colour` (a ColourHistogram, kBins bytes, each bin
  // rounded to 4 bits; zeros for an empty one). Throws std::invalid_argument
  // for any other size.
  static std::vector<uint8_t> Row(const std::vector<uint8_t>& colour);

  // A query's colour, prepared once per query: its 8-bit bins are compared
  // with the 4-bit rows, and the result divided by the query's similarity
  // with its own row, so the image itself gets 1.
  struct Query {
    std::vector<uint8_t> colour;  // the ColourHistogram; empty without colour
    float scale = 0;              // 1 / (|colour| x its similarity with Row(colour))
  };
  // Throws std::invalid_argument as Row does.
  static Query Prepare(const std::vector<uint8_t>& colour);

  // Appends image `id` (greater than every id held) with its colour, or an
  // empty one for an image without colour (a zero row: similarity 0, never
  // a candidate). Throws std::invalid_argument (size, id order).
  void Append(uint64_t id, const std::vector<uint8_t>& colour);
  // Adopts `ids` (ascending) and their rows, `table` (ids.size() x kRowBytes
  // bytes, as table() returns it). Throws std::invalid_argument otherwise.
  void Assign(std::vector<uint64_t> ids, std::vector<uint8_t> table);

  int64_t rows() const { return static_cast<int64_t>(ids_.size()); }
  const std::vector<uint8_t>& table() const { return table_; }

  // The colour similarity of image `id` with a query's colour (Prepare):
  // the cosine of the query's 8-bit bins and the row's 4-bit ones, as
  // ColourSimilarity computes it for two 8-bit histograms, over the same
  // for the query's own row: 1 for the image itself, clamped to [0, 1].
  // nullopt when the index does not hold `id`; 0 when either has no colour.
  std::optional<float> Similarity(uint64_t id, const Query& query) const;

  // The ids of the (at most) n images most similar to the query by
  // Similarity, best first (ties by id). Zero rows and a query without
  // colour give none.
  std::vector<uint64_t> Search(const Query& query, int n) const;

  // Search over rows read elsewhere (the persisted index's table, a block at
  // a time): Scan scores `n` rows (n x kRowBytes bytes) of images `ids`
  // (ascending across calls) into `scored`, which it keeps to at most a few
  // times `keep` entries; Best then gives what Search gives over the same
  // rows, best first.
  using Scored = ScoredIds<float>;  // (-similarity x scale, id)
  static void Scan(const Query& query, const uint64_t* ids, const uint8_t* rows, int64_t n,
                   int keep, Scored* scored);
  static std::vector<uint64_t> Best(Scored scored, int keep);
  // Similarity's value for a row held elsewhere (Row of a record's colour).
  static float RowSimilarity(const std::vector<uint8_t>& row, const Query& query);

 private:
  // Dot product of a row with a query's 8-bit bins.
  static int32_t Dot(const uint8_t* row, const uint8_t* colour);
  void AddNorm(int64_t r);
  static float InverseNorm(const uint8_t* row);

  std::vector<uint64_t> ids_;
  std::vector<uint8_t> table_;
  std::vector<float> inverse_norm_;  // 1 / |row|; 0 for a zero row
};

}  // namespace lookalike
