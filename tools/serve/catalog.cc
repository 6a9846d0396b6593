#include "tools/serve/catalog.h"

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <utility>

namespace lookalike {
namespace {

// What tells one state of the database from the next without reading a
// record: the image count, and from schema 3 on the counters every write
// updates (their generation changes with each added, removed or re-encoded
// image).
struct Version {
  uint64_t images = 0;
  std::optional<ImageTotals> totals;
  bool operator==(const Version& o) const { return images == o.images && totals == o.totals; }
};
Version VersionOf(const Store& store) { return Version{store.num_images(), store.totals()}; }

}  // namespace

void CatalogOptions::Validate() const {
  // search and dedup are validated where they are used, once: by
  // Searcher::Open and FindDuplicates.
  if (db.empty()) throw std::invalid_argument("--db is required: the database to serve");
  if (!(reload_seconds > 0))
    throw std::invalid_argument("--reload-seconds must be > 0, got " +
                                std::to_string(reload_seconds));
}

Snapshot::Snapshot(const CatalogOptions& options, std::unique_ptr<Store> store)
    : options_(options), store_(std::move(store)) {
  searcher_ = Searcher::Open(options.db, options.search);
  features_ = std::make_unique<FeatureReader>(*store_);
}

ImageEncoder::Result Snapshot::Encode(const std::string& name, const std::string& bytes) const {
  std::unique_ptr<ImageEncoder> encoder;
  {
    std::lock_guard<std::mutex> lock(encoders_mutex_);
    if (!idle_encoders_.empty()) {
      encoder = std::move(idle_encoders_.back());
      idle_encoders_.pop_back();
    }
  }
  // Queries keep exact descriptors against a compact database's quantised
  // ones, as Searcher's own encoder does.
  if (!encoder) {
    encoder = std::make_unique<ImageEncoder>(store_->model(), options_.search.backend,
                                             features_->quantizer());
    encoder->set_pasted_views(options_.search.pasted_views);
    encoder->set_content_hash(store_->hash_kind());
    encoder->set_mirror_views(options_.search.mirrored);
  }
  ImageEncoder::Result result = encoder->EncodeBytes(name, bytes, options_.limits);
  std::lock_guard<std::mutex> lock(encoders_mutex_);
  idle_encoders_.push_back(std::move(encoder));
  return result;
}

const std::vector<ImageRecord>& Snapshot::Images() const {
  std::call_once(images_once_, [this] {
    store_->ForEachImage([this](const ImageRecord& r) {
      images_.push_back(r);
      images_.back().colour.clear();
      images_.back().colour.shrink_to_fit();
    });
  });
  return images_;
}

const DedupResult& Snapshot::Duplicates() const {
  std::call_once(dedup_once_, [this] { dedup_ = FindDuplicates(*store_, options_.dedup); });
  return dedup_;
}

const InfoReport& Snapshot::Info() const {
  std::call_once(info_once_, [this] { info_ = MakeInfoReport(*store_, options_.db); });
  return info_;
}

Catalog::Catalog(const CatalogOptions& options)
    : options_((options.Validate(), options)), review_(options.db) {
  current_ =
      std::make_shared<const Snapshot>(options_, Store::Open(options_.db, Store::Mode::kReadOnly));
  if (!review_.error().empty())
    std::fprintf(stderr, "lookalike serve: review decisions not loaded: %s\n",
                 review_.error().c_str());
  reload_thread_ = std::thread([this] { ReloadLoop(); });
}

Catalog::~Catalog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  reload_thread_.join();
}

std::shared_ptr<const Snapshot> Catalog::Current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_;
}

bool Catalog::Reload() {
  const std::shared_ptr<const Snapshot> current = Current();
  try {
    auto store = Store::Open(options_.db, Store::Mode::kReadOnly);
    if (VersionOf(*store) == VersionOf(current->store())) return false;
    auto next = std::make_shared<const Snapshot>(options_, std::move(store));
    std::lock_guard<std::mutex> lock(mutex_);
    current_ = std::move(next);
    return true;
  } catch (const std::exception& e) {
    // An indexer between two writes, or a database replaced: keep serving
    // the snapshot we have and try again at the next check.
    std::fprintf(stderr, "lookalike serve: keeping the loaded database: %s\n", e.what());
    return false;
  }
}

void Catalog::ReloadLoop() {
  const auto period = std::chrono::duration<double>(options_.reload_seconds);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_cv_.wait_for(lock, period, [this] { return stopping_; })) {
    lock.unlock();
    Reload();
    lock.lock();
  }
}

Thumbnail Catalog::ThumbnailOf(const Snapshot& snapshot, const ImageRecord& record, int max_side) {
  const std::string key = std::to_string(record.id) + ":" + std::to_string(record.content_hash) +
                          ":" + std::to_string(max_side);
  {
    std::lock_guard<std::mutex> lock(thumbnails_mutex_);
    auto it = thumbnail_index_.find(key);
    if (it != thumbnail_index_.end()) {
      thumbnails_.splice(thumbnails_.begin(), thumbnails_, it->second);
      return Thumbnail{it->second->jpeg, ""};
    }
  }
  Thumbnail t = ThumbnailOfRecord(snapshot.store(), record, max_side, options_.limits);
  if (t.jpeg.empty() || t.jpeg.size() > options_.thumbnail_cache_bytes) return t;
  std::lock_guard<std::mutex> lock(thumbnails_mutex_);
  if (thumbnail_index_.count(key)) return t;
  thumbnails_.push_front(CachedThumbnail{key, t.jpeg});
  thumbnail_index_[key] = thumbnails_.begin();
  thumbnail_bytes_ += t.jpeg.size();
  while (thumbnail_bytes_ > options_.thumbnail_cache_bytes) {
    thumbnail_bytes_ -= thumbnails_.back().jpeg.size();
    thumbnail_index_.erase(thumbnails_.back().key);
    thumbnails_.pop_back();
  }
  return t;
}

}  // namespace lookalike
