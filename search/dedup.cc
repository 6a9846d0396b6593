#include "search/dedup.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <map>
#include <memory>
#include <numeric>
#include <opencv2/imgproc.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "indexer/local_features.h"
#include "indexer/search_vectors.h"
#include "search/search_index.h"
#include "search/vector_index.h"
#include "util/threads.h"

namespace lookalike {

void DedupOptions::Validate() const {
  if (!(min_similarity >= -1 && min_similarity <= 1))
    throw std::invalid_argument("--min-similarity must be in [-1, 1], got " +
                                std::to_string(min_similarity));
  if (neighbours < 1 || neighbours > 1000)
    throw std::invalid_argument("--neighbours must be in 1..1000, got " +
                                std::to_string(neighbours));
  if (nprobe < 0 || nprobe > 65536)
    throw std::invalid_argument("--nprobe must be in 0..65536 (0 = as stored), got " +
                                std::to_string(nprobe));
  if (!(threshold > 0 && threshold <= 1))
    throw std::invalid_argument("--threshold must be in (0, 1], got " + std::to_string(threshold));
  if (min_inliers < 5)
    throw std::invalid_argument(
        "--min-inliers must be >= 5 (four matches always fit a "
        "homography), got " +
        std::to_string(min_inliers));
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

// Record positions (first < second) of a candidate pair.
using PairKey = std::pair<size_t, size_t>;

// Every image of the store, in id order (ForEachImage's order).
std::vector<ImageRecord> ReadRecords(const Store& store, int64_t* num_without_features) {
  std::vector<ImageRecord> records;
  records.reserve(store.num_images());
  store.ForEachImage([&](const ImageRecord& rec) {
    records.push_back(rec);
    *num_without_features += rec.status == ImageStatus::kNoFeatures;
  });
  return records;
}

// The index the neighbours come from and the images it holds, in id order.
struct NeighbourIndex {
  std::unique_ptr<VectorIndex> index;
  std::vector<IndexedImage> manifest;
};

// flat: an exact index filled from the stored (or derived) search vectors
// chunk by chunk, so they are held once (4·d + 8 bytes per image), whatever
// index the database keeps. auto and ivfsq: the database's search index as
// the searcher loads it (persisted, reconciled in memory if stale; built from
// the vectors if there is none), converted to ivfsq if that is asked and it
// is flat; `nprobe` lists per query if positive.
NeighbourIndex LoadIndex(const Store& store, const SearchVectors& vectors,
                         const DedupOptions& options) {
  NeighbourIndex out;
  if (options.index_kind == VectorIndexKind::kFlat) {
    VectorIndexOptions exact;
    exact.kind = VectorIndexKind::kFlat;
    out.index = VectorIndex::Create(vectors.dim(), exact);
    out.index->Reserve(static_cast<int64_t>(store.num_images()));
    std::vector<float> chunk;
    std::vector<int64_t> ids;
    const int64_t dim = vectors.dim();
    vectors.ForEach(
        [&](const std::vector<ImageRecord>& records, const float* v) {
          for (size_t i = 0; i < records.size(); ++i) {
            if (records[i].status == ImageStatus::kNoFeatures) continue;
            ids.push_back(static_cast<int64_t>(records[i].id));
            out.manifest.push_back(IndexedImage{records[i].id, records[i].content_hash});
            chunk.insert(chunk.end(), v + i * dim, v + (i + 1) * dim);
          }
          out.index->Add(ids.data(), chunk.data(), static_cast<int64_t>(ids.size()));
          chunk.clear();
          ids.clear();
        },
        1024);
    return out;
  }
  VectorIndexOptions o;
  o.kind = options.index_kind;
  o.words = false;  // dedup compares vectors only: the word index is neither read nor built
  SearchIndexSync sync = SyncSearchIndex(store, vectors, o);
  if (options.index_kind == VectorIndexKind::kIvfSq &&
      sync.index->kind() != VectorIndexKind::kIvfSq && sync.index->ntotal() > 0) {
    // A current persisted index is used as it is, whatever kind was asked
    // for: an approximate one from the exact one's own vectors.
    std::vector<int64_t> ids;
    std::vector<float> exact;
    sync.index->Export(&ids, &exact);
    sync.index.reset();
    sync.index = VectorIndex::Build(vectors.dim(), o, ids.data(), exact.data(),
                                    static_cast<int64_t>(ids.size()));
  }
  if (options.nprobe > 0 && sync.index->nlist() > 0)
    sync.index->set_nprobe(std::min(options.nprobe, sync.index->nlist()));
  out.index = std::move(sync.index);
  out.manifest = std::move(sync.manifest);
  return out;
}

// Candidate pairs -> similarity: each indexed image's `neighbours` nearest
// other images with similarity >= min_similarity. `records` are in id order;
// `manifest` lists the images the index holds (ids among the records').
std::map<PairKey, float> FindCandidates(const SearchVectors& vectors, const VectorIndex& index,
                                        const std::vector<IndexedImage>& manifest,
                                        const std::vector<ImageRecord>& records,
                                        const DedupOptions& options, int threads) {
  std::vector<uint64_t> record_ids(records.size());
  for (size_t i = 0; i < records.size(); ++i) record_ids[i] = records[i].id;
  auto position = [&](int64_t id) -> std::optional<size_t> {
    const auto it =
        std::lower_bound(record_ids.begin(), record_ids.end(), static_cast<uint64_t>(id));
    if (it == record_ids.end() || *it != static_cast<uint64_t>(id)) return std::nullopt;
    return static_cast<size_t>(it - record_ids.begin());
  };
  // Batches of queries in parallel, each searched single-threaded (FAISS's
  // own OpenMP loop is nested, hence serial; BLAS stays at one thread), so
  // both cores work and the result does not depend on the thread count. The
  // queries are read from the store batch by batch: the vectors are held
  // once, in the index. One neighbour more than asked: the image itself is
  // usually among them.
  SetLibraryThreads(threads);
  constexpr int64_t kBatch = 256;
  const int64_t n = static_cast<int64_t>(manifest.size());
  const int64_t k = std::min<int64_t>(options.neighbours + 1, index.ntotal());
  const int64_t num_batches = (n + kBatch - 1) / kBatch;
  std::vector<std::vector<std::pair<PairKey, float>>> found(num_batches);
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t batch = 0; batch < num_batches; ++batch) {
    try {
      const int64_t q0 = batch * kBatch, nq = std::min(kBatch, n - q0);
      std::vector<uint64_t> ids(static_cast<size_t>(nq));
      for (int64_t q = 0; q < nq; ++q) ids[q] = manifest[q0 + q].id;
      std::vector<float> queries(static_cast<size_t>(nq * vectors.dim()));
      vectors.Read(ids, queries.data());
      std::vector<float> scores(static_cast<size_t>(nq * k));
      std::vector<int64_t> hits(static_cast<size_t>(nq * k));
      index.Search(queries.data(), nq, k, scores.data(), hits.data());
      for (int64_t q = 0; q < nq; ++q) {
        const auto self = position(static_cast<int64_t>(ids[q]));
        if (!self) continue;
        int kept = 0;
        for (int64_t j = 0; j < k && kept < options.neighbours; ++j) {
          const int64_t id = hits[q * k + j];
          const float score = scores[q * k + j];
          if (id < 0 || static_cast<uint64_t>(id) == ids[q]) continue;
          if (score < options.min_similarity) break;  // best first
          const auto other = position(id);
          if (!other) continue;
          ++kept;
          found[batch].emplace_back(PairKey{std::min(*self, *other), std::max(*self, *other)},
                                    score);
        }
      }
    } catch (...) {
#pragma omp critical(lookalike_dedup_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  std::map<PairKey, float> candidates;
  for (const auto& pairs : found) {
    for (const auto& [key, sim] : pairs) {
      // The two directions of a pair may differ in the last bit; keep one.
      auto [it, inserted] = candidates.emplace(key, sim);
      if (!inserted) it->second = std::max(it->second, sim);
    }
  }
  return candidates;
}

// Byte-identical files (same non-zero content hash): each with the first
// record of its hash. Duplicates whatever their features.
std::set<PairKey> IdenticalPairs(const std::vector<ImageRecord>& records) {
  std::set<PairKey> identical;
  std::unordered_map<uint64_t, size_t> first_with_hash;
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].content_hash == 0) continue;
    const auto [it, inserted] = first_with_hash.emplace(records[i].content_hash, i);
    if (!inserted) identical.insert({it->second, i});
  }
  return identical;
}

// The evidence of a searched pair from its two images' local features, the
// first prepared for all its pairs.
void Verify(const LocalFeatures& first, const PreparedQuery& prepared_first,
            const LocalFeatures& second, DedupPair* pair) {
  const Verification v = prepared_first.Verify(second);
  pair->matches = v.matches;
  pair->inliers = v.inliers;
  const int64_t fewer = std::min(first.num(), second.num());
  if (fewer > 0)
    pair->score = std::min(1.0f, static_cast<float>(v.inliers) / static_cast<float>(fewer));
  pair->spread =
      std::max(InlierSpread(first, v.inlier_pairs, 0), InlierSpread(second, v.inlier_pairs, 1));
}

// The candidate and identical pairs with their evidence, in key order: one
// task per first image (its features are decoded and prepared once for all
// its pairs).
std::vector<DedupPair> VerifyPairs(const Store& store, const std::vector<ImageRecord>& records,
                                   const std::vector<PairKey>& keys,
                                   const std::map<PairKey, float>& candidates,
                                   const std::set<PairKey>& identical, const DedupOptions& options,
                                   int threads) {
  std::vector<DedupPair> pairs(keys.size());
  std::vector<size_t> task_begin;  // first pair of each first image
  for (size_t i = 0; i < keys.size(); ++i)
    if (i == 0 || keys[i].first != keys[i - 1].first) task_begin.push_back(i);
  task_begin.push_back(keys.size());
  const size_t num_tasks = task_begin.size() - 1;
  const FeatureReader stored_features(store);
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (size_t t = 0; t < num_tasks; ++t) {
    try {
      std::optional<LocalFeatures> first;
      std::optional<PreparedQuery> prepared_first;  // borrows `first`
      bool first_loaded = false;
      for (size_t p = task_begin[t]; p < task_begin[t + 1]; ++p) {
        const auto [a, b] = keys[p];
        DedupPair& pair = pairs[p];
        pair.a = records[a].id;
        pair.b = records[b].id;
        pair.path_a = records[a].path;
        pair.path_b = records[b].path;
        pair.identical = identical.count(keys[p]) > 0;
        pair.inliers = -1;
        const auto cand = candidates.find(keys[p]);
        if (cand == candidates.end()) {
          pair.similarity = 1;  // identical files not searched (no features)
        } else {
          pair.similarity = cand->second;
          if (!first_loaded) {
            first_loaded = true;
            first = stored_features.Read(records[a].id, stored_features.matching_frame());
            if (first) prepared_first.emplace(*first, options.verify);
          }
          if (first)
            if (const auto second =
                    stored_features.Read(records[b].id, stored_features.matching_frame()))
              Verify(*first, *prepared_first, *second, &pair);
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
  return pairs;
}

bool ByIds(const DedupPair& x, const DedupPair& y) {
  return std::make_pair(x.a, x.b) < std::make_pair(y.a, y.b);
}

// The connected components of the duplicate pairs with 2 or more images,
// ordered as DedupResult::groups says. pairs[p] is the pair of keys[p].
std::vector<DedupGroup> GroupDuplicates(const std::vector<ImageRecord>& records,
                                        const std::vector<PairKey>& keys,
                                        const std::vector<DedupPair>& pairs) {
  UnionFind components(records.size());
  std::vector<float> best_score(records.size(), 0.0f);
  for (size_t p = 0; p < pairs.size(); ++p) {
    if (!pairs[p].duplicate) continue;
    components.Union(keys[p].first, keys[p].second);
    for (size_t r : {keys[p].first, keys[p].second})
      best_score[r] = std::max(best_score[r], pairs[p].score);
  }
  std::map<size_t, std::vector<size_t>> members_of;  // root -> record positions
  for (size_t i = 0; i < records.size(); ++i) members_of[components.Find(i)].push_back(i);
  std::vector<DedupGroup> groups;
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
    group_of_root[root] = groups.size();
    groups.push_back(std::move(group));
  }
  for (size_t p = 0; p < pairs.size(); ++p)
    if (pairs[p].duplicate)
      groups[group_of_root.at(components.Find(keys[p].first))].pairs.push_back(pairs[p]);
  for (DedupGroup& g : groups) std::sort(g.pairs.begin(), g.pairs.end(), ByIds);
  auto smallest_path = [](const DedupGroup& g) {
    const std::string* best = &g.members[0].path;
    for (const DedupMember& m : g.members)
      if (m.path < *best) best = &m.path;
    return *best;
  };
  std::sort(groups.begin(), groups.end(), [&](const DedupGroup& x, const DedupGroup& y) {
    return smallest_path(x) < smallest_path(y);
  });
  return groups;
}

}  // namespace

DedupResult FindDuplicates(const Store& store, const DedupOptions& options) {
  // The one check of the options: the steps behind trust them.
  options.Validate();
  DedupResult result;
  const int threads = ResolveThreads(options.threads);
  const auto search_start = Clock::now();
  const std::vector<ImageRecord> records = ReadRecords(store, &result.num_without_features);
  std::map<PairKey, float> candidates;
  {
    const SearchVectors vectors(store);
    const NeighbourIndex loaded = LoadIndex(store, vectors, options);
    result.index_description = loaded.index->Describe();
    result.index_bytes = loaded.index->MemoryBytes();
    candidates = FindCandidates(vectors, *loaded.index, loaded.manifest, records, options, threads);
  }
  result.num_images = static_cast<int64_t>(records.size());
  const std::set<PairKey> identical = IdenticalPairs(records);
  result.search_seconds = Seconds(search_start);

  const auto verify_start = Clock::now();
  std::vector<PairKey> keys;
  keys.reserve(candidates.size() + identical.size());
  for (const auto& [key, sim] : candidates) keys.push_back(key);
  for (const PairKey& key : identical)
    if (!candidates.count(key)) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  std::vector<DedupPair> pairs =
      VerifyPairs(store, records, keys, candidates, identical, options, threads);
  result.verify_seconds = Seconds(verify_start);
  for (size_t p = 0; p < pairs.size(); ++p)
    result.num_unverified += pairs[p].inliers < 0 && candidates.count(keys[p]) > 0;

  result.groups = GroupDuplicates(records, keys, pairs);
  std::sort(pairs.begin(), pairs.end(), ByIds);
  result.candidates = std::move(pairs);
  return result;
}

}  // namespace lookalike
