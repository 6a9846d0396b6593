// The ranking stage of one query: how the VLAD short list (the candidates an
// inner-product search of the index returns, best first) becomes the ranked
// list Searcher::SearchQuery returns. Three named steps, in the order the
// searcher runs them:
//
//   1. Fuse          re-orders the short list by the global similarity b;
//   2. Rerank        spatially verifies the top `rerank.depth` candidates against
//                    the query's local features and re-orders by the score;
//   3. Expand        averages the query with its verified results (average
//                    query expansion); the searcher searches that vector
//                    again and runs steps 1 and 2 on the new short list;
//   4. Correlate     raises the unverified candidates whose thumbnail
//                    correlates with the query's (the first
//                    thumbnail.depth, the colour and thumbnail candidates
//                    and the word list's first thumbnail.depth).
//
// The score (Hit::score), documented here once:
//
//   s      cosine of the query's and the candidate's VLAD vectors, [-1, 1]
//          (the expanded query after expansion; Hit::similarity);
//   c      colour similarity of query and candidate (indexer/colour.h,
//          Bhattacharyya coefficient, [0, 1], from the candidate's 4-bit
//          row of the colour index when the search index holds one:
//          search/colour_index.h; Hit::colour);
//   a      word similarity of query and candidate (search/word_index.h) over
//          the query's best, [0, 1]; 0 for a candidate beyond the word
//          list's depth (Hit::words);
//   w      fusion.colour_weight x spread, where spread = 1.4826 x the median
//          absolute deviation of the query's s over the collection (a
//          robust standard deviation: a query's few true matches must not
//          inflate it, or colour would outweigh the VLAD evidence of a
//          near-duplicate): over the short list when it holds the whole
//          collection, else over a fixed sample of up to 1,000 of its images
//          (Searcher), as the top of a large collection's list is a narrower
//          slice of it and would weigh colour less the larger the
//          collection; kDefaultSimilaritySpread for fewer than 3 images or a
//          spread below 1e-6. Colour is weighed against how much VLAD
//          similarities vary, which PCA-whitening changes six-fold
//          (search/README.md, "How search ranks");
//   v      fusion.word_weight x spread, the same unit;
//   b      = (s + w c + v a) / (1 + w + v), the global similarity; without
//          colour (weight 0, depth 0, no query colour, or a schema-1
//          database) w = 0, without word fusion (weight 0, no word index)
//          v = 0, and b = s without either.
//          Dividing by 1 + w + v keeps b in [-1, 1] without clamping, which would
//          tie near-duplicates at 1; b is 1 only for the image itself (just
//          below 1 in a compact database, whose vectors come from quantised
//          descriptors);
//   g      = inliers / (inliers + 20), the spatial evidence of a verified
//          candidate (RANSAC inliers >= rerank.min_inliers; Hit::inliers);
//   t      best correlation of the query's thumbnail with the candidate's,
//          the query placed as a crop (search/thumbnail_match.h), [-1, 1];
//          only for candidates stored with a thumbnail (Hit::thumbnail);
//   h      = thumbnail.weight x (t - T) / (1 - T) for t > T =
//          kThumbnailThreshold (0.86), else 0: the evidence of a
//          correlation that copies reach (0.87-0.97 for the dev set's tiny
//          crops) and unrelated images rarely do (search/README.md,
//          "Thumbnail correlation");
//   score  = 1 - (1 - b)(1 - g) for a verified candidate, clamped to [-1, 1],
//          else 1 - (1 - b)(1 - h): a noisy-or of the global similarity and
//          the evidence, so it equals b without evidence, rises with the
//          inliers (or the correlation), and is (close to) 1 for the image
//          itself.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "indexer/grey_thumbnail.h"
#include "indexer/local_features.h"
#include "indexer/search_vectors.h"
#include "search/colour_index.h"
#include "search/match_level.h"
#include "search/search_options.h"
#include "search/thumbnail_match.h"
#include "search/verifier.h"
#include "storage/store.h"

namespace lookalike {

// The colour weight's unit when a short list has too few candidates (or too
// little variation) for a spread: the typical spread of full-VLAD similarities.
inline constexpr float kDefaultSimilaritySpread = 0.02f;

// 1.4826 x the median absolute deviation of `similarities` (reordered): the
// unit of the fusion weights, w and v above; kDefaultSimilaritySpread for
// fewer than 3 values or a spread below 1e-6.
float RobustSpread(std::vector<float>* similarities);

// The thumbnail correlation T above which a candidate gains evidence (h).
// Chosen with thumbnail.weight by the tune half's mAP summed over the
// distractor curve (97 to 10,097 images): lower lets the generic layout of
// outdoor photos (sky over a building correlates at 0.85-0.91) outrank
// other views of a scene; higher loses tiny copies at 0.87-0.92
// (search/README.md, "Thumbnail correlation").
inline constexpr float kThumbnailThreshold = 0.86f;
// Correlate compares in full the thumbnails of the first this many
// candidates and of the colour candidates; deeper ones (to
// --thumbnail-depth) are compared at half resolution first, and only the
// kDeepCorrelations best of them in full: the same results as comparing
// all in full, at a fraction of the cost.
inline constexpr size_t kFullCorrelationDepth = 100;
inline constexpr size_t kDeepCorrelations = 50;

// One result of a query's final list (the mirrored search's verified
// results merged in), as verification through hubs sees it.
struct RankedResult {
  uint64_t id = 0;
  float score = 0;
  int inliers = -1;    // RANSAC inliers with the query or its mirror image; -1 = none
  int consistent = 0;  // of those, the most that turn and scale alike (ConsistentInliers)
  // Its match level: above kNone when verified against either.
  MatchLevel level = MatchLevel::kNone;
};

// An image near a hub in the search index, for verification through hubs:
// its id and its VLAD similarity with the query (Hit::similarity of the
// query as it is, not expanded).
struct HubNeighbour {
  uint64_t id = 0;
  float similarity = 0;
};
// The `n` images nearest image `hub` in the search index (not the hub
// itself), nearest first.
using HubNeighbours = std::function<std::vector<HubNeighbour>(uint64_t hub, int n)>;

// What verification through hubs found: each result of the list's score,
// raised or not, and the hubs' neighbours it raised that the list does not
// hold (score raised, inliers -1, level none).
struct ThroughHubs {
  std::vector<float> scores;
  std::vector<RankedResult> added;
  std::vector<float> added_similarity;  // each added result's HubNeighbour::similarity
};

// Verification through the query's hubs, on its final list `list` (best
// first): its first expansion.hubs results verified as another view or a
// part (MatchLevel kView, kPart: a copy shows what the query does, so what
// verifies against it verifies against the query) with at least
// expansion.hub_inliers inliers that turn and scale alike
// (rerank.min_inliers when 0; a chance fit through 8 inliers has 2 or 3
// such) are matched, as the query is, against the first
// expansion.hub_depth results that are not verified, and each against its
// own expansion.hub_neighbours nearest images in the search index
// (`neighbours`; none when it is empty or the option 0) that are not
// verified results, wherever the query's list ranks them. One with at
// least rerank.min_inliers inliers against a hub gains the evidence of the
// weaker link of its best chain, min(inliers query-hub, inliers
// hub-result), in a noisy-or (CombinedScore) with its score (a neighbour:
// with its VLAD similarity, so that its raised score does not depend on
// how long the list is), but never rises to its hub's score: what a hub
// verifies ranks below the hub. With expansion.hub_steps 2, the first
// expansion.hubs results raised with at least hub_inliers consistent
// inliers against their hub are hubs of a second step, with their chain's
// weakest link and raised score. Another view of a scene often shares
// more with a verified view of it than with the query (a landmark from
// further left, a symmetric facade verified through the query's mirror
// image, the next frames of a sequence). The results stay unverified: no
// level (what it shares with the query itself is too little), no
// expansion. Nothing changes when expansion.hubs is 0 or no result
// qualifies as a hub. Throws StoreError or encoding::CorruptValue (corrupt
// stored features).
ThroughHubs ScoresThroughHubs(const FeatureReader& stored_features, const SearchOptions& options,
                              const std::vector<RankedResult>& list,
                              const HubNeighbours& neighbours = {});

// True when `v` (query against candidate) is verified: at least
// options.min_inliers inliers, of which at least options.min_consistent
// (when > 0) turn and scale alike (ConsistentInliers).
bool StronglyVerified(const Verification& v, const LocalFeatures& query,
                      const LocalFeatures& candidate, const RerankOptions& options);

// True when `v` (query against candidate) is not verified (StronglyVerified)
// but has at least options.weak_inliers (> 0) inliers, of which at least
// options.weak_consistent turn and scale alike (ConsistentInliers): the few
// inliers another shot of a 3-D scene keeps under one homography, told from
// a chance fit by their keypoints (so more inliers with as many agreeing
// never count for less). Such a candidate is scored by
// its inliers like a verified one, but is not verified: no level, no
// expansion, no hub.
bool WeaklyVerified(const Verification& v, const LocalFeatures& query,
                    const LocalFeatures& candidate, const RerankOptions& options);

// The noisy-or score of a verified candidate: 1 - (1 - base)(1 - g) with
// g = inliers / (inliers + 20) (see above; not clamped here).
float CombinedScore(float base, int inliers);

// One database image on a query's short list.
struct Candidate {
  uint64_t id = 0;       // image id
  float similarity = 0;  // s: VLAD cosine with the (possibly expanded) query
  float colour = -1;     // c; -1 = colour not used
  float base = 0;        // b
  float score = 0;       // b, or the noisy-or once verified
  float words = -1;      // a; -1 = word fusion not used
  float thumbnail = -1;  // t; -1 = not compared (or no stored thumbnail)
};

// The ranking state of one query: the query's features and colour, and what
// it has learned about candidates so far (colour similarities and inliers,
// kept across the search before and after expansion, so no candidate is
// read or verified twice). Borrows `store`, `stored_features`, `vectors`,
// `options`, `features` and `colour`, which must outlive it. Not thread-safe (one per query);
// Rerank verifies on OpenMP threads inside.
class QueryRanking {
 public:
  // `options` must have passed SearchOptions::Validate (Searcher::Open).
  // `colours` (may be null) gives candidates' colour without reading their
  // records. `thumbnail`: the query's (kQueryThumbnailSide; copied), empty =
  // no correlation.
  QueryRanking(const Store& store, const FeatureReader& stored_features,
               const SearchVectors& vectors, const SearchOptions& options,
               const LocalFeatures& features, const std::vector<uint8_t>& colour,
               const ColourIndex* colours = nullptr,
               const GreyThumbnail& thumbnail = GreyThumbnail());

  // True when Fuse changes the order: colour fusion (weight and depth > 0,
  // the query has a colour histogram and the database stores colour) or
  // word fusion (SetWordSimilarities gave any).
  bool fuses() const { return fuse_colour_ || !word_similarity_.empty(); }
  // True when Fuse weighs colour (as above).
  bool fuses_colour() const { return fuse_colour_; }
  // The query's colour prepared for the colour index (empty unless
  // fuses_colour()): what the searcher looks up colour candidates with.
  const ColourIndex::Query& colour_query() const { return colour_query_; }

  // The word index's list for the query (id, a), for word fusion; a
  // candidate it does not list gets a = 0.
  void SetWordSimilarities(const std::vector<std::pair<uint64_t, float>>& list);
  // True when Rerank and Expand run: rerank.depth != 0 and the query has at least 5
  // local features (fewer cannot fit a homography).
  bool reranks() const { return rerank_; }

  // Step 1: sets every candidate's colour, word similarity, base and score
  // from its VLAD similarity, its colour (from `colours`, else its record)
  // and the word list, then stable-sorts by score. `spread` is the unit of
  // the weights (RobustSpread of the query's VLAD similarities over the
  // collection: w and v above). Does nothing unless fuses().
  void Fuse(std::vector<Candidate>* list, float spread);

  // Step 2: verifies the top `depth` candidates (RerankDepth) and those of
  // `also` (the VLAD order's and the word index's heads) not verified yet
  // (their stored features against the query's, PreparedQuery), then sets every
  // candidate's score (noisy-or when verified with >= min_inliers) and
  // stable-sorts by it. Only when reranks(). Throws StoreError or
  // encoding::CorruptValue (corrupt stored features).
  void Rerank(std::vector<Candidate>* list, int depth, const std::vector<uint64_t>& also = {});

  // Step 3: the query's search vector (vectors.dim() floats) plus the
  // search vectors of the first `expansion.results` verified candidates of `list`,
  // L2-normalised, into `expanded` (a search vector: averaged where the
  // index compares, after PCA-whitening when there is one). Only verified
  // results are averaged: unverified neighbours would drag the query towards
  // false matches. Returns false (and leaves `expanded` alone) when no
  // candidate qualifies.
  bool Expand(const float* query, const std::vector<Candidate>& list,
              std::vector<float>* expanded) const;

  // True when Correlate runs: thumbnail.weight and thumbnail.depth > 0 and
  // the query has a thumbnail.
  bool correlates() const { return thumbnails_.has_value(); }

  // Step 4: correlates the thumbnails of the first thumbnail.depth
  // candidates of `list` and of those of `also` that `list` holds (the
  // colour and thumbnail candidates, the word list's first thumbnail.depth),
  // read in one MultiGet, then raises every
  // unverified candidate's score by its evidence h (noisy-or, see above) and
  // stable-sorts by score. Run it after the last Rerank: Rerank recomputes
  // scores from b. Only when correlates(). Throws StoreError (a corrupt
  // thumbnail).
  void Correlate(std::vector<Candidate>* list, const std::vector<uint64_t>& also);

  // RANSAC inliers of a candidate Rerank verified, whether or not they
  // were enough; -1 = not tried (or no stored features).
  int inliers(uint64_t id) const;
  // Rerank verified it: StronglyVerified.
  bool Verified(uint64_t id) const;

  // The match evidence of each of `ids` (search/match_level.h) against the
  // query: for a candidate Rerank verified (StronglyVerified), its
  // geometry and, when both sides have a thumbnail, the aligned thumbnail
  // correlation (the stored thumbnails read in one MultiGet); for any other,
  // evidence with `verified` false. Throws StoreError (a corrupt thumbnail).
  std::vector<MatchEvidence> Evidence(const std::vector<uint64_t>& ids) const;

 private:
  // Verified, or weakly verified (WeaklyVerified): scored by its inliers.
  bool HasEvidence(uint64_t id) const;

  // What Rerank found for a verified candidate, for Evidence: the
  // verification and the candidate's keypoints (no descriptors).
  struct Measured {
    Verification verification;
    LocalFeatures keypoints;
  };

  const Store& store_;
  const FeatureReader& stored_features_;
  const SearchVectors& vectors_;
  const SearchOptions& options_;
  // options.rerank.verify, min_matches raised to min_inliers.
  VerifyOptions verify_;
  // What verification matches: the query's strongest
  // options.rerank.verify_keypoints features (StrongestFeatures), their descriptors
  // in the stored features' matching frame; only when reranks().
  std::optional<LocalFeatures> verified_;
  // verified_, prepared once for all candidates.
  std::optional<PreparedQuery> prepared_;
  const std::vector<uint8_t>& colour_;
  const ColourIndex* colours_;
  ColourIndex::Query colour_query_;  // colour_, prepared for colour rows
  bool fuse_colour_ = false;
  bool rerank_ = false;
  std::unordered_map<uint64_t, float> colour_of_;        // id -> c
  std::unordered_map<uint64_t, float> word_similarity_;  // id -> a
  std::unordered_map<uint64_t, int> inliers_of_;         // id -> inliers (-1: no stored features)
  std::unordered_map<uint64_t, Measured> measured_;      // verified ids only
  std::unordered_set<uint64_t> weak_;                    // weakly verified ids
  uint32_t query_width_ = 0, query_height_ = 0;          // the query's keypoint frame
  GreyThumbnail query_thumbnail_;                        // the query's (may be empty)
  std::optional<ThumbnailMatcher> thumbnails_;           // the query's; only when correlates()
};

}  // namespace lookalike
