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

#include "indexer/file_walker.h"
#include "indexer/grey_thumbnail.h"
#include "indexer/local_features.h"
#include "indexer/mirror_features.h"
#include "indexer/search_vectors.h"
#include "search/dedup_groups.h"
#include "search/image_traits.h"
#include "search/match_evidence.h"
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
  if (level == MatchLevel::kNone)
    throw std::invalid_argument(
        "--level none would group unrelated images: use identical, copy, part or view");
  for (const std::string& dir : keep_in)
    if (dir.empty() || dir[0] != '/' || (dir.size() > 1 && dir.back() == '/'))
      throw std::invalid_argument(
          "--keep-in folders must be absolute paths without a trailing "
          "'/', got '" +
          dir + "'");
  verify.Validate();
  levels.Validate();
}

const char* MemberRoleName(MemberRole role) {
  switch (role) {
    case MemberRole::kKeep:
      return "keep";
    case MemberRole::kReference:
      return "reference";
    case MemberRole::kDuplicate:
      return "duplicate";
  }
  return "duplicate";
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
// other images with similarity >= min_similarity; with `mirrored`, the
// nearest images of each one's mirror image (SearchVectors::ReadMirrored,
// prepared). `records` are in id order; `manifest` lists the images the
// index holds (ids among the records').
std::map<PairKey, float> FindCandidates(const SearchVectors& vectors, const VectorIndex& index,
                                        const std::vector<IndexedImage>& manifest,
                                        const std::vector<ImageRecord>& records,
                                        const DedupOptions& options, int threads, bool mirrored) {
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
      if (mirrored) {
        std::vector<ImageRecord> batch_records;
        for (uint64_t id : ids)
          if (const auto p = position(static_cast<int64_t>(id)))
            batch_records.push_back(records[*p]);
        if (batch_records.size() != ids.size())
          throw StoreError(StoreError::Kind::kCorrupt,
                           "the search index holds images without a record; run `lookalike "
                           "verify`");
        vectors.ReadMirrored(batch_records, queries.data());
      } else {
        vectors.Read(ids, queries.data());
      }
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

// Byte-identical files (same non-zero content hash): every two of a hash's
// first kMaxIdenticalClique files, and each further one with the first, so
// that any of them can keep the group. Duplicates whatever their features.
std::set<PairKey> IdenticalPairs(const std::vector<ImageRecord>& records) {
  constexpr size_t kMaxIdenticalClique = 64;
  std::set<PairKey> identical;
  std::unordered_map<uint64_t, std::vector<size_t>> with_hash;
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].content_hash == 0) continue;
    std::vector<size_t>& same = with_hash[records[i].content_hash];
    const size_t partners = same.size() < kMaxIdenticalClique ? same.size() : 1;
    for (size_t j = 0; j < partners; ++j) identical.insert({same[j], i});
    same.push_back(i);
  }
  return identical;
}

// The evidence of a searched pair from its two images' local features (the
// first prepared for all its pairs) and thumbnails (empty when not stored),
// and their records' original sizes.
void Verify(const LocalFeatures& first, const PreparedQuery& prepared_first,
            const GreyThumbnail& first_thumbnail, const ImageRecord& first_record,
            const LocalFeatures& second, const GreyThumbnail& second_thumbnail,
            const ImageRecord& second_record, int min_inliers, DedupPair* pair) {
  const Verification v = prepared_first.Verify(second);
  pair->matches = v.matches;
  pair->inliers = v.inliers;
  const int64_t fewer = std::min(first.num(), second.num());
  if (fewer > 0)
    pair->score = std::min(1.0f, static_cast<float>(v.inliers) / static_cast<float>(fewer));
  pair->spread =
      std::max(InlierSpread(first, v.inlier_pairs, 0), InlierSpread(second, v.inlier_pairs, 1));
  pair->evidence = MeasureMatch(v, first, second, min_inliers);
  if (!v.homography || !pair->evidence.homography) return;
  PairGeometry& g = pair->geometry;
  g.valid = true;
  g.homography = *v.homography;
  g.width_a = static_cast<int>(first.width);
  g.height_a = static_cast<int>(first.height);
  g.width_b = static_cast<int>(second.width);
  g.height_b = static_cast<int>(second.height);
  // Feature-frame scale to original pixels: b's per a's.
  if (first_record.width > 0 && second_record.width > 0 && first.width > 0 && second.width > 0)
    g.scale = pair->evidence.scale * (static_cast<double>(first.width) / first_record.width) /
              (static_cast<double>(second.width) / second_record.width);
  // As search does: the aligned thumbnails' correlation, and each image's
  // content share counted on its textured thumbnail pixels.
  if (pair->evidence.verified)
    MeasureThumbnails(first_thumbnail, g.width_a, g.height_a, second_thumbnail, g.width_b,
                      g.height_b, g.homography, &pair->evidence);
}

// A mirrored pair's homography from the first image's mirror frame to the
// second's, turned into one from the first's own frame (x -> width - 1 - x,
// then the fitted map), as the keep rule compares frames.
void FlipFirstFrame(PairGeometry* g) {
  if (!g->valid) return;
  const cv::Matx33d fitted(g->homography.data());
  const cv::Matx33d flip(-1, 0, g->width_a - 1.0, 0, 1, 0, 0, 0, 1);
  const cv::Matx33d h = fitted * flip;
  for (int i = 0; i < 9; ++i) g->homography[static_cast<size_t>(i)] = h.val[i];
}

// A stored grey thumbnail, empty when the image has none.
GreyThumbnail ReadThumbnail(const Store& store, uint64_t id) {
  if (!store.keeps_thumbnails()) return {};
  const auto value = store.GetThumbnails({id});
  return value[0] ? DecodeGreyThumbnail(*value[0]) : GreyThumbnail();
}

// Whether a pair's verification with its first image's mirror image is
// taken over its plain one: as search merges its mirror's hits, only with a
// level, the higher level winning, then the higher score.
bool MirroredWins(const DedupPair& mirrored, const DedupPair& plain) {
  return mirrored.level != MatchLevel::kNone &&
         (mirrored.level > plain.level ||
          (mirrored.level == plain.level && mirrored.score > plain.score));
}

// One image's features (or its mirror image's), prepared for all its pairs
// as their first image, read on first use.
struct FirstImage {
  bool loaded = false;
  std::optional<LocalFeatures> features;
  std::optional<PreparedQuery> prepared;  // borrows `features`
  GreyThumbnail thumbnail;

  void Load(const Store& store, const FeatureReader& reader, uint64_t id, bool mirror,
            const VerifyOptions& verify) {
    if (loaded) return;
    loaded = true;
    if (!mirror) {
      features = reader.Read(id, reader.matching_frame());
    } else if (const auto own = reader.Read(id, DescriptorFrame::kOriginal)) {
      features = reader.InMatchingFrame(MirrorFeatures(*own));
    }
    if (!features) return;
    prepared.emplace(*features, verify);
    thumbnail = ReadThumbnail(store, id);
    if (mirror) thumbnail = MirrorThumbnail(thumbnail);
  }
};

// The candidate and identical pairs with their evidence, in key order: one
// task per first image (its features are decoded and prepared once for all
// its pairs). A pair among `mirrored` is verified with its first image's
// mirror image too, and keeps that verification if it is the only one, or
// reaches a level above none and a higher level, or score, than the other.
std::vector<DedupPair> VerifyPairs(const Store& store, const std::vector<ImageRecord>& records,
                                   const std::vector<PairKey>& keys,
                                   const std::map<PairKey, float>& candidates,
                                   const std::map<PairKey, float>& mirrored,
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
      FirstImage first, first_mirror;
      // Verified: enough inliers, explaining enough of the poorer image,
      // spread over one of them (dedup's own bar, above search's).
      auto level = [&](DedupPair* pair) {
        if (pair->identical) pair->score = 1;
        pair->evidence.verified = pair->inliers >= options.min_inliers &&
                                  pair->score >= options.threshold &&
                                  pair->spread >= options.min_spread;
        pair->evidence.identical = pair->identical;
        pair->level = ClassifyMatch(pair->evidence, options.levels);
        pair->duplicate = pair->level >= options.level;
      };
      for (size_t p = task_begin[t]; p < task_begin[t + 1]; ++p) {
        const size_t a = keys[p].first, b = keys[p].second;
        DedupPair& pair = pairs[p];
        pair.a = records[a].id;
        pair.b = records[b].id;
        pair.path_a = records[a].path;
        pair.path_b = records[b].path;
        pair.identical = identical.count(keys[p]) > 0;
        pair.inliers = -1;
        const auto cand = candidates.find(keys[p]);
        const auto mirror = mirrored.find(keys[p]);
        std::optional<LocalFeatures> second;
        GreyThumbnail second_thumbnail;
        auto read_second = [&] {
          if (second) return;
          second = stored_features.Read(records[b].id, stored_features.matching_frame());
          second_thumbnail = ReadThumbnail(store, records[b].id);
        };
        if (cand == candidates.end() && mirror == mirrored.end()) {
          pair.similarity = 1;  // identical files not searched (no features)
        } else if (cand != candidates.end()) {
          pair.similarity = cand->second;
          first.Load(store, stored_features, records[a].id, false, options.verify);
          if (first.features) read_second();
          if (first.features && second)
            Verify(*first.features, *first.prepared, first.thumbnail, records[a], *second,
                   second_thumbnail, records[b], options.min_inliers, &pair);
        }
        level(&pair);
        if (mirror == mirrored.end()) continue;
        // The same pair between a's mirror image and b.
        DedupPair flipped;
        flipped.a = pair.a;
        flipped.b = pair.b;
        flipped.path_a = pair.path_a;
        flipped.path_b = pair.path_b;
        flipped.identical = pair.identical;
        flipped.inliers = -1;
        flipped.similarity = mirror->second;
        first_mirror.Load(store, stored_features, records[a].id, true, options.verify);
        if (first_mirror.features) read_second();
        if (first_mirror.features && second) {
          Verify(*first_mirror.features, *first_mirror.prepared, first_mirror.thumbnail, records[a],
                 *second, second_thumbnail, records[b], options.min_inliers, &flipped);
          flipped.evidence.mirrored = !flipped.evidence.mirrored;
          FlipFirstFrame(&flipped.geometry);
        }
        level(&flipped);
        if (cand == candidates.end() || MirroredWins(flipped, pair)) pair = std::move(flipped);
      }
    } catch (...) {
#pragma omp critical(lookalike_dedup_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  return pairs;
}

// Components of the pairs at the level up to this size are completed: every
// pair inside is verified (at most 1,128 pairs for one component).
constexpr size_t kMaxCompletedComponent = 48;

// The pairs inside the components (of kMaxCompletedComponent images or
// fewer) of the verified pairs (any level: a crop at part can link a copy to
// its original) that are not among `known` (the pairs verified as they are,
// not only mirrored), sorted. pairs[p] is the pair of keys[p].
std::vector<PairKey> MissingPairs(size_t num_records, const std::vector<PairKey>& keys,
                                  const std::vector<DedupPair>& pairs,
                                  const std::set<PairKey>& known) {
  std::vector<size_t> parent(num_records);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  std::vector<bool> linked(num_records, false);
  for (size_t p = 0; p < pairs.size(); ++p) {
    if (pairs[p].level == MatchLevel::kNone) continue;
    const size_t a = find(keys[p].first), b = find(keys[p].second);
    parent[std::max(a, b)] = std::min(a, b);
    linked[keys[p].first] = linked[keys[p].second] = true;
  }
  std::map<size_t, std::vector<size_t>> components;
  for (size_t i = 0; i < num_records; ++i)
    if (linked[i]) components[find(i)].push_back(i);
  std::vector<PairKey> missing;
  for (const auto& [root, nodes] : components) {
    if (nodes.size() < 3 || nodes.size() > kMaxCompletedComponent) continue;
    for (size_t i = 0; i < nodes.size(); ++i)
      for (size_t j = i + 1; j < nodes.size(); ++j)
        if (!known.count({nodes[i], nodes[j]})) missing.push_back({nodes[i], nodes[j]});
  }
  std::sort(missing.begin(), missing.end());
  return missing;
}

// The search-vector cosine similarity of each pair (0 when an image has no
// features); with `mirrored`, of the first image's mirror image and the
// second.
std::map<PairKey, float> Similarities(const SearchVectors& vectors,
                                      const std::vector<ImageRecord>& records,
                                      const std::vector<PairKey>& keys, bool mirrored) {
  std::map<PairKey, float> out;
  const int64_t dim = vectors.dim();
  std::vector<float> va(static_cast<size_t>(dim)), vb(static_cast<size_t>(dim));
  for (const PairKey& key : keys) {
    float similarity = 0;
    if (records[key.first].status != ImageStatus::kNoFeatures &&
        records[key.second].status != ImageStatus::kNoFeatures) {
      if (mirrored)
        vectors.ReadMirrored({records[key.first]}, va.data());
      else
        vectors.Read({records[key.first].id}, va.data());
      vectors.Read({records[key.second].id}, vb.data());
      double dot = 0, na = 0, nb = 0;
      for (int64_t d = 0; d < dim; ++d) {
        dot += double{va[d]} * vb[d];
        na += double{va[d]} * va[d];
        nb += double{vb[d]} * vb[d];
      }
      if (na > 0 && nb > 0) similarity = static_cast<float>(dot / std::sqrt(na * nb));
    }
    out[key] = similarity;
  }
  return out;
}

bool ByIds(const DedupPair& x, const DedupPair& y) {
  return std::make_pair(x.a, x.b) < std::make_pair(y.a, y.b);
}

// Whether `path` lies under one of the reference folders.
bool InReferenceFolder(const std::string& path, const std::vector<std::string>& folders) {
  for (const std::string& dir : folders)
    if (IsUnder(path, dir)) return true;
  return false;
}

// The traits of the images at `positions` (the `original` rule compares
// them by their files), in that order. An image whose file cannot be read,
// or no longer holds the indexed bytes, gets none (counted in *num_unread).
std::vector<std::optional<ImageTraits>> ReadTraits(const Store& store,
                                                   const std::vector<ImageRecord>& records,
                                                   const std::vector<size_t>& positions,
                                                   int threads, int64_t* num_unread) {
  std::vector<std::optional<ImageTraits>> traits(positions.size());
  int64_t unread = 0;
  const ImageFileLimits limits;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) reduction(+ : unread)
  for (size_t w = 0; w < positions.size(); ++w) {
    const ImageRecord& r = records[positions[w]];
    const ReadResult file = ReadImageBytes(r.path, limits);
    if (file.error || store.ContentHash(file.bytes.data(), file.bytes.size()) != r.content_hash) {
      ++unread;
      continue;
    }
    ImageTraits t = AnalyseImageBytes(file.bytes);
    if (!t.read) {
      ++unread;
      continue;
    }
    traits[w] = std::move(t);
  }
  *num_unread += unread;
  return traits;
}

// The same geometry seen from b's side.
PairGeometry Reversed(const PairGeometry& g) {
  PairGeometry r = g;
  if (!g.valid) return r;
  const cv::Matx33d inverse = cv::Matx33d(g.homography.data()).inv();
  for (int i = 0; i < 9; ++i) r.homography[static_cast<size_t>(i)] = inverse.val[i];
  std::swap(r.width_a, r.width_b);
  std::swap(r.height_a, r.height_b);
  r.scale = g.scale > 0 ? 1 / g.scale : 1;
  return r;
}

// One star as a group: its members with their roles, levels and reasons,
// the pairs at the level among them, the keep reason. `pairs_of` lists the
// component's pairs at the level (indices into `pairs`).
DedupGroup ToGroup(const Star& star, const std::vector<ImageRecord>& records,
                   const std::vector<DedupPair>& pairs, const std::map<PairKey, size_t>& pair_of,
                   const std::vector<bool>& reference) {
  DedupGroup group;
  group.level = MatchLevel::kIdentical;
  std::set<KeepCriterion> won_by;
  const size_t keeper = star.members[0];
  for (size_t i = 0; i < star.members.size(); ++i) {
    const size_t m = star.members[i];
    const ImageRecord& r = records[m];
    DedupMember member;
    member.id = r.id;
    member.path = r.path;
    member.width = r.width;
    member.height = r.height;
    member.size_bytes = r.size_bytes;
    member.mtime_ns = r.mtime_ns;
    if (i == 0) {
      member.role = MemberRole::kKeep;
      member.score = 1;
    } else {
      const DedupPair& with_keeper = pairs[pair_of.at({std::min(keeper, m), std::max(keeper, m)})];
      member.role = reference[m] ? MemberRole::kReference : MemberRole::kDuplicate;
      member.level = with_keeper.level;
      member.score = with_keeper.score;
      group.level = std::min(group.level, with_keeper.level);
      const KeepVerdict& v = star.verdicts[i];
      if (reference[m]) {
        member.reason = "in a reference folder (--keep-in): kept";
      } else if (v.prefer < 0) {
        member.reason = v.reason;
        won_by.insert(v.criterion);
      } else if (v.prefer == 0) {
        member.reason = "indistinguishable from the keeper";
      } else {
        member.reason = "not the keeper, though preferred to it (" + v.reason +
                        "), as it is not directly at the level with every other member";
      }
    }
    group.members.push_back(std::move(member));
  }
  if (reference[keeper]) won_by = {KeepCriterion::kReference};
  if (won_by.empty()) won_by.insert(KeepCriterion::kNone);
  for (KeepCriterion c : won_by)
    group.keep_reason += (group.keep_reason.empty() ? "" : "; ") + std::string(KeeperStrength(c));
  group.members[0].reason = group.keep_reason;
  for (size_t i = 0; i < star.members.size(); ++i)
    for (size_t j = i + 1; j < star.members.size(); ++j) {
      const auto it = pair_of.find(
          {std::min(star.members[i], star.members[j]), std::max(star.members[i], star.members[j])});
      if (it != pair_of.end()) group.pairs.push_back(pairs[it->second]);
    }
  std::sort(group.pairs.begin(), group.pairs.end(), ByIds);
  return group;
}

// Images whose traits a batch of components reads at once: enough for both
// threads, few enough that their masks (about 60 KiB each) stay small.
constexpr size_t kTraitsBatch = 256;

// The groups: stars around keepers over the pairs at the level
// (search/dedup_groups.h), formed component by component of those pairs, so
// that the files' traits are read (in parallel) and held for a batch of
// components at a time. Ordered as DedupResult::groups says. pairs[p] is
// the pair of keys[p].
std::vector<DedupGroup> GroupDuplicates(const Store& store, const std::vector<ImageRecord>& records,
                                        const std::vector<PairKey>& keys,
                                        const std::vector<DedupPair>& pairs,
                                        const DedupOptions& options, int threads,
                                        int64_t* num_unread) {
  std::map<PairKey, size_t> pair_of;  // the pairs at the level
  std::vector<size_t> parent(records.size());
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (size_t p = 0; p < pairs.size(); ++p) {
    if (!pairs[p].duplicate) continue;
    pair_of[keys[p]] = p;
    const size_t a = find(keys[p].first), b = find(keys[p].second);
    parent[std::max(a, b)] = std::min(a, b);
  }
  // Components in the order of their smallest image; each with its pairs.
  std::map<size_t, std::vector<size_t>> nodes_of;
  std::map<size_t, std::vector<PairKey>> edges_of;
  for (const auto& [key, p] : pair_of) edges_of[find(key.first)].push_back(key);
  for (const auto& [root, edges] : edges_of) {
    std::set<size_t> nodes;
    for (const PairKey& e : edges) nodes.insert({e.first, e.second});
    nodes_of[root].assign(nodes.begin(), nodes.end());
  }
  std::vector<bool> reference(records.size(), false);
  for (size_t i = 0; i < records.size(); ++i)
    reference[i] = InReferenceFolder(records[i].path, options.keep_in);
  auto records_first = [&](size_t x, size_t y) {
    const KeepCandidate bare_x{&records[x], nullptr, reference[x]};
    const KeepCandidate bare_y{&records[y], nullptr, reference[y]};
    const int prefer = CompareForKeeping(options.keep, bare_x, bare_y, nullptr, false).prefer;
    return prefer != 0 ? prefer < 0 : x < y;
  };

  std::vector<DedupGroup> groups;
  auto component = nodes_of.begin();
  while (component != nodes_of.end()) {
    // A batch of components, and the traits of their images that have a
    // pair at the level that is not byte-identical.
    const auto batch_begin = component;
    std::vector<size_t> wanted;
    while (component != nodes_of.end() && (wanted.empty() || wanted.size() < kTraitsBatch)) {
      if (options.keep == KeepRule::kOriginal) {
        std::set<size_t> want;
        for (const PairKey& e : edges_of.at(component->first))
          if (!pairs[pair_of.at(e)].identical) want.insert({e.first, e.second});
        wanted.insert(wanted.end(), want.begin(), want.end());
      }
      ++component;
    }
    std::vector<std::optional<ImageTraits>> traits =
        ReadTraits(store, records, wanted, threads, num_unread);
    std::map<size_t, const ImageTraits*> traits_of;
    for (size_t w = 0; w < wanted.size(); ++w)
      if (traits[w]) traits_of[wanted[w]] = &*traits[w];
    for (auto c = batch_begin; c != component; ++c) {
      // The component with local node numbers 0..n-1 (its images in order).
      const std::vector<size_t>& nodes = c->second;
      auto local = [&](size_t global) {
        return static_cast<size_t>(std::lower_bound(nodes.begin(), nodes.end(), global) -
                                   nodes.begin());
      };
      std::vector<std::pair<size_t, size_t>> edges;
      for (const PairKey& e : edges_of.at(c->first))
        edges.push_back({local(e.first), local(e.second)});
      std::vector<bool> local_reference(nodes.size());
      std::vector<KeepCandidate> candidates(nodes.size());
      for (size_t i = 0; i < nodes.size(); ++i) {
        local_reference[i] = reference[nodes[i]];
        const auto t = traits_of.find(nodes[i]);
        candidates[i] = KeepCandidate{
            &records[nodes[i]], t == traits_of.end() ? nullptr : t->second, reference[nodes[i]]};
      }
      auto compare_edge = [&](size_t x, size_t y) {
        const size_t gx = nodes[x], gy = nodes[y];
        const DedupPair& pair = pairs[pair_of.at({std::min(gx, gy), std::max(gx, gy)})];
        const PairGeometry geometry = gx < gy ? pair.geometry : Reversed(pair.geometry);
        return CompareForKeeping(options.keep, candidates[x], candidates[y], &geometry,
                                 pair.identical);
      };
      auto local_records_first = [&](size_t x, size_t y) {
        return records_first(nodes[x], nodes[y]);
      };
      for (Star star :
           FormStars(nodes.size(), edges, local_reference, options.keep == KeepRule::kOriginal,
                     compare_edge, local_records_first)) {
        for (size_t& m : star.members) m = nodes[m];
        groups.push_back(ToGroup(star, records, pairs, pair_of, reference));
      }
    }
  }
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
  std::map<PairKey, float> candidates, mirrored;
  SearchVectors vectors(store);
  // Mirrors need SIFT's descriptor layout, which every model has today.
  const bool mirrors = options.mirrored && vectors.PrepareMirrors();
  {
    const NeighbourIndex loaded = LoadIndex(store, vectors, options);
    result.index_description = loaded.index->Describe();
    result.index_bytes = loaded.index->MemoryBytes();
    candidates =
        FindCandidates(vectors, *loaded.index, loaded.manifest, records, options, threads, false);
    if (mirrors)
      mirrored =
          FindCandidates(vectors, *loaded.index, loaded.manifest, records, options, threads, true);
  }
  result.num_mirror_candidates = static_cast<int64_t>(mirrored.size());
  result.num_images = static_cast<int64_t>(records.size());
  const std::set<PairKey> identical = IdenticalPairs(records);
  result.search_seconds = Seconds(search_start);

  const auto verify_start = Clock::now();
  std::vector<PairKey> keys;
  keys.reserve(candidates.size() + mirrored.size() + identical.size());
  for (const auto& [key, sim] : candidates) keys.push_back(key);
  for (const auto& [key, sim] : mirrored)
    if (!candidates.count(key)) keys.push_back(key);
  for (const PairKey& key : identical)
    if (!candidates.count(key) && !mirrored.count(key)) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  std::vector<DedupPair> pairs =
      VerifyPairs(store, records, keys, candidates, mirrored, identical, options, threads);
  // Completing small groups: every pair inside a small component of the
  // verified pairs that the neighbours did not bring (an original with
  // eight copies is not among each copy's five nearest), so that stars
  // around keepers miss no member for want of a candidate. A pair only a
  // mirror image brought was verified mirrored only: it is completed as it
  // is, and keeps the better of its two verifications.
  std::set<PairKey> known;
  for (const PairKey& key : keys)
    if (!mirrored.count(key) || candidates.count(key) || identical.count(key)) known.insert(key);
  const std::vector<PairKey> missing = MissingPairs(records.size(), keys, pairs, known);
  if (!missing.empty()) {
    std::map<PairKey, float> added = Similarities(vectors, records, missing, false);
    std::vector<PairKey> unmirrored;  // not verified mirrored yet
    for (const PairKey& key : missing)
      if (!mirrored.count(key)) unmirrored.push_back(key);
    std::map<PairKey, float> added_mirrored;
    if (mirrors) added_mirrored = Similarities(vectors, records, unmirrored, true);
    std::vector<DedupPair> more =
        VerifyPairs(store, records, missing, added, added_mirrored, identical, options, threads);
    candidates.insert(added.begin(), added.end());
    const size_t num_searched = keys.size();  // sorted; missing ones are appended
    for (size_t m = 0; m < missing.size(); ++m) {
      if (mirrored.count(missing[m])) {
        // A mirror image's candidate: its pair stays one, with the plain
        // verification unless the mirrored one wins.
        const auto at = std::lower_bound(keys.begin(), keys.begin() + num_searched, missing[m]);
        DedupPair& had = pairs[static_cast<size_t>(at - keys.begin())];
        if (!MirroredWins(had, more[m])) had = std::move(more[m]);
        continue;
      }
      more[m].completing = true;
      keys.push_back(missing[m]);
      pairs.push_back(std::move(more[m]));
    }
    std::vector<size_t> order(keys.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return keys[x] < keys[y]; });
    std::vector<PairKey> sorted_keys;
    std::vector<DedupPair> sorted_pairs;
    for (size_t i : order) {
      sorted_keys.push_back(keys[i]);
      sorted_pairs.push_back(std::move(pairs[i]));
    }
    keys = std::move(sorted_keys);
    pairs = std::move(sorted_pairs);
  }
  result.verify_seconds = Seconds(verify_start);
  for (size_t p = 0; p < pairs.size(); ++p) {
    result.num_unverified +=
        pairs[p].inliers < 0 && (candidates.count(keys[p]) > 0 || mirrored.count(keys[p]) > 0);
    result.num_mirrored += pairs[p].level != MatchLevel::kNone && pairs[p].evidence.mirrored;
  }

  const auto keep_start = Clock::now();
  result.groups =
      GroupDuplicates(store, records, keys, pairs, options, threads, &result.num_unread);
  result.keep_seconds = Seconds(keep_start);
  result.level = options.level;
  result.keep = options.keep;
  std::sort(pairs.begin(), pairs.end(), ByIds);
  result.candidates = std::move(pairs);
  return result;
}

}  // namespace lookalike
