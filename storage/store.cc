#include "storage/store.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <filesystem>
#include <system_error>

#include <xxhash.h>

#include "storage/encoding.h"

namespace lookalike {
namespace fs = std::filesystem;
using encoding::Reader;

HashKind HashKindForSchema(uint32_t schema_version) {
  return schema_version >= 2 ? HashKind::kXxh3_64 : HashKind::kFnv1a64;
}

const char* HashKindName(HashKind kind) {
  return kind == HashKind::kXxh3_64 ? "xxh3-64" : "fnv1a-64";
}

uint64_t Hash64(HashKind kind, const void* data, size_t size) {
  if (kind == HashKind::kXxh3_64) return XXH3_64bits(data, size);
  return encoding::Fnv1a64(data, size);
}

namespace {

// "<what>: checksum mismatch (stored …, computed …)": the words the CLI and
// the tests look for, with both hashes so a report says which side changed.
encoding::CorruptValue ChecksumMismatch(const std::string& what, uint64_t stored,
                                        uint64_t computed) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "stored %016llx, computed %016llx",
                static_cast<unsigned long long>(stored),
                static_cast<unsigned long long>(computed));
  return encoding::CorruptValue((what.empty() ? "" : what + ": ") + "checksum mismatch (" +
                                buf + ")");
}

const char kSchemaKey[] = "m:schema";
const char kModelKey[] = "m:model";
const char kNextIdKey[] = "m:next_id";
const char kCountKey[] = "m:count";
const char kProjectionKey[] = "m:pca";
const char kSearchIndexKey[] = "m:xindex";
constexpr uint32_t kSearchIndexFormat = 1;
constexpr size_t kSearchIndexChunk = size_t{4} << 20;

std::string SearchIndexChunkKey(uint32_t chunk) {
  std::string k = "x:";
  for (int i = 3; i >= 0; --i) k.push_back(static_cast<char>((chunk >> (8 * i)) & 0xff));
  return k;
}

// m:xindex decoded: the blob's size, chunk count and checksum.
struct SearchIndexMeta {
  uint64_t size = 0;
  uint32_t chunks = 0;
  uint64_t checksum = 0;
};

SearchIndexMeta DecodeSearchIndexMeta(const std::string& value) {
  Reader r(value, "search index header (m:xindex)");
  const uint32_t format = r.Fixed32();
  if (format != kSearchIndexFormat)
    throw encoding::CorruptValue("search index header: format " + std::to_string(format) +
                                 ", this build reads " + std::to_string(kSearchIndexFormat));
  SearchIndexMeta m;
  m.size = r.Fixed64();
  m.chunks = r.Fixed32();
  m.checksum = r.Fixed64();
  r.ExpectEnd();
  if (m.chunks != (m.size + kSearchIndexChunk - 1) / kSearchIndexChunk)
    throw encoding::CorruptValue("search index header: " + std::to_string(m.chunks) +
                                 " chunks cannot hold " + std::to_string(m.size) + " bytes");
  return m;
}
constexpr uint32_t kProjectionFormat = 1;

std::string ImageKey(uint64_t id) { return "i:" + encoding::BigEndian64(id); }
std::string VectorKey(uint64_t id) { return "v:" + encoding::BigEndian64(id); }
std::string PathKey(const std::string& path) { return "p:" + path; }
std::string FeaturesKey(uint64_t id) { return "f:" + encoding::BigEndian64(id); }

// Puts f:<id> = blob, u64 hash of the blob. The blob goes into the batch
// straight from the caller's string (no intermediate copy).
void PutFeatures(rocksdb::WriteBatch* batch, const std::string& key, const std::string& blob,
                 HashKind kind) {
  std::string tail;
  encoding::PutFixed64(&tail, Hash64(kind, blob.data(), blob.size()));
  const rocksdb::Slice key_part(key);
  const rocksdb::Slice parts[2] = {rocksdb::Slice(blob), rocksdb::Slice(tail)};
  batch->Put(rocksdb::SliceParts(&key_part, 1), rocksdb::SliceParts(parts, 2));
}

// Throws CorruptValue unless an f: value ends with the hash of its blob;
// returns the blob's size.
size_t CheckFeatures(const std::string& value, HashKind kind) {
  if (value.size() < 8) throw encoding::CorruptValue("local features: too short");
  const size_t n = value.size() - 8;
  const uint64_t stored = Reader(value.data() + n, 8, "local features").Fixed64();
  const uint64_t computed = Hash64(kind, value.data(), n);
  if (stored != computed) throw ChecksumMismatch("local features", stored, computed);
  return n;
}

// Puts v:<id> = u32 dim, dim x f32 little-endian, u64 hash of the float
// bytes. On a little-endian host the floats go into the batch straight from
// `v`: the 256 KiB value is copied once, by the batch, and never encoded
// into a string first.
void PutVector(rocksdb::WriteBatch* batch, const std::string& key, const float* v,
               uint64_t dim, HashKind kind) {
  std::string head, swapped, tail;
  encoding::PutFixed32(&head, static_cast<uint32_t>(dim));
  rocksdb::Slice floats(reinterpret_cast<const char*>(v), dim * 4);
  if (!encoding::kLittleEndianHost) {
    swapped.reserve(dim * 4);
    encoding::PutFloats(&swapped, v, dim);
    floats = rocksdb::Slice(swapped);
  }
  encoding::PutFixed64(&tail, Hash64(kind, floats.data(), floats.size()));
  const rocksdb::Slice key_part(key);
  const rocksdb::Slice parts[3] = {rocksdb::Slice(head), floats, rocksdb::Slice(tail)};
  batch->Put(rocksdb::SliceParts(&key_part, 1), rocksdb::SliceParts(parts, 3));
}

// Checks a v: value (dimension, size, hash) and returns its float bytes
// (dim x 4, little-endian); throws CorruptValue.
const char* CheckVector(const char* data, size_t size, uint64_t dim, HashKind kind) {
  Reader r(data, size, "vector");
  if (r.Fixed32() != dim) throw encoding::CorruptValue("wrong dimension");
  const char* raw = r.Raw(dim * 4);
  const uint64_t stored = r.Fixed64();
  r.ExpectEnd();
  const uint64_t computed = Hash64(kind, raw, dim * 4);
  if (stored != computed) throw ChecksumMismatch("", stored, computed);
  return raw;
}

std::string EncodeU64(uint64_t v) {
  std::string s;
  encoding::PutFixed64(&s, v);
  return s;
}

std::string EncodeModel(const ModelRecord& m) {
  std::string s;
  encoding::PutBytes(&s, m.descriptor_type);
  encoding::PutFixed32(&s, m.dim);
  encoding::PutFixed32(&s, m.num_clusters);
  encoding::PutFixed32(&s, m.max_side);
  encoding::PutFloat(&s, m.contrast_threshold);
  encoding::PutFixed32(&s, m.max_features);
  encoding::PutFloat(&s, m.power_alpha);
  encoding::PutFixed32(&s, (m.intra_normalize ? 1u : 0u) |
                               (m.residual_normalize ? 2u : 0u));
  encoding::PutFixed64(&s, m.seed);
  encoding::PutFixed64(&s, m.codebook_hash);
  encoding::PutFixed64(&s, m.centroids.size());
  for (float v : m.centroids) encoding::PutFloat(&s, v);
  // Fields added after schema 1 shipped go last, so older models still
  // decode, followed by an FNV-1a of the whole value: the codebook hash
  // covers only the centroids, and a flipped settings byte would otherwise
  // change how queries are encoded without a word.
  encoding::PutFixed32(&s, m.min_keypoints);
  encoding::PutFixed64(&s, encoding::Fnv1a64(s.data(), s.size()));
  return s;
}

ModelRecord DecodeModel(const std::string& value) {
  Reader r(value, "model");
  ModelRecord m;
  m.descriptor_type = r.Bytes();
  m.dim = r.Fixed32();
  m.num_clusters = r.Fixed32();
  m.max_side = r.Fixed32();
  m.contrast_threshold = r.Float();
  m.max_features = r.Fixed32();
  m.power_alpha = r.Float();
  const uint32_t flags = r.Fixed32();
  m.intra_normalize = flags & 1u;
  m.residual_normalize = flags & 2u;
  m.seed = r.Fixed64();
  m.codebook_hash = r.Fixed64();
  const uint64_t n = r.Fixed64();
  if (n != m.vlad_dim() || n > (uint64_t{1} << 28))
    throw encoding::CorruptValue("model: codebook has " + std::to_string(n) +
                                 " values, expected K x dim = " +
                                 std::to_string(m.vlad_dim()));
  m.centroids.resize(n);
  for (uint64_t i = 0; i < n; ++i) m.centroids[i] = r.Float();
  if (r.remaining() > 0) {  // written by builds with min_keypoints
    m.min_keypoints = r.Fixed32();
    const uint64_t covered = value.size() - r.remaining();
    const uint64_t stored = r.Fixed64();
    const uint64_t computed = encoding::Fnv1a64(value.data(), covered);
    if (stored != computed) throw ChecksumMismatch("model", stored, computed);
  }
  r.ExpectEnd();
  const uint64_t hash = encoding::Fnv1a64(m.centroids.data(), n * sizeof(float));
  if (hash != m.codebook_hash) throw ChecksumMismatch("model: codebook", m.codebook_hash, hash);
  return m;
}

// m:pca: u32 format, u32 in_dim, u32 out_dim, u32 num_samples, u32 flags
// (1 whiten, 2 half precision), f32 eigen regularisation, f32 power alpha,
// in_dim f32 mean, out_dim f32 eigenvalues, out_dim x in_dim components (f16
// or f32), u64 FNV-1a of everything before it.
std::string EncodeProjection(const ProjectionRecord& p) {
  const uint64_t n = uint64_t{p.out_dim} * p.in_dim;
  if (p.mean.size() != p.in_dim || p.eigenvalues.size() != p.out_dim ||
      p.components.size() != n)
    throw StoreError(StoreError::Kind::kIo, "projection has inconsistent sizes");
  std::string s;
  s.reserve(36 + 4 * (p.in_dim + p.out_dim) + n * (p.half_precision ? 2 : 4) + 8);
  encoding::PutFixed32(&s, kProjectionFormat);
  encoding::PutFixed32(&s, p.in_dim);
  encoding::PutFixed32(&s, p.out_dim);
  encoding::PutFixed32(&s, p.num_samples);
  encoding::PutFixed32(&s, (p.whiten ? 1u : 0u) | (p.half_precision ? 2u : 0u));
  encoding::PutFloat(&s, p.eigen_regularization);
  encoding::PutFloat(&s, p.power_alpha);
  for (float v : p.mean) encoding::PutFloat(&s, v);
  for (float v : p.eigenvalues) encoding::PutFloat(&s, v);
  const size_t at = s.size();
  if (p.half_precision) {
    s.resize(at + 2 * n);
    for (uint64_t i = 0; i < n; ++i) {
      const uint16_t h = encoding::FloatToHalf(p.components[i]);
      s[at + 2 * i] = static_cast<char>(h & 0xff);
      s[at + 2 * i + 1] = static_cast<char>(h >> 8);
    }
  } else {
    s.resize(at + 4 * n);
    for (uint64_t i = 0; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &p.components[i], 4);
      for (int b = 0; b < 4; ++b) s[at + 4 * i + b] = static_cast<char>((bits >> (8 * b)) & 0xff);
    }
  }
  encoding::PutFixed64(&s, encoding::Fnv1a64(s.data(), s.size()));
  return s;
}

ProjectionRecord DecodeProjection(const std::string& value, uint64_t vlad_dim) {
  if (value.size() < 8) throw encoding::CorruptValue("projection: too short");
  const size_t body = value.size() - 8;
  const uint64_t stored = Reader(value.data() + body, 8, "projection").Fixed64();
  const uint64_t computed = encoding::Fnv1a64(value.data(), body);
  if (stored != computed) throw ChecksumMismatch("projection (m:pca)", stored, computed);
  Reader r(value.data(), body, "projection");
  const uint32_t format = r.Fixed32();
  if (format != kProjectionFormat)
    throw encoding::CorruptValue("projection: format " + std::to_string(format) +
                                 ", this build reads " + std::to_string(kProjectionFormat));
  ProjectionRecord p;
  p.in_dim = r.Fixed32();
  p.out_dim = r.Fixed32();
  p.num_samples = r.Fixed32();
  const uint32_t flags = r.Fixed32();
  p.whiten = flags & 1u;
  p.half_precision = flags & 2u;
  p.eigen_regularization = r.Float();
  p.power_alpha = r.Float();
  if (p.in_dim != vlad_dim || p.out_dim == 0 || p.out_dim > p.in_dim)
    throw encoding::CorruptValue("projection: maps " + std::to_string(p.in_dim) + " -> " +
                                 std::to_string(p.out_dim) +
                                 " dimensions, the model's VLAD has " +
                                 std::to_string(vlad_dim));
  p.mean.resize(p.in_dim);
  for (float& v : p.mean) v = r.Float();
  p.eigenvalues.resize(p.out_dim);
  for (float& v : p.eigenvalues) v = r.Float();
  const uint64_t n = uint64_t{p.out_dim} * p.in_dim;
  p.components.resize(n);
  if (p.half_precision) {
    // A table of all 65536 halves decodes tens of millions of them fast.
    static const std::vector<float> table = [] {
      std::vector<float> t(65536);
      for (uint32_t h = 0; h < 65536; ++h) t[h] = encoding::HalfToFloat(static_cast<uint16_t>(h));
      return t;
    }();
    const auto* raw = reinterpret_cast<const unsigned char*>(r.Raw(2 * n));
    for (uint64_t i = 0; i < n; ++i)
      p.components[i] = table[raw[2 * i] | (uint32_t{raw[2 * i + 1]} << 8)];
  } else {
    const char* raw = r.Raw(4 * n);
    for (uint64_t i = 0; i < n; ++i) {
      uint32_t bits = 0;
      for (int b = 3; b >= 0; --b) bits = (bits << 8) | static_cast<unsigned char>(raw[4 * i + b]);
      std::memcpy(&p.components[i], &bits, 4);
    }
  }
  r.ExpectEnd();
  return p;
}

std::string EncodeRecord(const ImageRecord& r, bool with_colour) {
  std::string s;
  encoding::PutFixed64(&s, r.id);
  encoding::PutBytes(&s, r.path);
  encoding::PutFixed64(&s, r.size_bytes);
  encoding::PutFixed64(&s, static_cast<uint64_t>(r.mtime_ns));
  encoding::PutFixed64(&s, r.content_hash);
  encoding::PutFixed32(&s, r.width);
  encoding::PutFixed32(&s, r.height);
  encoding::PutFixed32(&s, r.num_descriptors);
  encoding::PutFixed32(&s, static_cast<uint32_t>(r.status));
  // Schema 2 appends the colour histogram (length-prefixed); schema-1 records
  // end here, as the builds that read schema 1 expect.
  if (with_colour) encoding::PutBytes(&s, std::string(r.colour.begin(), r.colour.end()));
  return s;
}

ImageRecord DecodeRecord(const char* data, size_t size) {
  Reader r(data, size, "image record");
  ImageRecord rec;
  rec.id = r.Fixed64();
  rec.path = r.Bytes();
  rec.size_bytes = r.Fixed64();
  rec.mtime_ns = static_cast<int64_t>(r.Fixed64());
  rec.content_hash = r.Fixed64();
  rec.width = r.Fixed32();
  rec.height = r.Fixed32();
  rec.num_descriptors = r.Fixed32();
  const uint32_t status = r.Fixed32();
  if (status > 1) throw encoding::CorruptValue("image record: unknown status");
  rec.status = static_cast<ImageStatus>(status);
  if (r.remaining() > 0) {
    const std::string colour = r.Bytes();
    rec.colour.assign(colour.begin(), colour.end());
  }
  r.ExpectEnd();
  return rec;
}

StoreError IoError(const std::string& path, const rocksdb::Status& s,
                   const std::string& doing) {
  const std::string msg = s.ToString();
  if (s.IsIOError() && (msg.find("lock") != std::string::npos ||
                        msg.find("Resource temporarily unavailable") != std::string::npos))
    return StoreError(StoreError::Kind::kLocked,
                      "index in use by another process: " + path +
                          " is locked by a running 'lookalike index'; wait for it "
                          "to finish (search and info work meanwhile)");
  if (s.IsCorruption())
    return StoreError(StoreError::Kind::kCorrupt,
                      "database " + path + " is corrupt (" + msg + ") while " + doing);
  return StoreError(StoreError::Kind::kIo,
                    "cannot " + doing + " database " + path + ": " + msg);
}

// The folder a database folder lives in ("." for a bare name).
fs::path ParentFolder(const fs::path& target) {
  return target.has_parent_path() ? target.parent_path() : fs::path(".");
}

// The creation lock beside a database: "<parent>/.<name>.lock".
fs::path CreationLockPath(const fs::path& target) {
  return ParentFolder(target) / ("." + target.filename().string() + ".lock");
}

}  // namespace

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

struct Store::Impl {
  std::unique_ptr<rocksdb::DB> db;
  bool read_only = false;

  std::optional<std::string> Get(const std::string& key) const {
    std::string value;
    const rocksdb::Status s = db->Get(rocksdb::ReadOptions(), key, &value);
    if (s.IsNotFound()) return std::nullopt;
    if (!s.ok()) throw StoreError(StoreError::Kind::kIo, "read failed: " + s.ToString());
    return value;
  }
};

Store::Store(std::string path, std::unique_ptr<Impl> impl)
    : path_(std::move(path)), impl_(std::move(impl)) {}

Store::~Store() {
  if (impl_ && impl_->db) impl_->db->Close().PermitUncheckedError();
}

bool Store::IsDatabase(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec) || !fs::exists(fs::path(path) / "CURRENT", ec))
    return false;
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
      throw StoreError(StoreError::Kind::kNotADatabase,
                       "database path " + path + " is a file, not a directory; "
                       "choose another --db");
    if (!fs::is_empty(target, ec))
      throw StoreError(StoreError::Kind::kNotADatabase,
                       "refusing to create a database in " + path +
                           ": the folder is not empty and is not a lookalike "
                           "database; choose an empty or new --db folder");
  }
  const fs::path parent = ParentFolder(target);
  if (!fs::is_directory(parent, ec))
    throw StoreError(StoreError::Kind::kIo,
                     "cannot create database " + path + ": parent folder " +
                         parent.string() + " does not exist");
}

std::unique_ptr<Store> Store::Create(const std::string& path,
                                     const ModelRecord& model,
                                     const ProjectionRecord* projection,
                                     uint32_t schema_version) {
  if (schema_version < kOldestSchemaVersion || schema_version > kSchemaVersion)
    throw StoreError(StoreError::Kind::kSchema,
                     "cannot create a schema " + std::to_string(schema_version) +
                         " database: this build writes " +
                         std::to_string(kOldestSchemaVersion) + " to " +
                         std::to_string(kSchemaVersion));
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
    throw StoreError(StoreError::Kind::kIo,
                     "cannot create database " + path + ": " + ec.message());
  }
  return Open(path, Mode::kReadWrite);
}

std::unique_ptr<Store> Store::Open(const std::string& path, Mode mode) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw StoreError(StoreError::Kind::kNotFound,
                     "database " + path + " does not exist; create it with "
                     "'lookalike index DIR --db " + path + "'");
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
  options.keep_log_file_num = 4;  // RocksDB's info LOG rotates at every open
  options.max_open_files = -1;  // open every table file now: a running writer may
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
  return store;
}

void Store::LoadMeta() {
  const auto schema = impl_->Get(kSchemaKey);
  if (!schema)
    throw StoreError(StoreError::Kind::kNotADatabase,
                     path_ + " is a RocksDB database but not a lookalike database "
                             "(no schema key); choose another --db");
  uint32_t version = 0;
  try {
    Reader r(*schema, "schema");
    version = r.Fixed32();
  } catch (const encoding::CorruptValue& e) {
    throw StoreError(StoreError::Kind::kCorrupt, path_ + ": " + e.what());
  }
  if (version > kSchemaVersion)
    throw StoreError(StoreError::Kind::kSchema,
                     "database schema " + std::to_string(version) +
                         " is newer than this build reads (" +
                         std::to_string(kSchemaVersion) + "); upgrade lookalike");
  if (version < kOldestSchemaVersion)
    throw StoreError(StoreError::Kind::kSchema,
                     "database schema " + std::to_string(version) +
                         " is older than this build reads (" +
                         std::to_string(kOldestSchemaVersion) + " to " +
                         std::to_string(kSchemaVersion) +
                         "); re-index the folder into a new --db");
  // Decided once: every per-image value of a database uses its schema's hash.
  schema_version_ = version;
  hash_kind_ = HashKindForSchema(version);
  try {
    const auto model = impl_->Get(kModelKey);
    if (!model) throw encoding::CorruptValue("model missing");
    model_ = DecodeModel(*model);
    const auto next = impl_->Get(kNextIdKey);
    const auto count = impl_->Get(kCountKey);
    if (!next || !count) throw encoding::CorruptValue("counters missing");
    next_id_ = Reader(*next, "next id").Fixed64();
    num_images_ = Reader(*count, "image count").Fixed64();
  } catch (const encoding::CorruptValue& e) {
    throw StoreError(StoreError::Kind::kCorrupt,
                     "database " + path_ + " is corrupt: " + e.what() +
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

void Store::ForEachImage(const std::function<void(const ImageRecord&)>& fn) const {
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek("i:"); it->Valid() && it->key().starts_with("i:"); it->Next())
    fn(DecodeRecord(it->value().data(), it->value().size()));
  if (!it->status().ok()) throw IoError(path_, it->status(), "read");
}

void Store::ForEachVector(
    const std::function<void(const ImageRecord&, const float*)>& fn) const {
  // One consistent snapshot so a concurrent writer never shows a torn state.
  rocksdb::ReadOptions ro;
  const rocksdb::Snapshot* snapshot = impl_->read_only ? nullptr : impl_->db->GetSnapshot();
  ro.snapshot = snapshot;
  std::unique_ptr<rocksdb::Iterator> records(impl_->db->NewIterator(ro));
  const uint64_t dim = model_.vlad_dim();
  std::vector<float> vec(dim);
  std::string value;
  for (records->Seek("i:"); records->Valid() && records->key().starts_with("i:");
       records->Next()) {
    const ImageRecord rec = DecodeRecord(records->value().data(), records->value().size());
    const rocksdb::Status s = impl_->db->Get(ro, VectorKey(rec.id), &value);
    if (!s.ok())
      throw StoreError(StoreError::Kind::kCorrupt,
                       "database " + path_ + ": vector of " + rec.path +
                           " unreadable (" + s.ToString() + ")");
    try {
      encoding::GetFloats(CheckVector(value.data(), value.size(), dim, hash_kind_), dim,
                          vec.data());
    } catch (const encoding::CorruptValue& e) {
      if (snapshot) impl_->db->ReleaseSnapshot(snapshot);
      throw StoreError(StoreError::Kind::kCorrupt,
                       "database " + path_ + ": vector of " + rec.path + ": " + e.what());
    }
    fn(rec, vec.data());
  }
  const rocksdb::Status s = records->status();
  records.reset();
  if (snapshot) impl_->db->ReleaseSnapshot(snapshot);
  if (!s.ok()) throw IoError(path_, s, "read");
}

std::optional<std::vector<float>> Store::GetVector(uint64_t id) const {
  const auto value = impl_->Get(VectorKey(id));
  if (!value) return std::nullopt;
  const uint64_t dim = model_.vlad_dim();
  std::vector<float> vec(dim);
  try {
    encoding::GetFloats(CheckVector(value->data(), value->size(), dim, hash_kind_), dim,
                        vec.data());
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
    throw StoreError(StoreError::Kind::kCorrupt,
                     "database " + path_ + " is corrupt: " + e.what() +
                         "; run 'lookalike index' into a new --db");
  }
}

std::optional<std::string> Store::GetSearchIndex() const {
  // One snapshot, so a writer replacing the index meanwhile is never mixed in.
  rocksdb::ReadOptions ro;
  const rocksdb::Snapshot* snapshot = impl_->read_only ? nullptr : impl_->db->GetSnapshot();
  ro.snapshot = snapshot;
  std::string header, blob, chunk;
  std::string problem;
  rocksdb::Status s = impl_->db->Get(ro, kSearchIndexKey, &header);
  if (s.ok()) {
    try {
      const SearchIndexMeta meta = DecodeSearchIndexMeta(header);
      blob.reserve(meta.size);
      for (uint32_t c = 0; c < meta.chunks && problem.empty(); ++c) {
        s = impl_->db->Get(ro, SearchIndexChunkKey(c), &chunk);
        if (!s.ok()) problem = "chunk " + std::to_string(c) + " unreadable (" + s.ToString() + ")";
        blob += chunk;
      }
      if (problem.empty() && blob.size() != meta.size)
        problem = "holds " + std::to_string(blob.size()) + " bytes, header says " +
                  std::to_string(meta.size);
      if (problem.empty() && encoding::Fnv1a64(blob.data(), blob.size()) != meta.checksum)
        problem = "checksum mismatch";
    } catch (const encoding::CorruptValue& e) {
      problem = e.what();
    }
  } else if (!s.IsNotFound()) {
    problem = "header unreadable (" + s.ToString() + ")";
  }
  if (snapshot) impl_->db->ReleaseSnapshot(snapshot);
  if (!problem.empty())
    throw StoreError(StoreError::Kind::kCorrupt,
                     "database " + path_ + ": persisted search index: " + problem +
                         "; it is rebuilt from the stored vectors (run `lookalike index` to "
                         "rewrite it, `lookalike verify` to check the rest)");
  if (s.IsNotFound()) return std::nullopt;
  return blob;
}

void Store::PutSearchIndex(const std::string& blob) {
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
  encoding::PutFixed64(&header, encoding::Fnv1a64(blob.data(), blob.size()));
  batch.Put(kSearchIndexKey, header);
  const rocksdb::Status s = impl_->db->Write(rocksdb::WriteOptions(), &batch);
  if (!s.ok()) throw IoError(path_, s, "write to");
}

std::optional<std::string> Store::GetFeatures(uint64_t id) const {
  auto value = impl_->Get(FeaturesKey(id));
  if (!value) return std::nullopt;
  try {
    value->resize(CheckFeatures(*value, hash_kind_));
    return std::move(*value);
  } catch (const encoding::CorruptValue& e) {
    throw StoreError(StoreError::Kind::kCorrupt, "database " + path_ + ": image id " +
                                                     std::to_string(id) + ": " + e.what() +
                                                     "; run `lookalike verify`");
  }
}

void Store::PutImage(ImageRecord* record, const float* vector, const std::string& features) {
  if (impl_->read_only)
    throw StoreError(StoreError::Kind::kIo, "database " + path_ + " is open read-only");
  const uint64_t dim = model_.vlad_dim();
  for (uint64_t i = 0; i < dim; ++i)
    if (!std::isfinite(vector[i]))
      throw StoreError(StoreError::Kind::kIo,
                       "refusing to store a non-finite vector for " + record->path);
  rocksdb::WriteBatch batch;
  uint64_t next_id = next_id_, count = num_images_;
  if (record->id == 0) {
    record->id = next_id++;
    ++count;
    batch.Put(kNextIdKey, EncodeU64(next_id));
    batch.Put(kCountKey, EncodeU64(count));
  }
  batch.Put(ImageKey(record->id), EncodeRecord(*record, stores_colour()));
  PutVector(&batch, VectorKey(record->id), vector, dim, hash_kind_);
  if (features.empty())
    batch.Delete(FeaturesKey(record->id));  // a replaced image keeps no stale features
  else
    PutFeatures(&batch, FeaturesKey(record->id), features, hash_kind_);
  batch.Put(PathKey(record->path), EncodeU64(record->id));
  const rocksdb::Status s = impl_->db->Write(rocksdb::WriteOptions(), &batch);
  if (!s.ok()) {
    if (next_id != next_id_) record->id = 0;
    throw IoError(path_, s, "write to");
  }
  next_id_ = next_id;
  num_images_ = count;
}

void Store::UpdateRecord(const ImageRecord& record) {
  if (impl_->read_only)
    throw StoreError(StoreError::Kind::kIo, "database " + path_ + " is open read-only");
  rocksdb::WriteBatch batch;
  batch.Put(ImageKey(record.id), EncodeRecord(record, stores_colour()));
  const rocksdb::Status s = impl_->db->Write(rocksdb::WriteOptions(), &batch);
  if (!s.ok()) throw IoError(path_, s, "write to");
}

void Store::RemoveImage(const ImageRecord& record) {
  if (impl_->read_only)
    throw StoreError(StoreError::Kind::kIo, "database " + path_ + " is open read-only");
  rocksdb::WriteBatch batch;
  batch.Delete(ImageKey(record.id));
  batch.Delete(VectorKey(record.id));
  batch.Delete(FeaturesKey(record.id));
  batch.Delete(PathKey(record.path));
  batch.Put(kCountKey, EncodeU64(num_images_ - 1));
  const rocksdb::Status s = impl_->db->Write(rocksdb::WriteOptions(), &batch);
  if (!s.ok()) throw IoError(path_, s, "write to");
  --num_images_;
}

std::vector<std::string> Store::Verify(size_t max_problems) const {
  std::vector<std::string> problems;
  auto problem = [&](std::string p) {
    if (problems.size() < max_problems) problems.push_back(std::move(p));
  };
  const rocksdb::Status checksums = impl_->db->VerifyChecksum();
  if (!checksums.ok()) problem("block checksums: " + checksums.ToString());

  rocksdb::ReadOptions ro;
  ro.verify_checksums = true;
  const uint64_t dim = model_.vlad_dim();
  std::vector<float> floats(dim);
  uint64_t num_records = 0;
  std::string value;
  {
    const rocksdb::Status s = impl_->db->Get(ro, kProjectionKey, &value);
    if (s.ok()) {
      try {
        const ProjectionRecord p = DecodeProjection(value, dim);
        for (const auto* v : {&p.mean, &p.eigenvalues, &p.components})
          for (float x : *v)
            if (!std::isfinite(x)) throw encoding::CorruptValue("projection: non-finite value");
      } catch (const encoding::CorruptValue& e) {
        problem(e.what());
      }
    } else if (!s.IsNotFound()) {
      problem("projection (m:pca) unreadable (" + s.ToString() + ")");
    }
  }
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(ro));
  for (it->Seek("i:"); it->Valid() && it->key().starts_with("i:"); it->Next()) {
    ++num_records;
    ImageRecord rec;
    try {
      rec = DecodeRecord(it->value().data(), it->value().size());
    } catch (const encoding::CorruptValue& e) {
      problem("record key " + it->key().ToString(true) + ": " + e.what());
      continue;
    }
    const std::string where = "image " + std::to_string(rec.id) + " (" + rec.path + ")";
    if (it->key().size() != 10 || encoding::ParseBigEndian64(it->key().data() + 2) != rec.id)
      problem(where + ": record stored under another id's key");
    if (rec.id == 0 || rec.id >= next_id_)
      problem(where + ": id outside the allocated range 1.." + std::to_string(next_id_ - 1));
    rocksdb::Status s = impl_->db->Get(ro, PathKey(rec.path), &value);
    if (!s.ok() || value.size() != 8 || Reader(value, "path entry").Fixed64() != rec.id)
      problem(where + ": path entry missing or pointing elsewhere");
    s = impl_->db->Get(ro, VectorKey(rec.id), &value);
    if (!s.ok()) {
      problem(where + ": vector missing (" + s.ToString() + ")");
      continue;
    }
    try {
      encoding::GetFloats(CheckVector(value.data(), value.size(), dim, hash_kind_), dim,
                          floats.data());
      double norm2 = 0;
      bool finite = true;
      for (uint64_t j = 0; j < dim; ++j) {
        const float v = floats[j];
        finite = finite && std::isfinite(v);
        norm2 += double{v} * v;
      }
      if (!finite) throw encoding::CorruptValue("non-finite value");
      if (rec.status == ImageStatus::kNoFeatures ? norm2 != 0 : std::fabs(norm2 - 1.0) > 1e-3)
        throw encoding::CorruptValue("squared norm " + std::to_string(norm2) +
                                     (rec.status == ImageStatus::kNoFeatures
                                          ? ", expected 0 for an image without features"
                                          : ", expected 1"));
    } catch (const encoding::CorruptValue& e) {
      problem(where + ": vector: " + e.what());
    }
    s = impl_->db->Get(ro, FeaturesKey(rec.id), &value);
    if (s.ok()) {
      try {
        CheckFeatures(value, hash_kind_);
      } catch (const encoding::CorruptValue& e) {
        problem(where + ": " + e.what());
      }
    } else if (!s.IsNotFound()) {
      problem(where + ": local features unreadable (" + s.ToString() + ")");
    }
  }
  if (!it->status().ok()) problem("reading records: " + it->status().ToString());
  if (num_records != num_images_)
    problem("stored image count " + std::to_string(num_images_) + " but " +
            std::to_string(num_records) + " records");
  // Orphans: path entries and vectors without their record.
  for (it->Seek("p:"); it->Valid() && it->key().starts_with("p:"); it->Next()) {
    const std::string path = it->key().ToString().substr(2);
    if (it->value().size() != 8) {
      problem("path entry " + path + ": malformed");
      continue;
    }
    const uint64_t id = Reader(it->value().data(), 8, "path entry").Fixed64();
    if (!impl_->db->Get(ro, ImageKey(id), &value).ok())
      problem("path entry " + path + ": no record for id " + std::to_string(id));
  }
  for (const char* prefix : {"v:", "f:"}) {
    const char* what = prefix[0] == 'v' ? "vector" : "local features";
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      if (it->key().size() != 10) {
        problem(std::string(what) + " key " + it->key().ToString(true) + ": malformed");
        continue;
      }
      const uint64_t id = encoding::ParseBigEndian64(it->key().data() + 2);
      if (!impl_->db->Get(ro, ImageKey(id), &value).ok())
        problem(std::string(what) + " of id " + std::to_string(id) + " has no record");
    }
  }
  if (!it->status().ok()) problem("reading: " + it->status().ToString());
  // The persisted search index: every chunk present, no stray ones, checksum.
  {
    uint32_t expected = 0;
    std::string header;
    const rocksdb::Status hs = impl_->db->Get(ro, kSearchIndexKey, &header);
    if (hs.ok()) {
      try {
        expected = DecodeSearchIndexMeta(header).chunks;
        GetSearchIndex();
      } catch (const encoding::CorruptValue& e) {
        problem(std::string("persisted search index: ") + e.what());
      } catch (const StoreError& e) {
        problem(e.what());
      }
    } else if (!hs.IsNotFound()) {
      problem("persisted search index header unreadable (" + hs.ToString() + ")");
    }
    for (it->Seek("x:"); it->Valid() && it->key().starts_with("x:"); it->Next()) {
      const bool well_formed = it->key().size() == 6;
      uint32_t c = 0;
      for (size_t i = 2; well_formed && i < 6; ++i)
        c = (c << 8) | static_cast<unsigned char>(it->key()[i]);
      if (!well_formed || c >= expected)
        problem("search index chunk key " + it->key().ToString(true) +
                " is not part of the persisted index");
    }
  }
  return problems;
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
