#include "search/dedup_groups.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

namespace lookalike {

std::vector<Star> FormStars(size_t num_nodes, const std::vector<std::pair<size_t, size_t>>& edges,
                            const std::vector<bool>& reference, bool rank_by_edges,
                            const std::function<KeepVerdict(size_t, size_t)>& compare_edge,
                            const std::function<bool(size_t, size_t)>& records_first) {
  std::vector<std::vector<size_t>> adjacent(num_nodes);
  std::set<std::pair<size_t, size_t>> edge_set;
  for (auto [x, y] : edges) {
    if (x == y) continue;
    if (x > y) std::swap(x, y);
    if (!edge_set.insert({x, y}).second) continue;
    adjacent[x].push_back(y);
    adjacent[y].push_back(x);
  }
  for (std::vector<size_t>& a : adjacent) std::sort(a.begin(), a.end());
  auto linked = [&](size_t x, size_t y) {
    return std::binary_search(adjacent[x].begin(), adjacent[x].end(), y);
  };
  // The pairwise verdicts over the edges, once each: prefer[{x, y}] is
  // compare_edge(x, y).prefer for x < y.
  std::map<std::pair<size_t, size_t>, int> prefer;
  if (rank_by_edges)
    for (const auto& e : edge_set) prefer[e] = compare_edge(e.first, e.second).prefer;
  auto preferred = [&](size_t x, size_t y) {  // x is preferred to y
    const int p = prefer.at({std::min(x, y), std::max(x, y)});
    return x < y ? p < 0 : p > 0;
  };

  // Connected components of the edges, each formed on its own (in the
  // order of their smallest node), so the work of choosing keepers grows
  // with the components' sizes, not the collection's.
  std::vector<size_t> component(num_nodes, num_nodes);
  std::vector<std::vector<size_t>> components;
  for (size_t start = 0; start < num_nodes; ++start) {
    if (component[start] != num_nodes || adjacent[start].empty()) continue;
    std::vector<size_t> nodes = {start};
    component[start] = components.size();
    for (size_t i = 0; i < nodes.size(); ++i)
      for (size_t y : adjacent[nodes[i]])
        if (component[y] == num_nodes) {
          component[y] = components.size();
          nodes.push_back(y);
        }
    std::sort(nodes.begin(), nodes.end());
    components.push_back(std::move(nodes));
  }

  std::vector<Star> stars;
  std::vector<bool> placed(num_nodes, false);
  for (const std::vector<size_t>& nodes : components) {
    // 1-2. Repeatedly, the best free node with a free neighbour keeps a star
    // of its free neighbours. Best: a reference folder's; then (original
    // rule) one no free neighbour is preferred to, then the most free
    // neighbours it is preferred to minus those preferred to it; then the
    // records' order.
    std::vector<long> wins(num_nodes, 0), losses(num_nodes, 0);
    std::vector<size_t> free_degree(num_nodes, 0);
    for (size_t x : nodes) {
      free_degree[x] = adjacent[x].size();
      if (!rank_by_edges) continue;
      for (size_t y : adjacent[x]) {
        if (preferred(x, y))
          ++wins[x];
        else if (preferred(y, x))
          ++losses[x];
      }
    }
    auto better = [&](size_t x, size_t y) {
      if (reference[x] != reference[y]) return static_cast<bool>(reference[x]);
      if (rank_by_edges) {
        if ((losses[x] == 0) != (losses[y] == 0)) return losses[x] == 0;
        if (wins[x] - losses[x] != wins[y] - losses[y])
          return wins[x] - losses[x] > wins[y] - losses[y];
      }
      return records_first(x, y);
    };
    for (;;) {
      size_t keeper = num_nodes;
      for (size_t x : nodes)
        if (!placed[x] && free_degree[x] > 0 && (keeper == num_nodes || better(x, keeper)))
          keeper = x;
      if (keeper == num_nodes) break;
      std::vector<size_t> members = {keeper};
      for (size_t y : adjacent[keeper])
        if (!placed[y]) members.push_back(y);
      for (size_t m : members) {
        placed[m] = true;
        for (size_t y : adjacent[m]) {
          --free_degree[y];
          if (rank_by_edges && !placed[y]) {
            // y no longer counts m among its free neighbours.
            if (preferred(y, m)) --wins[y];
            if (preferred(m, y)) --losses[y];
          }
        }
      }
      std::sort(members.begin() + 1, members.end(), better);
      stars.push_back(Star{std::move(members), {}});
    }
  }

  // 3. A member preferred to its keeper and linked to every other member
  // takes its place (each node keeps a star at most once: the verdicts need
  // not be transitive, and this must end).
  for (Star& star : stars) {
    std::vector<size_t>& m = star.members;
    std::set<size_t> was_keeper = {m[0]};
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 1; i < m.size(); ++i) {
        if (was_keeper.count(m[i]) || (reference[m[0]] && !reference[m[i]]) ||
            compare_edge(m[0], m[i]).prefer <= 0)
          continue;
        bool with_all = true;
        for (size_t j = 1; j < m.size() && with_all; ++j)
          if (j != i) with_all = linked(m[i], m[j]);
        if (!with_all) continue;
        was_keeper.insert(m[i]);
        std::swap(m[0], m[i]);
        changed = true;
        break;
      }
    }
    star.verdicts.assign(m.size(), KeepVerdict());
    for (size_t i = 1; i < m.size(); ++i) star.verdicts[i] = compare_edge(m[0], m[i]);
  }
  return stars;
}

}  // namespace lookalike
