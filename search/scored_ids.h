// The best of a table scan's (score, image id) pairs, for the tables that
// keep their candidates this way (colour_index.h, tiny_index.h): a lower
// score is better, and the pairs are all distinct (one per image), so the
// best `keep` are one set whichever order the rows were scanned in and
// whatever was dropped beyond them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace lookalike {

template <typename Score>
using ScoredIds = std::vector<std::pair<Score, uint64_t>>;

// Drops all but the best `keep` once the list holds well more than that,
// so a scan over a table a block at a time holds a few times `keep` pairs.
template <typename Score>
void TrimScoredIds(ScoredIds<Score>* scored, int keep) {
  if (scored->size() > 4 * static_cast<size_t>(std::max(keep, 0)) + 4096) {
    std::nth_element(scored->begin(), scored->begin() + keep, scored->end());
    scored->resize(static_cast<size_t>(keep));
  }
}

// The ids of the best `keep` pairs, best first.
template <typename Score>
std::vector<uint64_t> BestScoredIds(ScoredIds<Score> scored, int keep) {
  const size_t m = std::min(scored.size(), static_cast<size_t>(std::max(keep, 0)));
  std::partial_sort(scored.begin(), scored.begin() + m, scored.end());
  std::vector<uint64_t> out(m);
  for (size_t i = 0; i < m; ++i) out[i] = scored[i].second;
  return out;
}

}  // namespace lookalike
