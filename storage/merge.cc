// `lookalike merge` in the store: the model fingerprint and check, and
// MergeShards, which copies shard databases into this one through table
// files (SstFileWriter) ingested in one atomic IngestExternalFile.
#include <rocksdb/sst_file_writer.h>
#include <xxhash.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <string>
#include <vector>

#include "storage/encoding.h"
#include "storage/keys.h"
#include "storage/store_impl.h"
#include "storage/values.h"
#include "util/test_hooks.h"

namespace lookalike {
namespace fs = std::filesystem;
using namespace store_detail;

namespace {

std::string Hex(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// A key for messages: printable bytes as they are, others as \xHH.
std::string Printable(const std::string& key) {
  std::string out;
  for (unsigned char c : key) {
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

// The one-letter prefixes ("i:", "m:", ...) of the keys of `db`, each key
// checked against KeySpaceOf (m: keys one by one, other spaces by their
// first key). Throws StoreError(kSchema) for a key merge does not know.
std::set<std::string> KeySpaces(rocksdb::DB* db, const std::string& path) {
  std::set<std::string> prefixes;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  it->SeekToFirst();
  while (it->Valid()) {
    const std::string key = it->key().ToString();
    bool known = false;
    KeySpaceOf(key, &known);
    if (!known)
      throw StoreError(StoreError::Kind::kSchema,
                       "cannot merge " + path + ": it holds key '" + Printable(key) +
                           "', which this build of lookalike does not know how to merge; "
                           "merge with the version that wrote it");
    const std::string prefix = key.substr(0, 2);
    prefixes.insert(prefix);
    if (prefix == "m:") {
      it->Next();
    } else {  // every key of "<c>:" sorts before "<c>;"
      it->Seek(std::string(1, key[0]) + ";");
    }
  }
  if (!it->status().ok()) throw IoError(path, it->status(), "read");
  return prefixes;
}

// Table files of strictly increasing keys, a new file every kFileBytes, so
// the files never overlap and one IngestExternalFile takes them all.
class TableFiles {
 public:
  static constexpr uint64_t kFileBytes = uint64_t{256} << 20;
  TableFiles(std::string dir, std::string db_path) : dir_(std::move(dir)), db_(std::move(db_path)) {
    SetTableCompression(&options_);
  }

  void Put(const rocksdb::Slice& key, const rocksdb::Slice& value) {
    if (!writer_ || writer_->FileSize() >= kFileBytes) Roll();
    Check(writer_->Put(key, value));
  }
  // Closes the last file; returns every file in key order.
  std::vector<std::string> Finish() {
    Close();
    return files_;
  }
  uint64_t bytes() const { return bytes_; }

 private:
  void Check(const rocksdb::Status& s) {
    if (!s.ok()) throw IoError(db_, s, "write merge table files for");
  }
  void Close() {
    if (!writer_) return;
    rocksdb::ExternalSstFileInfo info;
    Check(writer_->Finish(&info));
    bytes_ += info.file_size;
    writer_.reset();
  }
  void Roll() {
    Close();
    writer_ = std::make_unique<rocksdb::SstFileWriter>(rocksdb::EnvOptions(), options_);
    char name[32];
    std::snprintf(name, sizeof name, "%06zu.sst", files_.size());
    files_.push_back((fs::path(dir_) / name).string());
    Check(writer_->Open(files_.back()));
  }

  std::string dir_, db_;
  rocksdb::Options options_;
  std::unique_ptr<rocksdb::SstFileWriter> writer_;
  std::vector<std::string> files_;
  uint64_t bytes_ = 0;
};

// The p: entries of several databases in one sorted stream: Next() gives a
// path and which sources hold it.
class PathMerge {
 public:
  explicit PathMerge(const std::vector<rocksdb::DB*>& dbs) {
    for (rocksdb::DB* db : dbs) {
      its_.emplace_back(db->NewIterator(rocksdb::ReadOptions()));
      its_.back()->Seek("p:");
      Push(its_.size() - 1);
    }
  }
  // False at the end. `key` is the whole p: key, `sources` the indices of
  // the databases holding it (ascending), `values` their values.
  bool Next(std::string* key, std::vector<size_t>* sources, std::vector<std::string>* values) {
    sources->clear();
    values->clear();
    if (heap_.empty()) return false;
    *key = heap_.top().first;
    while (!heap_.empty() && heap_.top().first == *key) {
      const size_t s = heap_.top().second;
      heap_.pop();
      sources->push_back(s);
      values->push_back(its_[s]->value().ToString());
      its_[s]->Next();
      Push(s);
    }
    return true;
  }
  void CheckStatus(const std::vector<std::string>& paths) const {
    for (size_t s = 0; s < its_.size(); ++s)
      if (!its_[s]->status().ok()) throw IoError(paths[s], its_[s]->status(), "read");
  }

 private:
  void Push(size_t s) {
    rocksdb::Iterator* it = its_[s].get();
    if (it->Valid() && it->key().starts_with("p:")) heap_.emplace(it->key().ToString(), s);
  }
  using Entry = std::pair<std::string, size_t>;
  std::vector<std::unique_ptr<rocksdb::Iterator>> its_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap_;
};

uint64_t IdOf(const std::string& value, const std::string& where) {
  if (value.size() != 8)
    throw StoreError(StoreError::Kind::kCorrupt, where + ": malformed path entry");
  return encoding::Reader(value, "path entry").Fixed64();
}

// The databases of a merge, index 0 being the one merged into (never read
// by the copies below) and 1.. the shards.
struct MergeInputs {
  std::vector<rocksdb::DB*> dbs;
  std::vector<std::string> paths;
  std::vector<bool> take;        // shard s is merged (not merged before)
  std::vector<uint64_t> offset;  // shard s's id x becomes offset[s] + x
};

// The i: or (image value) v:/f:/t: keys of `prefix` of every merged shard, ids
// re-mapped in key (and record); records are counted into `totals`, `count`.
void CopyImageKeys(const std::string& prefix, KeySpace space, const MergeInputs& in,
                   bool with_colour, TableFiles* tables, ImageTotals* totals, uint64_t* count) {
  std::string key;
  for (size_t s = 1; s < in.dbs.size(); ++s) {
    if (!in.take[s]) continue;
    std::unique_ptr<rocksdb::Iterator> it(in.dbs[s]->NewIterator(rocksdb::ReadOptions()));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      if (it->key().size() != 10)
        throw StoreError(StoreError::Kind::kCorrupt,
                         "database " + in.paths[s] + ": malformed key " + it->key().ToString(true) +
                             "; run `lookalike verify`");
      const uint64_t id = encoding::ParseBigEndian64(it->key().data() + 2) + in.offset[s];
      key = prefix + encoding::BigEndian64(id);
      if (space == KeySpace::kImageValue) {
        tables->Put(key, it->value());
        continue;
      }
      ImageRecord rec = DecodeRecord(it->value().data(), it->value().size());
      rec.id = id;
      totals->descriptors += rec.num_descriptors;
      totals->without_features += rec.status == ImageStatus::kNoFeatures;
      ++*count;
      tables->Put(key, EncodeRecord(rec, with_colour));
    }
    if (!it->status().ok()) throw IoError(in.paths[s], it->status(), "read");
  }
}

// The p: keys of every merged shard in one k-way merge, ids re-mapped in
// their values.
void CopyPathKeys(const MergeInputs& in, TableFiles* tables) {
  std::vector<rocksdb::DB*> taken;
  std::vector<size_t> index;
  for (size_t s = 1; s < in.dbs.size(); ++s)
    if (in.take[s]) {
      taken.push_back(in.dbs[s]);
      index.push_back(s);
    }
  PathMerge merge(taken);
  std::string key;
  std::vector<size_t> sources;
  std::vector<std::string> values;
  while (merge.Next(&key, &sources, &values)) {
    const size_t s = index[sources[0]];
    tables->Put(key, EncodeU64(IdOf(values[0], in.paths[s]) + in.offset[s]));
  }
  std::vector<std::string> names;
  for (size_t s : index) names.push_back(in.paths[s]);
  merge.CheckStatus(names);
}

}  // namespace

uint64_t Store::ModelFingerprint() const {
  std::string all;
  auto add = [&all](const std::string& value) {
    encoding::PutFixed64(&all, value.size());
    all += value;
  };
  add(EncodeModel(model_));
  const auto projection = GetProjection();
  add(projection ? EncodeProjection(*projection) : std::string());
  const auto quantizer = GetDescriptorQuantizer();
  add(quantizer ? *quantizer : std::string());
  if (const auto words = GetModelWordVocabulary()) add(*words);
  if (const auto lists = GetModelSearchQuantizer()) {
    all += "ivq";  // never confused with a database that has only m:wv
    add(*lists);
  }
  return XXH3_64bits(all.data(), all.size());
}

void Store::CheckSameModel(const std::vector<const Store*>& stores) {
  if (stores.empty()) return;
  const Store& first = *stores[0];
  const uint64_t fingerprint = first.ModelFingerprint();
  for (size_t i = 1; i < stores.size(); ++i) {
    const Store& s = *stores[i];
    if (s.schema_version() != first.schema_version())
      throw StoreError(StoreError::Kind::kSchema,
                       "schema mismatch: " + s.path() + " is schema " +
                           std::to_string(s.schema_version()) + ", " + first.path() +
                           " is schema " + std::to_string(first.schema_version()) +
                           "; merge only databases indexed with --model-from the same BASE");
    const uint64_t other = s.ModelFingerprint();
    if (other != fingerprint || s.vector_dim() != first.vector_dim())
      throw StoreError(StoreError::Kind::kModel,
                       "model mismatch: " + s.path() + " has model fingerprint " + Hex(other) +
                           ", " + first.path() + " has " + Hex(fingerprint) +
                           "; merge only databases indexed with --model-from the same BASE");
  }
}

MergeSummary Store::CheckMerge(const std::vector<const Store*>& shards) const {
  std::vector<const Store*> all{this};
  all.insert(all.end(), shards.begin(), shards.end());
  CheckSameModel(all);
  MergeSummary summary;
  for (const Store* s : shards) {
    KeySpaces(s->impl_->db.get(), s->path());
    summary.shards.push_back(ShardMerge{s->path(), s->num_images(), 0, false});
  }
  // One pass over the path entries: no path in two shards; a shard is either
  // wholly here already (same content) or not at all.
  std::vector<rocksdb::DB*> dbs;
  std::vector<std::string> paths;
  for (const Store* s : all) {
    dbs.push_back(s->impl_->db.get());
    paths.push_back(s->path());
  }
  std::vector<uint64_t> entries(all.size(), 0), here(all.size(), 0);
  std::vector<std::string> example(all.size());
  PathMerge merge(dbs);
  std::string key;
  std::vector<size_t> sources;
  std::vector<std::string> values;
  while (merge.Next(&key, &sources, &values)) {
    const std::string path = key.substr(2);
    const size_t first_shard = sources[0] == 0 ? 1 : 0;
    if (sources.size() - first_shard >= 2)
      throw StoreError(StoreError::Kind::kConflict,
                       "image path " + Printable(path) + " is in both " +
                           paths[sources[first_shard]] + " and " + paths[sources[first_shard + 1]] +
                           "; every file must be in exactly one shard (index each with "
                           "--shard I/N of the same N); nothing was merged");
    for (size_t i = first_shard; i < sources.size(); ++i) ++entries[sources[i]];
    if (first_shard == 1 && sources.size() == 2) {
      const size_t s = sources[1];
      const auto mine = FindById(IdOf(values[0], path_));
      const auto theirs = all[s]->FindById(IdOf(values[1], all[s]->path()));
      if (!mine || !theirs || mine->content_hash != theirs->content_hash ||
          mine->status != theirs->status)
        throw StoreError(StoreError::Kind::kConflict,
                         "image path " + Printable(path) + " is in both " + path_ + " and " +
                             all[s]->path() +
                             " with other content; merge adds images, it does not replace "
                             "them (re-index the folder into " +
                             path_ + " instead); nothing was merged");
      ++here[s];
      if (example[s].empty()) example[s] = path;
    }
  }
  merge.CheckStatus(paths);
  for (size_t s = 1; s < all.size(); ++s) {
    if (here[s] == 0) continue;
    if (here[s] != entries[s])
      throw StoreError(StoreError::Kind::kConflict,
                       "image path " + Printable(example[s]) + " is in both " + path_ + " and " +
                           all[s]->path() + ", and " + std::to_string(entries[s] - here[s]) +
                           " other images of that shard are not; a shard is merged whole "
                           "or not at all; nothing was merged");
    summary.shards[s - 1].already_merged = true;
  }
  return summary;
}

MergeSummary Store::MergeShards(const std::vector<const Store*>& shards,
                                const std::string& scratch_dir) {
  if (impl_->read_only)
    throw StoreError(StoreError::Kind::kIo, "database " + path_ + " is open read-only");
  MergeSummary summary = CheckMerge(shards);
  std::vector<const Store*> all{this};
  all.insert(all.end(), shards.begin(), shards.end());
  MergeInputs in;
  for (const Store* s : all) {
    in.dbs.push_back(s->impl_->db.get());
    in.paths.push_back(s->path());
  }
  std::set<std::string> prefixes;
  in.take.assign(all.size(), false);
  bool any = false;
  for (size_t s = 1; s < all.size(); ++s) {
    in.take[s] = !summary.shards[s - 1].already_merged;
    if (!in.take[s]) continue;
    for (const std::string& p : KeySpaces(in.dbs[s], in.paths[s])) prefixes.insert(p);
    any = any || all[s]->num_images() > 0;
  }
  if (!any) return summary;

  // Ids of shard s become offset[s] + id: ranges above this database's
  // allocator, in shard order, so every key space is written in key order.
  in.offset.assign(all.size(), 0);
  uint64_t next_id = next_id_;
  for (size_t s = 1; s < all.size(); ++s) {
    if (!in.take[s]) continue;
    in.offset[s] = next_id - 1;
    summary.shards[s - 1].id_offset = in.offset[s];
    next_id += all[s]->next_id_ - 1;
  }

  std::error_code ec;
  fs::remove_all(scratch_dir, ec);
  fs::create_directories(scratch_dir, ec);
  if (ec)
    throw StoreError(StoreError::Kind::kIo, "cannot create " + scratch_dir + " for merging into " +
                                                path_ + ": " + ec.message());
  struct RemoveScratch {
    std::string dir;
    ~RemoveScratch() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } remove_scratch{scratch_dir};

  TableFiles tables(scratch_dir, path_);
  ImageTotals totals = totals_;
  const uint64_t count_before = num_images_;
  uint64_t count = num_images_;
  // In key order: "f:" < "i:" < "m:" < "p:" < "t:" < "v:" < "x:". Every database
  // has m: keys (m:schema), so the counters are always written.
  for (const std::string& prefix : prefixes) {
    bool known = false;
    const KeySpace space = KeySpaceOf(prefix == "m:" ? kCountKey : prefix, &known);
    switch (space) {
      case KeySpace::kImageRecord:
      case KeySpace::kImageValue:
        CopyImageKeys(prefix, space, in, stores_colour(), &tables, &totals, &count);
        break;
      case KeySpace::kModel:
      case KeySpace::kCounter:  // the m: space: only the counters change
        tables.Put(kCountKey, EncodeU64(count));
        tables.Put(kNextIdKey, EncodeU64(next_id));
        if (has_totals_) {
          ++totals.generation;
          tables.Put(kTotalsKey, EncodeTotals(totals));
        }
        break;
      case KeySpace::kPath:
        CopyPathKeys(in, &tables);
        break;
      case KeySpace::kDerived:  // rebuilt from the records by the caller
        break;
    }
  }
  const std::vector<std::string> files = tables.Finish();
  summary.sst_bytes = tables.bytes();
  TestStopPoint("merge-tables-written");
  rocksdb::IngestExternalFileOptions io;
  io.move_files = true;  // hard links: the scratch folder is beside the database
  const rocksdb::Status s = impl_->Checked(impl_->db->IngestExternalFile(files, io));
  if (!s.ok()) throw IoError(path_, s, "ingest merged shards into");
  LoadMeta();
  summary.added = count - count_before;
  TestStopPoint("merge-ingested");
  return summary;
}

}  // namespace lookalike
