#include "search/ranking.h"

#include <omp.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <exception>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "indexer/colour.h"
#include "search/match_evidence.h"
#include "storage/encoding.h"

namespace lookalike {
namespace {

// Best score first; equal scores keep their previous order.
void SortByScore(std::vector<Candidate>* list) {
  std::stable_sort(list->begin(), list->end(),
                   [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
}

// The median of `v` (the upper one for an even size); reorders `v`.
float Median(std::vector<float>* v) {
  auto mid = v->begin() + static_cast<std::ptrdiff_t>(v->size() / 2);
  std::nth_element(v->begin(), mid, v->end());
  return *mid;
}

// The verifier's options for a search: a candidate with fewer matches than
// min_inliers cannot be verified, so RANSAC is not tried below that.
VerifyOptions VerifyFor(const RerankOptions& options) {
  VerifyOptions v = options.verify;
  v.min_matches = std::max(v.min_matches, options.min_inliers);
  return v;
}

// fn(0) ... fn(n - 1) on `threads` OpenMP threads (0: OpenMP's count, which
// Searcher::Open sets), one index at a time (the items cost unequally); the
// first exception thrown is rethrown here once all have finished.
template <typename Fn>
void ParallelFor(size_t n, int threads, Fn&& fn) {
  if (threads <= 0) threads = omp_get_max_threads();
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (size_t i = 0; i < n; ++i) {
    try {
      fn(i);
    } catch (...) {
#pragma omp critical(lookalike_search_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

bool WeaklyVerified(const Verification& v, const LocalFeatures& query,
                    const LocalFeatures& candidate, const RerankOptions& options) {
  if (options.weak_inliers == 0 || v.inliers < options.weak_inliers ||
      StronglyVerified(v, query, candidate, options))
    return false;
  return ConsistentInliers(v, query, candidate, options.weak_consistent) >= options.weak_consistent;
}

bool StronglyVerified(const Verification& v, const LocalFeatures& query,
                      const LocalFeatures& candidate, const RerankOptions& options) {
  if (v.inliers < options.min_inliers) return false;
  return options.min_consistent == 0 ||
         ConsistentInliers(v, query, candidate, options.min_consistent) >= options.min_consistent;
}

float CombinedScore(float base, int inliers) {
  const float evidence = static_cast<float>(inliers) / (static_cast<float>(inliers) + 20.0f);
  return 1.0f - (1.0f - base) * (1.0f - evidence);
}

namespace {

// Verification through hubs (ScoresThroughHubs), one step at a time.
class HubChains {
 public:
  HubChains(const FeatureReader& stored_features, const SearchOptions& options,
            const std::vector<RankedResult>& list)
      : features_(stored_features),
        options_(options),
        list_(list),
        hub_least_(std::max(options.rerank.min_inliers, options.expansion.hub_inliers)) {
    const ExpansionOptions& e = options.expansion;
    for (size_t i = 0; i < list.size(); ++i) {
      at_.emplace(list[i].id, i);
      if (list[i].level != MatchLevel::kNone) {
        if (static_cast<int>(hubs_.size()) < e.hubs && list[i].level <= MatchLevel::kPart &&
            list[i].consistent >= hub_least_)
          hubs_.push_back({list[i].id, list[i].score, list[i].inliers});
      } else if (static_cast<int>(todo_.size()) < e.hub_depth) {
        todo_.push_back(i);
      }
    }
  }

  bool has_hubs() const { return !hubs_.empty(); }

  // Verifies the list's first hub_depth unverified results and each hub's
  // neighbours against this step's hubs, then makes the best it raised
  // strongly enough the next step's hubs.
  void Step(int step, const HubNeighbours& neighbours) {
    for (const Hub& h : hubs_) was_hub_.insert(h.id);
    // Each hub as a query: its strongest features, as the query's are.
    const VerifyOptions verify = VerifyFor(options_.rerank);
    std::vector<LocalFeatures> hub_features(hubs_.size());
    std::vector<std::unique_ptr<PreparedQuery>> prepared(hubs_.size());
    for (size_t h = 0; h < hubs_.size(); ++h) {
      auto f = features_.Read(hubs_[h].id, features_.matching_frame());
      if (!f) continue;
      hub_features[h] = StrongestFeatures(*f, options_.rerank.verify_keypoints);
      prepared[h] = std::make_unique<PreparedQuery>(hub_features[h], verify);
    }
    work_.clear();
    work_at_.clear();
    for (size_t t : todo_)
      for (size_t h = 0; h < hubs_.size(); ++h)
        if (prepared[h]) Add(list_[t].id, list_[t].score, 0.0f, h);
    const int n = options_.expansion.hub_neighbours;
    if (neighbours && n > 0)
      for (size_t h = 0; h < hubs_.size(); ++h)
        if (prepared[h])
          for (const HubNeighbour& nb : neighbours(hubs_[h].id, n))
            Add(nb.id, nb.similarity, nb.similarity, h);
    ParallelFor(work_.size(), options_.threads, [&](size_t w) {
      Reached& r = reached_[work_[w].first];
      const auto candidate = features_.Read(r.id, features_.matching_frame());
      if (!candidate) return;
      for (const auto& [h, base] : work_[w].second) {
        const Verification v = prepared[h]->Verify(*candidate);
        if (!StronglyVerified(v, hub_features[h], *candidate, options_.rerank)) continue;
        const int link = std::min(v.inliers, hubs_[h].strength);
        const float through = std::min(std::clamp(CombinedScore(base, link), -1.0f, 1.0f),
                                       std::nextafter(hubs_[h].score, -2.0f));
        if (through <= r.raised) continue;
        r.raised = through;
        r.step = step;
        r.strength =
            ConsistentInliers(v, hub_features[h], *candidate, hub_least_) >= hub_least_ ? link : 0;
      }
    });
    std::vector<size_t> next;
    for (size_t i = 0; i < reached_.size(); ++i)
      if (reached_[i].step == step && reached_[i].strength >= hub_least_) next.push_back(i);
    std::stable_sort(next.begin(), next.end(), [&](size_t a, size_t b) {
      return FinalScore(reached_[a]) > FinalScore(reached_[b]);
    });
    if (static_cast<int>(next.size()) > options_.expansion.hubs)
      next.resize(static_cast<size_t>(options_.expansion.hubs));
    hubs_.clear();
    for (size_t i : next)
      hubs_.push_back({reached_[i].id, FinalScore(reached_[i]), reached_[i].strength});
  }

  ThroughHubs Result() const {
    ThroughHubs out;
    for (const RankedResult& r : list_) out.scores.push_back(r.score);
    for (const Reached& r : reached_) {
      if (r.step < 0) continue;
      if (r.row >= 0) {
        float& s = out.scores[static_cast<size_t>(r.row)];
        s = std::max(s, r.raised);
      } else {
        out.added.push_back({r.id, r.raised, -1, 0, MatchLevel::kNone});
        out.added_similarity.push_back(r.similarity);
      }
    }
    return out;
  }

 private:
  // A hub: its image, the score what it raises stays below, and the inliers
  // of the weakest link of its chain to the query.
  struct Hub {
    uint64_t id;
    float score;
    int strength;
  };
  // An image verified against a hub: its best raised score (-2: none), and,
  // when that chain's last link has hub_least_ consistent inliers, the
  // chain's weakest link (else 0: no hub of a next step).
  struct Reached {
    uint64_t id;
    int64_t row;       // index in the list; -1 = a neighbour the list does not hold
    float similarity;  // with the query, for a neighbour the list does not hold
    float raised = -2.0f;
    int strength = 0;
    int step = -1;  // the step that raised it last
  };

  // Image `id` to be verified against hub h, raised from `base`; once per
  // pair, never a hub or a verified result.
  void Add(uint64_t id, float base, float similarity, size_t h) {
    if (was_hub_.count(id)) return;
    const auto in_list = at_.find(id);
    if (in_list != at_.end() && list_[in_list->second].level != MatchLevel::kNone) return;
    if (!tried_.emplace(id, hubs_[h].id).second) return;
    const auto [r, added] = reached_at_.emplace(id, reached_.size());
    if (added)
      reached_.push_back(
          {id, in_list == at_.end() ? -1 : static_cast<int64_t>(in_list->second), similarity});
    const auto [w, first] = work_at_.emplace(r->second, work_.size());
    if (first) work_.push_back({r->second, {}});
    work_[w->second].second.emplace_back(h, base);
  }

  float FinalScore(const Reached& r) const {
    return r.row < 0 ? r.raised : std::max(r.raised, list_[static_cast<size_t>(r.row)].score);
  }

  const FeatureReader& features_;
  const SearchOptions& options_;
  const std::vector<RankedResult>& list_;
  const int hub_least_;
  std::vector<Hub> hubs_;                    // this step's
  std::vector<size_t> todo_;                 // indexes in the list
  std::unordered_map<uint64_t, size_t> at_;  // id -> index in the list
  std::vector<Reached> reached_;
  std::unordered_map<uint64_t, size_t> reached_at_;
  std::unordered_set<uint64_t> was_hub_;
  std::set<std::pair<uint64_t, uint64_t>> tried_;  // (image, hub)
  // This step's pairs, grouped by image (index in reached_): (hub, base).
  std::vector<std::pair<size_t, std::vector<std::pair<size_t, float>>>> work_;
  std::unordered_map<size_t, size_t> work_at_;  // index in reached_ -> in work_
};

}  // namespace

ThroughHubs ScoresThroughHubs(const FeatureReader& stored_features, const SearchOptions& options,
                              const std::vector<RankedResult>& list,
                              const HubNeighbours& neighbours) {
  HubChains chains(stored_features, options, list);
  for (int step = 0; step < options.expansion.hub_steps && chains.has_hubs(); ++step)
    chains.Step(step, neighbours);
  return chains.Result();
}

QueryRanking::QueryRanking(const Store& store, const FeatureReader& stored_features,
                           const SearchVectors& vectors, const SearchOptions& options,
                           const LocalFeatures& features, const std::vector<uint8_t>& colour,
                           const ColourIndex* colours, const GreyThumbnail& thumbnail)
    : store_(store),
      stored_features_(stored_features),
      vectors_(vectors),
      options_(options),
      verify_(VerifyFor(options.rerank)),
      colour_(colour),
      colours_(colours),
      query_width_(features.width),
      query_height_(features.height),
      query_thumbnail_(thumbnail) {
  fuse_colour_ = options.fusion.colour_weight > 0 && options.fusion.colour_depth > 0 &&
                 !colour.empty() && store.stores_colour();
  if (fuse_colour_) colour_query_ = ColourIndex::Prepare(colour);
  if (options.thumbnail.weight > 0 && options.thumbnail.depth > 0 && !thumbnail.empty())
    thumbnails_.emplace(thumbnail);
  rerank_ = options.rerank.depth != 0 && features.num() >= 5;
  if (!rerank_) return;
  verified_.emplace(stored_features.InMatchingFrame(
      StrongestFeatures(features, options.rerank.verify_keypoints)));
  prepared_.emplace(*verified_, verify_);
}

float RobustSpread(std::vector<float>* sims) {
  if (sims->size() < 3) return kDefaultSimilaritySpread;
  const float centre = Median(sims);
  for (float& x : *sims) x = std::abs(x - centre);
  const float spread = 1.4826f * Median(sims);
  return spread > 1e-6f ? spread : kDefaultSimilaritySpread;
}

void QueryRanking::SetWordSimilarities(const std::vector<std::pair<uint64_t, float>>& list) {
  word_similarity_.clear();
  for (const auto& [id, a] : list) word_similarity_.emplace(id, a);
}

void QueryRanking::Fuse(std::vector<Candidate>* list, float spread) {
  if (!fuses() || list->empty()) return;
  const float w = fuse_colour_ ? options_.fusion.colour_weight * spread : 0.0f;
  const float v = word_similarity_.empty() ? 0.0f : options_.fusion.word_weight * spread;
  if (fuse_colour_) {
    // From the colour index when it holds the candidate, else from its
    // record: each read once per query, those of a list in one MultiGet.
    std::vector<uint64_t> unread;
    for (const Candidate& c : *list) {
      if (colour_of_.count(c.id)) continue;
      const std::optional<float> c_indexed =
          colours_ ? colours_->Similarity(c.id, colour_query_) : std::nullopt;
      if (c_indexed)
        colour_of_.emplace(c.id, *c_indexed);
      else
        unread.push_back(c.id);
    }
    // As the colour index would give it (its 4-bit row), so a search that
    // reads no table ranks as one that holds it.
    const auto records = store_.FindByIds(unread);
    for (size_t i = 0; i < unread.size(); ++i) {
      float c = 0.0f;
      if (records[i] && records[i]->colour.size() == static_cast<size_t>(ColourIndex::kBins))
        c = ColourIndex::RowSimilarity(ColourIndex::Row(records[i]->colour), colour_query_);
      else if (records[i])
        c = ColourSimilarity(colour_, records[i]->colour);
      colour_of_.emplace(unread[i], c);
    }
  }
  for (Candidate& c : *list) {
    float weighted = c.similarity;
    if (fuse_colour_) {
      c.colour = colour_of_.at(c.id);
      weighted += w * c.colour;
    }
    if (v > 0) {
      const auto it = word_similarity_.find(c.id);
      c.words = it == word_similarity_.end() ? 0.0f : it->second;
      weighted += v * c.words;
    }
    c.base = weighted / (1.0f + w + v);
    c.score = c.base;
  }
  SortByScore(list);
}

void QueryRanking::Rerank(std::vector<Candidate>* list, int depth_wanted,
                          const std::vector<uint64_t>& also) {
  assert(prepared_);  // reranks()
  const size_t depth =
      std::min<size_t>(list->size(), static_cast<size_t>(std::max(0, depth_wanted)));
  std::vector<uint64_t> todo;
  std::unordered_set<uint64_t> queued;
  auto queue = [&](uint64_t id) {
    if (!inliers_of_.count(id) && queued.insert(id).second) todo.push_back(id);
  };
  for (size_t i = 0; i < depth; ++i) queue((*list)[i].id);
  for (uint64_t id : also) queue(id);
  std::vector<int> found(todo.size(), -1);
  std::vector<char> weak(todo.size(), 0);
  std::vector<std::optional<Measured>> measured(todo.size());
  ParallelFor(todo.size(), options_.threads, [&](size_t t) {
    const auto candidate = stored_features_.Read(todo[t], stored_features_.matching_frame());
    if (!candidate) return;
    Verification v = prepared_->Verify(*candidate);
    found[t] = v.inliers;
    if (!StronglyVerified(v, *verified_, *candidate, options_.rerank)) {
      weak[t] = WeaklyVerified(v, *verified_, *candidate, options_.rerank);
      return;
    }
    LocalFeatures keypoints;
    keypoints.width = candidate->width;
    keypoints.height = candidate->height;
    keypoints.keypoints = candidate->keypoints;
    measured[t] = Measured{std::move(v), std::move(keypoints)};
  });
  for (size_t t = 0; t < todo.size(); ++t) {
    inliers_of_[todo[t]] = found[t];
    if (weak[t]) weak_.insert(todo[t]);
    if (measured[t]) measured_.emplace(todo[t], std::move(*measured[t]));
  }
  for (Candidate& c : *list) {
    c.score = c.base;
    if (HasEvidence(c.id)) c.score = std::clamp(CombinedScore(c.base, inliers(c.id)), -1.0f, 1.0f);
  }
  SortByScore(list);
}

void QueryRanking::Correlate(std::vector<Candidate>* list, const std::vector<uint64_t>& also) {
  assert(thumbnails_);                               // correlates()
  std::unordered_map<uint64_t, float> thumbnail_of;  // id -> t (-1: no stored thumbnail)
  std::vector<uint64_t> todo;                        // correlated in full
  auto queue = [&](uint64_t id) {
    if (thumbnail_of.emplace(id, -1.0f).second) todo.push_back(id);
  };
  const size_t depth =
      std::min<size_t>(list->size(), static_cast<size_t>(options_.thumbnail.depth));
  const size_t head = std::min(depth, kFullCorrelationDepth);
  for (size_t i = 0; i < head; ++i) queue((*list)[i].id);
  std::unordered_set<uint64_t> in_list;
  for (const Candidate& c : *list) in_list.insert(c.id);
  for (uint64_t id : also)
    if (in_list.count(id)) queue(id);
  const size_t full = todo.size();
  // Deeper candidates are compared at half resolution first.
  for (size_t i = head; i < depth; ++i) queue((*list)[i].id);
  const std::vector<std::optional<std::string>> stored = store_.GetThumbnails(todo);
  std::vector<GreyThumbnail> decoded(todo.size());
  for (size_t i = 0; i < todo.size(); ++i) {
    if (!stored[i]) continue;
    try {
      decoded[i] = DecodeGreyThumbnail(*stored[i]);
    } catch (const encoding::CorruptValue& e) {
      throw StoreError(StoreError::Kind::kCorrupt, "database " + store_.path() + ": image id " +
                                                       std::to_string(todo[i]) + ": " + e.what() +
                                                       "; run `lookalike verify`");
    }
  }
  // Each correlation is independent of the others, so they run on the
  // search's threads (ThumbnailMatcher may be called from several).
  std::vector<std::pair<float, size_t>> deep;  // (coarse t, index in todo)
  for (size_t i = full; i < todo.size(); ++i)
    if (!decoded[i].empty()) deep.emplace_back(0.0f, i);
  ParallelFor(deep.size(), options_.threads,
              [&](size_t k) { deep[k].first = thumbnails_->CoarseMatch(decoded[deep[k].second]); });
  const size_t keep = std::min(deep.size(), kDeepCorrelations);
  std::partial_sort(deep.begin(), deep.begin() + keep, deep.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<size_t> correlate;
  for (size_t i = 0; i < full; ++i)
    if (!decoded[i].empty()) correlate.push_back(i);
  for (size_t k = 0; k < keep; ++k) correlate.push_back(deep[k].second);
  std::vector<float> t(correlate.size());
  ParallelFor(correlate.size(), options_.threads,
              [&](size_t k) { t[k] = thumbnails_->Match(decoded[correlate[k]]); });
  for (size_t k = 0; k < correlate.size(); ++k) thumbnail_of[todo[correlate[k]]] = t[k];
  const float weight = options_.thumbnail.weight;
  for (Candidate& c : *list) {
    const auto it = thumbnail_of.find(c.id);
    if (it == thumbnail_of.end()) continue;
    c.thumbnail = it->second;
    if (HasEvidence(c.id) || c.thumbnail <= kThumbnailThreshold) continue;
    const float evidence =
        weight * (c.thumbnail - kThumbnailThreshold) / (1.0f - kThumbnailThreshold);
    c.score = std::clamp(1.0f - (1.0f - c.score) * (1.0f - evidence), -1.0f, 1.0f);
  }
  SortByScore(list);
}

bool QueryRanking::Expand(const float* query, const std::vector<Candidate>& list,
                          std::vector<float>* expanded) const {
  const int64_t dim = vectors_.dim();
  std::vector<uint64_t> ids;
  for (const Candidate& c : list) {
    if (static_cast<int>(ids.size()) == options_.expansion.results) break;
    if (Verified(c.id)) ids.push_back(c.id);
  }
  if (ids.empty()) return false;
  std::vector<float> neighbours(ids.size() * static_cast<size_t>(dim));
  vectors_.Read(ids, neighbours.data());
  std::vector<float> sum(query, query + dim);
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t j = 0; j < dim; ++j) sum[j] += neighbours[i * dim + j];
  double norm2 = 0;
  for (float x : sum) norm2 += double{x} * x;
  const float inv = static_cast<float>(1.0 / std::sqrt(std::max(norm2, 1e-30)));
  for (float& x : sum) x *= inv;
  *expanded = std::move(sum);
  return true;
}

int QueryRanking::inliers(uint64_t id) const {
  const auto it = inliers_of_.find(id);
  return it == inliers_of_.end() ? -1 : it->second;
}

bool QueryRanking::HasEvidence(uint64_t id) const { return Verified(id) || weak_.count(id) > 0; }

bool QueryRanking::Verified(uint64_t id) const { return measured_.count(id) > 0; }

std::vector<MatchEvidence> QueryRanking::Evidence(const std::vector<uint64_t>& ids) const {
  std::vector<MatchEvidence> out(ids.size());
  std::vector<uint64_t> aligned;  // ids whose thumbnails are compared
  std::vector<size_t> at;         // their index in ids
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto it = measured_.find(ids[i]);
    if (it == measured_.end()) {
      out[i].inliers = std::max(0, inliers(ids[i]));
      continue;
    }
    const Measured& m = it->second;
    out[i] = MeasureMatch(m.verification, *verified_, m.keypoints, options_.rerank.min_inliers);
    if (!query_thumbnail_.empty() && out[i].homography) {
      aligned.push_back(ids[i]);
      at.push_back(i);
    }
  }
  if (aligned.empty()) return out;
  const std::vector<std::optional<std::string>> stored = store_.GetThumbnails(aligned);
  for (size_t k = 0; k < aligned.size(); ++k) {
    if (!stored[k]) continue;
    GreyThumbnail thumbnail;
    try {
      thumbnail = DecodeGreyThumbnail(*stored[k]);
    } catch (const encoding::CorruptValue& e) {
      throw StoreError(StoreError::Kind::kCorrupt, "database " + store_.path() + ": image id " +
                                                       std::to_string(aligned[k]) + ": " +
                                                       e.what() + "; run `lookalike verify`");
    }
    const Measured& m = measured_.at(aligned[k]);
    MeasureThumbnails(query_thumbnail_, static_cast<int>(query_width_),
                      static_cast<int>(query_height_), thumbnail,
                      static_cast<int>(m.keypoints.width), static_cast<int>(m.keypoints.height),
                      *m.verification.homography, &out[at[k]]);
  }
  return out;
}

}  // namespace lookalike
