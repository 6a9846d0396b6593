// The lookalike database: one RocksDB directory holding the model (codebook
// and encoding settings), one record and one VLAD vector per image, and a
// path -> id map. rocksdb types never leave storage/.
//
// Key layout and format history: storage/keys.h. Value coding: storage/values.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "storage/model_record.h"
#include "storage/records.h"
#include "storage/schema.h"
#include "storage/store_error.h"

namespace lookalike {

// Held by the one process building a new database (sampling, k-means,
// creation), so a second `index` on the same path is refused at once instead
// of learning its own codebook in parallel. An flock on `.<name>.lock` beside
// the database; the file is removed when the lock is released.
class CreationLock {
 public:
  // Throws StoreError(kLocked) if another process holds it, kIo if the lock
  // file cannot be created (e.g. read-only parent folder).
  explicit CreationLock(const std::string& db_path);
  ~CreationLock();
  CreationLock(const CreationLock&) = delete;
  CreationLock& operator=(const CreationLock&) = delete;

 private:
  std::string lock_path_;
  int fd_ = -1;
};

// Held by `merge` on each shard while it reads it: a shard that a running
// `index` or `migrate` is writing is refused, and no writer can open it until
// the merge has finished with it. A shared POSIX record lock (fcntl) on the
// shard's RocksDB LOCK file, which a RocksDB writer locks exclusively the same
// way; readers (search, info, other merges) are not affected.
class ShardReadLock {
 public:
  // Throws StoreError(kLocked) naming the shard and the writing process. A
  // folder without a LOCK file is not locked (Store::Open reports what it is).
  explicit ShardReadLock(const std::string& db_path);
  ~ShardReadLock();
  ShardReadLock(const ShardReadLock&) = delete;
  ShardReadLock& operator=(const ShardReadLock&) = delete;

 private:
  int fd_ = -1;
};

// Judges one image's local-features blob (without its checksum) for
// Store::Verify: empty when fine, else what is wrong.
using FeaturesCheck =
    std::function<std::string(const ImageRecord& record, const std::string& blob)>;

// The persisted search index's blob read front to back from one snapshot
// (Store::ReadSearchIndex), holding one 4 MiB chunk at a time. Its checksum
// is computed as the bytes pass and checked when the last one is read, so a
// decoder that reads the blob to its end has checked all of it; what it built
// before a mismatch must be discarded (the exception says so).
class SearchIndexReader {
 public:
  struct State;  // storage/store.cc
  explicit SearchIndexReader(std::unique_ptr<State> state);
  ~SearchIndexReader();
  SearchIndexReader(const SearchIndexReader&) = delete;
  SearchIndexReader& operator=(const SearchIndexReader&) = delete;

  uint64_t size() const;       // the whole blob's bytes
  uint64_t remaining() const;  // bytes not read yet
  // Checked with FNV-1a (m:xindex format 1, before 2026-11-29): rewrite it
  // (PutSearchIndex) to have it checked with XXH3-64, 10x faster.
  bool old_checksum() const;
  // Copies the next n bytes to `out`. Throws StoreError(kCorrupt) when fewer
  // than n remain, a chunk is missing or of the wrong size, or (as the last
  // byte is read) the blob fails its checksum.
  void Read(void* out, size_t n);
  // Moves forward to byte `offset` without reading what lies between, for
  // a second pass over a blob a first one checked whole in the same
  // read-only view (a store opened read-only sees one fixed state): the
  // checksum is then no longer computed nor checked (RocksDB still checks
  // each block it reads). Throws StoreError(kCorrupt) past the end,
  // std::logic_error backwards.
  void SkipTo(uint64_t offset);

 private:
  std::unique_ptr<State> state_;
};

class Store {
 public:
  enum class Mode { kReadWrite, kReadOnly };

  // True if `path` holds a lookalike database (has the schema key); false for
  // a missing or empty directory. Never creates anything.
  static bool IsDatabase(const std::string& path);

  // Creates a new database at `path` holding `model`. Atomic: the database is
  // built in a sibling temporary directory and renamed into place, so a crash
  // leaves either nothing or a complete empty database. Throws StoreError if
  // `path` exists and is not an empty directory.
  // `projection`, if given, is written in the same atomic creation.
  // `schema_version` is for tests only (databases as older builds wrote
  // them); kOldestSchemaVersion..kSchemaVersion, else StoreError(kSchema).
  // `descriptor_quantizer` (schema 3) is the indexer's opaque quantizer of
  // local descriptors (indexer/descriptor_quantizer.h), stored checksummed.
  // `word_vocabulary` (any schema; empty = none) is the indexer's opaque
  // vocabulary of the word index (indexer/word_signatures.h), part of the
  // model, stored checksummed (m:wv). `search_quantizer` (empty = none) is
  // search's opaque trained, empty inverted-file index over the search
  // vectors (search/model_quantizer.h), part of the model, stored
  // checksummed (m:ivq).
  static std::unique_ptr<Store> Create(const std::string& path, const ModelRecord& model,
                                       const ProjectionRecord* projection = nullptr,
                                       uint32_t schema_version = kSchemaVersion,
                                       const std::string& descriptor_quantizer = std::string(),
                                       const std::string& word_vocabulary = std::string(),
                                       const std::string& search_quantizer = std::string());

  // Throws the StoreError Create would throw for `path` (a file, a non-empty
  // folder that is not a database, a missing parent), without creating anything.
  static void CheckCanCreate(const std::string& path);

  // Opens an existing database. kReadOnly never writes or creates anything
  // and works while another process writes. Throws StoreError: kNotFound,
  // kNotADatabase, kLocked (another writer), kSchema (a version outside
  // kOldestSchemaVersion..kSchemaVersion),
  // kCorrupt (unreadable model).
  static std::unique_ptr<Store> Open(const std::string& path, Mode mode);

  // Closes the database; a read-write store first flushes its memtables, so
  // read-only opens do not replay the write-ahead log.
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const { return path_; }
  const ModelRecord& model() const { return model_; }
  uint64_t num_images() const { return num_images_; }
  // The database's schema, as stored; opening never changes it. What it
  // stores differently: its layout (storage/schema.h), which the
  // predicates below read.
  uint32_t schema_version() const { return layout_.version; }
  const SchemaLayout& layout() const { return layout_; }
  // The hash of its per-image values and content hashes.
  HashKind hash_kind() const { return layout_.image_hash; }
  // Whether image records carry their colour histogram.
  bool stores_colour() const { return layout_.colour; }
  // The compact layout (SchemaLayout::compact): search vectors (or none),
  // compact local features, counters, thumbnails.
  bool compact() const { return layout_.compact; }
  // Floats of each image's stored vector: the full VLAD
  // (model().vlad_dim() f32) in the older layouts; in the compact one the
  // search vector (the PCA projection's out_dim, f16), and nothing (0) when
  // the database has no projection, its vectors being derived from the
  // stored local features.
  uint64_t vector_dim() const { return vector_dim_; }
  // Whether stored vectors are float16 search vectors (the compact layout).
  bool half_vectors() const { return layout_.compact; }
  // Whether the indexer gives images a thumbnail (t:<id>; the compact
  // layout: older ones are written as they are, for the builds that read
  // them).
  static bool KeepsThumbnails(uint32_t schema) { return LayoutOf(schema).compact; }
  bool keeps_thumbnails() const { return layout_.compact; }
  // Descriptors and images without features over all records, from the
  // counters (the compact layout; nullopt in the older ones, and for compact
  // databases written before the counters existed, where only a scan tells).
  std::optional<ImageTotals> totals() const {
    if (!has_totals_) return std::nullopt;
    return totals_;
  }
  // ImageRecord::content_hash of file bytes, as this database computes it.
  uint64_t ContentHash(const void* data, size_t size) const {
    return Hash64(layout_.image_hash, data, size);
  }

  // Record of the image stored under this exact path, if any.
  std::optional<ImageRecord> FindByPath(const std::string& path) const;

  // Record of image `id`, if any.
  std::optional<ImageRecord> FindById(uint64_t id) const;
  // Records of images `ids`, in their order (nullopt for an absent one),
  // with one RocksDB MultiGet: what ranking reads for a short list.
  std::vector<std::optional<ImageRecord>> FindByIds(const std::vector<uint64_t>& ids) const;

  // Calls fn for every image record in id order.
  void ForEachImage(const std::function<void(const ImageRecord&)>& fn) const;

  // Calls fn(record, vector) for every image in id order; the vector has
  // vector_dim() floats and is only valid during the call (null when
  // vector_dim() is 0). Throws StoreError(kCorrupt) if a vector is missing,
  // mis-sized or fails its checksum.
  void ForEachVector(const std::function<void(const ImageRecord&, const float*)>& fn) const;

  // Atomically stores (or replaces, when record->id != 0) an image's record,
  // vector, path entry, local features (none if `features` is empty) and
  // thumbnail (none if `thumbnail` is empty: a replaced image keeps no stale
  // one). Assigns record->id for new images. vector must have vector_dim()
  // finite floats (it is not read when vector_dim() is 0). Throws
  // StoreError(kIo).
  void PutImage(ImageRecord* record, const float* vector,
                const std::string& features = std::string(),
                const std::string& thumbnail = std::string());

  // The vector of image `id` (vector_dim() floats), or nullopt if there is no
  // such image or the database stores none. Throws StoreError(kCorrupt) on a
  // bad checksum.
  std::optional<std::vector<float>> GetVector(uint64_t id) const;

  // The local-features blob stored with image `id`, or nullopt if it has
  // none. Throws StoreError(kCorrupt) if the blob fails its checksum.
  std::optional<std::string> GetFeatures(uint64_t id) const;

  // The thumbnails (opaque blobs the indexer encodes) of images `ids`, in
  // their order, with one RocksDB MultiGet; nullopt for an image without one
  // (indexed before thumbnails existed) or no such image. Throws
  // StoreError(kCorrupt) naming the id if a value fails its checksum.
  std::vector<std::optional<std::string>> GetThumbnails(const std::vector<uint64_t>& ids) const;
  // Adds or replaces the thumbnail of the stored image `id` in one write,
  // leaving its record, vector, features and the totals as they are (what
  // `index` does for images indexed before thumbnails existed). Throws
  // StoreError(kIo) if read-only or on write failure, std::invalid_argument
  // if no image has that id or `thumbnail` is empty.
  void PutThumbnail(uint64_t id, const std::string& thumbnail);
  // The ids that have a thumbnail, ascending: a scan of the t: keys that
  // reads no value (the indexer finds the images still needing one). Throws
  // StoreError(kCorrupt) for a malformed t: key.
  std::vector<uint64_t> IdsWithThumbnails() const;

  // The PCA projection stored at creation (or by Add/ReplaceProjection), or nullopt
  // if the database has none. Reads and checks it at every call (tens of MiB
  // at K = 512): callers keep the result. Throws StoreError(kCorrupt) if it
  // fails its checksum or does not fit the model.
  std::optional<ProjectionRecord> GetProjection() const;

  // Gives a schema-3 database without a projection (vector_dim() 0: its
  // search vectors are derived from the features) `projection` and every
  // image's search vector: `ids` lists every stored image once, `vectors`
  // holds ids.size() x projection.out_dim floats (zero for an image without
  // features). One atomic WriteBatch: a kill leaves the database as it was or
  // complete, and vector_dim() is then out_dim. Bumps the totals' generation
  // (every search vector changed). Throws std::invalid_argument for a
  // database that has a projection, an older schema, a projection that does
  // not fit the model, or ids that are not the stored images; StoreError(kIo).
  void AddProjection(const ProjectionRecord& projection, const std::vector<uint64_t>& ids,
                     const float* vectors);
  // As AddProjection, for a schema-3 database that has one: the projection,
  // m:vdim and every image's search vector are replaced, and the persisted
  // search index (m:xindex, x:, w:), built from the old vectors, and the
  // model's search quantizer (m:ivq), learned from them, are deleted
  // in the same WriteBatch, so no search reads old and new vectors together
  // (the next `index` or search builds it again). A kill leaves the old
  // projection with its vectors, or the new one with its own. Then compacts
  // those key ranges, so the replaced values leave the disk now. Throws
  // std::invalid_argument for a database without one.
  void ReplaceProjection(const ProjectionRecord& projection, const std::vector<uint64_t>& ids,
                         const float* vectors);

  // The descriptor quantizer stored at creation (schema 3), or nullopt.
  // Throws StoreError(kCorrupt) if it fails its checksum.
  std::optional<std::string> GetDescriptorQuantizer() const;

  // The word index's vocabulary stored with the model (m:wv), or nullopt
  // for a database created before the model carried one (its word index
  // keeps its own, w:v). Throws StoreError(kCorrupt) if it fails its
  // checksum.
  std::optional<std::string> GetModelWordVocabulary() const;
  // Adds `blob` as the model's word vocabulary to a database that has none
  // (`migrate`), in one write: a kill leaves it without or with it. Throws
  // std::logic_error if it has one, StoreError(kIo) on a read-only store.
  void AddModelWordVocabulary(const std::string& blob);

  // The search vectors' quantizer stored with the model (m:ivq: a trained,
  // empty inverted-file index that every shard of the model fills, so
  // `merge` can join their lists), or nullopt (the common case: each
  // database trains its own). Throws StoreError(kCorrupt) if it fails its
  // checksum.
  std::optional<std::string> GetModelSearchQuantizer() const;

  // The persisted search index (an opaque blob that search/search_index.h
  // encodes), or nullopt if none was written. Throws StoreError(kCorrupt) if
  // a chunk is missing or the blob fails its checksum.
  std::optional<std::string> GetSearchIndex() const;
  // The same blob read in order, one chunk held at a time (SearchIndexReader),
  // for a decoder that builds its tables as it reads: no copy of the whole
  // blob (345 MB at 1,000,000 images) is ever held. Null if none was
  // written. The reader must not outlive this store. Throws
  // StoreError(kCorrupt) for an unreadable header.
  std::unique_ptr<SearchIndexReader> ReadSearchIndex() const;

  // Replaces the persisted search index in one atomic WriteBatch: the blob
  // in chunks of 4 MiB under x:<u32 BE chunk>, and m:xindex (format, size,
  // chunk count, XXH3-64 of the blob), with the word index's table and
  // vocabulary (`words`; null: every w: key is deleted) and the deletion of
  // every word-list segment the table does not list. Throws StoreError(kIo).
  void PutSearchIndex(const std::string& blob, const WordIndexCommit* words = nullptr);
  // Compacts the persisted search index's keys (x:) out of level 0 when a
  // level-0 table holds any of them: an index saved by a build before
  // PutSearchIndex compacted it slows every read of v:, t: and w: keys
  // until RocksDB compacts on its own (p50 456-487 against 144-146 ms on a
  // 100,000-image database). True when it compacted. Throws
  // StoreError(kIo); a read-only store does nothing.
  bool CompactSearchIndexOutOfLevelZero();

  // The word index's table and vocabulary (w:t, w:v), or nullopt. Throws
  // StoreError(kCorrupt) if the value fails its checksum.
  std::optional<std::string> GetWordTable() const;
  std::optional<std::string> GetWordVocabulary() const;
  // Values read in place: each one's bytes without its checksum (checked),
  // nullopt for an absent key, valid while `pinned` lives (it holds what
  // RocksDB read them into).
  struct PinnedValues {
    std::vector<std::optional<std::string_view>> values;
    std::shared_ptr<const void> pinned;
  };
  // The word lists of the (segment, word) pairs `keys`, in their order, with
  // one RocksDB MultiGet, not copied: a query's lists are megabytes at
  // 100,000 images. Throws StoreError(kCorrupt) if a value fails its
  // checksum.
  PinnedValues GetWordLists(const std::vector<std::pair<uint32_t, uint32_t>>& keys) const;
  // Writes word lists of `segment` (word, value) in one WriteBatch. The
  // segment is used by no committed table: PutSearchIndex commits it (or a
  // later one deletes it). Throws StoreError(kIo).
  void PutWordLists(uint32_t segment, const std::vector<std::pair<uint32_t, std::string>>& lists);
  // One more than the highest segment any word list is stored under (0 when
  // there is none): a segment number no committed table and no list left by
  // a killed run uses.
  uint32_t NextWordSegment() const;

  // Replaces the record of an already stored image (e.g. a new mtime for the
  // same content), keeping its vector, features and thumbnail.
  void UpdateRecord(const ImageRecord& record);

  // Atomically removes an image's record, vector, local features, thumbnail
  // and path entry.
  void RemoveImage(const ImageRecord& record);

  // Stores an image under the id it already has (record.id != 0), as a
  // database filled from another one keeps its ids: record, vector, path
  // entry, local features, thumbnail and counters in one atomic WriteBatch,
  // like PutImage. A stored image of that id is replaced (its path entry dropped
  // if the path changed); the id allocator is raised past the id. vector
  // must have vector_dim() finite floats (not read when vector_dim() is 0).
  // Throws StoreError(kIo).
  void PutImageWithId(const ImageRecord& record, const float* vector,
                      const std::string& features = std::string(),
                      const std::string& thumbnail = std::string());

  // The id the next new image gets.
  uint64_t next_id() const { return next_id_; }
  // Raises the id allocator to `next_id` (no-op if it is already there), so
  // that ids a copied database had given out are never given out again.
  // Throws StoreError(kIo).
  void RaiseNextId(uint64_t next_id);

  // Full consistency check, for `lookalike verify`: RocksDB block checksums,
  // every record decodes and has its vector (right size, checksum, finite,
  // unit L2 norm or all zero for kNoFeatures) and its path entry, the PCA
  // projection if any (checksum, fits the model, finite), the persisted
  // search index if any (every chunk present, checksum), every path
  // entry, vector, features and thumbnail value has its record, ids are below the allocator and the
  // stored count equals the number of records. Schema 3: m:vdim agrees with
  // the PCA, the descriptor quantizer's checksum, the image totals, and every
  // image with features has them when its vector is derived from them. Each
  // stored thumbnail's checksum.
  // `check_features`, if given, also judges each local-features blob (the
  // store keeps them opaque; indexer/local_features.h knows their format).
  // Returns one line per problem (empty = consistent); stops listing after
  // `max_problems`.
  std::vector<std::string> Verify(size_t max_problems = 100,
                                  const FeaturesCheck& check_features = nullptr) const;

  // A 64-bit fingerprint of everything that decides how images are encoded:
  // XXH3-64 over the canonical encodings of the model (settings and
  // codebook), the PCA projection and the descriptor quantizer (each
  // length-prefixed, empty when absent), then the model's word vocabulary
  // when it has one (a database without one keeps its fingerprint). Computed from the stored values
  // at every call (it reads the projection, tens of MiB at K = 512), so a model copied with `index
  // --model-from` has the same fingerprint as its source.
  uint64_t ModelFingerprint() const;

  // Throws unless every store in `stores` has the schema, stored vector
  // dimension and ModelFingerprint of the first: StoreError(kSchema) or
  // (kModel) naming both folders and both values. Reads only the model.
  static void CheckSameModel(const std::vector<const Store*>& stores);

  // The checks of MergeShards, on a store open read-only or read-write:
  // throws what MergeShards would throw before writing (model, schema,
  // conflicting paths, unknown keys); returns the shards with
  // `already_merged` set for those wholly here. Writes nothing.
  MergeSummary CheckMerge(const std::vector<const Store*>& shards) const;

  // `lookalike merge`: adds the images of `shards` (read-only stores of the
  // same schema and model as this one, see CheckSameModel) to this database
  // in one atomic step: their records, vectors, path entries, local
  // features and thumbnails are written, ids re-mapped above this database's, into table
  // files under `scratch_dir` (created, then removed) and ingested with one
  // IngestExternalFile together with the new counters (m:next_id, m:count,
  // m:totals with a new generation). A crash leaves the database as it was
  // or with every shard merged. The persisted search index (x:) is not
  // touched: it is left for UpdateSearchIndex, which reconciles it with the
  // new records. A shard whose every image path is here already with the
  // same content hash is skipped (a re-run after a completed merge); a path
  // held by two shards, or by a shard and this database otherwise, throws
  // StoreError(kConflict) naming the path and both holders, before anything
  // is written. A key this build does not know (keys.h, KeySpaceOf) in a
  // shard throws StoreError(kSchema). Throws StoreError(kIo) on write failure.
  MergeSummary MergeShards(const std::vector<const Store*>& shards, const std::string& scratch_dir);

  // Bytes used by the database directory.
  uint64_t SizeOnDisk() const;

  // Flushes memtables to SST files (optional; the WAL already makes writes durable
  // against process crashes).
  void Flush();

 private:
  struct Impl;
  Store(std::string path, std::unique_ptr<Impl> impl);
  void LoadMeta();
  // PutImage and PutImageWithId: one image's batch; `before` is the stored
  // image of record.id (needed for the totals and a changed path), `is_new`
  // counts it as one more image.
  void WriteImage(const ImageRecord& record, const float* vector, const std::string& features,
                  const std::string& thumbnail, const std::optional<ImageRecord>& before,
                  bool is_new);
  // Compacts the keys in [from, to) down the levels now. Throws
  // StoreError(kIo).
  void CompactKeys(const std::string& from, const std::string& to);
  // The value under a model key that ends with its checksum (m:dq, m:wv,
  // m:ivq), checked; nullopt if absent. `what` names it in the
  // StoreError(kCorrupt) a damaged one throws.
  std::optional<std::string> GetCheckedModelBlob(const char* key, const char* what) const;
  // AddProjection (replace false) and ReplaceProjection (true).
  void WriteProjection(const ProjectionRecord& projection, const std::vector<uint64_t>& ids,
                       const float* vectors, bool replace);

  std::string path_;
  std::unique_ptr<Impl> impl_;
  ModelRecord model_;
  uint64_t num_images_ = 0;
  uint64_t next_id_ = 1;
  uint64_t vector_dim_ = 0;
  ImageTotals totals_;  // valid when has_totals_ (the compact layout)
  bool has_totals_ = false;
  SchemaLayout layout_ = LayoutOf(kSchemaVersion);
};

}  // namespace lookalike
