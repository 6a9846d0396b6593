// Tests of the RocksDB store: round trips, refusal of bad input, atomicity
// under SIGKILL, the schema gate, corruption detection and locking. Every
// test works in a fresh temporary directory; RocksDB is used directly (the
// test links it) to forge the states a bug or a newer build would leave.
#include "storage/store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "storage/encoding.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr uint32_t kClusters = 3;
constexpr uint32_t kDim = 5;  // vlad_dim 15: not a multiple of anything convenient

ModelRecord MakeModel(uint64_t seed = 7) {
  ModelRecord m;
  m.dim = kDim;
  m.num_clusters = kClusters;
  m.max_side = 640;
  m.seed = seed;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  m.centroids.resize(m.vlad_dim());
  for (float& v : m.centroids) v = u(rng);
  m.codebook_hash = encoding::Fnv1a64(m.centroids.data(), m.centroids.size() * sizeof(float));
  return m;
}

std::vector<float> MakeVector(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(kClusters * kDim);
  for (float& x : v) x = u(rng);
  return v;
}

ImageRecord MakeRecord(const std::string& path, uint64_t n) {
  ImageRecord r;
  r.path = path;
  r.size_bytes = 1000 + n;
  r.mtime_ns = 1'700'000'000'000'000'000 + static_cast<int64_t>(n);
  r.content_hash = 0xABCDEF00ull + n;
  r.width = 640 + static_cast<uint32_t>(n);
  r.height = 480;
  r.num_descriptors = static_cast<uint32_t>(n * 3);
  r.status = n % 4 == 3 ? ImageStatus::kNoFeatures : ImageStatus::kOk;
  return r;
}

void ExpectSameRecord(const ImageRecord& a, const ImageRecord& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.path, b.path);
  EXPECT_EQ(a.size_bytes, b.size_bytes);
  EXPECT_EQ(a.mtime_ns, b.mtime_ns);
  EXPECT_EQ(a.content_hash, b.content_hash);
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.height, b.height);
  EXPECT_EQ(a.num_descriptors, b.num_descriptors);
  EXPECT_EQ(a.status, b.status);
}

// Raw RocksDB access for forging states.
std::unique_ptr<rocksdb::DB> OpenRaw(const std::string& path, bool read_only = false) {
  rocksdb::Options options;
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status s = read_only ? rocksdb::DB::OpenForReadOnly(options, path, &raw)
                                      : rocksdb::DB::Open(options, path, &raw);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::unique_ptr<rocksdb::DB>(raw);
}

std::map<std::string, std::string> DumpRaw(const std::string& path) {
  std::map<std::string, std::string> kv;
  auto db = OpenRaw(path, /*read_only=*/true);
  if (!db) return kv;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next())
    kv[it->key().ToString()] = it->value().ToString();
  return kv;
}

// Name -> bytes of every file of a directory (RocksDB's LOG files excluded:
// they are diagnostics, not data).
std::map<std::string, std::string> DirSnapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("LOG", 0) == 0) continue;
    std::ifstream in(e.path(), std::ios::binary);
    files[name] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  return files;
}

std::string Schema(uint32_t v) {
  std::string s;
  encoding::PutFixed32(&s, v);
  return s;
}

TEST(StoreTest, CreateOpenRoundTrip) {
  TempDir tmp;
  const std::string db = tmp / "db";
  const ModelRecord model = MakeModel();
  std::vector<ImageRecord> records;
  std::vector<std::vector<float>> vectors;
  {
    auto store = Store::Create(db, model, nullptr, 2);
    EXPECT_EQ(store->num_images(), 0u);
    for (uint64_t i = 0; i < 9; ++i) {
      ImageRecord r = MakeRecord("/photos/\xff raw bytes/img " + std::to_string(i) + ".jpg", i);
      const auto v = MakeVector(100 + i);
      store->PutImage(&r, v.data());
      EXPECT_NE(r.id, 0u);
      records.push_back(r);
      vectors.push_back(v);
    }
    EXPECT_EQ(store->num_images(), 9u);
    std::set<uint64_t> ids;
    for (const auto& r : records) ids.insert(r.id);
    EXPECT_EQ(ids.size(), records.size()) << "ids must be unique";
  }
  ASSERT_TRUE(Store::IsDatabase(db));
  {
    auto store = Store::Open(db, Store::Mode::kReadWrite);
    EXPECT_EQ(store->num_images(), 9u);
    const ModelRecord& m = store->model();
    EXPECT_EQ(m.descriptor_type, model.descriptor_type);
    EXPECT_EQ(m.dim, model.dim);
    EXPECT_EQ(m.num_clusters, model.num_clusters);
    EXPECT_EQ(m.max_side, model.max_side);
    EXPECT_EQ(m.contrast_threshold, model.contrast_threshold);
    EXPECT_EQ(m.power_alpha, model.power_alpha);
    EXPECT_EQ(m.intra_normalize, model.intra_normalize);
    EXPECT_EQ(m.residual_normalize, model.residual_normalize);
    EXPECT_EQ(m.seed, model.seed);
    EXPECT_EQ(m.centroids, model.centroids);
    EXPECT_EQ(m.codebook_hash, model.codebook_hash);

    size_t n = 0;
    store->ForEachVector([&](const ImageRecord& r, const float* v) {
      ASSERT_LT(n, records.size());
      ExpectSameRecord(r, records[n]);  // id order == insertion order
      EXPECT_EQ(std::vector<float>(v, v + kClusters * kDim), vectors[n]);
      ++n;
    });
    EXPECT_EQ(n, records.size());

    for (const auto& r : records) {
      const auto found = store->FindByPath(r.path);
      ASSERT_TRUE(found.has_value()) << r.path;
      ExpectSameRecord(*found, r);
    }
    EXPECT_FALSE(store->FindByPath("/photos/missing.jpg").has_value());
    EXPECT_FALSE(store->FindByPath(records[0].path + "x").has_value());
    // By id, one at a time or many in one read, in the order asked, absent
    // ids as nullopt.
    const uint64_t absent = records.back().id + 100;
    const auto many = store->FindByIds({records[3].id, absent, records[0].id, records[3].id});
    ASSERT_EQ(many.size(), 4u);
    ASSERT_TRUE(many[0] && many[2] && many[3]);
    EXPECT_FALSE(many[1].has_value());
    ExpectSameRecord(*many[0], records[3]);
    ExpectSameRecord(*many[2], records[0]);
    ExpectSameRecord(*many[3], records[3]);
    ExpectSameRecord(*store->FindById(records[5].id), records[5]);
    EXPECT_FALSE(store->FindById(absent).has_value());
    EXPECT_TRUE(store->FindByIds({}).empty());

    // UpdateRecord keeps the vector.
    ImageRecord touched = records[2];
    touched.mtime_ns += 12345;
    store->UpdateRecord(touched);
    records[2] = touched;
    // PutImage with an id replaces record and vector, keeps the count.
    ImageRecord changed = records[4];
    changed.content_hash ^= 0xFF;
    vectors[4] = MakeVector(999);
    store->PutImage(&changed, vectors[4].data());
    EXPECT_EQ(changed.id, records[4].id);
    records[4] = changed;
    EXPECT_EQ(store->num_images(), 9u);

    store->RemoveImage(records[6]);
    EXPECT_EQ(store->num_images(), 8u);
    EXPECT_FALSE(store->FindByPath(records[6].path).has_value());
    records.erase(records.begin() + 6);
    vectors.erase(vectors.begin() + 6);
  }
  {
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    EXPECT_EQ(store->num_images(), 8u);
    size_t n = 0;
    store->ForEachVector([&](const ImageRecord& r, const float* v) {
      ASSERT_LT(n, records.size());
      ExpectSameRecord(r, records[n]);
      EXPECT_EQ(std::vector<float>(v, v + kClusters * kDim), vectors[n]) << r.path;
      ++n;
    });
    EXPECT_EQ(n, 8u);
    size_t m = 0;
    store->ForEachImage([&](const ImageRecord& r) { ExpectSameRecord(r, records[m++]); });
    EXPECT_EQ(m, 8u);
    // A read-only store refuses writes.
    EXPECT_THROW(
        {
          ImageRecord r = MakeRecord("/x", 1);
          const auto v = MakeVector(1);
          store->PutImage(&r, v.data());
        },
        StoreError);
  }
  {
    auto store = Store::Open(db, Store::Mode::kReadWrite);
    ImageRecord r = MakeRecord("/photos/new.jpg", 50);
    const auto v = MakeVector(50);
    store->PutImage(&r, v.data());
    for (const auto& old : records) EXPECT_GT(r.id, old.id);
    EXPECT_EQ(store->num_images(), 9u);
  }
}

// Every read-only open replays what the write-ahead log still holds; a writer
// that closes must leave its writes in table files.
TEST(StoreTest, ClosedWriterLeavesNoWriteAheadLogToReplay) {
  TempDir tmp;
  const std::string db = tmp / "db";
  auto log_bytes = [&] {
    uintmax_t total = 0;
    for (const auto& e : fs::directory_iterator(db))
      if (e.path().extension() == ".log") total += fs::file_size(e.path());
    return total;
  };
  { Store::Create(db, MakeModel(), nullptr, 2); }
  {
    auto store = Store::Open(db, Store::Mode::kReadWrite);
    for (uint64_t i = 0; i < 3; ++i) {
      ImageRecord r = MakeRecord("/photos/" + std::to_string(i) + ".jpg", i);
      const auto v = MakeVector(i);
      store->PutImage(&r, v.data());
    }
    ASSERT_GT(log_bytes(), 0u) << "the writes must be in the log while the writer runs";
  }
  EXPECT_EQ(log_bytes(), 0u);
  EXPECT_EQ(Store::Open(db, Store::Mode::kReadOnly)->num_images(), 3u);
}

TEST(StoreTest, PutImageRefusesNonFiniteAndLeavesNothing) {
  TempDir tmp;
  const std::string db = tmp / "db";
  auto store = Store::Create(db, MakeModel(), nullptr, 2);
  ImageRecord good = MakeRecord("/good.png", 1);
  const auto gv = MakeVector(1);
  store->PutImage(&good, gv.data());

  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    for (size_t pos : {size_t{0}, size_t{kClusters * kDim - 1}}) {
      ImageRecord r = MakeRecord("/bad.png", 2);
      auto v = MakeVector(2);
      v[pos] = bad;
      try {
        store->PutImage(&r, v.data());
        FAIL() << "non-finite value " << bad << " at " << pos << " was stored";
      } catch (const StoreError& e) {
        EXPECT_NE(std::string(e.what()).find("/bad.png"), std::string::npos) << e.what();
      }
      EXPECT_EQ(r.id, 0u);
      EXPECT_EQ(store->num_images(), 1u);
      EXPECT_FALSE(store->FindByPath("/bad.png").has_value());
    }
  }
  // Replacing an existing image with a non-finite vector keeps the old one.
  ImageRecord replace = good;
  auto nan_vec = MakeVector(3);
  nan_vec[7] = std::nanf("");
  EXPECT_THROW(store->PutImage(&replace, nan_vec.data()), StoreError);
  store.reset();

  const auto kv = DumpRaw(db);
  size_t images = 0, vectors = 0, paths = 0;
  for (const auto& [k, v] : kv) {
    images += k.rfind("i:", 0) == 0;
    vectors += k.rfind("v:", 0) == 0;
    paths += k.rfind("p:", 0) == 0;
  }
  EXPECT_EQ(images, 1u);
  EXPECT_EQ(vectors, 1u);
  EXPECT_EQ(paths, 1u);
  auto reopened = Store::Open(db, Store::Mode::kReadOnly);
  EXPECT_EQ(reopened->num_images(), 1u);
  reopened->ForEachVector([&](const ImageRecord& r, const float* v) {
    EXPECT_EQ(r.path, "/good.png");
    EXPECT_EQ(std::vector<float>(v, v + kClusters * kDim), gv);
  });
}

// ---- atomicity under SIGKILL ----------------------------------------------
//
// The writer runs in a forked child that re-executes this binary (a fresh
// process: no RocksDB threads inherited from earlier tests). It reports each
// completed operation with one byte on a pipe; the parent kills it with
// SIGKILL after a seeded random number of operations, i.e. in the middle of
// the next one.

constexpr char kChildDbEnv[] = "LOOKALIKE_STORE_TEST_CHILD_DB";
constexpr char kChildFdEnv[] = "LOOKALIKE_STORE_TEST_CHILD_FD";
constexpr char kChildRoundEnv[] = "LOOKALIKE_STORE_TEST_CHILD_ROUND";

// The vector stored for (path, version): the record's content_hash is the
// hash of this vector, so record and vector can be checked against each other.
std::vector<float> VersionedVector(const std::string& path, uint64_t version) {
  return MakeVector(encoding::Fnv1a64(path.data(), path.size()) ^
                    (version * 0x9E3779B97F4A7C15ull));
}
uint64_t VectorHash(const float* v) {
  return encoding::Fnv1a64(v, kClusters * kDim * sizeof(float));
}

[[noreturn]] void RunChildWriter(const char* db, int fd, int round) {
  try {
    auto store = Store::Open(db, Store::Mode::kReadWrite);
    std::vector<std::string> mine;
    for (uint64_t i = 0;; ++i) {
      char op;
      if (i % 7 == 6 && mine.size() > 2) {  // remove an earlier image
        const auto rec = store->FindByPath(mine[i % mine.size()]);
        op = 'n';  // nothing to remove
        if (rec) {
          store->RemoveImage(*rec);
          op = 'r';
        }
      } else if (i % 3 == 2 && !mine.empty()) {  // replace record + vector
        auto rec = store->FindByPath(mine[(i * 5) % mine.size()]);
        if (rec) {
          rec->size_bytes += 1;  // the version
          const auto v = VersionedVector(rec->path, rec->size_bytes);
          rec->content_hash = VectorHash(v.data());
          store->PutImage(&*rec, v.data());
        }
        op = 'u';
      } else {  // add
        ImageRecord rec =
            MakeRecord("/round" + std::to_string(round) + "/img" + std::to_string(i), i);
        rec.size_bytes = 0;
        const auto v = VersionedVector(rec.path, 0);
        rec.content_hash = VectorHash(v.data());
        store->PutImage(&rec, v.data());
        mine.push_back(rec.path);
        op = 'a';
      }
      if (::write(fd, &op, 1) != 1) ::_exit(4);
    }
  } catch (...) {
    ::_exit(3);
  }
}

// Runs before main() in the re-executed child only.
const bool kChildDispatch = [] {
  const char* db = std::getenv(kChildDbEnv);
  if (db != nullptr)
    RunChildWriter(db, std::atoi(std::getenv(kChildFdEnv)), std::atoi(std::getenv(kChildRoundEnv)));
  return true;
}();

TEST(StoreTest, AtomicUnderSigkill) {
  TempDir tmp;
  const std::string db = tmp / "db";
  Store::Create(db, MakeModel(), nullptr, 2).reset();
  std::mt19937 rng(20240611);
  int64_t count = 0;  // images in the store when the round starts (checked)
  for (int round = 0; round < 6; ++round) {
    int pipe_fds[2];
    ASSERT_EQ(::pipe(pipe_fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(pipe_fds[0]);
      ::setenv(kChildDbEnv, db.c_str(), 1);
      ::setenv(kChildFdEnv, std::to_string(pipe_fds[1]).c_str(), 1);
      ::setenv(kChildRoundEnv, std::to_string(round).c_str(), 1);
      ::execl("/proc/self/exe", "store_test", static_cast<char*>(nullptr));
      ::_exit(5);
    }
    ::close(pipe_fds[1]);
    const int kill_after = std::uniform_int_distribution<int>(1, 400)(rng);
    int done = 0, adds = 0, removes = 0;
    char op;
    while (done < kill_after && ::read(pipe_fds[0], &op, 1) == 1) {
      ++done;
      adds += op == 'a';
      removes += op == 'r';
      if (round == 0 && done == 1) {
        // A second writer, here from another process, is refused.
        try {
          Store::Open(db, Store::Mode::kReadWrite);
          ADD_FAILURE() << "second read-write open succeeded while a writer runs";
        } catch (const StoreError& e) {
          EXPECT_EQ(e.kind(), StoreError::Kind::kLocked) << e.what();
          EXPECT_NE(std::string(e.what()).find("in use by another process"), std::string::npos)
              << e.what();
        }
      }
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    // The child runs ahead of the parent: count what it completed before it
    // died (the pipe holds every acknowledgement it wrote).
    while (::read(pipe_fds[0], &op, 1) == 1) {
      adds += op == 'a';
      removes += op == 'r';
    }
    ::close(pipe_fds[0]);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "child writer ended on its own (status " << status << ") after " << done
        << " operations";
    ASSERT_EQ(done, kill_after);
    // Every acknowledged operation is durable; the one in flight may or may
    // not have landed (an add or a removal), but never half of it.
    const int64_t acknowledged = count + adds - removes;
    // After every kill: the store opens and everything is consistent.
    auto store = Store::Open(db, Store::Mode::kReadWrite);
    std::set<uint64_t> ids;
    store->ForEachVector([&](const ImageRecord& r, const float* v) {
      EXPECT_EQ(r.content_hash, VectorHash(v))
          << "record and vector of " << r.path << " come from different writes";
      EXPECT_EQ(VectorHash(VersionedVector(r.path, r.size_bytes).data()), r.content_hash) << r.path;
      const auto by_path = store->FindByPath(r.path);
      ASSERT_TRUE(by_path.has_value()) << "no path entry for " << r.path;
      EXPECT_EQ(by_path->id, r.id);
      ids.insert(r.id);
    });
    EXPECT_EQ(store->num_images(), ids.size()) << "image counter disagrees with the records";
    EXPECT_GE(static_cast<int64_t>(ids.size()), acknowledged - 1);
    EXPECT_LE(static_cast<int64_t>(ids.size()), acknowledged + 1);
    count = static_cast<int64_t>(ids.size());
    store.reset();

    // Raw view: every path entry points at a record, no stray vectors, and
    // the id allocator is past every id.
    const auto kv = DumpRaw(db);
    uint64_t next_id = 0;
    size_t paths = 0, vectors = 0;
    for (const auto& [k, v] : kv) {
      if (k == "m:next_id") next_id = encoding::Reader(v, "next").Fixed64();
      if (k.rfind("p:", 0) == 0) {
        ++paths;
        const uint64_t id = encoding::Reader(v, "p").Fixed64();
        EXPECT_TRUE(kv.count("i:" + encoding::BigEndian64(id))) << "dangling path entry " << k;
      }
      if (k.rfind("v:", 0) == 0) {
        ++vectors;
        EXPECT_TRUE(kv.count("i:" + k.substr(2))) << "vector without record";
      }
    }
    EXPECT_EQ(paths, ids.size());
    EXPECT_EQ(vectors, ids.size());
    for (uint64_t id : ids) EXPECT_LT(id, next_id);
  }
}

// ---- schema gate ------------------------------------------------------------

// `readable` is how the message names the versions this build reads.
void ExpectSchemaRefused(uint32_t version, const std::string& readable, const std::string& advice) {
  TempDir tmp;
  const std::string db = tmp / "db";
  {
    auto store = Store::Create(db, MakeModel(), nullptr, 2);
    ImageRecord r = MakeRecord("/a.jpg", 1);
    const auto v = MakeVector(1);
    store->PutImage(&r, v.data());
  }
  {
    auto raw = OpenRaw(db);
    ASSERT_TRUE(raw);
    ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), "m:schema", Schema(version)).ok());
    ASSERT_TRUE(raw->Flush(rocksdb::FlushOptions()).ok());
  }
  const auto before_kv = DumpRaw(db);
  const auto before_files = DirSnapshot(db);
  for (Store::Mode mode : {Store::Mode::kReadWrite, Store::Mode::kReadOnly}) {
    try {
      Store::Open(db, mode);
      ADD_FAILURE() << "schema " << version << " was accepted";
    } catch (const StoreError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(e.kind(), StoreError::Kind::kSchema) << msg;
      EXPECT_NE(msg.find("schema " + std::to_string(version)), std::string::npos) << msg;
      EXPECT_NE(msg.find("(" + readable + ")"), std::string::npos) << msg;
      EXPECT_NE(msg.find(advice), std::string::npos) << msg;
    }
  }
  EXPECT_EQ(DumpRaw(db), before_kv) << "refusing the database changed its contents";
  const auto after_files = DirSnapshot(db);
  EXPECT_EQ(after_files.size(), before_files.size());
  for (const auto& [name, bytes] : before_files) {
    const auto it = after_files.find(name);
    ASSERT_NE(it, after_files.end()) << name << " disappeared";
    EXPECT_TRUE(it->second == bytes) << name << " was rewritten";
  }
  for (const auto& [name, bytes] : after_files)
    EXPECT_TRUE(before_files.count(name)) << name << " was created by a refused open";
}

TEST(StoreTest, RefusesNewerSchema) {
  ExpectSchemaRefused(kSchemaVersion + 1, std::to_string(kSchemaVersion), "upgrade lookalike");
  ExpectSchemaRefused(99, std::to_string(kSchemaVersion), "upgrade lookalike");
}
TEST(StoreTest, RefusesOlderSchema) { ExpectSchemaRefused(0, "1 to 3", "re-index"); }

TEST(StoreTest, CreateRefusesUnknownSchema) {
  TempDir tmp;
  for (uint32_t version : {0u, kSchemaVersion + 1}) {
    try {
      Store::Create(tmp / "db", MakeModel(), nullptr, version);
      ADD_FAILURE() << "created a schema " << version << " database";
    } catch (const StoreError& e) {
      EXPECT_EQ(e.kind(), StoreError::Kind::kSchema) << e.what();
    }
    EXPECT_FALSE(fs::exists(tmp / "db"));
  }
}

// ---- per-image hashes by schema ---------------------------------------------

// A vector and record Verify accepts (unit norm, status ok).
std::vector<float> UnitVector(uint64_t seed) {
  std::vector<float> v = MakeVector(seed);
  double n2 = 0;
  for (float x : v) n2 += double{x} * x;
  for (float& x : v) x = static_cast<float>(x / std::sqrt(n2));
  return v;
}
ImageRecord OkRecord(const std::string& path, uint64_t n) {
  ImageRecord r = MakeRecord(path, n);
  r.status = ImageStatus::kOk;
  return r;
}

// `size` seeded random bytes: a features value, a search index blob.
std::string RandomBytes(uint64_t seed, size_t size) {
  std::mt19937_64 rng(seed);
  std::string blob(size, '\0');
  for (char& c : blob) c = static_cast<char>(rng());
  return blob;
}

// The hash a schema stores, computed here from the libraries themselves
// (not through the store), so a store using the wrong one is caught.
uint64_t ExpectedHash(uint32_t schema, const void* data, size_t size) {
  return schema >= 2 ? XXH3_64bits(data, size) : encoding::Fnv1a64(data, size);
}

// Every v: and f: value of the database ends with `schema`'s hash of what it
// covers; returns how many values were checked.
size_t ExpectAllValuesHashedAs(const std::string& db, uint32_t schema) {
  size_t checked = 0;
  for (const auto& [key, value] : DumpRaw(db)) {
    const bool vector = key.rfind("v:", 0) == 0;
    if (!vector && key.rfind("f:", 0) != 0) continue;
    EXPECT_GE(value.size(), 12u) << key;
    if (value.size() < 12) continue;
    const size_t from = vector ? 4 : 0;
    const size_t body = value.size() - 8;
    const uint64_t stored = encoding::Reader(value.data() + body, 8, "test").Fixed64();
    EXPECT_EQ(stored, ExpectedHash(schema, value.data() + from, body - from))
        << (vector ? "vector " : "features ") << "value not hashed as schema " << schema;
    ++checked;
  }
  return checked;
}

uint32_t StoredSchema(const std::string& db) {
  const auto kv = DumpRaw(db);
  const auto it = kv.find("m:schema");
  if (it == kv.end() || it->second.size() != 4) return 0;
  return encoding::Reader(it->second, "test").Fixed32();
}

TEST(StoreTest, Schema2DatabaseUsesXxh3AndFloat32Vectors) {
  TempDir tmp;
  const std::string db = tmp / "db";
  const std::string features = RandomBytes(1, 1000);
  std::vector<float> v = UnitVector(1);
  {
    auto store = Store::Create(db, MakeModel(), nullptr, 2);
    EXPECT_EQ(store->schema_version(), 2u);
    EXPECT_EQ(store->hash_kind(), HashKind::kXxh3_64);
    ImageRecord r = OkRecord("/a.jpg", 1);
    store->PutImage(&r, v.data(), features);
    const std::string bytes = "file contents";
    EXPECT_EQ(store->ContentHash(bytes.data(), bytes.size()),
              XXH3_64bits(bytes.data(), bytes.size()));
  }
  EXPECT_EQ(StoredSchema(db), 2u);
  EXPECT_EQ(ExpectAllValuesHashedAs(db, 2), 2u);
  // The floats are stored as they are, little-endian, after the u32 dim.
  const std::string value = DumpRaw(db).at("v:" + encoding::BigEndian64(1));
  ASSERT_EQ(value.size(), 4 + v.size() * 4 + 8);
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_EQ(encoding::Reader(value.data() + 4 + 4 * i, 4, "test").Float(), v[i]) << i;
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  EXPECT_EQ(store->GetVector(1), v);
  EXPECT_EQ(store->GetFeatures(1), features);
  EXPECT_TRUE(store->Verify().empty());
}

// A schema-1 database (every database written before schema 2) opens, takes
// more images, and stays schema 1 with FNV-1a in every per-image value; it
// is never converted and never mixed.
TEST(StoreTest, Schema1DatabaseStaysSchema1WithFnv) {
  TempDir tmp;
  const std::string db = tmp / "db";
  std::vector<std::vector<float>> vectors;
  {
    auto store = Store::Create(db, MakeModel(), nullptr, 1);
    EXPECT_EQ(store->schema_version(), 1u);
    EXPECT_EQ(store->hash_kind(), HashKind::kFnv1a64);
    for (int i = 0; i < 3; ++i) {
      ImageRecord r = OkRecord("/old" + std::to_string(i), i);
      vectors.push_back(UnitVector(i));
      store->PutImage(&r, vectors.back().data(), RandomBytes(i, 500 + i));
    }
  }
  for (Store::Mode mode : {Store::Mode::kReadWrite, Store::Mode::kReadOnly}) {
    auto store = Store::Open(db, mode);
    EXPECT_EQ(store->schema_version(), 1u);
    EXPECT_EQ(store->hash_kind(), HashKind::kFnv1a64);
    const std::string bytes = "file contents";
    EXPECT_EQ(store->ContentHash(bytes.data(), bytes.size()),
              encoding::Fnv1a64(bytes.data(), bytes.size()));
    if (mode == Store::Mode::kReadWrite) {
      ImageRecord r = OkRecord("/new", 10);
      vectors.push_back(UnitVector(10));
      store->PutImage(&r, vectors.back().data(), RandomBytes(10, 700));
      ImageRecord replaced = *store->FindByPath("/old1");
      vectors[1] = UnitVector(11);
      store->PutImage(&replaced, vectors[1].data(), RandomBytes(11, 300));
    }
  }
  EXPECT_EQ(StoredSchema(db), 1u) << "opening or writing converted a schema-1 database";
  EXPECT_EQ(ExpectAllValuesHashedAs(db, 1), 8u);
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  EXPECT_TRUE(store->Verify().empty());
  size_t n = 0;
  store->ForEachVector([&](const ImageRecord& r, const float* v) {
    ASSERT_LT(n, vectors.size());
    EXPECT_EQ(std::vector<float>(v, v + kClusters * kDim), vectors[n]) << r.path;
    ++n;
  });
  EXPECT_EQ(n, 4u);
  EXPECT_EQ(store->GetFeatures(4), RandomBytes(10, 700));
}

// Schema 2 records carry the colour histogram; schema-1 records are written
// exactly as builds that read schema 1 expect (no trailing colour), so such
// a database stays readable by them.
TEST(StoreTest, RecordColourOnlyInSchema2) {
  TempDir tmp;
  const std::vector<uint8_t> colour = {0, 1, 2, 250, 255, 7};
  for (uint32_t schema : {1u, 2u}) {
    const std::string db = tmp / ("db" + std::to_string(schema));
    std::string raw_record;
    {
      auto store = Store::Create(db, MakeModel(), nullptr, schema);
      EXPECT_EQ(store->stores_colour(), schema >= 2);
      ImageRecord r = OkRecord("/a.jpg", 1);
      r.colour = colour;
      std::vector<float> v = UnitVector(1);
      store->PutImage(&r, v.data(), RandomBytes(1, 100));
      ImageRecord touched = *store->FindByPath("/a.jpg");
      touched.mtime_ns += 5;
      store->UpdateRecord(touched);
    }
    raw_record = DumpRaw(db).at("i:" + encoding::BigEndian64(1));
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    const auto r = store->FindByPath("/a.jpg");
    ASSERT_TRUE(r.has_value());
    if (schema >= 2) {
      EXPECT_EQ(r->colour, colour);
    } else {
      EXPECT_TRUE(r->colour.empty());
      // The schema-1 layout ends with the status word.
      ImageRecord bare = *r;
      EXPECT_EQ(raw_record.size(), 8 + 4 + bare.path.size() + 8 * 3 + 4 * 4);
    }
    EXPECT_TRUE(store->Verify().empty());
  }
}

// The hash is taken from the schema, never guessed per value: a value that
// carries the other schema's hash is corrupt.
TEST(StoreTest, ValueWithTheOtherSchemasHashIsCorrupt) {
  for (uint32_t schema : {1u, 2u}) {
    SCOPED_TRACE("schema " + std::to_string(schema));
    TempDir tmp;
    const std::string db = tmp / "db";
    {
      auto store = Store::Create(db, MakeModel(), nullptr, schema);
      ImageRecord r = OkRecord("/a", 1);
      const auto v = UnitVector(1);
      store->PutImage(&r, v.data(), RandomBytes(1, 100));
    }
    {
      auto raw = OpenRaw(db);
      for (const char* prefix : {"v:", "f:"}) {
        const std::string key = prefix + encoding::BigEndian64(1);
        std::string value;
        ASSERT_TRUE(raw->Get(rocksdb::ReadOptions(), key, &value).ok());
        const size_t from = prefix[0] == 'v' ? 4 : 0;
        const size_t body = value.size() - 8;
        value.resize(body);
        encoding::PutFixed64(&value, ExpectedHash(3 - schema, value.data() + from, body - from));
        ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), key, value).ok());
      }
    }
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    EXPECT_THROW(store->GetVector(1), StoreError);
    EXPECT_THROW(store->GetFeatures(1), StoreError);
    EXPECT_EQ(store->Verify().size(), 2u);
  }
}

// Flips one byte of image `id`'s value under `prefix` at `offset`.
void FlipByte(const std::string& db, const std::string& prefix, uint64_t id, size_t offset) {
  auto raw = OpenRaw(db);
  const std::string key = prefix + encoding::BigEndian64(id);
  std::string value;
  ASSERT_TRUE(raw->Get(rocksdb::ReadOptions(), key, &value).ok());
  ASSERT_LT(offset, value.size());
  value[offset] ^= 0x10;
  ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), key, value).ok());
}

// A projection of the test model's 15-d VLAD onto its first `out_dim` axes.
ProjectionRecord AxisProjection(uint32_t out_dim) {
  ProjectionRecord p;
  p.in_dim = kClusters * kDim;
  p.out_dim = out_dim;
  p.num_samples = 10;
  p.mean.assign(p.in_dim, 0.0f);
  for (uint32_t c = 0; c < out_dim; ++c) p.eigenvalues.push_back(static_cast<float>(out_dim - c));
  p.components.assign(size_t{out_dim} * p.in_dim, 0.0f);
  for (uint32_t c = 0; c < out_dim; ++c) p.components[size_t{c} * p.in_dim + c] = 1.0f;
  return p;
}

// Schema 3 keeps each image's search vector at half precision (the
// projection's dimension, not the VLAD's) and the descriptor quantizer.
TEST(StoreTest, CompactLayoutKeepsHalfPrecisionSearchVectors) {
  TempDir tmp;
  const std::string db = tmp / "db";
  const ProjectionRecord p = AxisProjection(4);
  const std::string quantizer = std::string("opaque quantizer \0 bytes", 24);
  const std::vector<float> v = {0.6f, -0.8f, 0.0f, 0.0f};
  {
    auto store = Store::Create(db, MakeModel(), &p, kSchemaVersion, quantizer);
    EXPECT_EQ(store->vector_dim(), 4u);
    EXPECT_TRUE(store->half_vectors());
    ImageRecord r = OkRecord("/a.jpg", 0);
    store->PutImage(&r, v.data(), "features");
  }
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  EXPECT_EQ(store->schema_version(), kSchemaVersion);
  EXPECT_EQ(store->vector_dim(), 4u);
  EXPECT_EQ(store->GetDescriptorQuantizer(), quantizer);
  const auto got = store->GetVector(1);
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR((*got)[i], v[i], 1e-3);
  // 4 floats at 2 bytes, not the 15 of the VLAD at 4.
  const auto raw = DumpRaw(db);
  EXPECT_EQ(raw.at("v:" + encoding::BigEndian64(1)).size(), 4u + 4 * 2 + 8);
  EXPECT_TRUE(store->Verify().empty());
}

// Without a projection a compact database keeps no vector at all (search
// derives it from the stored features); a stray one is a problem.
TEST(StoreTest, CompactLayoutWithoutProjectionKeepsNoVectors) {
  TempDir tmp;
  const std::string db = tmp / "db";
  {
    auto store = Store::Create(db, MakeModel(), nullptr, kSchemaVersion, "quantizer");
    EXPECT_EQ(store->vector_dim(), 0u);
    ImageRecord r = OkRecord("/a.jpg", 0);
    store->PutImage(&r, nullptr, "features");
  }
  {
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    EXPECT_FALSE(store->GetVector(1).has_value());
    int calls = 0;
    store->ForEachVector([&](const ImageRecord& r, const float* v) {
      EXPECT_EQ(r.path, "/a.jpg");
      EXPECT_EQ(v, nullptr);
      ++calls;
    });
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(*store->GetFeatures(1), "features");
    EXPECT_TRUE(store->Verify().empty());
  }
  OpenRaw(db)->Put(rocksdb::WriteOptions(), "v:" + encoding::BigEndian64(1), "stray");
  const auto problems = Store::Open(db, Store::Mode::kReadOnly)->Verify();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("keeps none"), std::string::npos) << problems[0];
}

// Schema 3 keeps the descriptor and no-features totals with every write, so
// `info` reads no record; verify recounts them.
TEST(StoreTest, CompactLayoutKeepsImageTotals) {
  TempDir tmp;
  const std::string db = tmp / "db";
  {
    auto store = Store::Create(db, MakeModel(), nullptr, kSchemaVersion, "quantizer");
    EXPECT_EQ(store->totals(), ImageTotals());
    ImageRecord a = OkRecord("/a.jpg", 0), b = OkRecord("/b.jpg", 1), flat = OkRecord("/f.jpg", 2);
    a.num_descriptors = 100;
    b.num_descriptors = 40;
    flat.num_descriptors = 0;
    flat.status = ImageStatus::kNoFeatures;
    store->PutImage(&a, nullptr, "fa");
    store->PutImage(&b, nullptr, "fb");
    store->PutImage(&flat, nullptr);
    EXPECT_EQ(store->totals(), (ImageTotals{140, 1, 3}));
    a.num_descriptors = 70;  // re-encoded with other content
    a.content_hash ^= 1;
    store->PutImage(&a, nullptr, "fa2");
    EXPECT_EQ(store->totals(), (ImageTotals{110, 1, 4}));
    b.mtime_ns += 1;  // touched only
    store->UpdateRecord(b);
    EXPECT_EQ(store->totals(), (ImageTotals{110, 1, 4})) << "the same content: same generation";
    ImageRecord stale = flat;
    stale.status = ImageStatus::kOk;  // the stored record counts, not the caller's copy
    store->RemoveImage(stale);
    EXPECT_EQ(store->totals(), (ImageTotals{110, 0, 5}));
  }
  EXPECT_EQ(Store::Open(db, Store::Mode::kReadOnly)->totals(), (ImageTotals{110, 0, 5}));
  EXPECT_TRUE(Store::Open(db, Store::Mode::kReadOnly)->Verify().empty());
  std::string forged;
  encoding::PutFixed64(&forged, 111);
  encoding::PutFixed64(&forged, 0);
  encoding::PutFixed64(&forged, 5);
  ASSERT_TRUE(OpenRaw(db)->Put(rocksdb::WriteOptions(), "m:totals", forged).ok());
  const auto problems = Store::Open(db, Store::Mode::kReadOnly)->Verify();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("m:totals"), std::string::npos) << problems[0];
  // Older schemas have no counters: callers scan.
  EXPECT_FALSE(Store::Create(tmp / "old", MakeModel(), nullptr, 2)->totals().has_value());
  // Nor have schema-3 databases written before the counters existed: they
  // open, verify and take writes, their totals unknown.
  ASSERT_TRUE(OpenRaw(db)->Delete(rocksdb::WriteOptions(), "m:totals").ok());
  auto early = Store::Open(db, Store::Mode::kReadWrite);
  EXPECT_FALSE(early->totals().has_value());
  EXPECT_TRUE(early->Verify().empty());
  ImageRecord c = OkRecord("/c.jpg", 5);
  EXPECT_NO_THROW(early->PutImage(&c, nullptr, "fc"));
  EXPECT_FALSE(early->totals().has_value());
}

TEST(StoreTest, CorruptQuantizerIsReportedNotUsed) {
  TempDir tmp;
  const std::string db = tmp / "db";
  Store::Create(db, MakeModel(), nullptr, kSchemaVersion, "quantizer bytes").reset();
  {
    auto raw = OpenRaw(db);
    std::string value;
    ASSERT_TRUE(raw->Get(rocksdb::ReadOptions(), "m:dq", &value).ok());
    value[3] ^= 0x20;
    ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), "m:dq", value).ok());
  }
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  try {
    store->GetDescriptorQuantizer();
    ADD_FAILURE() << "a flipped byte in the quantizer went unnoticed";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.kind(), StoreError::Kind::kCorrupt) << e.what();
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  }
  const auto problems = store->Verify();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("descriptor quantizer"), std::string::npos) << problems[0];
}

// The word vocabulary stored with the model (m:wv): written at creation in
// any schema, part of the fingerprint (a database without one keeps its
// own), added once to a database without one, checked like the quantizer.
TEST(StoreTest, ModelWordVocabularyIsPartOfTheModel) {
  TempDir tmp;
  const std::string with = tmp / "with", without = tmp / "without", other = tmp / "other";
  Store::Create(with, MakeModel(), nullptr, kSchemaVersion, "quantizer", "vocabulary A").reset();
  Store::Create(without, MakeModel(), nullptr, kSchemaVersion, "quantizer").reset();
  Store::Create(other, MakeModel(), nullptr, kSchemaVersion, "quantizer", "vocabulary B").reset();
  const std::string old = tmp / "schema2";
  Store::Create(old, MakeModel(), nullptr, 2, "", "vocabulary A").reset();
  EXPECT_EQ(Store::Open(old, Store::Mode::kReadOnly)->GetModelWordVocabulary(), "vocabulary A");
  uint64_t fingerprint_without = 0;
  {
    auto a = Store::Open(with, Store::Mode::kReadOnly);
    auto n = Store::Open(without, Store::Mode::kReadOnly);
    auto b = Store::Open(other, Store::Mode::kReadOnly);
    EXPECT_EQ(a->GetModelWordVocabulary(), "vocabulary A");
    EXPECT_FALSE(n->GetModelWordVocabulary().has_value());
    EXPECT_NE(a->ModelFingerprint(), n->ModelFingerprint());
    EXPECT_NE(a->ModelFingerprint(), b->ModelFingerprint());
    EXPECT_THROW(Store::CheckSameModel({a.get(), b.get()}), StoreError);
    EXPECT_TRUE(a->Verify().empty());
    fingerprint_without = n->ModelFingerprint();
    EXPECT_THROW(n->AddModelWordVocabulary("vocabulary A"), StoreError);  // read-only
  }
  {
    auto n = Store::Open(without, Store::Mode::kReadWrite);
    n->AddModelWordVocabulary("vocabulary A");
    EXPECT_THROW(n->AddModelWordVocabulary("vocabulary B"), std::logic_error);
  }
  auto a = Store::Open(with, Store::Mode::kReadOnly);
  auto n = Store::Open(without, Store::Mode::kReadOnly);
  EXPECT_EQ(n->GetModelWordVocabulary(), "vocabulary A");
  EXPECT_NE(n->ModelFingerprint(), fingerprint_without);
  EXPECT_EQ(n->ModelFingerprint(), a->ModelFingerprint());
  n.reset();
  {
    auto raw = OpenRaw(without);
    std::string value;
    ASSERT_TRUE(raw->Get(rocksdb::ReadOptions(), "m:wv", &value).ok());
    value[2] ^= 0x20;
    ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), "m:wv", value).ok());
  }
  auto damaged = Store::Open(without, Store::Mode::kReadOnly);
  EXPECT_THROW(damaged->GetModelWordVocabulary(), StoreError);
  const auto problems = damaged->Verify();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("model word vocabulary (m:wv)"), std::string::npos) << problems[0];
}

// The search quantizer stored with the model (m:ivq): written at creation,
// part of the fingerprint (so shards with and without it never merge),
// checked like the vocabulary; a database without one keeps the
// fingerprint it always had.
TEST(StoreTest, ModelSearchQuantizerIsPartOfTheModel) {
  TempDir tmp;
  const std::string with = tmp / "with", without = tmp / "without", other = tmp / "other";
  Store::Create(with, MakeModel(), nullptr, kSchemaVersion, "quantizer", "words", "lists A")
      .reset();
  Store::Create(without, MakeModel(), nullptr, kSchemaVersion, "quantizer", "words").reset();
  Store::Create(other, MakeModel(), nullptr, kSchemaVersion, "quantizer", "words", "lists B")
      .reset();
  {
    auto a = Store::Open(with, Store::Mode::kReadOnly);
    auto n = Store::Open(without, Store::Mode::kReadOnly);
    auto b = Store::Open(other, Store::Mode::kReadOnly);
    EXPECT_EQ(a->GetModelSearchQuantizer(), "lists A");
    EXPECT_FALSE(n->GetModelSearchQuantizer().has_value());
    EXPECT_NE(a->ModelFingerprint(), n->ModelFingerprint());
    EXPECT_NE(a->ModelFingerprint(), b->ModelFingerprint());
    EXPECT_THROW(Store::CheckSameModel({a.get(), n.get()}), StoreError);
    EXPECT_TRUE(a->Verify().empty());
  }
  {
    auto raw = OpenRaw(with);
    std::string value;
    ASSERT_TRUE(raw->Get(rocksdb::ReadOptions(), "m:ivq", &value).ok());
    value[1] ^= 0x20;
    ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), "m:ivq", value).ok());
  }
  auto damaged = Store::Open(with, Store::Mode::kReadOnly);
  EXPECT_THROW(damaged->GetModelSearchQuantizer(), StoreError);
  const auto problems = damaged->Verify();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("model search quantizer (m:ivq)"), std::string::npos) << problems[0];
}

TEST(StoreTest, DetectsCorruptedVector) {
  for (uint32_t schema : {1u, 2u}) {
    SCOPED_TRACE("schema " + std::to_string(schema));
    TempDir tmp;
    const std::string db = tmp / "db";
    uint64_t victim_id = 0;
    {
      auto store = Store::Create(db, MakeModel(), nullptr, schema);
      for (int i = 0; i < 4; ++i) {
        ImageRecord r = OkRecord("/img" + std::to_string(i), i);
        const auto v = UnitVector(i);
        store->PutImage(&r, v.data());
        if (i == 2) victim_id = r.id;
      }
    }
    FlipByte(db, "v:", victim_id, 4 + 4 * 7 + 1);  // one byte inside float 7
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    try {
      store->ForEachVector([](const ImageRecord&, const float*) {});
      ADD_FAILURE() << "a flipped byte in a stored vector went unnoticed";
    } catch (const StoreError& e) {
      EXPECT_EQ(e.kind(), StoreError::Kind::kCorrupt) << e.what();
      EXPECT_NE(std::string(e.what()).find("/img2"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
    }
    EXPECT_THROW(store->GetVector(victim_id), StoreError);
    EXPECT_NO_THROW(store->GetVector(victim_id - 1));
    const auto problems = store->Verify();
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems[0].find("/img2"), std::string::npos) << problems[0];
    EXPECT_NE(problems[0].find("vector: checksum mismatch"), std::string::npos) << problems[0];
  }
}

TEST(StoreTest, DetectsCorruptedFeatures) {
  for (uint32_t schema : {1u, 2u}) {
    SCOPED_TRACE("schema " + std::to_string(schema));
    TempDir tmp;
    const std::string db = tmp / "db";
    {
      auto store = Store::Create(db, MakeModel(), nullptr, schema);
      for (int i = 0; i < 3; ++i) {
        ImageRecord r = OkRecord("/img" + std::to_string(i), i);
        const auto v = UnitVector(i);
        store->PutImage(&r, v.data(), RandomBytes(i, 165 * 1024));
      }
    }
    FlipByte(db, "f:", 2, 100 * 1024);
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    EXPECT_EQ(store->GetFeatures(1), RandomBytes(0, 165 * 1024));
    try {
      store->GetFeatures(2);
      ADD_FAILURE() << "a flipped byte in stored local features went unnoticed";
    } catch (const StoreError& e) {
      EXPECT_EQ(e.kind(), StoreError::Kind::kCorrupt) << e.what();
      EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
    }
    const auto problems = store->Verify();
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems[0].find("/img1"), std::string::npos) << problems[0];
    EXPECT_NE(problems[0].find("local features: checksum mismatch"), std::string::npos)
        << problems[0];
  }
}

// ---- thumbnails (t:<id>) ------------------------------------------------------

// A thumbnail-sized opaque blob (the indexer's encoding is not the store's
// business).
std::string ThumbnailBlob(uint64_t seed) { return RandomBytes(1000 + seed, 2048); }

// A database of `schema` holding images /img0../img<n-1> (ids 1..n) with
// features, and a thumbnail for those `with_thumbnail` says.
std::unique_ptr<Store> ThumbnailInput(const std::string& db, uint32_t schema, int n,
                                      const std::function<bool(int)>& with_thumbnail) {
  auto store = Store::Create(db, MakeModel(), nullptr, schema, schema >= 3 ? "quantizer" : "");
  for (int i = 0; i < n; ++i) {
    ImageRecord r = OkRecord("/img" + std::to_string(i), i);
    const auto v = UnitVector(i);
    store->PutImage(&r, v.data(), RandomBytes(i, 300),
                    with_thumbnail(i) ? ThumbnailBlob(i) : std::string());
  }
  return store;
}

TEST(StoreTest, ThumbnailsRoundTripInTheOrderAskedWithNulloptForImagesWithout) {
  for (uint32_t schema : {1u, 2u, kSchemaVersion}) {
    SCOPED_TRACE("schema " + std::to_string(schema));
    TempDir tmp;
    const std::string db = tmp / "db";
    // Ids 1..4; image 3 (id 3) has no thumbnail.
    ThumbnailInput(db, schema, 4, [](int i) { return i != 2; }).reset();
    // Each value is the blob followed by the schema's image hash of it.
    const std::string value = DumpRaw(db).at("t:" + encoding::BigEndian64(2));
    const std::string blob = ThumbnailBlob(1);
    ASSERT_EQ(value.size(), blob.size() + 8);
    EXPECT_EQ(value.substr(0, blob.size()), blob);
    EXPECT_EQ(encoding::Reader(value.data() + blob.size(), 8, "test").Fixed64(),
              ExpectedHash(schema, blob.data(), blob.size()));
    for (Store::Mode mode : {Store::Mode::kReadWrite, Store::Mode::kReadOnly}) {
      auto store = Store::Open(db, mode);
      const auto got = store->GetThumbnails({4, 3, 99, 1, 4});
      ASSERT_EQ(got.size(), 5u);
      EXPECT_EQ(got[0], ThumbnailBlob(3));
      EXPECT_FALSE(got[1].has_value()) << "image 3 was stored without a thumbnail";
      EXPECT_FALSE(got[2].has_value()) << "no image 99";
      EXPECT_EQ(got[3], ThumbnailBlob(0));
      EXPECT_EQ(got[4], ThumbnailBlob(3));
      EXPECT_TRUE(store->GetThumbnails({}).empty());
      EXPECT_EQ(store->GetFeatures(1), RandomBytes(0, 300)) << "features are kept apart";
      EXPECT_TRUE(store->Verify().empty());
    }
  }
}

TEST(StoreTest, PutThumbnailAddsToAStoredImageAndRefusesMissingIdsAndEmptyBlobs) {
  TempDir tmp;
  const std::string db = tmp / "db";
  {
    // Images indexed before thumbnails existed: none has one.
    auto store = ThumbnailInput(db, kSchemaVersion, 2, [](int) { return false; });
    EXPECT_TRUE(store->IdsWithThumbnails().empty());
    const ImageTotals totals = *store->totals();
    store->PutThumbnail(2, ThumbnailBlob(7));
    EXPECT_EQ(store->GetThumbnails({1, 2}),
              (std::vector<std::optional<std::string>>{std::nullopt, ThumbnailBlob(7)}));
    store->PutThumbnail(2, ThumbnailBlob(8));  // replaces it
    EXPECT_EQ(store->GetThumbnails({2})[0], ThumbnailBlob(8));
    // The image itself is untouched: features, record, count and totals
    // (generation included: which images there are did not change).
    EXPECT_EQ(store->GetFeatures(2), RandomBytes(1, 300));
    EXPECT_EQ(store->FindById(2)->path, "/img1");
    EXPECT_EQ(store->num_images(), 2u);
    EXPECT_EQ(store->totals(), totals);
    // No image 3: refused, nothing written.
    EXPECT_THROW(store->PutThumbnail(3, ThumbnailBlob(9)), std::invalid_argument);
    EXPECT_THROW(store->PutThumbnail(0, ThumbnailBlob(9)), std::invalid_argument);
    EXPECT_THROW(store->PutThumbnail(1, std::string()), std::invalid_argument);
    EXPECT_EQ(store->IdsWithThumbnails(), std::vector<uint64_t>{2});
    EXPECT_FALSE(store->GetThumbnails({3})[0].has_value());
    EXPECT_TRUE(store->Verify().empty());
  }
  auto reader = Store::Open(db, Store::Mode::kReadOnly);
  EXPECT_EQ(reader->GetThumbnails({2})[0], ThumbnailBlob(8));
  try {
    reader->PutThumbnail(1, ThumbnailBlob(1));
    ADD_FAILURE() << "a read-only store wrote a thumbnail";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.kind(), StoreError::Kind::kIo) << e.what();
  }
}

TEST(StoreTest, ReplacedImageWithoutThumbnailKeepsNoStaleOneAndUpdateRecordKeepsIt) {
  TempDir tmp;
  auto store = ThumbnailInput(tmp / "db", kSchemaVersion, 2, [](int) { return true; });
  // A new mtime for the same content: the thumbnail stays.
  ImageRecord r = *store->FindById(1);
  r.mtime_ns += 10;
  store->UpdateRecord(r);
  EXPECT_EQ(store->GetThumbnails({1})[0], ThumbnailBlob(0));
  // Re-put with a new thumbnail replaces it, without one deletes it.
  store->PutImage(&r, nullptr, "features", ThumbnailBlob(5));
  EXPECT_EQ(store->GetThumbnails({1})[0], ThumbnailBlob(5));
  r.content_hash ^= 1;
  store->PutImage(&r, nullptr, "features");
  EXPECT_FALSE(store->GetThumbnails({1})[0].has_value());
  // The same through PutImageWithId.
  ImageRecord other = *store->FindById(2);
  store->PutImageWithId(other, nullptr, "features", ThumbnailBlob(6));
  EXPECT_EQ(store->GetThumbnails({2})[0], ThumbnailBlob(6));
  store->PutImageWithId(other, nullptr, "features");
  EXPECT_FALSE(store->GetThumbnails({2})[0].has_value());
  EXPECT_TRUE(store->IdsWithThumbnails().empty());
  EXPECT_TRUE(store->Verify().empty());
}

TEST(StoreTest, RemoveImageDeletesItsThumbnail) {
  TempDir tmp;
  const std::string db = tmp / "db";
  {
    auto store = ThumbnailInput(db, kSchemaVersion, 3, [](int) { return true; });
    store->RemoveImage(*store->FindById(2));
    EXPECT_EQ(store->GetThumbnails({1, 2, 3}),
              (std::vector<std::optional<std::string>>{ThumbnailBlob(0), std::nullopt,
                                                       ThumbnailBlob(2)}));
    EXPECT_TRUE(store->Verify().empty());
  }
  const auto kv = DumpRaw(db);
  EXPECT_EQ(kv.count("t:" + encoding::BigEndian64(2)), 0u);
  EXPECT_EQ(kv.count("t:" + encoding::BigEndian64(1)), 1u);
}

TEST(StoreTest, IdsWithThumbnailsListsExactlyTheIdsThatHaveOneAscending) {
  TempDir tmp;
  // 300 images: ids past 255 check that big-endian keys scan in numeric order.
  auto store = ThumbnailInput(tmp / "db", kSchemaVersion, 300, [](int i) { return i % 3 != 0; });
  store->RemoveImage(*store->FindById(5));     // had one
  store->PutThumbnail(4, ThumbnailBlob(4));    // had none
  store->PutThumbnail(300, ThumbnailBlob(4));  // had one already
  std::vector<uint64_t> expected;
  for (uint64_t id = 1; id <= 300; ++id)
    if ((id - 1) % 3 != 0 || id == 4)
      if (id != 5) expected.push_back(id);
  EXPECT_EQ(store->IdsWithThumbnails(), expected);
  // The neighbouring key spaces (p: before, v: after in a database with
  // vectors) are not read as thumbnails.
  EXPECT_TRUE(
      ThumbnailInput(tmp / "empty", 2, 2, [](int) { return false; })->IdsWithThumbnails().empty());
}

TEST(StoreTest, DetectsCorruptedThumbnail) {
  TempDir tmp;
  const std::string db = tmp / "db";
  ThumbnailInput(db, kSchemaVersion, 3, [](int) { return true; }).reset();
  FlipByte(db, "t:", 2, 100);
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  EXPECT_EQ(store->GetThumbnails({1, 3})[1], ThumbnailBlob(2));
  try {
    store->GetThumbnails({1, 2});
    ADD_FAILURE() << "a flipped byte in a stored thumbnail went unnoticed";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.kind(), StoreError::Kind::kCorrupt) << e.what();
    EXPECT_NE(std::string(e.what()).find("image id 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("thumbnail: checksum mismatch"), std::string::npos)
        << e.what();
  }
  const auto problems = store->Verify();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("image 2 (/img1)"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("thumbnail: checksum mismatch"), std::string::npos) << problems[0];
  // A value too short to hold its checksum.
  ASSERT_TRUE(
      OpenRaw(db)->Put(rocksdb::WriteOptions(), "t:" + encoding::BigEndian64(3), "short").ok());
  store = Store::Open(db, Store::Mode::kReadOnly);
  EXPECT_THROW(store->GetThumbnails({3}), StoreError);
  const auto short_problems = store->Verify();
  ASSERT_EQ(short_problems.size(), 2u);
  EXPECT_NE(short_problems[1].find("thumbnail: too short"), std::string::npos) << short_problems[1];
}

TEST(StoreTest, VerifyReportsThumbnailWithoutRecord) {
  TempDir tmp;
  const std::string db = tmp / "db";
  ThumbnailInput(db, kSchemaVersion, 1, [](int) { return true; }).reset();
  {
    auto raw = OpenRaw(db);
    std::string value;
    ASSERT_TRUE(raw->Get(rocksdb::ReadOptions(), "t:" + encoding::BigEndian64(1), &value).ok());
    ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), "t:" + encoding::BigEndian64(42), value).ok());
  }
  {
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    EXPECT_EQ(store->IdsWithThumbnails(), (std::vector<uint64_t>{1, 42}));
    const auto problems = store->Verify();
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems[0].find("thumbnail of id 42 has no record"), std::string::npos)
        << problems[0];
  }
  // A t: key that holds no id is malformed.
  ASSERT_TRUE(OpenRaw(db)->Put(rocksdb::WriteOptions(), "t:x", "stray").ok());
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  const auto problems = store->Verify();
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[1].find("thumbnail key"), std::string::npos) << problems[1];
  EXPECT_NE(problems[1].find("malformed"), std::string::npos) << problems[1];
  try {
    store->IdsWithThumbnails();
    ADD_FAILURE() << "a malformed t: key was listed";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.kind(), StoreError::Kind::kCorrupt) << e.what();
  }
}

TEST(StoreTest, ModelSettingsAreChecksummedAndOlderModelsStillOpen) {
  TempDir tmp;
  const std::string db = tmp / "db";
  ModelRecord model = MakeModel();
  model.min_keypoints = 300;
  Store::Create(db, model, nullptr, 2);
  EXPECT_EQ(Store::Open(db, Store::Mode::kReadOnly)->model().min_keypoints, 300u);
  std::string value;
  {
    auto raw = OpenRaw(db);
    ASSERT_TRUE(raw->Get(rocksdb::ReadOptions(), "m:model", &value).ok());
  }
  auto put = [&](const std::string& v) {
    auto raw = OpenRaw(db);
    ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), "m:model", v).ok());
  };
  // The value ends with u32 min_keypoints and a u64 FNV-1a of all before it.
  // A flipped settings byte outside the centroids (which the codebook hash
  // covers) must not go unnoticed.
  std::string flipped = value;
  flipped[flipped.size() - 12] ^= 0x01;
  put(flipped);
  try {
    Store::Open(db, Store::Mode::kReadOnly);
    FAIL() << "a flipped min_keypoints byte went unnoticed";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.kind(), StoreError::Kind::kCorrupt) << e.what();
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  }
  // A model written before min_keypoints existed ends with the centroids:
  // it opens, with re-detection off, as it was built.
  put(value.substr(0, value.size() - 12));
  EXPECT_EQ(Store::Open(db, Store::Mode::kReadOnly)->model().min_keypoints, 0u);
  put(value);
  EXPECT_EQ(Store::Open(db, Store::Mode::kReadOnly)->model().min_keypoints, 300u);
}

TEST(StoreTest, DetectsTruncatedVector) {
  TempDir tmp;
  const std::string db = tmp / "db";
  uint64_t id = 0;
  {
    auto store = Store::Create(db, MakeModel(), nullptr, 2);
    ImageRecord r = MakeRecord("/img", 1);
    const auto v = MakeVector(1);
    store->PutImage(&r, v.data());
    id = r.id;
  }
  {
    auto raw = OpenRaw(db);
    const std::string key = "v:" + encoding::BigEndian64(id);
    std::string value;
    ASSERT_TRUE(raw->Get(rocksdb::ReadOptions(), key, &value).ok());
    value.resize(value.size() - 3);
    ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), key, value).ok());
  }
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  try {
    store->ForEachVector([](const ImageRecord&, const float*) {});
    FAIL() << "a truncated vector went unnoticed";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.kind(), StoreError::Kind::kCorrupt) << e.what();
  }
}

TEST(StoreTest, ReadOnlyOpenCreatesNothing) {
  TempDir tmp;
  const std::string missing = tmp / "nothing-here";
  EXPECT_FALSE(Store::IsDatabase(missing));
  try {
    Store::Open(missing, Store::Mode::kReadOnly);
    FAIL() << "opened a missing database";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.kind(), StoreError::Kind::kNotFound) << e.what();
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(missing));
  EXPECT_TRUE(fs::is_empty(tmp.path()));

  const std::string empty = tmp / "empty";
  fs::create_directory(empty);
  EXPECT_FALSE(Store::IsDatabase(empty));
  try {
    Store::Open(empty, Store::Mode::kReadOnly);
    FAIL() << "opened an empty folder as a database";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.kind(), StoreError::Kind::kNotADatabase) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(empty));
}

TEST(StoreTest, CreateRefusesNonEmptyFolderAndFile) {
  TempDir tmp;
  const std::string folder = tmp / "photos";
  fs::create_directory(folder);
  { std::ofstream(folder + "/keep.txt") << "precious"; }
  try {
    Store::Create(folder, MakeModel());
    FAIL() << "created a database in a non-empty folder";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.kind(), StoreError::Kind::kNotADatabase) << e.what();
    EXPECT_NE(std::string(e.what()).find("not empty"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Store::CheckCanCreate(folder), StoreError);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(folder)) names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"keep.txt"});

  const std::string file = tmp / "file.db";
  { std::ofstream(file) << "x"; }
  try {
    Store::Create(file, MakeModel());
    FAIL() << "created a database over a file";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.kind(), StoreError::Kind::kNotADatabase) << e.what();
    EXPECT_NE(std::string(e.what()).find("is a file"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_regular_file(file));
  EXPECT_EQ(fs::file_size(file), 1u);

  // Nothing else was left behind (no temporary .creating- folders).
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(tmp.path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 2u);

  // An empty folder is accepted.
  const std::string empty = tmp / "empty";
  fs::create_directory(empty);
  EXPECT_NO_THROW(Store::Create(empty, MakeModel()));
  EXPECT_TRUE(Store::IsDatabase(empty));
}

TEST(StoreTest, SecondWriterIsLocked) {
  TempDir tmp;
  const std::string db = tmp / "db";
  auto first = Store::Create(db, MakeModel(), nullptr, 2);
  try {
    Store::Open(db, Store::Mode::kReadWrite);
    FAIL() << "a second read-write open succeeded";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.kind(), StoreError::Kind::kLocked) << e.what();
    EXPECT_NE(std::string(e.what()).find("in use by another process"), std::string::npos)
        << e.what();
  }
  // Readers are welcome meanwhile, and see committed writes.
  ImageRecord r = MakeRecord("/a", 1);
  const auto v = MakeVector(1);
  first->PutImage(&r, v.data());
  auto reader = Store::Open(db, Store::Mode::kReadOnly);
  EXPECT_EQ(reader->num_images(), 1u);
  EXPECT_TRUE(reader->FindByPath("/a").has_value());
  // After the writer closes, a new writer may open.
  first.reset();
  EXPECT_NO_THROW(Store::Open(db, Store::Mode::kReadWrite));
}

}  // namespace
}  // namespace lookalike

namespace lookalike {
namespace {

// The persisted search index: chunked round trip, replacement by a smaller
// blob (no stray chunks), read-only access, and corruption (a flipped byte,
// a missing chunk, a stray chunk) detected on load and by Verify.
// A saved search index leaves level 0 at once: its table would otherwise
// cover the key range of every vector, thumbnail and word list, and each read
// of those would consult it until a compaction reached it.
TEST(StoreTest, SavedSearchIndexIsCompactedOutOfLevelZero) {
  TempDir tmp;
  const std::string db = tmp / "db";
  const std::string big = RandomBytes(4, 9u << 20);
  {
    auto store = Store::Create(db, MakeModel(), nullptr, 2);
    for (int i = 0; i < 3; ++i) {
      ImageRecord r;
      r.path = "/p/" + std::to_string(i) + ".jpg";
      r.num_descriptors = 1;
      const std::vector<float> v(store->model().vlad_dim(), 0.0f);
      store->PutImage(&r, v.data());
    }
    store->PutSearchIndex(big);
    EXPECT_EQ(store->GetSearchIndex(), big);
  }
  auto raw = OpenRaw(db);
  std::vector<rocksdb::LiveFileMetaData> files;
  raw->GetLiveFilesMetaData(&files);
  int with_chunks = 0;
  for (const auto& f : files) {
    if (f.largestkey < "x:" || f.smallestkey >= "x;") continue;
    ++with_chunks;
    EXPECT_GT(f.level, 0) << f.name << " holds search index chunks in level 0";
  }
  EXPECT_GT(with_chunks, 0);
}

// An index saved by a build that did not compact it sits in level 0 until
// RocksDB compacts on its own: the next writer's sync moves it down.
TEST(StoreTest, ASearchIndexLeftInLevelZeroIsCompactedOnRequest) {
  TempDir tmp;
  const std::string db = tmp / "db";
  const std::string big = RandomBytes(5, 9u << 20);
  Store::Create(db, MakeModel(), nullptr, 2)->PutSearchIndex(big);
  auto chunks_in_level_zero = [&] {
    auto raw = OpenRaw(db);
    std::vector<rocksdb::LiveFileMetaData> files;
    raw->GetLiveFilesMetaData(&files);
    int n = 0;
    for (const auto& f : files)
      n += f.level == 0 && !(f.largestkey < "x:" || f.smallestkey >= "x;");
    return n;
  };
  {
    // What an older build left: the chunks written again and flushed.
    auto raw = OpenRaw(db);
    std::unique_ptr<rocksdb::Iterator> it(raw->NewIterator(rocksdb::ReadOptions()));
    for (it->Seek("x:"); it->Valid() && it->key().compare("x;") < 0; it->Next())
      ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), it->key(), it->value()).ok());
    ASSERT_TRUE(raw->Flush(rocksdb::FlushOptions()).ok());
  }
  ASSERT_GT(chunks_in_level_zero(), 0);
  EXPECT_FALSE(Store::Open(db, Store::Mode::kReadOnly)->CompactSearchIndexOutOfLevelZero());
  {
    auto store = Store::Open(db, Store::Mode::kReadWrite);
    EXPECT_TRUE(store->CompactSearchIndexOutOfLevelZero());
    EXPECT_FALSE(store->CompactSearchIndexOutOfLevelZero()) << "nothing left to move";
    EXPECT_EQ(store->GetSearchIndex(), big);
  }
  EXPECT_EQ(chunks_in_level_zero(), 0);
}

TEST(StoreTest, PersistedSearchIndex) {
  TempDir tmp;
  const std::string db = tmp / "db";
  const std::string big = RandomBytes(3, 9u << 20);  // three 4 MiB chunks
  {
    auto store = Store::Create(db, MakeModel(), nullptr, 2);
    EXPECT_FALSE(store->GetSearchIndex().has_value());
    store->PutSearchIndex(big);
    EXPECT_EQ(store->GetSearchIndex(), big);
    EXPECT_TRUE(store->Verify().empty());
    store->PutSearchIndex("small");
    EXPECT_EQ(store->GetSearchIndex(), std::string("small"));
    EXPECT_TRUE(store->Verify().empty()) << store->Verify()[0];
    store->PutSearchIndex(big);
  }
  {
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    EXPECT_EQ(store->GetSearchIndex(), big);
    EXPECT_THROW(store->PutSearchIndex("x"), StoreError);
  }
  const std::string chunk1 = std::string("x:") + std::string("\0\0\0\1", 4);
  auto expect_corrupt = [&](const std::string& what) {
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    try {
      store->GetSearchIndex();
      ADD_FAILURE() << what << " went unnoticed on load";
    } catch (const StoreError& e) {
      EXPECT_EQ(e.kind(), StoreError::Kind::kCorrupt) << e.what();
      EXPECT_NE(std::string(e.what()).find("search index"), std::string::npos) << e.what();
    }
    const auto problems = store->Verify();
    ASSERT_FALSE(problems.empty()) << what << " went unnoticed by Verify";
    EXPECT_NE(problems[0].find("search index"), std::string::npos) << problems[0];
  };
  std::string value;
  {
    auto raw = OpenRaw(db);
    ASSERT_TRUE(raw->Get(rocksdb::ReadOptions(), chunk1, &value).ok());
    std::string bad = value;
    bad[12345] ^= 0x01;
    ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), chunk1, bad).ok());
  }
  expect_corrupt("a flipped byte");
  {
    auto raw = OpenRaw(db);
    ASSERT_TRUE(raw->Delete(rocksdb::WriteOptions(), chunk1).ok());
  }
  expect_corrupt("a missing chunk");
  {
    auto raw = OpenRaw(db);
    ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), chunk1, value).ok());
    ASSERT_TRUE(
        raw->Put(rocksdb::WriteOptions(), std::string("x:") + std::string("\0\0\0\7", 4), "stray")
            .ok());
  }
  {
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    EXPECT_EQ(store->GetSearchIndex(), big);  // the blob itself is whole again
    const auto problems = store->Verify();
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems[0].find("not part of the persisted index"), std::string::npos)
        << problems[0];
  }
}

// ReadSearchIndex hands the blob over in reads of any size across its 4 MiB
// chunks, checking its checksum as the last chunk is read; a header of the
// older format (FNV-1a, written before 2026-11-29) is still read and
// reported, and a flipped byte in it is caught too.
TEST(StoreTest, SearchIndexReadInPiecesChecksItsChecksumAtTheEnd) {
  TempDir tmp;
  const std::string db = tmp / "db";
  const std::string big = RandomBytes(5, 9u << 20);  // three chunks
  {
    auto store = Store::Create(db, MakeModel(), nullptr, 2);
    EXPECT_EQ(store->ReadSearchIndex(), nullptr);
    store->PutSearchIndex(big);
  }
  auto read_all = [&](size_t piece) {
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    const std::unique_ptr<SearchIndexReader> in = store->ReadSearchIndex();
    EXPECT_NE(in, nullptr);
    if (!in) return std::make_pair(std::string(), false);
    const bool old = in->old_checksum();
    std::string out(in->size(), '\0');
    for (size_t at = 0; at < out.size(); at += piece) {
      in->Read(out.data() + at, std::min(piece, out.size() - at));
      EXPECT_EQ(in->remaining(), out.size() - std::min(out.size(), at + piece));
    }
    EXPECT_THROW(in->Read(out.data(), 1), StoreError);  // past its end
    return std::make_pair(out, old);
  };
  EXPECT_EQ(read_all(7777), std::make_pair(big, false));
  EXPECT_EQ(read_all(big.size()), std::make_pair(big, false));
  // The header as the older format wrote it: format 1, FNV-1a of the blob.
  std::string header;
  encoding::PutFixed32(&header, 1);
  encoding::PutFixed64(&header, big.size());
  encoding::PutFixed32(&header, 3);
  encoding::PutFixed64(&header, encoding::Fnv1a64(big.data(), big.size()));
  {
    auto raw = OpenRaw(db);
    ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), "m:xindex", header).ok());
  }
  EXPECT_EQ(read_all(1u << 20), std::make_pair(big, true));
  const std::string chunk2 = std::string("x:") + std::string("\0\0\0\2", 4);
  {
    auto raw = OpenRaw(db);
    std::string value;
    ASSERT_TRUE(raw->Get(rocksdb::ReadOptions(), chunk2, &value).ok());
    value[100] ^= 0x20;
    ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), chunk2, value).ok());
  }
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  {
    // SkipTo passes bytes unread, within the chunk held and across chunks;
    // the checksum is then not checked (the flipped byte is read as it is).
    const std::unique_ptr<SearchIndexReader> in = store->ReadSearchIndex();
    ASSERT_NE(in, nullptr);
    std::string piece(10, '\0');
    in->Read(piece.data(), piece.size());
    in->SkipTo(1000);
    in->Read(piece.data(), piece.size());
    EXPECT_EQ(piece, big.substr(1000, 10));
    in->SkipTo((4u << 20) - 5);  // the first chunk's last 5 bytes and the second's first 5
    in->Read(piece.data(), piece.size());
    EXPECT_EQ(piece, big.substr((4u << 20) - 5, 10));
    in->SkipTo(8u << 20);  // a chunk's first byte
    std::string rest(in->remaining(), '\0');
    in->Read(rest.data(), rest.size());
    std::string flipped = big.substr(8u << 20);
    flipped[100] ^= 0x20;
    EXPECT_EQ(rest, flipped);
    EXPECT_THROW(in->SkipTo(big.size() + 1), StoreError);
  }
  const std::unique_ptr<SearchIndexReader> in = store->ReadSearchIndex();
  ASSERT_NE(in, nullptr);
  std::string head(8u << 20, '\0');
  in->Read(head.data(), head.size());  // the first two chunks are whole
  EXPECT_EQ(head, big.substr(0, head.size()));
  std::string rest(in->remaining(), '\0');
  try {
    in->Read(rest.data(), rest.size());
    ADD_FAILURE() << "a flipped byte in the last chunk went unnoticed";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.kind(), StoreError::Kind::kCorrupt);
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lookalike

namespace lookalike {
namespace {

// A compact database with a 4-d projection holding `paths` (ids 1..n), a
// thumbnail for every other one (the first, third, ...), the image at
// `remove` (if any) removed again so its id is a gap.
std::unique_ptr<Store> MergeInput(const std::string& db, const std::vector<std::string>& paths,
                                  uint64_t seed, int remove = -1) {
  const ProjectionRecord p = AxisProjection(4);
  auto store = Store::Create(db, MakeModel(), &p, kSchemaVersion, "quantizer");
  for (size_t i = 0; i < paths.size(); ++i) {
    ImageRecord r = MakeRecord(paths[i], seed + i);
    const bool none = r.status == ImageStatus::kNoFeatures;
    const std::vector<float> v = none ? std::vector<float>{0, 0, 0, 0}
                                      : std::vector<float>{0.6f, 0.8f * (i % 2 ? -1 : 1), 0, 0};
    store->PutImage(&r, v.data(), "features of " + paths[i],
                    i % 2 == 0 ? "thumbnail of " + paths[i] : std::string());
    if (static_cast<int>(i) == remove) store->RemoveImage(r);
  }
  return store;
}

TEST(StoreMergeTest, RemapsIdsAndKeepsEveryValueAndCounter) {
  TempDir tmp;
  auto out = MergeInput(tmp / "out", {"/o/1.jpg", "/o/2.jpg", "/o/3.jpg"}, 10, 1);
  auto a = MergeInput(tmp / "a", {"/a/1.jpg", "/a/2.jpg", "/a/3.jpg", "/a/4.jpg"}, 20, 0);
  auto b = MergeInput(tmp / "b", {"/b/1.jpg", "/b/2.jpg"}, 30);
  struct Values {
    ImageRecord record;
    std::string features;
    std::optional<std::string> thumbnail;
  };
  std::map<std::string, Values> expected;
  ImageTotals sums;
  size_t thumbnails = 0;
  for (Store* s : {out.get(), a.get(), b.get()})
    s->ForEachImage([&](const ImageRecord& r) {
      expected[r.path] = {r, *s->GetFeatures(r.id), s->GetThumbnails({r.id})[0]};
      thumbnails += expected[r.path].thumbnail.has_value();
      sums.descriptors += r.num_descriptors;
      sums.without_features += r.status == ImageStatus::kNoFeatures;
    });
  ASSERT_EQ(expected.size(), 2u + 3u + 2u);
  ASSERT_EQ(thumbnails, 2u + 1u + 1u);  // /o/1, /o/3; /a/3; /b/1 (/a/1 was removed)
  const uint64_t generation = out->totals()->generation;
  const MergeSummary m = out->MergeShards({a.get(), b.get()}, tmp / "scratch");
  EXPECT_EQ(m.added, 5u);
  EXPECT_FALSE(fs::exists(tmp / "scratch"));
  EXPECT_EQ(out->num_images(), 7u);
  EXPECT_EQ(out->totals()->descriptors, sums.descriptors);
  EXPECT_EQ(out->totals()->without_features, sums.without_features);
  EXPECT_NE(out->totals()->generation, generation);
  std::set<uint64_t> ids, with_thumbnail;
  for (const auto& [path, want] : expected) {
    const auto got = out->FindByPath(path);
    ASSERT_TRUE(got.has_value()) << path;
    EXPECT_TRUE(ids.insert(got->id).second) << "id " << got->id << " given twice";
    ImageRecord w = want.record;
    w.id = got->id;
    ExpectSameRecord(*got, w);
    EXPECT_EQ(*out->GetFeatures(got->id), want.features) << path;
    // Thumbnails travel with their image under its new id; none appears.
    EXPECT_EQ(out->GetThumbnails({got->id})[0], want.thumbnail) << path;
    if (want.thumbnail) with_thumbnail.insert(got->id);
    const auto v = out->GetVector(got->id);
    ASSERT_TRUE(v.has_value()) << path;
  }
  EXPECT_EQ(out->IdsWithThumbnails(),
            std::vector<uint64_t>(with_thumbnail.begin(), with_thumbnail.end()));
  EXPECT_TRUE(out->Verify().empty());
  // Reopened, the counters read back; merging the same shards again is a no-op.
  out.reset();
  out = Store::Open(tmp / "out", Store::Mode::kReadWrite);
  EXPECT_EQ(out->num_images(), 7u);
  const MergeSummary again = out->MergeShards({a.get(), b.get()}, tmp / "scratch");
  EXPECT_EQ(again.added, 0u);
  EXPECT_TRUE(again.shards[0].already_merged && again.shards[1].already_merged);
  EXPECT_EQ(out->num_images(), 7u);
}

TEST(StoreMergeTest, UnknownKeyFailsLoudlyAndChangesNothing) {
  for (const std::string& key : {std::string("y:1"), std::string("m:future"), std::string("zz")}) {
    SCOPED_TRACE(key);
    TempDir tmp;
    MergeInput(tmp / "out", {"/o/1.jpg"}, 10);
    MergeInput(tmp / "a", {"/a/1.jpg"}, 20);
    OpenRaw(tmp / "a")->Put(rocksdb::WriteOptions(), key, "a key space of a newer build");
    const auto before = DumpRaw(tmp / "out");
    auto out = Store::Open(tmp / "out", Store::Mode::kReadWrite);
    auto a = Store::Open(tmp / "a", Store::Mode::kReadOnly);
    try {
      out->MergeShards({a.get()}, tmp / "scratch");
      ADD_FAILURE() << "merged a shard holding " << key;
    } catch (const StoreError& e) {
      EXPECT_EQ(e.kind(), StoreError::Kind::kSchema);
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(tmp / "a"), std::string::npos) << e.what();
    }
    out.reset();
    EXPECT_EQ(DumpRaw(tmp / "out"), before);
  }
}

// Every setting of the model and of the PCA projection survives a write and
// a read (a database created from what another one reads back holds the same
// bytes), and the values are the bytes this format has always had: a golden
// FNV-1a of each pins the layout (storage/README.md, "On-disk format").
TEST(StoreTest, ModelAndProjectionValuesRoundTripByteForByte) {
  TempDir tmp;
  ModelRecord model = MakeModel(11);
  model.descriptor_type = "sift";
  model.max_side = 777;
  model.contrast_threshold = 0.02f;
  model.max_features = 900;
  model.min_keypoints = 250;
  model.power_alpha = 0.5f;
  model.intra_normalize = false;
  model.residual_normalize = true;
  // bits, and whether the mean is stored projected (format 4).
  const std::vector<std::pair<uint32_t, bool>> cases = {{16, false}, {32, false}, {4, false},
                                                        {2, false},  {1, false},  {4, true},
                                                        {2, true},   {1, true}};
  for (const auto& [bits, projected] : cases) {
    ProjectionRecord p = AxisProjection(4);
    p.whiten = false;
    p.component_bits = bits;
    if (ProjectionRecord::Gridded(bits)) p.component_scales = {0.25f, 0.5f, 0.125f, 1.0f};
    p.eigen_regularization = 0.25f;
    p.power_alpha = 0.75f;
    p.mean[2] = 0.125f;
    p.components[1] = -0.5f;
    if (projected) {
      p.mean.clear();
      p.projected_mean = {0.5f, -0.25f, 0.125f, 2.0f};
    }
    const std::string name = std::to_string(bits) + (projected ? "p" : "");
    SCOPED_TRACE(name);
    const std::string first = tmp / ("first" + name);
    const std::string second = tmp / ("second" + name);
    Store::Create(first, model, &p, kSchemaVersion, "quantizer");
    {
      auto read = Store::Open(first, Store::Mode::kReadOnly);
      const ProjectionRecord read_p = *read->GetProjection();
      Store::Create(second, read->model(), &read_p, kSchemaVersion, "quantizer");
    }
    const auto a = DumpRaw(first), b = DumpRaw(second);
    for (const char* key : {"m:model", "m:pca"}) {
      ASSERT_EQ(a.count(key), 1u) << key;
      EXPECT_EQ(a.at(key), b.at(key)) << key;
    }
    const std::string& m = a.at("m:model");
    const std::string& pca = a.at("m:pca");
    EXPECT_EQ(encoding::Fnv1a64(m.data(), m.size()), 0xab1964034dc6c697ull);
    // 16 and 32 bits: the bytes every build since m:pca format 1 wrote; 4
    // bits: format 2's; 2 and 1: format 3's; a projected mean: format 4's.
    const uint32_t format = static_cast<uint8_t>(pca[0]);
    EXPECT_EQ(format, projected ? 4u : bits == 4 ? 2u : bits <= 2 ? 3u : 1u);
    const std::map<std::string, uint64_t> pins = {
        {"16", 0x20fc97c30181f055ull}, {"32", 0x82daf8c048261a27ull}, {"4", 0xf36c96f9dc99829dull},
        {"2", 0x98fb9d5d0cbcecc3ull},  {"1", 0x130c795383a6387cull},  {"4p", 0xb6d969d778c899d0ull},
        {"2p", 0x95d6c9e4b956b0daull}, {"1p", 0x0aa7b28cbee445eaull}};
    EXPECT_EQ(encoding::Fnv1a64(pca.data(), pca.size()), pins.at(name));
    const ProjectionRecord back = *Store::Open(first, Store::Mode::kReadOnly)->GetProjection();
    EXPECT_EQ(back.mean, p.mean);
    EXPECT_EQ(back.projected_mean, p.projected_mean);
  }
}

TEST(StoreMergeTest, FingerprintCoversModelProjectionAndQuantizer) {
  TempDir tmp;
  const ProjectionRecord p = AxisProjection(4);
  auto base = Store::Create(tmp / "base", MakeModel(), &p, kSchemaVersion, "quantizer");
  const ProjectionRecord stored = *base->GetProjection();
  auto copy = Store::Create(tmp / "copy", base->model(), &stored, kSchemaVersion,
                            *base->GetDescriptorQuantizer());
  EXPECT_EQ(base->ModelFingerprint(), copy->ModelFingerprint());
  EXPECT_NO_THROW(Store::CheckSameModel({base.get(), copy.get()}));
  auto seed = Store::Create(tmp / "seed", MakeModel(8), &p, kSchemaVersion, "quantizer");
  auto quant = Store::Create(tmp / "quant", MakeModel(), &p, kSchemaVersion, "other quantizer");
  auto nopca = Store::Create(tmp / "nopca", MakeModel(), nullptr, kSchemaVersion, "quantizer");
  for (Store* other : {seed.get(), quant.get(), nopca.get()}) {
    EXPECT_NE(other->ModelFingerprint(), base->ModelFingerprint()) << other->path();
    try {
      Store::CheckSameModel({base.get(), other});
      ADD_FAILURE() << other->path() << " accepted";
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find(other->path()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(base->path()), std::string::npos) << e.what();
    }
  }
}

// `merge` holds a ShardReadLock on each shard: it is refused while another
// process writes the shard, and a writer cannot open the shard while it is
// held. Both sides are separate processes, as they are in use (POSIX record
// locks are per process).
TEST(StoreTest, ShardReadLockExcludesWriters) {
  TempDir tmp;
  const std::string db = tmp.path() + "/shard";
  Store::Create(db, MakeModel(), nullptr, 2);

  int ready[2], release[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(release), 0);
  const pid_t writer = ::fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    ::close(ready[0]);
    ::close(release[1]);
    int code = 0;
    try {
      auto store = Store::Open(db, Store::Mode::kReadWrite);
      const char c = 'x';
      if (::write(ready[1], &c, 1) != 1) code = 3;
      char ignored;
      while (::read(release[0], &ignored, 1) > 0) {
      }  // until the parent closes its end
    } catch (...) {
      code = 4;
    }
    ::_exit(code);
  }
  ::close(ready[1]);
  ::close(release[0]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1) << "the writer did not open the database";
  try {
    ShardReadLock lock(db);
    ADD_FAILURE() << "a shard was locked for reading while a writer holds it";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.kind(), StoreError::Kind::kLocked) << e.what();
    EXPECT_NE(std::string(e.what()).find("process " + std::to_string(writer)), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(db), std::string::npos) << e.what();
  }
  ::close(release[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(writer, &status, 0), writer);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ::close(ready[0]);

  // Held by this process, the lock keeps a writer in another process out,
  // and releasing it lets the writer in.
  {
    ShardReadLock lock(db);
    const pid_t second = ::fork();
    ASSERT_GE(second, 0);
    if (second == 0) {
      int code = 1;
      try {
        Store::Open(db, Store::Mode::kReadWrite);
        code = 0;
      } catch (const StoreError& e) {
        code = e.kind() == StoreError::Kind::kLocked ? 7 : 8;
      } catch (...) {
        code = 9;
      }
      ::_exit(code);
    }
    ASSERT_EQ(::waitpid(second, &status, 0), second);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7) << "writer exit status " << status;
    // Readers are not affected.
    EXPECT_NO_THROW(Store::Open(db, Store::Mode::kReadOnly));
  }
  EXPECT_NO_THROW(Store::Open(db, Store::Mode::kReadWrite));
  // A folder that is not a database is not locked; opening it says what it is.
  EXPECT_NO_THROW(ShardReadLock(tmp.path() + "/missing"));
}

}  // namespace
}  // namespace lookalike
