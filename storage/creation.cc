// Creating a database: the creation lock, the checks before creating, and the
// atomic creation (built in a sibling folder, renamed into place).
#include <fcntl.h>
#include <rocksdb/write_batch.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "storage/keys.h"
#include "storage/store_impl.h"
#include "storage/values.h"

namespace lookalike {
namespace fs = std::filesystem;
using namespace store_detail;

CreationLock::CreationLock(const std::string& db_path) {
  lock_path_ = CreationLockPath(db_path).string();
  fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw StoreError(StoreError::Kind::kIo, "cannot create database " + db_path + ": " +
                                                lock_path_ + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd_);
    fd_ = -1;
    throw StoreError(StoreError::Kind::kLocked,
                     "index in use by another process: " + db_path +
                         " is being created by a running 'lookalike index'; wait for it "
                         "to finish");
  }
}

CreationLock::~CreationLock() {
  if (fd_ < 0) return;
  // Unlink while still holding the lock: a process that opened the old file
  // fails its flock and reports "in use"; one that comes later finds the
  // database itself, locked by RocksDB.
  ::unlink(lock_path_.c_str());
  ::close(fd_);
}

ShardReadLock::ShardReadLock(const std::string& db_path) {
  const std::string lock_path = (fs::path(db_path) / "LOCK").string();
  fd_ = ::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return;
  struct flock shared = {};
  shared.l_type = F_RDLCK;
  shared.l_whence = SEEK_SET;  // the whole file, as RocksDB locks it
  if (::fcntl(fd_, F_SETLK, &shared) == 0) return;
  const int error = errno;
  struct flock probe = {};
  probe.l_type = F_RDLCK;
  probe.l_whence = SEEK_SET;
  const bool found = ::fcntl(fd_, F_GETLK, &probe) == 0 && probe.l_type != F_UNLCK;
  ::close(fd_);
  fd_ = -1;
  if (error != EACCES && error != EAGAIN)
    throw StoreError(StoreError::Kind::kIo, "cannot lock shard " + db_path + ": " + lock_path +
                                                ": " + std::strerror(error));
  throw StoreError(StoreError::Kind::kLocked,
                   "shard " + db_path + " is being written by " +
                       (found ? "process " + std::to_string(probe.l_pid) : "another process") +
                       " (a running 'lookalike index' or 'lookalike migrate'); merge it when "
                       "that run has finished");
}

ShardReadLock::~ShardReadLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the record lock
}

bool Store::IsDatabase(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec) || !fs::exists(fs::path(path) / "CURRENT", ec)) return false;
  try {
    Open(path, Mode::kReadOnly);
    return true;
  } catch (const StoreError& e) {
    return e.kind() != StoreError::Kind::kNotADatabase;
  }
}

void Store::CheckCanCreate(const std::string& path) {
  std::error_code ec;
  const fs::path target(path);
  if (fs::exists(target, ec)) {
    if (!fs::is_directory(target, ec))
      throw StoreError(StoreError::Kind::kNotADatabase, "database path " + path +
                                                            " is a file, not a directory; "
                                                            "choose another --db");
    if (!fs::is_empty(target, ec))
      throw StoreError(StoreError::Kind::kNotADatabase,
                       "refusing to create a database in " + path +
                           ": the folder is not empty and is not a lookalike "
                           "database; choose an empty or new --db folder");
  }
  const fs::path parent = ParentFolder(target);
  if (!fs::is_directory(parent, ec))
    throw StoreError(StoreError::Kind::kIo, "cannot create database " + path + ": parent folder " +
                                                parent.string() + " does not exist");
}

std::unique_ptr<Store> Store::Create(const std::string& path, const ModelRecord& model,
                                     const ProjectionRecord* projection, uint32_t schema_version,
                                     const std::string& descriptor_quantizer,
                                     const std::string& word_vocabulary,
                                     const std::string& search_quantizer) {
  if (schema_version < kOldestSchemaVersion || schema_version > kSchemaVersion)
    throw StoreError(StoreError::Kind::kSchema,
                     "cannot create a schema " + std::to_string(schema_version) +
                         " database: this build writes " + std::to_string(kOldestSchemaVersion) +
                         " to " + std::to_string(kSchemaVersion));
  CheckCanCreate(path);
  std::error_code ec;
  const fs::path target(path);
  const fs::path parent = ParentFolder(target);
  // Remove what earlier creators killed mid-way left behind (their pid is gone).
  const std::string prefix = target.filename().string() + ".creating-";
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      fs::remove_all(entry.path(), ec);
  }
  const fs::path temp = parent / (prefix + std::to_string(::getpid()));
  fs::remove_all(temp, ec);
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    options.error_if_exists = true;
    SetTableCompression(&options);
    rocksdb::DB* raw = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(options, temp.string(), &raw);
    if (!s.ok()) {
      fs::remove_all(temp, ec);
      throw IoError(path, s, "create");
    }
    std::unique_ptr<rocksdb::DB> db(raw);
    rocksdb::WriteBatch batch;
    batch.Put(kModelKey, EncodeModel(model));
    if (projection) batch.Put(kProjectionKey, EncodeProjection(*projection));
    if (LayoutOf(schema_version).compact) {
      std::string vdim;
      encoding::PutFixed32(&vdim, projection ? projection->out_dim : 0);
      batch.Put(kVectorDimKey, vdim);
      batch.Put(kTotalsKey, EncodeTotals(ImageTotals()));
      if (!descriptor_quantizer.empty())
        batch.Put(kDescriptorQuantizerKey, WithChecksum(descriptor_quantizer));
    }
    if (!word_vocabulary.empty()) batch.Put(kModelWordVocabularyKey, WithChecksum(word_vocabulary));
    if (!search_quantizer.empty())
      batch.Put(kModelSearchQuantizerKey, WithChecksum(search_quantizer));
    batch.Put(kNextIdKey, EncodeU64(1));
    batch.Put(kCountKey, EncodeU64(0));
    std::string schema;
    encoding::PutFixed32(&schema, schema_version);
    batch.Put(kSchemaKey, schema);
    rocksdb::WriteOptions wo;
    wo.sync = true;
    s = db->Write(wo, &batch);
    if (s.ok()) s = db->Flush(rocksdb::FlushOptions());
    if (s.ok()) s = db->Close();
    if (!s.ok()) {
      db.reset();
      fs::remove_all(temp, ec);
      throw IoError(path, s, "create");
    }
  }
  // rename(2) atomically replaces an empty directory.
  fs::rename(temp, target, ec);
  if (ec) {
    fs::remove_all(temp, ec);
    throw StoreError(StoreError::Kind::kIo, "cannot create database " + path + ": " + ec.message());
  }
  return Open(path, Mode::kReadWrite);
}

}  // namespace lookalike
