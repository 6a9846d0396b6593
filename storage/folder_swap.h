// Replacing a database folder by a converted copy, crash-safely (what
// `lookalike migrate` builds on). The copy is built beside the database, in
// "<db>.migrating", synced, and exchanged with the original in one
// renameat2(RENAME_EXCHANGE); the original, now at "<db>.migrating", is then
// removed. At every moment the database path holds a whole database, the
// original or the complete copy, and whatever sits at the sibling path tells
// a later run which step was reached (InspectSibling).
#pragma once

#include <filesystem>
#include <string>

namespace lookalike {

// The folder a database folder lives in ("." for a bare name).
inline std::filesystem::path ParentFolder(const std::filesystem::path& target) {
  return target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
}

// "<db>.migrating": where the copy is built, and where the original lies
// between the exchange and its removal.
std::string SiblingPath(const std::string& db_path);

// What lies at SiblingPath(db) (InspectSibling).
enum class Sibling {
  kNone,      // nothing
  kCopy,      // an unfinished copy (schema `copy_schema`) of an older-schema database
  kOriginal,  // the replaced original or what is left of it: the database is already the copy
  kForeign,   // something this build did not put there; never touched
};

// Looks at the database and its sibling without changing either (read-only
// opens). `copy_schema` is the schema a copy is built in: a sibling of that
// schema beside a database of an older one is a copy; a sibling beside a
// database of `copy_schema` that is an older-schema database, carries the
// removal marker or is an empty folder is the original.
Sibling InspectSibling(const std::string& db_path, uint32_t copy_schema);

// Holds a database's writer lock (RocksDB's own LOCK file, by an
// open-file-description lock) without opening the database for writing: no
// `index` can write to it while it is read, copied and exchanged, and the lock
// follows the folder, not its path, across the exchange. Released by the
// destructor. Throws StoreError(kLocked) when a writer holds it, kIo when
// the lock file cannot be opened.
class WriterLock {
 public:
  explicit WriterLock(const std::string& db_path);
  ~WriterLock();
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  int fd_ = -1;
};

// fsyncs every regular file under `folder` (a closed database), the folder
// and its parent. Throws StoreError(kIo).
void SyncFolder(const std::string& folder);

// Atomically exchanges the folders `a` and `b` (renameat2 RENAME_EXCHANGE,
// same parent) and fsyncs their parent. Throws StoreError(kIo), leaving
// both as they were, e.g. on a file system without RENAME_EXCHANGE.
void ExchangeFolders(const std::string& a, const std::string& b);

// Removes the replaced original at SiblingPath(db): first a marker file goes
// into it, then everything else, then the marker and the folder, so that a
// removal interrupted at any point is still recognised (kOriginal) and
// finished by the next run. Errors are ignored (the next run retries).
void RemoveSibling(const std::string& db_path);

}  // namespace lookalike
