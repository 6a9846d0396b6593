// What a reviewer decided in the web page, remembered for the database:
// sets of images marked "not duplicates". Kept in review.json inside the
// database folder (RocksDB ignores files it did not name), never in the
// store itself, which `serve` only reads. Each change is written crash-
// safely: the new file goes to a temporary name, is fsynced, renamed over
// the old one and the folder fsynced, so a kill at any moment leaves the
// old decisions or the new ones, whole.
//
// A decision names each image by id and content hash: when a file is
// re-indexed with other bytes its old decisions no longer apply.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace lookalike {

struct ReviewMember {
  uint64_t id = 0;
  uint64_t content_hash = 0;  // ImageRecord::content_hash
  std::string path;           // for a person reading the file; not compared
};

class ReviewStore {
 public:
  // The file's name inside the database folder.
  static constexpr const char* kFileName = "review.json";

  // Reads <db_folder>/review.json (none yet: no decisions) and removes
  // temporary files that killed writers left. A file this build cannot
  // read is kept as it is: error() says why, and changes are refused
  // until it is moved away.
  explicit ReviewStore(const std::string& db_folder);

  const std::string& path() const { return path_; }
  // Why the file could not be read; empty when it could (or did not exist).
  std::string error() const;

  // True when every two of `members` were marked "not duplicates" together
  // (in one decision, same ids and content hashes). False for fewer than 2.
  bool NotDuplicates(const std::vector<ReviewMember>& members) const;

  // Remembers `members` (2 or more) as not duplicates of one another, or,
  // with value = false, forgets every decision holding two of them. The
  // file on disk is re-read first (another server may have written it) and
  // replaced crash-safely. Throws std::runtime_error naming the file when it
  // cannot be read or written; the remembered decisions are then unchanged.
  void SetNotDuplicates(const std::vector<ReviewMember>& members, bool value);

 private:
  using Decision = std::vector<ReviewMember>;
  // Parses the file into `out`; "" on success (or no file), else the reason.
  std::string Read(std::vector<Decision>* out) const;
  void Write(const std::vector<Decision>& decisions) const;

  std::string folder_, path_;
  mutable std::mutex mutex_;
  std::vector<Decision> decisions_;
  std::string error_;
};

}  // namespace lookalike
