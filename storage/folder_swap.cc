#include "storage/folder_swap.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>
#include <vector>

#include "storage/schema.h"
#include "storage/store_error.h"
#include "util/test_hooks.h"

namespace lookalike {
namespace fs = std::filesystem;

namespace {

// Put into the replaced original before anything of it is removed.
constexpr char kRemovalMarker[] = "LOOKALIKE-REMOVING";

void SyncPath(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    throw StoreError(StoreError::Kind::kIo,
                     "cannot sync " + path.string() + ": " + std::strerror(error));
  }
  ::close(fd);
}

}  // namespace

std::string SiblingPath(const std::string& db_path) {
  fs::path p(db_path);
  if (!p.has_filename()) p = p.parent_path();  // "db/" names "db"
  return p.string() + ".migrating";
}

Sibling InspectSibling(const std::string& db_path, uint32_t copy_schema) {
  const fs::path sibling = SiblingPath(db_path);
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(sibling, ec);
  if (!fs::exists(st)) return Sibling::kNone;
  if (!fs::is_directory(st)) return Sibling::kForeign;
  const bool marked = fs::exists(sibling / kRemovalMarker, ec);
  const bool empty = fs::is_empty(sibling, ec) && !ec;
  const std::optional<uint32_t> schema = StoredSchema(db_path);
  const std::optional<uint32_t> sibling_schema =
      marked || empty ? std::nullopt : StoredSchema(sibling.string());
  if (schema && *schema >= copy_schema)
    return marked || empty || (sibling_schema && *sibling_schema < copy_schema) ? Sibling::kOriginal
                                                                                : Sibling::kForeign;
  if (schema && sibling_schema && *sibling_schema == copy_schema) return Sibling::kCopy;
  return Sibling::kForeign;
}

WriterLock::WriterLock(const std::string& db_path) {
  const std::string lock_path = (fs::path(db_path) / "LOCK").string();
  fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw StoreError(StoreError::Kind::kIo,
                     "cannot lock database " + db_path + ": " + std::strerror(errno));
  // An open-file-description lock conflicts with RocksDB's fcntl lock on the
  // same file, and is not dropped when this process closes another
  // descriptor of it.
  struct flock lock;
  std::memset(&lock, 0, sizeof lock);
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  if (::fcntl(fd_, F_OFD_SETLK, &lock) != 0) {
    const int error = errno;
    ::close(fd_);
    fd_ = -1;
    if (error == EAGAIN || error == EACCES)
      throw StoreError(StoreError::Kind::kLocked,
                       "index in use by another process: " + db_path +
                           " is locked by a running 'lookalike index' or 'lookalike migrate'; "
                           "wait for it to finish");
    throw StoreError(StoreError::Kind::kIo,
                     "cannot lock database " + db_path + ": " + std::strerror(error));
  }
}

WriterLock::~WriterLock() {
  if (fd_ >= 0) ::close(fd_);
}

void SyncFolder(const std::string& folder) {
  std::error_code ec;
  for (const auto& entry : fs::recursive_directory_iterator(folder, ec))
    if (entry.is_regular_file(ec)) SyncPath(entry.path(), O_RDONLY);
  if (ec) throw StoreError(StoreError::Kind::kIo, "cannot list " + folder + ": " + ec.message());
  SyncPath(folder, O_RDONLY | O_DIRECTORY);
  SyncPath(ParentFolder(folder), O_RDONLY | O_DIRECTORY);
}

void ExchangeFolders(const std::string& a, const std::string& b) {
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) != 0) {
    const int error = errno;
    throw StoreError(StoreError::Kind::kIo,
                     "cannot exchange " + a + " and " + b + ": " + std::strerror(error) +
                         (error == EINVAL || error == ENOSYS || error == ENOTSUP
                              ? " (the file system cannot exchange folders atomically; move the "
                                "database to an ext4, XFS, Btrfs or tmpfs file system)"
                              : ""));
  }
  SyncPath(ParentFolder(a), O_RDONLY | O_DIRECTORY);
}

void RemoveSibling(const std::string& db_path) {
  const fs::path sibling = SiblingPath(db_path);
  std::error_code ec;
  const fs::path marker = sibling / kRemovalMarker;
  const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;  // already gone, or not ours to remove: the next run looks again
  ::close(fd);
  try {
    SyncPath(sibling, O_RDONLY | O_DIRECTORY);
  } catch (const StoreError&) {
    return;
  }
  TestStopPoint("marked");
  std::vector<fs::path> entries;
  for (const auto& entry : fs::directory_iterator(sibling, ec))
    if (entry.path().filename() != kRemovalMarker) entries.push_back(entry.path());
  for (const fs::path& entry : entries) fs::remove_all(entry, ec);
  TestStopPoint("emptied");
  fs::remove(marker, ec);
  fs::remove(sibling, ec);
}

}  // namespace lookalike
