// Duplicate groups that never chain: stars around keepers.
//
// Joining every verified pair into connected components chains: A~B and
// B~C put A and C in one group though nothing says they are the same
// picture (26 chessboard photos, each verifying against the next pose,
// became one group). Here a group is a star: its keeper and images each
// directly at the requested level with the keeper. The keepers are chosen
// first, by the keep rule, and every other image joins the best-ranked
// keeper it is directly at the level with:
//
//   1. Within each connected component of the pairs at the level, the best
//      image not yet placed that has a neighbour not yet placed becomes a
//      keeper. Best: in a reference folder; then, for the `original` rule,
//      one that none of its free neighbours is preferred to (the pairwise
//      keep verdicts), then the most free neighbours it is preferred to
//      minus those preferred to it (so an original with many copies leads);
//      for the other rules the rule's order; ties by the records' order
//      (pixels, older, shorter path).
//   2. The keeper takes every neighbour not yet placed; repeat.
//   3. If a member is preferred to its keeper and is itself at the level
//      with every other member, it becomes the keeper instead (the star
//      stays a star).
//
// An image whose every neighbour joined keepers it is not at the level with
// stays out of every group: missing a duplicate is recoverable, merging two
// photos is not. The result depends only on the edges and the verdicts, not
// on threads or ids.
#pragma once

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "search/keep_rule.h"

namespace lookalike {

struct Star {
  // Node indices: the keeper first, then the other members in rank order.
  std::vector<size_t> members;
  // verdicts[i]: CompareEdge(keeper, members[i]) (verdicts[0] is empty): why
  // members[i] is not the keeper.
  std::vector<KeepVerdict> verdicts;
};

// Forms the stars of `num_nodes` nodes joined by `edges` (pairs at the
// level; each once, any order). `compare_edge(x, y)` is the keep verdict of
// x against y for an edge (prefer < 0: keep x rather than y); `records_first(
// x, y)` a strict total order used to break ties (records only);
// `rank_by_edges` selects step 1's count of pairwise verdicts (the original
// rule) instead of ordering by records_first alone. `reference[x]`: x is in
// a reference folder. Stars come in the order of their keepers' ranks; each
// holds at least two nodes.
std::vector<Star> FormStars(size_t num_nodes, const std::vector<std::pair<size_t, size_t>>& edges,
                            const std::vector<bool>& reference, bool rank_by_edges,
                            const std::function<KeepVerdict(size_t, size_t)>& compare_edge,
                            const std::function<bool(size_t, size_t)>& records_first);

}  // namespace lookalike
