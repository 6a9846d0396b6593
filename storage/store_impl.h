// What the store's own files (store.cc, creation.cc, verify.cc) share: the
// RocksDB handle behind Store, error translation, where the creation lock
// lives, and RAII for snapshots. Never included outside storage/.
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "storage/folder_swap.h"
#include "storage/store.h"

namespace lookalike {

// The compression of every table file the store writes (its own flushes and
// compactions, creation's first, merge's ingested ones): Zstandard where
// RocksDB has it, not its default Snappy. The product-quantised features are
// near-random bytes, but the model, the PCA matrix's codes, the thumbnails
// and the records compress (storage/README.md, "Sizes"), and a query decodes
// its few values as fast. Each table records its own compression, so tables
// written before stay readable, and any build with RocksDB 7 reads these.
void SetTableCompression(rocksdb::Options* options);

struct Store::Impl {
  std::unique_ptr<rocksdb::DB> db;
  bool read_only = false;
  // A write failed (a full disk, an I/O error): RocksDB stops writing, and
  // ~Store must not flush on top of the failed log file.
  bool write_failed = false;

  // Every write of the store goes through here, so a failure is remembered.
  rocksdb::Status Write(rocksdb::WriteBatch* batch) {
    const rocksdb::Status s = db->Write(rocksdb::WriteOptions(), batch);
    if (!s.ok()) write_failed = true;
    return s;
  }
  rocksdb::Status Checked(const rocksdb::Status& s) {
    if (!s.ok()) write_failed = true;
    return s;
  }

  // The values of `keys` in one RocksDB MultiGet, with a status each
  // (IsNotFound for an absent key); the values stay pinned until destroyed.
  struct MultiValues {
    std::vector<rocksdb::PinnableSlice> values;
    std::vector<rocksdb::Status> statuses;
  };
  MultiValues MultiGet(const std::vector<std::string>& keys) const {
    std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
    MultiValues r{std::vector<rocksdb::PinnableSlice>(keys.size()),
                  std::vector<rocksdb::Status>(keys.size())};
    db->MultiGet(rocksdb::ReadOptions(), db->DefaultColumnFamily(), keys.size(), slices.data(),
                 r.values.data(), r.statuses.data());
    return r;
  }

  std::optional<std::string> Get(const std::string& key) const {
    std::string value;
    const rocksdb::Status s = db->Get(rocksdb::ReadOptions(), key, &value);
    if (s.IsNotFound()) return std::nullopt;
    if (!s.ok()) throw StoreError(StoreError::Kind::kIo, "read failed: " + s.ToString());
    return value;
  }
};

namespace store_detail {
namespace fs = std::filesystem;

// A RocksDB status as the StoreError the CLI understands (locked, corrupt, I/O).
inline StoreError IoError(const std::string& path, const rocksdb::Status& s,
                          const std::string& doing) {
  const std::string msg = s.ToString();
  if (s.IsIOError() && (msg.find("lock") != std::string::npos ||
                        msg.find("Resource temporarily unavailable") != std::string::npos))
    return StoreError(StoreError::Kind::kLocked,
                      "index in use by another process: " + path +
                          " is locked by a running 'lookalike index', 'lookalike "
                          "migrate' or 'lookalike merge' (reading it as a shard); wait for it "
                          "to finish (search and info work meanwhile)");
  if (s.IsCorruption())
    return StoreError(StoreError::Kind::kCorrupt,
                      "database " + path + " is corrupt (" + msg + ") while " + doing);
  return StoreError(StoreError::Kind::kIo, "cannot " + doing + " database " + path + ": " + msg);
}

// The creation lock beside a database: "<parent>/.<name>.lock".
inline fs::path CreationLockPath(const fs::path& target) {
  return ParentFolder(target) / ("." + target.filename().string() + ".lock");
}

// A RocksDB snapshot released when it goes out of scope (also when a
// callback throws). No snapshot for a read-only open, which sees a fixed
// state anyway.
class ScopedSnapshot {
 public:
  ScopedSnapshot(rocksdb::DB* db, bool read_only)
      : db_(db), snapshot_(read_only ? nullptr : db->GetSnapshot()) {}
  ~ScopedSnapshot() {
    if (snapshot_) db_->ReleaseSnapshot(snapshot_);
  }
  ScopedSnapshot(const ScopedSnapshot&) = delete;
  ScopedSnapshot& operator=(const ScopedSnapshot&) = delete;
  // Read options that read at the snapshot.
  rocksdb::ReadOptions Options() const {
    rocksdb::ReadOptions ro;
    ro.snapshot = snapshot_;
    return ro;
  }

 private:
  rocksdb::DB* db_;
  const rocksdb::Snapshot* snapshot_;
};

}  // namespace store_detail
}  // namespace lookalike
