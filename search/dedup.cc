#include "search/dedup.h"

#include <faiss/IndexFlat.h>
#include <faiss/impl/AuxIndexStructures.h>
#include <omp.h>

#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "indexer/local_features.h"
#include "util/threads.h"

namespace lookalike {

void DedupOptions::Validate() const {
  if (!(min_similarity >= -1 && min_similarity <= 1))
    throw std::invalid_argument("--min-similarity must be in [-1, 1], got " +
                                std::to_string(min_similarity));
  if (max_candidates < 1 || max_candidates > 10000)
    throw std::invalid_argument("--max-candidates must be in 1..10000, got " +
                                std::to_string(max_candidates));
  if (!(threshold > 0 && threshold <= 1))
    throw std::invalid_argument("--threshold must be in (0, 1], got " +
                                std::to_string(threshold));
  if (min_inliers < 5)
    throw std::invalid_argument("--min-inliers must be >= 5 (four matches always fit a "
                                "homography), got " + std::to_string(min_inliers));
  if (!(min_spread >= 0 && min_spread <= 1))
    throw std::invalid_argument("--min-spread must be in [0, 1], got " +
                                std::to_string(min_spread));
  if (threads < 0)
    throw std::invalid_argument("threads must be >= 0, got " + std::to_string(threads));
  verify.Validate();
}

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Area of the convex hull of the inlier keypoints of one side of a pair
// (side 0 = first image) over the area of that image's frame.
float InlierSpread(const LocalFeatures& f, const std::vector<std::pair<int, int>>& inliers,
                   int side) {
  if (inliers.size() < 3 || f.width == 0 || f.height == 0) return 0;
  std::vector<cv::Point2f> points, hull;
  for (const auto& [first, second] : inliers) {
    const Keypoint& k = f.keypoints[side == 0 ? first : second];
    points.emplace_back(k.x, k.y);
  }
  cv::convexHull(points, hull);
  const double area = cv::contourArea(hull);
  return static_cast<float>(std::min(1.0, area / (static_cast<double>(f.width) * f.height)));
}

class UnionFind {
 public:
  explicit UnionFind(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  size_t Find(size_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void Union(size_t a, size_t b) {
    a = Find(a);
    b = Find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }

 private:
  std::vector<size_t> parent_;
};

}  // namespace

DedupResult FindDuplicates(const Store& store, const DedupOptions& options) {
  options.Validate();
  DedupResult result;
  const int threads = options.threads > 0 ? options.threads : DefaultThreads();
  const auto search_start = Clock::now();

  // Every image (for content-hash grouping); rows of the index are the
  // images with features.
  const int64_t dim = static_cast<int64_t>(store.model().vlad_dim());
  std::vector<ImageRecord> records;
  std::vector<size_t> row_record;  // index row -> position in records
  faiss::IndexFlatIP index(dim);
  {
    std::vector<float> chunk;
    constexpr int64_t kChunk = 256;
    auto flush = [&] {
      if (chunk.empty()) return;
      index.add(static_cast<faiss::Index::idx_t>(chunk.size() / dim), chunk.data());
      chunk.clear();
    };
    store.ForEachVector([&](const ImageRecord& rec, const float* v) {
      records.push_back(rec);
      if (rec.status == ImageStatus::kNoFeatures) {
        ++result.num_without_features;
        return;
      }
      row_record.push_back(records.size() - 1);
      chunk.insert(chunk.end(), v, v + dim);
      if (static_cast<int64_t>(chunk.size()) >= kChunk * dim) flush();
    });
    flush();
  }
  result.num_images = static_cast<int64_t>(records.size());

  // Candidate pairs (record positions, first < second) -> VLAD similarity.
  std::map<std::pair<size_t, size_t>, float> candidates;
  const int64_t n = index.ntotal;
  {
    // Batches of queries in parallel, each searched single-threaded (FAISS's
    // own OpenMP loop is nested, hence serial; BLAS stays at one thread), so
    // both cores work on the inner products and the result does not depend
    // on the thread count.
    SetLibraryThreads(threads);
    constexpr int64_t kBatch = 128;
    const int64_t num_batches = (n + kBatch - 1) / kBatch;
    std::vector<std::vector<std::pair<size_t, size_t>>> batch_pairs(num_batches);
    std::vector<std::vector<float>> batch_sims(num_batches);
    std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t batch = 0; batch < num_batches; ++batch) {
      try {
        const int64_t q0 = batch * kBatch, nq = std::min(kBatch, n - q0);
        faiss::RangeSearchResult range(nq);
        // FAISS keeps inner products strictly above the radius.
        index.range_search(nq, index.get_xb() + q0 * dim,
                           std::nextafter(options.min_similarity, -2.0f), &range);
        std::vector<std::pair<float, int64_t>> hits;
        for (int64_t q = 0; q < nq; ++q) {
          hits.clear();
          for (size_t r = range.lims[q]; r < range.lims[q + 1]; ++r)
            if (range.labels[r] != q0 + q) hits.emplace_back(range.distances[r], range.labels[r]);
          // Most similar first; ties by row, so the cap is deterministic.
          std::sort(hits.begin(), hits.end(), [](const auto& x, const auto& y) {
            return x.first != y.first ? x.first > y.first : x.second < y.second;
          });
          if (hits.size() > static_cast<size_t>(options.max_candidates))
            hits.resize(options.max_candidates);
          for (const auto& [sim, row] : hits) {
            size_t a = row_record[q0 + q], b = row_record[row];
            if (a > b) std::swap(a, b);
            batch_pairs[batch].emplace_back(a, b);
            batch_sims[batch].push_back(sim);
          }
        }
      } catch (...) {
#pragma omp critical(lookalike_dedup_failure)
        if (!failure) failure = std::current_exception();
      }
    }
    if (failure) std::rethrow_exception(failure);
    for (int64_t batch = 0; batch < num_batches; ++batch) {
      for (size_t i = 0; i < batch_pairs[batch].size(); ++i) {
        // The two directions of a pair may differ in the last bit; keep one.
        auto [it, inserted] = candidates.emplace(batch_pairs[batch][i], batch_sims[batch][i]);
        if (!inserted) it->second = std::max(it->second, batch_sims[batch][i]);
      }
    }
  }
  // Byte-identical files are duplicates whatever their features.
  std::map<std::pair<size_t, size_t>, bool> identical;
  {
    std::unordered_map<uint64_t, size_t> first_with_hash;
    for (size_t i = 0; i < records.size(); ++i) {
      if (records[i].content_hash == 0) continue;
      const auto [it, inserted] = first_with_hash.emplace(records[i].content_hash, i);
      if (!inserted) identical[{it->second, i}] = true;
    }
  }
  result.search_seconds = Seconds(search_start);

  // Spatial verification, one task per first image (its features are
  // decoded once for all its candidates).
  const auto verify_start = Clock::now();
  std::vector<std::pair<size_t, size_t>> keys;
  keys.reserve(candidates.size() + identical.size());
  for (const auto& [key, sim] : candidates) keys.push_back(key);
  for (const auto& [key, unused] : identical)
    if (!candidates.count(key)) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  std::vector<DedupPair> pairs(keys.size());
  std::vector<size_t> task_begin;  // first pair of each first image
  for (size_t i = 0; i < keys.size(); ++i)
    if (i == 0 || keys[i].first != keys[i - 1].first) task_begin.push_back(i);
  task_begin.push_back(keys.size());
  const size_t num_tasks = task_begin.size() - 1;
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (size_t t = 0; t < num_tasks; ++t) {
    try {
      std::optional<LocalFeatures> first;
      bool first_loaded = false;
      for (size_t p = task_begin[t]; p < task_begin[t + 1]; ++p) {
        const auto [a, b] = keys[p];
        DedupPair& pair = pairs[p];
        pair.a = records[a].id;
        pair.b = records[b].id;
        pair.path_a = records[a].path;
        pair.path_b = records[b].path;
        pair.identical = identical.count(keys[p]) > 0;
        const auto cand = candidates.find(keys[p]);
        pair.inliers = -1;
        if (cand == candidates.end()) {
          pair.similarity = 1;  // identical files not searched (no features)
        } else {
          pair.similarity = cand->second;
          if (!first_loaded) {
            first_loaded = true;
            if (auto blob = store.GetFeatures(records[a].id)) first = DecodeLocalFeatures(*blob);
          }
          const auto blob = store.GetFeatures(records[b].id);
          if (first && blob) {
            const LocalFeatures second = DecodeLocalFeatures(*blob);
            const Verification v = VerifyPair(*first, second, options.verify);
            pair.matches = v.matches;
            pair.inliers = v.inliers;
            const int64_t fewer = std::min(first->num(), second.num());
            if (fewer > 0)
              pair.score = std::min(1.0f, static_cast<float>(v.inliers) / static_cast<float>(fewer));
            pair.spread = std::max(InlierSpread(*first, v.inlier_pairs, 0),
                                   InlierSpread(second, v.inlier_pairs, 1));
          }
        }
        if (pair.identical) pair.score = 1;
        pair.duplicate = pair.identical ||
                         (pair.inliers >= options.min_inliers && pair.score >= options.threshold &&
                          pair.spread >= options.min_spread);
      }
    } catch (...) {
#pragma omp critical(lookalike_dedup_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  result.verify_seconds = Seconds(verify_start);
  for (size_t p = 0; p < pairs.size(); ++p)
    result.num_unverified += pairs[p].inliers < 0 && candidates.count(keys[p]) > 0;

  // Connected components of the duplicate pairs.
  UnionFind components(records.size());
  for (size_t p = 0; p < pairs.size(); ++p)
    if (pairs[p].duplicate) components.Union(keys[p].first, keys[p].second);
  std::map<size_t, std::vector<size_t>> members_of;  // root -> record positions
  std::vector<float> best_score(records.size(), 0.0f);
  for (size_t p = 0; p < pairs.size(); ++p) {
    if (!pairs[p].duplicate) continue;
    for (size_t r : {keys[p].first, keys[p].second})
      best_score[r] = std::max(best_score[r], pairs[p].score);
  }
  for (size_t i = 0; i < records.size(); ++i) {
    members_of[components.Find(i)].push_back(i);
  }
  std::map<size_t, size_t> group_of_root;
  for (auto& [root, positions] : members_of) {
    if (positions.size() < 2) continue;
    DedupGroup group;
    for (size_t i : positions) {
      const ImageRecord& r = records[i];
      group.members.push_back(
          DedupMember{r.id, r.path, r.width, r.height, r.size_bytes, best_score[i]});
    }
    std::sort(group.members.begin(), group.members.end(),
              [](const DedupMember& x, const DedupMember& y) {
                const uint64_t px = uint64_t{x.width} * x.height, py = uint64_t{y.width} * y.height;
                if (px != py) return px > py;
                if (x.size_bytes != y.size_bytes) return x.size_bytes > y.size_bytes;
                return x.path < y.path;
              });
    group_of_root[root] = result.groups.size();
    result.groups.push_back(std::move(group));
  }
  for (size_t p = 0; p < pairs.size(); ++p)
    if (pairs[p].duplicate)
      result.groups[group_of_root.at(components.Find(keys[p].first))].pairs.push_back(pairs[p]);
  for (DedupGroup& g : result.groups)
    std::sort(g.pairs.begin(), g.pairs.end(), [](const DedupPair& x, const DedupPair& y) {
      return std::make_pair(x.a, x.b) < std::make_pair(y.a, y.b);
    });
  auto smallest_path = [](const DedupGroup& g) {
    const std::string* best = &g.members[0].path;
    for (const DedupMember& m : g.members)
      if (m.path < *best) best = &m.path;
    return *best;
  };
  std::sort(result.groups.begin(), result.groups.end(),
            [&](const DedupGroup& x, const DedupGroup& y) {
              return smallest_path(x) < smallest_path(y);
            });
  std::sort(pairs.begin(), pairs.end(), [](const DedupPair& x, const DedupPair& y) {
    return std::make_pair(x.a, x.b) < std::make_pair(y.a, y.b);
  });
  result.candidates = std::move(pairs);
  return result;
}

}  // namespace lookalike
