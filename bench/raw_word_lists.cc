// Rewrites the table files holding a database's word lists without
// compression, the rest untouched: for the grown benchmark database only.
//
// Why: in a real collection a word list does not compress (its 8-byte
// signatures are near-random; Zstandard leaves 1.000 of the lists of the
// dev set with 2,000 or 10,000 real distractors), so RocksDB stores their
// blocks raw and a query reads them without decoding. The grown database's
// synthetic distractors are collages of 10,000 real ones' features, so each
// real image's signatures recur about 18 times, its lists compress to 0.51,
// and every query pays Zstandard's decoding on top of the reading
// (bench/README.md, "Distractors"). This brings its word lists to how a
// real collection stores them, so query timings measure the engine, not the
// benchmark's synthesis.
//
// usage: build/bench/raw_word_lists --db DB   (no writer may have it open)
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <cstdio>
#include <memory>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3 || std::string(argv[1]) != "--db") {
    std::fprintf(stderr, "usage: raw_word_lists --db DB\n");
    return 2;
  }
  rocksdb::Options options;
  options.create_if_missing = false;
  options.paranoid_checks = true;
  options.compression = rocksdb::kNoCompression;  // for the files this rewrites
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, argv[2], &raw);
  if (!s.ok()) {
    std::fprintf(stderr, "raw_word_lists: %s: %s\n", argv[2], s.ToString().c_str());
    return 1;
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  // The word lists' keys ("w:s" + segment + word) and the files holding
  // them (with their neighbours' keys at the edges), rewritten at the
  // bottom level.
  const rocksdb::Slice begin("w:s"), end("w:t");
  rocksdb::CompactRangeOptions compact;
  compact.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  s = db->CompactRange(compact, &begin, &end);
  if (!s.ok()) {
    std::fprintf(stderr, "raw_word_lists: %s: %s\n", argv[2], s.ToString().c_str());
    return 1;
  }
  std::string live;
  db->GetProperty("rocksdb.total-sst-files-size", &live);
  std::printf("word lists rewritten uncompressed; table files now %s bytes\n", live.c_str());
  return 0;
}
