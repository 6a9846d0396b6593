// What `serve` knows about its database: a read-only snapshot (store,
// searcher, stored features), replaced by a newer one when `index` has
// changed the database since (checked every few seconds on a background
// thread, so new images appear without a restart), plus the caches the web
// UI needs (thumbnails, the image list, dedup groups, info).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "indexer/model.h"
#include "search/dedup.h"
#include "search/searcher.h"
#include "search/verifier.h"
#include "storage/store.h"
#include "tools/output.h"
#include "tools/serve/review.h"
#include "tools/thumbnail.h"

namespace lookalike {

struct CatalogOptions {
  std::string db;  // database folder, opened read-only
  // Searches run with these options; search.k is the largest k a request
  // may ask for (requests get a prefix of the ranking: see tools/serve/README.md).
  SearchOptions search;
  DedupOptions dedup;
  ImageFileLimits limits;  // for uploads and for reading indexed files
  // Seconds between checks for a database changed by `index`, > 0.
  double reload_seconds = 2.0;
  // Bytes of thumbnails kept in memory, >= 0.
  uint64_t thumbnail_cache_bytes = 64ull << 20;
  // Throws std::invalid_argument naming the field (search and dedup are
  // checked by Searcher::Open and FindDuplicates).
  void Validate() const;
};

// One state of the database. Everything here is safe to use from many
// request threads at once.
class Snapshot {
 public:
  Snapshot(const CatalogOptions& options, std::unique_ptr<Store> store);

  const Store& store() const { return *store_; }
  const Searcher& searcher() const { return *searcher_; }
  const FeatureReader& features() const { return *features_; }
  // The record of image `id`, if the snapshot has it.
  std::optional<ImageRecord> Find(uint64_t id) const { return store_->FindById(id); }

  // Encodes a query the way `search` does (a pool of encoders: encoding
  // itself is not thread-safe).
  ImageEncoder::Result Encode(const std::string& name, const std::string& bytes) const;

  // Every record in id order (colour histograms dropped), built once.
  const std::vector<ImageRecord>& Images() const;
  // The dedup groups, computed once (on first use) per snapshot.
  const DedupResult& Duplicates() const;
  // What `info` reports, built once.
  const InfoReport& Info() const;

 private:
  const CatalogOptions& options_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Searcher> searcher_;
  std::unique_ptr<FeatureReader> features_;
  mutable std::mutex encoders_mutex_;
  mutable std::vector<std::unique_ptr<ImageEncoder>> idle_encoders_;
  mutable std::once_flag images_once_, dedup_once_, info_once_;
  mutable std::vector<ImageRecord> images_;
  mutable DedupResult dedup_;
  mutable InfoReport info_;
};

class Catalog {
 public:
  // Validates the options (std::invalid_argument naming the flag), opens
  // the first snapshot (throws StoreError or std::runtime_error like
  // Searcher::Open) and starts the reload thread.
  explicit Catalog(const CatalogOptions& options);
  ~Catalog();  // stops the reload thread
  Catalog(const Catalog&) = delete;
  Catalog& operator=(const Catalog&) = delete;

  const CatalogOptions& options() const { return options_; }
  // The newest snapshot; callers keep it for the whole request.
  std::shared_ptr<const Snapshot> Current() const;
  // Opens a new snapshot now if the database changed; true if it did.
  // Errors (a database briefly unreadable) keep the current snapshot.
  bool Reload();
  // Thumbnail of an indexed image, from the cache when possible.
  Thumbnail ThumbnailOf(const Snapshot& snapshot, const ImageRecord& record, int max_side);
  // The review decisions remembered for this database (review.h).
  ReviewStore& review() { return review_; }

 private:
  void ReloadLoop();

  CatalogOptions options_;
  mutable std::mutex mutex_;
  std::shared_ptr<const Snapshot> current_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread reload_thread_;
  ReviewStore review_;

  // Thumbnail LRU keyed by (id, content hash, size).
  struct CachedThumbnail {
    std::string key, jpeg;
  };
  std::mutex thumbnails_mutex_;
  std::list<CachedThumbnail> thumbnails_;  // most recent first
  std::unordered_map<std::string, std::list<CachedThumbnail>::iterator> thumbnail_index_;
  uint64_t thumbnail_bytes_ = 0;
};

}  // namespace lookalike
