// The options of a search, one group per stage of the ranking
// (search/ranking.h): fusion of the short list, spatial re-ranking, thumbnail
// correlation, query expansion; and the search index's. Each group checks
// its own fields (Validate, naming the field and its `lookalike search`
// flag); SearchOptions::Validate runs them all, once, in Searcher::Open.
#pragma once

#include "indexer/image_file.h"
#include "indexer/vlad.h"
#include "search/match_level.h"
#include "search/vector_index.h"
#include "search/verifier.h"

namespace lookalike {

// Fusion: the global similarity b of the short list mixes the VLAD
// similarity with colour and with the word index's similarity (formula and
// why: search/ranking.h).
struct FusionOptions {
  // The top `colour_depth` VLAD results are ranked by b, which mixes in the
  // colour similarity with a weight of colour_weight x the robust spread of
  // the VLAD similarities, before verification picks its candidates from
  // that order. Colour is what texture misses (rooms, video, landmarks in
  // other light). 0 = off; off by itself for databases without colour
  // (schema 1).
  float colour_weight = 14.0f;  // --colour-weight, [0, 100]
  int colour_depth = 1000;      // --colour-depth, 0..100000
  // Colour candidates: the images whose colour is most like the query's,
  // over the whole collection (search/colour_index.h), join the fused list
  // wherever VLAD ranked them. A thumbnail-sized, blurred copy keeps its
  // colours when its texture is gone; among 10,000 unrelated images its VLAD
  // rank is random. 0 = off; needs colour fusion, and a persisted index that
  // holds the colour table.
  int colour_candidates = 50;  // --colour-candidates, 0..10000
  // b also mixes in the word index's similarity of each candidate
  // (search/word_index.h, divided by the query's best), weighed like colour
  // in units of the robust spread. Shared local features are what a view of
  // the same place keeps when its global statistics drown among thousands
  // of images. 0 = off; off by itself without a word index.
  float word_weight = 7.0f;  // --word-weight, [0, 100]
  // ... in collections of this many images and more. In smaller ones the
  // word list's head is still verified (RerankOptions::word_depth), but
  // its similarity is not fused: among a few hundred images the VLAD order
  // already holds what shares local features, and a word score mostly
  // lifts unrelated pictures that share common words (mAP verified only /
  // fused on the dev set among unrelated images: 0.936 / 0.911 at 97
  // images, 0.916 / 0.900 at 437, 0.915 / 0.911 at 997, 0.901 / 0.911 at
  // 2,097, 0.897 / 0.924 at 10,097). 0 = fused at any size.
  int64_t word_min_images = 1000;  // --word-fusion-min-images, >= 0
  // Multiple assignment of the query's words: each query descriptor joins
  // up to this many of its coarse word's sub-words (the nearest, and those
  // within kMultipleAssignmentRatio of its distance;
  // WordVocabulary::EncodeMultiple), for the word list (fusion and the
  // verified word head). The database's words are not changed. 1 = off.
  int word_assignments = 1;  // --word-assignments, 1..8
  // Throws std::invalid_argument naming the field and its flag.
  void Validate() const;
};

// Spatial re-ranking: candidates are matched against the query's local
// features (PreparedQuery); those with >= min_inliers RANSAC inliers have
// their score raised by that evidence (search/ranking.h).
struct RerankOptions {
  // The top `depth` of the fused list are verified: depth 50 finds copies
  // VLAD ranks low. 0 = off (no verification, no expansion). -1 = kRerank
  // without a word-index head to verify, kRerankWithWords with one, which
  // finds part of what the deeper list did (RerankDepth).
  int depth = -1;  // --rerank, -1..10000
  // Also verified: the top `vlad_depth` results by VLAD similarity alone,
  // wherever colour fusion put them, so that colour can never push a
  // candidate with strong local evidence out of the verified set (a grey
  // copy of a colour photo is its original's nearest VLAD neighbour but
  // falls to rank 250-550 of 10,000 after fusion). 0 = off. -1 = kVladHead
  // when the query has no word-index head to verify (no word index, or
  // word_depth 0), else 0: the word head finds what the VLAD head did.
  // VladHeadDepth resolves it.
  int vlad_depth = -1;  // --rerank-vlad, -1..10000
  // Also verified: the top `word_depth` images of the selective first stage
  // (search/word_index.h: shared fine visual words whose residual
  // signatures agree), wherever the VLAD and colour order put them. 0 = off.
  int word_depth = 40;  // --rerank-words, 0..10000
  // Postings the word stage reads per query at most: its most selective
  // words first, the commonest skipped beyond the bound
  // (StoredWordIndex::Search). A query's lists grow with the collection;
  // this keeps their cost flat past the size where they reach it. 4 million
  // is never reached at 10,000 images (some 0.3 million), seldom at
  // 100,000 (mAP 0.9079 -> 0.9075 on the dev set among 100,000 generated
  // photos), and at 1,000,000 it took the median query from 341 to 232 ms
  // for 0.011 mAP and 0.013 of copies (0.899 -> 0.888, 0.948 -> 0.934):
  // bench/results/2026-11-29-search-a-million-measured.md. 0 = all.
  int64_t word_postings = 4000000;  // --word-postings, 0..10^10
  // Inliers a verified result needs: 8 is above what unrelated pairs reach
  // (at most 7 over the dev set's 6,000 one-to-one matched pairs). >= 5:
  // four matches always fit a homography.
  int min_inliers = 8;  // --min-inliers
  // Of those inliers, how many must turn and scale alike
  // (ConsistentInliers, search/verifier.h) for the result to count as
  // verified (a level, a hub, a score from its inliers); 0 = no such
  // condition, else 2..min_inliers. A chance homography through unrelated
  // images keeps 8-10 inliers of which 2-5 agree, and there are more of
  // them the larger the collection; another shot of a scene keeps inliers
  // that agree. 6 was chosen on the tune half of the dev set
  // (search/match_levels.md, "Chance fits").
  int min_consistent = 6;  // --min-consistent
  // Weak verification (WeaklyVerified, search/ranking.h): a candidate that
  // is not verified but has weak_inliers or more inliers of which at least
  // weak_consistent turn and scale alike is scored by its inliers (but gets
  // no level). Chance fits through unrelated images reach 5-7 inliers whose
  // keypoints disagree; another shot of a 3-D scene keeps a few that agree.
  // Chosen on the tune half of the dev set (search/README.md, "Weak
  // verification"). weak_inliers 0 = off (as is any value >= min_inliers);
  // else 5..10000, and weak_consistent 2..weak_inliers.
  int weak_inliers = 6;     // --weak-inliers
  int weak_consistent = 5;  // --weak-consistent
  // Verification matches at most this many of the query's features, its
  // strongest (StrongestFeatures); 0 = all. Bounds the cost of a detailed
  // query, which grows with its feature count times each candidate's. 2,000
  // changed no dev-set result with or without 10,000 distractors; 1,000
  // cost 0.008 mAP there.
  int verify_keypoints = 2000;  // --verify-keypoints, 0..1000000
  // How a pair is verified (--match-dims, --ransac).
  VerifyOptions verify = CheaperVerifyOptions();
  // Throws std::invalid_argument naming the field and its flag.
  void Validate() const;
};

// Thumbnail correlation (search/thumbnail_match.h): an unverified candidate
// whose stored thumbnail correlates with the query's above
// kThumbnailThreshold has its score raised by that evidence, weighted by
// `weight` (search/ranking.h, "t"). It finds tiny, blurred, cropped copies
// that keep too few local features to verify; chosen on the tune half of
// the dev set over the distractor curve. Off by itself for images stored
// without a thumbnail (search/README.md, "Thumbnail correlation").
struct ThumbnailOptions {
  float weight = 0.7f;  // --thumbnail-weight, [0, 1]; 0 = off
  // ... for the first `depth` candidates of the ranked list and of the word
  // index's (wherever fusion ranked them: a blurred copy may share too few
  // local features with its original to verify), and the colour and
  // thumbnail candidates.
  int depth = 100;  // --thumbnail-depth, 0..10000
  // Thumbnail candidates: the images whose tiny image (8 x 8 grey levels of
  // the thumbnail, search/tiny_index.h) correlates best with the query's,
  // over the whole collection, join the short list and the thumbnail
  // correlation wherever VLAD ranked them: a shrunk, blurred copy keeps its
  // layout of light and dark when its texture is gone. 0 = off; needs
  // thumbnail correlation and a persisted index that holds the tiny images.
  int candidates = 20;  // --thumbnail-candidates, 0..10000
  // Throws std::invalid_argument naming the field and its flag.
  void Validate() const;
};

// Average query expansion: the query vector plus the vectors of up to
// `results` verified results is searched again (and re-ranked). Needs
// re-ranking. With colour fusion it still adds about 0.001 mAP on every
// dev-set seed.
struct ExpansionOptions {
  int results = 5;  // --expansion, 0..100; 0 = off
  // Verification through verified results (ScoresThroughHubs, on the
  // final list): the first `hubs` results verified as another view or a
  // part (not a copy) with at least `hub_inliers` inliers that turn and
  // scale alike (0 = rerank.min_inliers) are matched, as the query
  // is, against the first `hub_depth` unverified results; one verified
  // against a hub gains the evidence of the weaker link of that chain,
  // ranking below the hub. Another view of a scene often shares more with a
  // verified view than with the query. Its level stays none: a level says
  // what was verified against the query itself. 0 = off.
  int hubs = 3;         // --hubs, 0..20
  int hub_depth = 30;   // --hub-depth, 1..1000
  int hub_inliers = 0;  // --hub-inliers, 0 or rerank.min_inliers..10000
  // Each hub is also matched against its own `hub_neighbours` nearest images
  // in the vector index (its stored search vector as the query) that are not
  // verified results, wherever the query's list ranks them, and a neighbour
  // the list does not hold joins it: a scene's other photos are often near
  // a view of it and far from the query. 0 = off.
  int hub_neighbours = 0;  // --hub-neighbours, 0..1000
  // 2: the first `hubs` results raised through a hub with `hub_inliers`
  // consistent inliers are hubs too, one step further (their chain's
  // weakest link as their inliers). 1 = hubs are verified results only.
  int hub_steps = 2;  // --hub-steps, 1..2
  // Throws std::invalid_argument naming the field and its flag.
  void Validate() const;
};

struct SearchOptions {
  int k = 10;                        // -k: results per query, 1..100000
  Backend backend = Backend::kAuto;  // --backend
  ImageFileLimits limits;            // how a query file is read
  // Pasted pictures: a query that is a picture pasted onto a uniform border
  // (rotated, in perspective; indexer/pasted_picture.h) is also searched
  // with the picture rectified, and each result keeps the better of its two
  // scores (search/README.md, "Pasted pictures").
  bool pasted_views = true;  // --pasted-views
  // Mirrored copies: the query's mirror image (its own features mirrored,
  // indexer/mirror_features.h; no second extraction) is searched too,
  // without expansion or thumbnail correlation, and its verified hits join
  // the list (search/match_levels.md, "Mirrored copies").
  bool mirrored = true;  // --mirrored
  // Threads for verification; 0 = all hardware threads. >= 0.
  int threads = 0;
  FusionOptions fusion;
  RerankOptions rerank;
  ThumbnailOptions thumbnail;
  ExpansionOptions expansion;
  // Search index: the persisted one is used (reconciled in memory if stale);
  // these options only decide the kind when none is usable and it is built
  // from the stored vectors. index.nprobe > 0 (--nprobe) overrides the lists
  // an ivfsq index visits per query.
  VectorIndexOptions index;
  // Hold every image's colour row and tiny image in memory (208 bytes an
  // image), read once at open: right for many queries (serve, a folder).
  // Off, each query reads them from the persisted index instead, a pass
  // over it (at 1,000,000 images ~0.2 s a query, 208 MB less memory): what
  // `lookalike search` of a single image file does. The results are the same.
  bool tables_in_memory = true;
  // Match levels: how each hit's level is decided from its evidence
  // (search/match_level.h), and the lowest level a hit must reach to be
  // returned (kNone = every hit). The filter keeps the hits of the first k
  // that reach it (a verified match ranks above unverified look-alikes).
  MatchLevelOptions levels;
  MatchLevel min_level = MatchLevel::kNone;  // --min-level
  // Throws std::invalid_argument naming the offending field (and its flag).
  void Validate() const;
};

// The fused list's verified depth when RerankOptions::depth is -1: without
// a word-index head (measured on the dev set alone), and beside one: 20
// with a word head of 40 ranks every dev-set query as 30 and 50 did, at
// 2,097, 10,097 and 100,097 images, for fewer verified pairs.
inline constexpr int kRerank = 50;
inline constexpr int kRerankWithWords = 20;

// How many of the fused list's first candidates are verified: `depth` when
// set (>= 0), else kRerank without a word head and kRerankWithWords with one.
inline int RerankDepth(int depth, bool word_head) {
  if (depth >= 0) return depth;
  return word_head ? kRerankWithWords : kRerank;
}

// The VLAD head's depth when RerankOptions::vlad_depth is -1 and no word
// head is verified: half the re-rank depth, chosen before measuring.
inline constexpr int kVladHead = 25;

// How many of the VLAD order's first candidates are verified: `vlad_depth`
// when set (>= 0), else kVladHead without a word head and 0 with one.
inline int VladHeadDepth(int vlad_depth, bool word_head) {
  if (vlad_depth >= 0) return vlad_depth;
  return word_head ? 0 : kVladHead;
}

}  // namespace lookalike
