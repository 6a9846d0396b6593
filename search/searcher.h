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
#include "search/match_level.h"
#include "search/search_options.h"
#include "search/vector_index.h"
#include "search/verifier.h"
#include "storage/store.h"

namespace lookalike {

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
  // How the hit relates to the query (search/match_level.h), decided from
  // `evidence`, never from `score`.
  MatchLevel level = MatchLevel::kNone;
  // What verification measured (geometry of a verified hit; `identical`
  // when the files' bytes are equal).
  MatchEvidence evidence;
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
  // while an indexer is running) and loads the search index once: here, or
  // with options.tables_in_memory off at the first search, after its query
  // is encoded (so errors reading it come from that search). Validates
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
  // its best-scoring hit, best first, at most k; a hit whose file has the
  // query's bytes (enc.content_hash) is `identical`; with options.mirrored,
  // the verified hits of its mirror image (enc.mirror) join; hits below
  // options.min_level are dropped. `enc` must have no error.
  std::vector<Hit> SearchEncoded(const ImageEncoder::Result& enc) const;

  int64_t num_indexed() const;       // vectors in the search index
  int64_t num_zero_vectors() const;  // images without features (never returned)
  const ModelRecord& model() const;
  Backend backend() const;

 private:
  struct Impl;
  explicit Searcher(std::unique_ptr<Impl> impl);
  // SearchEncoded's ranking: the query and its views searched and merged,
  // the first k, or with `unverified` > 0 every hit SearchWith gave
  // (verification through hubs looks deeper).
  std::vector<Hit> SearchViews(int unverified, const ImageEncoder::Result& enc) const;
  // The query's mirror image searched (without expansion or thumbnail
  // correlation) and its verified hits merged into `hits` (an image's
  // higher level, then higher score, wins), marked mirrored; the first k
  // kept when `unverified` is 0, else all.
  void AddMirrored(int unverified, const ImageEncoder::Result& mirror,
                   std::vector<Hit>* hits) const;
  // Verification through the hits' hubs (ScoresThroughHubs; `vlad` the
  // query's, for the similarity of the hubs' neighbours), re-sorted.
  void RaiseThroughHubs(const float* vlad, std::vector<Hit>* hits) const;
  // SearchQuery with other options (the mirror's): its first options.k hits,
  // and as many more as hold `unverified` hits that are not verified.
  std::vector<Hit> SearchWith(const SearchOptions& options, int unverified, const float* vlad,
                              const LocalFeatures& features, const std::vector<uint8_t>& colour,
                              const GreyThumbnail& thumbnail) const;
  std::unique_ptr<Impl> impl_;
};

// Expands command-line query arguments: files are kept as given, folders are
// walked recursively for images (sorted). A missing path becomes an error.
std::vector<std::string> ExpandQueryPaths(const std::vector<std::string>& args,
                                          std::vector<FileError>* errors);

}  // namespace lookalike
