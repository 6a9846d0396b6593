// Query side: loads a database's vectors into a FAISS inner-product index and
// ranks database images for query images encoded exactly as the database was.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "indexer/grey_thumbnail.h"
#include "indexer/image_file.h"
#include "indexer/model.h"
#include "indexer/vlad.h"
#include "search/vector_index.h"
#include "search/verifier.h"
#include "storage/store.h"

namespace lookalike {

struct SearchOptions {
  int k = 10;  // results per query; 1..100000
  Backend backend = Backend::kAuto;
  ImageFileLimits limits;
  // Spatial re-ranking: the top `rerank` VLAD results are matched against
  // the query's local features (PreparedQuery); those with >= min_inliers
  // RANSAC inliers have their score raised by that evidence (the score
  // formula: search/ranking.h). 0 = off. Defaults measured on the dev set (search/README.md,
  // "Re-ranking and query expansion"): depth 50 finds copies VLAD ranks low; 8 inliers is above
  // what unrelated pairs reach (at most 7 over the dev set's 6,000 one-to-one matched pairs).
  // -1 (the default) = kRerank without a word-index head to verify, and
  // kRerankWithWords with one, which finds part of what the deeper list
  // did (RerankDepth; search/README.md, "Selective first stage").
  int rerank = -1;
  // Also verified: the top `rerank_vlad` results by VLAD similarity alone,
  // wherever colour fusion put them, so that colour can never push a
  // candidate with strong local evidence out of the verified set (a grey
  // copy of a colour photo is its original's nearest VLAD neighbour but
  // falls to rank 250-550 of 10,000 after fusion: bench/README.md,
  // "Distractors"). 0 = off; needs rerank != 0. -1 (the default) =
  // kVladHead when the query has no word-index head to verify (no word
  // index, or rerank_words 0), else 0: the word head finds what the VLAD
  // head did (the same results with and without it at 1,997, 10,097 and
  // 100,097 images, for 13 % less CPU at 100,000; search/README.md, "The
  // VLAD head is verified too"). VladHeadDepth resolves it.
  int rerank_vlad = -1;
  // Also verified: the top `rerank_words` images of the selective first
  // stage (search/word_index.h: shared fine visual words whose residual
  // signatures agree), wherever the VLAD and colour order put them. 0 = off;
  // needs rerank != 0.
  int rerank_words = 40;
  int min_inliers = 8;
  // Verification matches at most this many of the query's features, its
  // strongest (StrongestFeatures); 0 = all. Bounds the cost of a detailed
  // query, which grows with its feature count times each candidate's. 2,000
  // changed no dev-set result with or without 10,000 distractors; 1,000
  // cost 0.008 mAP there (search/README.md, "Cheaper verification").
  int verify_keypoints = 2000;
  // Average query expansion: the query vector plus the vectors of up to this
  // many verified results is searched again (and re-ranked). 0 = off;
  // needs rerank != 0. With colour fusion it still adds about 0.001 mAP on
  // every dev-set seed (search/README.md "Colour").
  int expansion = 5;
  VerifyOptions verify = CheaperVerifyOptions();
  // Colour fusion: the top `colour_depth` VLAD results are ranked by their
  // global similarity b, which mixes in the colour similarity with a weight
  // of colour_weight x the robust spread of the VLAD similarities (formula
  // and why: search/ranking.h), before verification picks its `rerank`
  // candidates from that order. Colour is what texture misses (rooms,
  // video, landmarks in other light): measured on the dev set, search/README.md
  // "Colour". 0 = off; off by itself for databases without colour (schema 1).
  float colour_weight = 14.0f;
  int colour_depth = 1000;
  // Colour candidates: the `colour_candidates` images whose colour is most
  // like the query's, over the whole collection (search/colour_index.h), join
  // the fused list wherever VLAD ranked them. A thumbnail-sized, blurred copy
  // keeps its colours when its texture is gone; among 10,000 unrelated images
  // its VLAD rank is random. 0 = off; needs colour fusion, and a persisted
  // index that holds the colour table (written by `index` since search
  // index format 5).
  int colour_candidates = 50;
  // Word fusion: the global similarity b also mixes in the word index's
  // similarity of each candidate (search/word_index.h, divided by the
  // query's best), weighed like colour in units of the robust spread of the
  // VLAD similarities (search/ranking.h). Shared local features are what a
  // view of the same place keeps when its global statistics drown among
  // thousands of images. 0 = off; off by itself without a word index.
  float word_weight = 7.0f;
  // Thumbnail correlation (search/thumbnail_match.h): an unverified
  // candidate whose stored thumbnail correlates with the query's above
  // kThumbnailThreshold has its score raised by that evidence, weighted by
  // thumbnail_weight (search/ranking.h, "t"). It finds tiny, blurred,
  // cropped copies that keep too few local features to verify; chosen on the
  // tune half of the dev set over the distractor curve (search/README.md,
  // "Thumbnail correlation"). In [0, 1]; 0 = off. Off by itself for images
  // stored without a thumbnail.
  float thumbnail_weight = 0.7f;
  // ... for the first thumbnail_depth candidates of the ranked list and of
  // the word index's (wherever fusion ranked them: a blurred copy may share
  // too few local features with its original to verify), and the colour and
  // thumbnail candidates, 0..10000.
  int thumbnail_depth = 100;
  // Thumbnail candidates: the `thumbnail_candidates` images whose tiny image
  // (8 x 8 grey levels of the thumbnail, search/tiny_index.h) correlates best
  // with the query's, over the whole collection, join the short list and the
  // thumbnail correlation wherever VLAD ranked them: a shrunk, blurred copy
  // keeps its layout of light and dark when its texture is gone. 0..10000,
  // 0 = off; needs thumbnail correlation and a persisted index that holds
  // the tiny images (written by `index` since format 6).
  int thumbnail_candidates = 20;
  // Pasted pictures: a query that is a picture pasted onto a uniform border
  // (rotated, in perspective; indexer/pasted_picture.h) is also searched
  // with the picture rectified, and each result keeps the better of its two
  // scores (search/README.md, "Pasted pictures").
  bool pasted_views = true;
  // Threads for verification; 0 = all hardware threads.
  int threads = 0;
  // Search index: the persisted one is used (reconciled in memory if stale);
  // these options only decide the kind when none is usable and it is built
  // from the stored vectors. index.nprobe > 0 overrides the lists an ivfsq
  // index visits per query.
  VectorIndexOptions index;
  // Throws std::invalid_argument naming the offending field.
  void Validate() const;
};

// The fused list's verified depth when SearchOptions::rerank is -1: without
// a word-index head (measured on the dev set alone), and beside one: 20
// with a word head of 40 ranks every dev-set query as 30 and 50 did, at
// 2,097, 10,097 and 100,097 images, for fewer verified pairs (search/README.md,
// "Selective first stage").
inline constexpr int kRerank = 50;
inline constexpr int kRerankWithWords = 20;

// How many of the fused list's first candidates are verified: rerank when
// set (>= 0), else kRerank without a word head and kRerankWithWords with one.
inline int RerankDepth(int rerank, bool word_head) {
  if (rerank >= 0) return rerank;
  return word_head ? kRerankWithWords : kRerank;
}

// The VLAD head's depth when SearchOptions::rerank_vlad is -1 and no word
// head is verified: half the re-rank depth, chosen before measuring.
inline constexpr int kVladHead = 25;

// How many of the VLAD order's first candidates are verified: rerank_vlad
// when set (>= 0), else kVladHead without a word head and 0 with one.
inline int VladHeadDepth(int rerank_vlad, bool word_head) {
  if (rerank_vlad >= 0) return rerank_vlad;
  return word_head ? 0 : kVladHead;
}

struct Hit {
  uint64_t id = 0;
  std::string path;  // absolute path as indexed
  // Ranking score in [-1, 1]: the global similarity (VLAD and colour), raised
  // by the spatial evidence of a verified result; the formula is documented
  // once, in search/ranking.h.
  float score = 0;
  // Cosine similarity of the VLAD vectors, [-1, 1] (with the expanded query
  // when query expansion ran).
  float similarity = 0;
  int inliers = -1;   // RANSAC inliers with the query; -1 = not verified
  float colour = -1;  // colour similarity with the query, [0, 1]; -1 = not used
  // Word-index similarity with the query over the query's best, [0, 1];
  // -1 = not used.
  float words = -1;
  // Thumbnail correlation with the query, [-1, 1]; -1 also when not compared
  // (search/thumbnail_match.h).
  float thumbnail = -1;
};

struct QueryResult {
  std::string query;               // the query path as given
  std::vector<Hit> hits;           // best first
  std::optional<FileError> error;  // the query could not be used
  // Wall-clock seconds from the file to the ranked list: read, decode,
  // extract, encode, search, re-rank and expand.
  double seconds = 0;
};

// Thread-compatible: const methods may run concurrently, SearchFiles may not.
class Searcher {
 public:
  // Opens the database read-only (never creates or writes anything; works
  // while an indexer is running) and loads every vector once. Validates
  // `options` here, once (std::invalid_argument naming the field); nothing
  // behind checks them again. Throws StoreError or std::runtime_error.
  static std::unique_ptr<Searcher> Open(const std::string& db_path, const SearchOptions& options);
  ~Searcher();

  // Encodes each query file with the database's model and returns its top k.
  // A bad query file yields a QueryResult with `error` set; the others go on.
  std::vector<QueryResult> SearchFiles(const std::vector<std::string>& queries);

  // Top k of `num` query vectors (row-major, vlad_dim floats each), by VLAD
  // similarity alone (no re-ranking).
  std::vector<std::vector<Hit>> SearchVectors(const float* vectors, int64_t num) const;

  // Top k for one encoded query: the VLAD short list, then the ranking steps
  // of search/ranking.h (colour fusion, re-ranking, query expansion) as the
  // options say. `colour` is the query's colour histogram (empty: no colour
  // fusion), `thumbnail` its kQueryThumbnailSide thumbnail (empty: no
  // thumbnail correlation). Throws StoreError on corrupt stored features.
  std::vector<Hit> SearchQuery(const float* vlad, const LocalFeatures& features,
                               const std::vector<uint8_t>& colour = {},
                               const GreyThumbnail& thumbnail = GreyThumbnail()) const;

  // SearchQuery for an encoded query and each of its views (ImageEncoder::
  // Result::views, when pasted_views is on), merged: every image once, with
  // its best-scoring hit, best first, at most k. `enc` must have no error.
  std::vector<Hit> SearchEncoded(const ImageEncoder::Result& enc) const;

  int64_t num_indexed() const;       // vectors in the search index
  int64_t num_zero_vectors() const;  // images without features (never returned)
  const ModelRecord& model() const;
  Backend backend() const;

 private:
  struct Impl;
  explicit Searcher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Expands command-line query arguments: files are kept as given, folders are
// walked recursively for images (sorted). A missing path becomes an error.
std::vector<std::string> ExpandQueryPaths(const std::vector<std::string>& args,
                                          std::vector<FileError>* errors);

}  // namespace lookalike
