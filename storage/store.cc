#include "storage/store.h"

#include <fcntl.h>
#include <rocksdb/convenience.h>
#include <rocksdb/write_batch.h>
#include <sys/file.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <thread>

#include "storage/encoding.h"
#include "storage/folder_swap.h"
#include "storage/keys.h"
#include "storage/store_impl.h"
#include "storage/values.h"

namespace lookalike {
namespace fs = std::filesystem;
using namespace store_detail;
using encoding::Reader;

namespace {

// `totals` after replacing `before` (if any) by `after` (if any).
ImageTotals Updated(ImageTotals totals, const std::optional<ImageRecord>& before,
                    const ImageRecord* after) {
  if (!before || !after || before->content_hash != after->content_hash ||
      before->status != after->status)
    ++totals.generation;
  for (const ImageRecord* r : {before ? &*before : nullptr, after}) {
    if (!r) continue;
    const int sign = r == after ? 1 : -1;
    totals.descriptors += sign * static_cast<int64_t>(r->num_descriptors);
    totals.without_features += sign * (r->status == ImageStatus::kNoFeatures ? 1 : 0);
  }
  return totals;
}

// A w: value (the blob and its XXH3-64) as the blob; StoreError(kCorrupt)
// if it fails its checksum.
std::string CheckedWordValue(const std::string& value, const char* what, const std::string& path) {
  try {
    return CheckedXxh3(value, what);
  } catch (const encoding::CorruptValue& e) {
    throw StoreError(StoreError::Kind::kCorrupt,
                     "database " + path + ": " + e.what() +
                         "; the word index is rebuilt from the stored features (run `lookalike "
                         "index` to rewrite it)");
  }
}

}  // namespace

Store::Store(std::string path, std::unique_ptr<Impl> impl)
    : path_(std::move(path)), impl_(std::move(impl)) {}

Store::~Store() {
  if (!impl_ || !impl_->db) return;
  // A writer leaves its last writes in SST files, not only in the write-ahead
  // log: a read-only open (every search, info and serve) replays the whole log
  // into a memtable, which at 100,000 images cost 0.2-0.35 s and 70 MB of
  // every CLI query after a merge. Best effort: the log already makes the
  // writes durable, and the next writer's open flushes what this one could not.
  // Not after a failed write (a full disk): RocksDB then stops writing, and
  // a flush would trip over the failed log file.
  if (!impl_->read_only && !impl_->write_failed)
    impl_->db->Flush(rocksdb::FlushOptions()).PermitUncheckedError();
  impl_->db->Close().PermitUncheckedError();
}

void SetTableCompression(rocksdb::Options* options) {
  const std::vector<rocksdb::CompressionType> supported = rocksdb::GetSupportedCompressions();
  if (std::find(supported.begin(), supported.end(), rocksdb::kZSTD) != supported.end())
    options->compression = rocksdb::kZSTD;
}

std::unique_ptr<Store> Store::Open(const std::string& path, Mode mode) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw StoreError(StoreError::Kind::kNotFound, "database " + path +
                                                      " does not exist; create it with "
                                                      "'lookalike index DIR --db " +
                                                      path + "'");
  if (!fs::is_directory(path, ec) || !fs::exists(fs::path(path) / "CURRENT", ec))
    throw StoreError(StoreError::Kind::kNotADatabase,
                     path + " is not a lookalike database (no RocksDB CURRENT file)");
  // Gate on the schema (and model) through a read-only open first: a
  // read-write open rewrites CURRENT, the MANIFEST and the OPTIONS file, and a
  // database this build refuses (e.g. from a newer version) must stay untouched.
  if (mode == Mode::kReadWrite) Open(path, Mode::kReadOnly);
  auto impl = std::make_unique<Impl>();
  impl->read_only = mode == Mode::kReadOnly;
  rocksdb::Options options;
  options.create_if_missing = false;
  options.paranoid_checks = true;
  // Test hook: a tiny memtable makes flushes and compactions happen every few
  // images, so crash tests can kill the writer in the middle of them.
  if (const char* bytes = std::getenv("LOOKALIKE_TEST_WRITE_BUFFER_BYTES")) {
    const long long n = std::atoll(bytes);
    if (n >= 4096) options.write_buffer_size = static_cast<size_t>(n);
  }
  SetTableCompression(&options);
  options.keep_log_file_num = 4;  // RocksDB's info LOG rotates at every open
  options.max_open_files = -1;    // open every table file now: a running writer may
                                  // delete obsolete ones later, open ones stay readable
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s;
  for (int attempt = 0;; ++attempt) {
    s = impl->read_only ? rocksdb::DB::OpenForReadOnly(options, path, &raw)
                        : rocksdb::DB::Open(options, path, &raw);
    // A read-only open races with a live writer that flushes or compacts and
    // deletes the files the MANIFEST it just read still names; a fresh
    // attempt reads the new MANIFEST.
    const bool vanished_file = (s.IsIOError() || s.IsCorruption() || s.IsPathNotFound()) &&
                               s.ToString().find("No such file") != std::string::npos;
    if (s.ok() || !impl->read_only || !vanished_file || attempt == 20) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5 * (attempt + 1)));
  }
  if (!s.ok()) throw IoError(path, s, "open");
  impl->db.reset(raw);
  if (!impl->read_only) {
    // We hold the database's own lock now, so a creation lock file left by a
    // creator killed after the rename is stale: remove it.
    std::error_code ignored;
    const fs::path stale = CreationLockPath(path);
    const int fd = ::open(stale.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
      if (::flock(fd, LOCK_EX | LOCK_NB) == 0) fs::remove(stale, ignored);
      ::close(fd);
    }
  }
  std::unique_ptr<Store> store(new Store(path, std::move(impl)));
  store->LoadMeta();
  // A migration killed after exchanging the folders left the original
  // beside the database; the first writer to open it finishes the job.
  if (!store->impl_->read_only && store->layout_.version >= kSchemaVersion &&
      fs::exists(SiblingPath(path), ec) &&
      InspectSibling(path, kSchemaVersion) == Sibling::kOriginal)
    RemoveSibling(path);
  return store;
}

void Store::LoadMeta() {
  const auto schema = impl_->Get(kSchemaKey);
  if (!schema)
    throw StoreError(StoreError::Kind::kNotADatabase,
                     path_ +
                         " is a RocksDB database but not a lookalike database "
                         "(no schema key); choose another --db");
  uint32_t version = 0;
  try {
    Reader r(*schema, "schema");
    version = r.Fixed32();
  } catch (const encoding::CorruptValue& e) {
    throw StoreError(StoreError::Kind::kCorrupt, path_ + ": " + e.what());
  }
  if (version > kSchemaVersion)
    throw StoreError(StoreError::Kind::kSchema, "database schema " + std::to_string(version) +
                                                    " is newer than this build reads (" +
                                                    std::to_string(kSchemaVersion) +
                                                    "); upgrade lookalike");
  if (version < kOldestSchemaVersion)
    throw StoreError(StoreError::Kind::kSchema, "database schema " + std::to_string(version) +
                                                    " is older than this build reads (" +
                                                    std::to_string(kOldestSchemaVersion) + " to " +
                                                    std::to_string(kSchemaVersion) +
                                                    "); re-index the folder into a new --db");
  // Decided once: every per-image value of a database uses its schema's hash.
  layout_ = LayoutOf(version);
  try {
    const auto model = impl_->Get(kModelKey);
    if (!model) throw encoding::CorruptValue("model missing");
    model_ = DecodeModel(*model);
    const auto next = impl_->Get(kNextIdKey);
    const auto count = impl_->Get(kCountKey);
    if (!next || !count) throw encoding::CorruptValue("counters missing");
    next_id_ = Reader(*next, "next id").Fixed64();
    num_images_ = Reader(*count, "image count").Fixed64();
    vector_dim_ = model_.vlad_dim();
    if (layout_.compact) {
      const auto vdim = impl_->Get(kVectorDimKey);
      if (!vdim) throw encoding::CorruptValue("vector dimension (m:vdim) missing");
      vector_dim_ = Reader(*vdim, "vector dimension").Fixed32();
      // Absent in schema-3 databases written before the counters existed:
      // then unknown, and callers scan as for older schemas.
      if (const auto totals = impl_->Get(kTotalsKey)) {
        totals_ = DecodeTotals(*totals);
        has_totals_ = true;
      }
    }
  } catch (const encoding::CorruptValue& e) {
    throw StoreError(StoreError::Kind::kCorrupt, "database " + path_ + " is corrupt: " + e.what() +
                                                     "; run 'lookalike index' into a new --db");
  }
}

std::optional<ImageRecord> Store::FindByPath(const std::string& path) const {
  const auto id_value = impl_->Get(PathKey(path));
  if (!id_value) return std::nullopt;
  const uint64_t id = Reader(*id_value, "path entry").Fixed64();
  const auto rec = impl_->Get(ImageKey(id));
  if (!rec)
    throw StoreError(StoreError::Kind::kCorrupt,
                     "database " + path_ + ": path entry without record for " + path);
  return DecodeRecord(rec->data(), rec->size());
}

std::optional<ImageRecord> Store::FindById(uint64_t id) const {
  const auto rec = impl_->Get(ImageKey(id));
  if (!rec) return std::nullopt;
  return DecodeRecord(rec->data(), rec->size());
}

std::vector<std::optional<ImageRecord>> Store::FindByIds(const std::vector<uint64_t>& ids) const {
  std::vector<std::string> keys;
  keys.reserve(ids.size());
  for (uint64_t id : ids) keys.push_back(ImageKey(id));
  const auto [values, statuses] = impl_->MultiGet(keys);
  std::vector<std::optional<ImageRecord>> out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (statuses[i].IsNotFound()) continue;
    if (!statuses[i].ok()) throw IoError(path_, statuses[i], "read the image records of");
    out[i] = DecodeRecord(values[i].data(), values[i].size());
  }
  return out;
}

void Store::ForEachImage(const std::function<void(const ImageRecord&)>& fn) const {
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek("i:"); it->Valid() && it->key().starts_with("i:"); it->Next())
    fn(DecodeRecord(it->value().data(), it->value().size()));
  if (!it->status().ok()) throw IoError(path_, it->status(), "read");
}

void Store::ForEachVector(const std::function<void(const ImageRecord&, const float*)>& fn) const {
  // One consistent snapshot so a concurrent writer never shows a torn state;
  // released however the loop ends (a callback may throw).
  const ScopedSnapshot snapshot(impl_->db.get(), impl_->read_only);
  const rocksdb::ReadOptions ro = snapshot.Options();
  std::unique_ptr<rocksdb::Iterator> records(impl_->db->NewIterator(ro));
  const uint64_t dim = vector_dim_;
  std::vector<float> vec(dim);
  std::string value;
  for (records->Seek("i:"); records->Valid() && records->key().starts_with("i:"); records->Next()) {
    const ImageRecord rec = DecodeRecord(records->value().data(), records->value().size());
    if (dim == 0) {
      fn(rec, nullptr);
      continue;
    }
    const rocksdb::Status s = impl_->db->Get(ro, VectorKey(rec.id), &value);
    if (!s.ok())
      throw StoreError(StoreError::Kind::kCorrupt, "database " + path_ + ": vector of " + rec.path +
                                                       " unreadable (" + s.ToString() + ")");
    try {
      ReadVector(value.data(), value.size(), dim, half_vectors(), layout_.image_hash, vec.data());
    } catch (const encoding::CorruptValue& e) {
      throw StoreError(StoreError::Kind::kCorrupt,
                       "database " + path_ + ": vector of " + rec.path + ": " + e.what());
    }
    fn(rec, vec.data());
  }
  if (!records->status().ok()) throw IoError(path_, records->status(), "read");
}

std::optional<std::vector<float>> Store::GetVector(uint64_t id) const {
  if (vector_dim_ == 0) return std::nullopt;
  const auto value = impl_->Get(VectorKey(id));
  if (!value) return std::nullopt;
  const uint64_t dim = vector_dim_;
  std::vector<float> vec(dim);
  try {
    ReadVector(value->data(), value->size(), dim, half_vectors(), layout_.image_hash, vec.data());
  } catch (const encoding::CorruptValue& e) {
    throw StoreError(StoreError::Kind::kCorrupt, "database " + path_ + ": vector of id " +
                                                     std::to_string(id) + ": " + e.what() +
                                                     "; run `lookalike verify`");
  }
  return vec;
}

std::optional<ProjectionRecord> Store::GetProjection() const {
  const auto value = impl_->Get(kProjectionKey);
  if (!value) return std::nullopt;
  try {
    return DecodeProjection(*value, model_.vlad_dim());
  } catch (const encoding::CorruptValue& e) {
    throw StoreError(StoreError::Kind::kCorrupt, "database " + path_ + " is corrupt: " + e.what() +
                                                     "; run 'lookalike index' into a new --db");
  }
}

std::optional<std::string> Store::GetCheckedModelBlob(const char* key, const char* what) const {
  const auto value = impl_->Get(key);
  if (!value) return std::nullopt;
  try {
    return CheckedBlob(*value, what);
  } catch (const encoding::CorruptValue& e) {
    throw StoreError(StoreError::Kind::kCorrupt, "database " + path_ + " is corrupt: " + e.what() +
                                                     "; run 'lookalike index' into a new --db");
  }
}

std::optional<std::string> Store::GetDescriptorQuantizer() const {
  return GetCheckedModelBlob(kDescriptorQuantizerKey, "descriptor quantizer (m:dq)");
}

std::optional<std::string> Store::GetModelWordVocabulary() const {
  return GetCheckedModelBlob(kModelWordVocabularyKey, "model word vocabulary (m:wv)");
}

std::optional<std::string> Store::GetModelSearchQuantizer() const {
  return GetCheckedModelBlob(kModelSearchQuantizerKey, "model search quantizer (m:ivq)");
}

void Store::AddModelWordVocabulary(const std::string& blob) {
  if (impl_->read_only)
    throw StoreError(StoreError::Kind::kIo, "database " + path_ + " is open read-only");
  if (impl_->Get(kModelWordVocabularyKey))
    throw std::logic_error("database " + path_ + " has a model word vocabulary already");
  rocksdb::WriteOptions wo;
  wo.sync = true;
  const rocksdb::Status s =
      impl_->Checked(impl_->db->Put(wo, kModelWordVocabularyKey, WithChecksum(blob)));
  if (!s.ok()) throw IoError(path_, s, "write to");
}

struct SearchIndexReader::State {
  rocksdb::DB* db = nullptr;
  std::string path;  // the database's, for messages
  std::unique_ptr<ScopedSnapshot> snapshot;
  SearchIndexMeta meta;
  uint32_t next_chunk = 0;
  std::string chunk;  // the chunk being read
  size_t at = 0;      // its bytes read
  uint64_t read = 0;  // the blob's bytes read
  XXH3_state_t* xxh3 = nullptr;
  uint64_t fnv = encoding::Fnv1a64(nullptr, 0);
  bool hashing = true;  // false once SkipTo passed bytes unread

  ~State() {
    if (xxh3) XXH3_freeState(xxh3);
  }
  [[noreturn]] void Fail(const std::string& problem) const {
    throw StoreError(StoreError::Kind::kCorrupt,
                     "database " + path + ": persisted search index: " + problem +
                         "; it is rebuilt from the stored vectors (run `lookalike index` to "
                         "rewrite it, `lookalike verify` to check the rest)");
  }
  uint64_t Digest() const {
    return meta.checksum_kind == HashKind::kXxh3_64 ? XXH3_64bits_digest(xxh3) : fnv;
  }
  // The next chunk into `chunk`, hashed; the checksum checked after the last.
  void NextChunk() {
    const uint32_t c = next_chunk++;
    const rocksdb::Status s = db->Get(snapshot->Options(), SearchIndexChunkKey(c), &chunk);
    if (!s.ok()) Fail("chunk " + std::to_string(c) + " unreadable (" + s.ToString() + ")");
    const uint64_t want = std::min<uint64_t>(kSearchIndexChunk, meta.size - c * kSearchIndexChunk);
    if (chunk.size() != want)
      Fail("chunk " + std::to_string(c) + " holds " + std::to_string(chunk.size()) +
           " bytes, the header implies " + std::to_string(want));
    at = 0;
    if (!hashing) return;
    if (meta.checksum_kind == HashKind::kXxh3_64)
      XXH3_64bits_update(xxh3, chunk.data(), chunk.size());
    else
      fnv = encoding::Fnv1a64(chunk.data(), chunk.size(), fnv);
    if (next_chunk == meta.chunks && Digest() != meta.checksum) Fail("checksum mismatch");
  }
};

SearchIndexReader::SearchIndexReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
SearchIndexReader::~SearchIndexReader() = default;
uint64_t SearchIndexReader::size() const { return state_->meta.size; }
uint64_t SearchIndexReader::remaining() const { return state_->meta.size - state_->read; }
bool SearchIndexReader::old_checksum() const {
  return state_->meta.checksum_kind != HashKind::kXxh3_64;
}

void SearchIndexReader::Read(void* out, size_t n) {
  State& st = *state_;
  if (n > remaining())
    st.Fail("a read of " + std::to_string(n) + " bytes at offset " + std::to_string(st.read) +
            " passes its end (" + std::to_string(st.meta.size) + " bytes)");
  auto* dst = static_cast<char*>(out);
  while (n > 0) {
    if (st.at == st.chunk.size()) st.NextChunk();
    const size_t take = std::min(n, st.chunk.size() - st.at);
    std::memcpy(dst, st.chunk.data() + st.at, take);
    st.at += take;
    st.read += take;
    dst += take;
    n -= take;
  }
}

void SearchIndexReader::SkipTo(uint64_t offset) {
  State& st = *state_;
  if (offset < st.read) throw std::logic_error("SearchIndexReader::SkipTo: backwards");
  if (offset > st.meta.size)
    st.Fail("a skip to offset " + std::to_string(offset) + " passes its end (" +
            std::to_string(st.meta.size) + " bytes)");
  if (offset == st.read) return;
  st.hashing = false;
  const uint64_t chunk_start = uint64_t{st.next_chunk} * kSearchIndexChunk;  // past the held one
  if (offset < chunk_start) {
    st.at += static_cast<size_t>(offset - st.read);  // within the chunk held
  } else {
    // The chunk holding `offset` is read when the next byte is wanted.
    st.next_chunk = static_cast<uint32_t>(offset / kSearchIndexChunk);
    st.chunk.clear();
    st.at = 0;
    const uint64_t into = offset - uint64_t{st.next_chunk} * kSearchIndexChunk;
    if (into > 0) {
      st.NextChunk();
      st.at = static_cast<size_t>(into);
    }
  }
  st.read = offset;
}

std::unique_ptr<SearchIndexReader> Store::ReadSearchIndex() const {
  auto st = std::make_unique<SearchIndexReader::State>();
  st->db = impl_->db.get();
  st->path = path_;
  // One snapshot, so a writer replacing the index meanwhile is never mixed in.
  st->snapshot = std::make_unique<ScopedSnapshot>(impl_->db.get(), impl_->read_only);
  std::string header;
  const rocksdb::Status s = impl_->db->Get(st->snapshot->Options(), kSearchIndexKey, &header);
  if (s.IsNotFound()) return nullptr;
  if (!s.ok()) st->Fail("header unreadable (" + s.ToString() + ")");
  try {
    st->meta = DecodeSearchIndexMeta(header);
  } catch (const encoding::CorruptValue& e) {
    st->Fail(e.what());
  }
  if (st->meta.checksum_kind == HashKind::kXxh3_64) {
    st->xxh3 = XXH3_createState();
    if (!st->xxh3 || XXH3_64bits_reset(st->xxh3) != XXH_OK) throw std::bad_alloc();
  }
  // An empty blob has no chunk to read: its checksum is checked now.
  if (st->meta.chunks == 0 && st->Digest() != st->meta.checksum) st->Fail("checksum mismatch");
  return std::make_unique<SearchIndexReader>(std::move(st));
}

std::optional<std::string> Store::GetSearchIndex() const {
  const std::unique_ptr<SearchIndexReader> reader = ReadSearchIndex();
  if (!reader) return std::nullopt;
  std::string blob(reader->size(), '\0');
  reader->Read(blob.data(), blob.size());
  return blob;
}

void Store::PutSearchIndex(const std::string& blob, const WordIndexCommit* words) {
  if (impl_->read_only)
    throw StoreError(StoreError::Kind::kIo, "database " + path_ + " is open read-only");
  const uint32_t chunks =
      static_cast<uint32_t>((blob.size() + kSearchIndexChunk - 1) / kSearchIndexChunk);
  rocksdb::WriteBatch batch;
  // Later entries of a batch win, so the range delete only drops chunks the
  // new blob does not overwrite.
  batch.DeleteRange("x:", "x;");
  for (uint32_t c = 0; c < chunks; ++c) {
    const size_t at = size_t{c} * kSearchIndexChunk;
    batch.Put(SearchIndexChunkKey(c),
              rocksdb::Slice(blob.data() + at, std::min(kSearchIndexChunk, blob.size() - at)));
  }
  std::string header;
  encoding::PutFixed32(&header, kSearchIndexFormat);
  encoding::PutFixed64(&header, blob.size());
  encoding::PutFixed32(&header, chunks);
  encoding::PutFixed64(&header, XXH3_64bits(blob.data(), blob.size()));
  batch.Put(kSearchIndexKey, header);
  if (!words) {
    batch.DeleteRange("w:", "w;");
  } else {
    batch.Put(kWordTableKey, WithXxh3(words->table));
    if (!words->vocabulary.empty()) batch.Put(kWordVocabularyKey, WithXxh3(words->vocabulary));
    // Every segment outside the list: the gaps between listed ones, and
    // everything before the first and after the last.
    std::vector<uint32_t> keep = words->segments;
    std::sort(keep.begin(), keep.end());
    std::string from = kWordListPrefix;
    for (uint32_t s : keep) {
      batch.DeleteRange(from, WordSegmentKey(s));
      from = s == UINT32_MAX ? std::string("w:t") : WordSegmentKey(s + 1);
    }
    batch.DeleteRange(from, "w:t");
  }
  const rocksdb::Status s = impl_->Write(&batch);
  if (!s.ok()) throw IoError(path_, s, "write to");
  // Out of level 0 at once: flushed there, the blob's 4 MiB chunks share a
  // table whose key range covers every v:, t: and w: key, and each read of
  // those then consults it (a 100,000-image database's queries took 0.29-0.42
  // instead of 0.17 s after a save, until a compaction reached it; compacting
  // the x: range takes about 4 s at that size).
  CompactKeys("x:", "x;");
}

bool Store::CompactSearchIndexOutOfLevelZero() {
  if (impl_->read_only) return false;
  std::vector<rocksdb::LiveFileMetaData> files;
  impl_->db->GetLiveFilesMetaData(&files);
  const bool in_level_zero = std::any_of(files.begin(), files.end(), [](const auto& f) {
    return f.level == 0 && f.smallestkey < "x;" && f.largestkey >= "x:";
  });
  if (in_level_zero) CompactKeys("x:", "x;");
  return in_level_zero;
}

std::optional<std::string> Store::GetWordTable() const {
  auto value = impl_->Get(kWordTableKey);
  if (!value) return std::nullopt;
  return CheckedWordValue(*value, "word index table (w:t)", path_);
}

std::optional<std::string> Store::GetWordVocabulary() const {
  auto value = impl_->Get(kWordVocabularyKey);
  if (!value) return std::nullopt;
  return CheckedWordValue(*value, "word index vocabulary (w:v)", path_);
}

Store::PinnedValues Store::GetWordLists(
    const std::vector<std::pair<uint32_t, uint32_t>>& keys) const {
  std::vector<std::string> names;
  names.reserve(keys.size());
  for (const auto& [segment, word] : keys) names.push_back(WordListKey(segment, word));
  auto read = std::make_shared<Impl::MultiValues>(impl_->MultiGet(names));
  PinnedValues out{std::vector<std::optional<std::string_view>>(keys.size()), read};
  for (size_t i = 0; i < keys.size(); ++i) {
    const rocksdb::PinnableSlice& value = read->values[i];
    if (read->statuses[i].IsNotFound()) continue;
    if (!read->statuses[i].ok()) throw IoError(path_, read->statuses[i], "read the word index of");
    try {
      out.values[i].emplace(value.data(), CheckXxh3(value.data(), value.size(), "word list"));
    } catch (const encoding::CorruptValue&) {
      CheckedWordValue(value.ToString(), "word list", path_);  // throws StoreError
    }
  }
  return out;
}

void Store::PutWordLists(uint32_t segment,
                         const std::vector<std::pair<uint32_t, std::string>>& lists) {
  if (impl_->read_only)
    throw StoreError(StoreError::Kind::kIo, "database " + path_ + " is open read-only");
  rocksdb::WriteBatch batch;
  for (const auto& [word, value] : lists) batch.Put(WordListKey(segment, word), WithXxh3(value));
  const rocksdb::Status s = impl_->Write(&batch);
  if (!s.ok()) throw IoError(path_, s, "write to");
}

uint32_t Store::NextWordSegment() const {
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions()));
  it->SeekForPrev(WordListKey(UINT32_MAX, UINT32_MAX));
  if (!it->status().ok()) throw IoError(path_, it->status(), "read the word index of");
  if (!it->Valid() || !it->key().starts_with(kWordListPrefix) || it->key().size() != 11) return 0;
  uint32_t segment = 0;
  for (size_t i = 3; i < 7; ++i)
    segment = (segment << 8) | static_cast<unsigned char>(it->key()[i]);
  return segment + 1;
}

std::optional<std::string> Store::GetFeatures(uint64_t id) const {
  auto value = impl_->Get(FeaturesKey(id));
  if (!value) return std::nullopt;
  try {
    value->resize(CheckImageBlob(value->data(), value->size(), layout_.image_hash, kFeaturesWhat));
    return std::move(*value);
  } catch (const encoding::CorruptValue& e) {
    throw StoreError(StoreError::Kind::kCorrupt, "database " + path_ + ": image id " +
                                                     std::to_string(id) + ": " + e.what() +
                                                     "; run `lookalike verify`");
  }
}

std::vector<std::optional<std::string>> Store::GetThumbnails(
    const std::vector<uint64_t>& ids) const {
  std::vector<std::string> keys;
  keys.reserve(ids.size());
  for (uint64_t id : ids) keys.push_back(ThumbnailKey(id));
  const auto [values, statuses] = impl_->MultiGet(keys);
  std::vector<std::optional<std::string>> out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (statuses[i].IsNotFound()) continue;
    if (!statuses[i].ok()) throw IoError(path_, statuses[i], "read the thumbnails of");
    try {
      out[i].emplace(values[i].data(), CheckImageBlob(values[i].data(), values[i].size(),
                                                      layout_.image_hash, kThumbnailWhat));
    } catch (const encoding::CorruptValue& e) {
      throw StoreError(StoreError::Kind::kCorrupt, "database " + path_ + ": image id " +
                                                       std::to_string(ids[i]) + ": " + e.what() +
                                                       "; run `lookalike verify`");
    }
  }
  return out;
}

void Store::PutThumbnail(uint64_t id, const std::string& thumbnail) {
  if (impl_->read_only)
    throw StoreError(StoreError::Kind::kIo, "database " + path_ + " is open read-only");
  if (thumbnail.empty())
    throw std::invalid_argument("refusing to store an empty thumbnail for image id " +
                                std::to_string(id));
  if (!impl_->Get(ImageKey(id)))
    throw std::invalid_argument("cannot store a thumbnail for image id " + std::to_string(id) +
                                ": database " + path_ + " holds no such image");
  rocksdb::WriteBatch batch;
  PutImageBlob(&batch, ThumbnailKey(id), thumbnail, layout_.image_hash);
  const rocksdb::Status s = impl_->Write(&batch);
  if (!s.ok()) throw IoError(path_, s, "write to");
}

std::vector<uint64_t> Store::IdsWithThumbnails() const {
  const std::string upper = "t;";  // every key of "t:" sorts before it
  const rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(ro));
  std::vector<uint64_t> ids;
  for (it->Seek(kThumbnailPrefix); it->Valid(); it->Next()) {
    if (it->key().size() != 10)
      throw StoreError(StoreError::Kind::kCorrupt, "database " + path_ + ": malformed key " +
                                                       it->key().ToString(true) +
                                                       "; run `lookalike verify`");
    ids.push_back(encoding::ParseBigEndian64(it->key().data() + 2));
  }
  if (!it->status().ok()) throw IoError(path_, it->status(), "read the thumbnails of");
  return ids;
}

void Store::PutImage(ImageRecord* record, const float* vector, const std::string& features,
                     const std::string& thumbnail) {
  const bool is_new = record->id == 0;
  if (is_new) record->id = next_id_;
  try {
    WriteImage(*record, vector, features, thumbnail,
               !is_new && has_totals_ ? FindById(record->id) : std::nullopt, is_new);
  } catch (...) {
    if (is_new) record->id = 0;
    throw;
  }
}

void Store::PutImageWithId(const ImageRecord& record, const float* vector,
                           const std::string& features, const std::string& thumbnail) {
  if (record.id == 0)
    throw StoreError(StoreError::Kind::kIo, "cannot store " + record.path + " under id 0");
  const std::optional<ImageRecord> before = FindById(record.id);
  WriteImage(record, vector, features, thumbnail, before, !before);
}

void Store::WriteImage(const ImageRecord& record, const float* vector, const std::string& features,
                       const std::string& thumbnail, const std::optional<ImageRecord>& before,
                       bool is_new) {
  if (impl_->read_only)
    throw StoreError(StoreError::Kind::kIo, "database " + path_ + " is open read-only");
  const uint64_t dim = vector_dim_;
  for (uint64_t i = 0; i < dim; ++i)
    if (!std::isfinite(vector[i]))
      throw StoreError(StoreError::Kind::kIo,
                       "refusing to store a non-finite vector for " + record.path);
  rocksdb::WriteBatch batch;
  ImageTotals totals = totals_;
  if (has_totals_) {
    totals = Updated(totals_, before, &record);
    batch.Put(kTotalsKey, EncodeTotals(totals));
  }
  const uint64_t next_id = std::max(next_id_, record.id + 1);
  const uint64_t count = num_images_ + (is_new ? 1 : 0);
  if (next_id != next_id_) batch.Put(kNextIdKey, EncodeU64(next_id));
  if (count != num_images_) batch.Put(kCountKey, EncodeU64(count));
  if (before && before->path != record.path) batch.Delete(PathKey(before->path));
  batch.Put(ImageKey(record.id), EncodeRecord(record, stores_colour()));
  if (dim > 0)
    PutVector(&batch, VectorKey(record.id), vector, dim, half_vectors(), layout_.image_hash);
  if (features.empty())
    batch.Delete(FeaturesKey(record.id));  // a replaced image keeps no stale features
  else
    PutImageBlob(&batch, FeaturesKey(record.id), features, layout_.image_hash);
  if (thumbnail.empty())
    batch.Delete(ThumbnailKey(record.id));  // nor a stale thumbnail
  else
    PutImageBlob(&batch, ThumbnailKey(record.id), thumbnail, layout_.image_hash);
  batch.Put(PathKey(record.path), EncodeU64(record.id));
  const rocksdb::Status s = impl_->Write(&batch);
  if (!s.ok()) throw IoError(path_, s, "write to");
  next_id_ = next_id;
  num_images_ = count;
  totals_ = totals;
}

void Store::AddProjection(const ProjectionRecord& projection, const std::vector<uint64_t>& ids,
                          const float* vectors) {
  WriteProjection(projection, ids, vectors, /*replace=*/false);
}

void Store::ReplaceProjection(const ProjectionRecord& projection, const std::vector<uint64_t>& ids,
                              const float* vectors) {
  WriteProjection(projection, ids, vectors, /*replace=*/true);
}

void Store::WriteProjection(const ProjectionRecord& projection, const std::vector<uint64_t>& ids,
                            const float* vectors, bool replace) {
  if (impl_->read_only)
    throw StoreError(StoreError::Kind::kIo, "database " + path_ + " is open read-only");
  if (!layout_.compact)
    throw std::invalid_argument("database " + path_ + " stores full vectors (schema " +
                                std::to_string(layout_.version) + ")");
  const bool has = vector_dim_ != 0 || impl_->Get(kProjectionKey);
  if (has != replace)
    throw std::invalid_argument("database " + path_ +
                                (has ? " already has a projection" : " has no projection"));
  if (!projection.Maps(model_.vlad_dim()) || !projection.SizesConsistent() ||
      projection.out_dim == 0)
    throw std::invalid_argument("the projection does not fit the database's VLAD vectors");
  if (ids.size() != num_images_)
    throw std::invalid_argument("a projection needs the search vector of all " +
                                std::to_string(num_images_) + " images, got " +
                                std::to_string(ids.size()));
  std::vector<uint64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw std::invalid_argument("a projection's search vectors name an image twice");
  const uint64_t dim = projection.out_dim;
  for (uint64_t i = 0; i < ids.size() * dim; ++i)
    if (!std::isfinite(vectors[i]))
      throw std::invalid_argument("refusing to store a non-finite search vector");
  rocksdb::WriteBatch batch;
  if (replace) {
    // Built from the old vectors; its keys go with them.
    batch.Delete(kSearchIndexKey);
    batch.DeleteRange("x:", "x;");
    batch.DeleteRange("w:", "w;");
    // Lists learned from the old projection's vectors: the database trains
    // its own from now on.
    batch.Delete(kModelSearchQuantizerKey);
  }
  batch.Put(kProjectionKey, EncodeProjection(projection));
  std::string vdim;
  encoding::PutFixed32(&vdim, static_cast<uint32_t>(dim));
  batch.Put(kVectorDimKey, vdim);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!impl_->Get(ImageKey(ids[i])))
      throw std::invalid_argument("a projection's search vectors name image " +
                                  std::to_string(ids[i]) + ", which is not stored");
    PutVector(&batch, VectorKey(ids[i]), vectors + i * dim, dim, half_vectors(),
              layout_.image_hash);
  }
  ImageTotals totals = totals_;
  if (has_totals_) {
    ++totals.generation;
    batch.Put(kTotalsKey, EncodeTotals(totals));
  }
  const rocksdb::Status s = impl_->Write(&batch);
  if (!s.ok()) throw IoError(path_, s, "write to");
  vector_dim_ = dim;
  totals_ = totals;
  if (replace) {
    // The old matrix, vectors and index would otherwise stay on disk until
    // some later compaction reaches them (a collection of 300 photos grown
    // from 150: 33.9 KiB per photo against 28.5 for a new one). Only the
    // rewritten key ranges: their files hold little else.
    for (const char* prefix : {"m", "v", "w", "x"})
      CompactKeys(std::string(prefix) + ":", std::string(prefix) + ";");
  }
}

void Store::CompactKeys(const std::string& from, const std::string& to) {
  const rocksdb::Slice begin(from), end(to);
  const rocksdb::Status c =
      impl_->Checked(impl_->db->CompactRange(rocksdb::CompactRangeOptions(), &begin, &end));
  if (!c.ok()) throw IoError(path_, c, "compact");
}

void Store::RaiseNextId(uint64_t next_id) {
  if (impl_->read_only)
    throw StoreError(StoreError::Kind::kIo, "database " + path_ + " is open read-only");
  if (next_id <= next_id_) return;
  const rocksdb::Status s =
      impl_->Checked(impl_->db->Put(rocksdb::WriteOptions(), kNextIdKey, EncodeU64(next_id)));
  if (!s.ok()) throw IoError(path_, s, "write to");
  next_id_ = next_id;
}

void Store::UpdateRecord(const ImageRecord& record) {
  if (impl_->read_only)
    throw StoreError(StoreError::Kind::kIo, "database " + path_ + " is open read-only");
  rocksdb::WriteBatch batch;
  ImageTotals totals = totals_;
  if (has_totals_) {
    totals = Updated(totals_, FindById(record.id), &record);
    batch.Put(kTotalsKey, EncodeTotals(totals));
  }
  batch.Put(ImageKey(record.id), EncodeRecord(record, stores_colour()));
  const rocksdb::Status s = impl_->Write(&batch);
  if (!s.ok()) throw IoError(path_, s, "write to");
  totals_ = totals;
}

void Store::RemoveImage(const ImageRecord& record) {
  if (impl_->read_only)
    throw StoreError(StoreError::Kind::kIo, "database " + path_ + " is open read-only");
  rocksdb::WriteBatch batch;
  ImageTotals totals = totals_;
  if (has_totals_) {
    // What is stored counts, not what the caller believes.
    totals = Updated(totals_, FindById(record.id), nullptr);
    batch.Put(kTotalsKey, EncodeTotals(totals));
  }
  batch.Delete(ImageKey(record.id));
  batch.Delete(VectorKey(record.id));
  batch.Delete(FeaturesKey(record.id));
  batch.Delete(ThumbnailKey(record.id));
  batch.Delete(PathKey(record.path));
  batch.Put(kCountKey, EncodeU64(num_images_ - 1));
  const rocksdb::Status s = impl_->Write(&batch);
  if (!s.ok()) throw IoError(path_, s, "write to");
  --num_images_;
  totals_ = totals;
}

uint64_t Store::SizeOnDisk() const {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : fs::recursive_directory_iterator(path_, ec))
    if (entry.is_regular_file(ec)) total += entry.file_size(ec);
  return total;
}

void Store::Flush() {
  if (impl_->read_only) return;
  const rocksdb::Status s = impl_->db->Flush(rocksdb::FlushOptions());
  if (!s.ok()) throw IoError(path_, s, "flush");
}

}  // namespace lookalike
