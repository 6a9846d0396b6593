// Prints every key of a database with the size and a 64-bit hash of its
// value, in key order: two databases whose digests are equal store the same
// bytes. For checking that a change to indexing keeps every stored value
// (bench/index_speed_ab.sh's companion): index the same folder with both
// builds and --threads 1 (ids follow the commit order, which more threads
// change), then diff the digests. --skip PREFIX (repeatable) leaves out keys
// that differ between any two runs (none do today).
//
// usage: build/bench/db_digest --db DB [--skip PREFIX]...
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

// FNV-1a, 64-bit: enough to tell values apart in a diff.
uint64_t Fnv1a(const rocksdb::Slice& s) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < s.size(); ++i) {
    h ^= static_cast<unsigned char>(s[i]);
    h *= 1099511628211ull;
  }
  return h;
}

std::string Printable(const rocksdb::Slice& key) {
  std::string out;
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    if (c >= 0x21 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  std::vector<std::string> skip;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--db")
      path = argv[i + 1];
    else if (flag == "--skip")
      skip.push_back(argv[i + 1]);
    else
      path.clear(), i = argc;
  }
  if (path.empty() || argc % 2 == 0) {
    std::fprintf(stderr, "usage: db_digest --db DB [--skip PREFIX]...\n");
    return 2;
  }
  rocksdb::Options options;
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status s = rocksdb::DB::OpenForReadOnly(options, path, &raw);
  if (!s.ok()) {
    std::fprintf(stderr, "db_digest: %s: %s\n", path.c_str(), s.ToString().c_str());
    return 1;
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    bool skipped = false;
    for (const std::string& p : skip) skipped = skipped || it->key().starts_with(p);
    if (skipped) continue;
    std::printf("%s %zu %016llx\n", Printable(it->key()).c_str(), it->value().size(),
                static_cast<unsigned long long>(Fnv1a(it->value())));
  }
  if (!it->status().ok()) {
    std::fprintf(stderr, "db_digest: %s: %s\n", path.c_str(), it->status().ToString().c_str());
    return 1;
  }
  return 0;
}
