// Every indexed image's thumbnail shrunk to a tiny image (8 x 8 grey levels,
// mean removed, L2-normalised, 8 bits a value: 64 bytes), in memory, for
// thumbnail candidates: the images whose tiny image correlates best with the
// query's, over the whole collection, join the short list wherever VLAD
// ranked them, and their thumbnails are then correlated in full
// (search/ranking.h, Correlate). A copy shrunk and blurred beyond what local
// features can verify keeps its overall layout of light and dark; among
// 100,000 images its original often ranks first by that alone, where its
// VLAD rank is random. The
// persisted search index holds the rows (format 6), filled by `index` from
// the stored thumbnails.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "indexer/grey_thumbnail.h"
#include "search/scored_ids.h"

namespace lookalike {

class TinyIndex {
 public:
  static constexpr int kSide = 8;
  static constexpr int kRowBytes = kSide * kSide;
  using Row = std::array<int8_t, kRowBytes>;

  // The tiny image of `thumbnail`: shrunk to kSide x kSide by area
  // averaging, its mean subtracted, scaled to unit length and stored as
  // round(254 x value), clamped to +-127 (no component of a unit vector of
  // 64 values exceeds 1, and hardly any 0.5). All zeros for an empty or flat
  // thumbnail (it correlates with nothing).
  static Row RowOf(const GreyThumbnail& thumbnail);
  static bool IsZero(const Row& row);

  // Appends image `id` (greater than every id held) with its row (zero: no
  // thumbnail, never a candidate). Throws std::invalid_argument for an id
  // out of order.
  void Append(uint64_t id, const Row& row);
  // Adopts `ids` (ascending) and their rows, `table` (ids.size() x kRowBytes
  // bytes, as table() returns it). Throws std::invalid_argument otherwise.
  void Assign(std::vector<uint64_t> ids, std::vector<int8_t> table);

  int64_t rows() const { return static_cast<int64_t>(ids_.size()); }
  const std::vector<uint64_t>& ids() const { return ids_; }
  const std::vector<int8_t>& table() const { return table_; }
  Row RowAt(int64_t r) const;

  // The ids of the (at most) n images whose rows have the largest dot
  // product with `query`, best first (ties by id), positive only. A zero
  // query gives none.
  std::vector<uint64_t> Search(const Row& query, int n) const;

  // Search over rows read elsewhere (the persisted index's table, a block at
  // a time): Scan scores `n` rows (n x kRowBytes) of images `ids` into
  // `scored`, kept to at most a few times `keep` entries; Best then gives
  // what Search gives over the same rows, best first.
  using Scored = ScoredIds<int32_t>;  // (-dot, id)
  static void Scan(const Row& query, const uint64_t* ids, const int8_t* rows, int64_t n, int keep,
                   Scored* scored);
  static std::vector<uint64_t> Best(Scored scored, int keep);

 private:
  std::vector<uint64_t> ids_;
  std::vector<int8_t> table_;
};

}  // namespace lookalike
