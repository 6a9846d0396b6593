// `lookalike verify` on what schema 3 adds: values with valid checksums that
// do not fit the rest of the database are found (local features of another
// image or of the older format, features missing where vectors are derived
// from them, stored vectors without a projection, an unusable descriptor
// quantizer), and a clean database passes.
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "storage/encoding.h"
#include "storage/store.h"
#include "tests/test_images.h"
#include "tools/cli.h"

namespace lookalike {
namespace {

using testing::TempDir;

struct CliRun {
  int code;
  std::string out, err;
};

CliRun RunLookalike(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunCli(args, out, err, /*stderr_is_tty=*/false, nullptr);
  return {code, out.str(), err.str()};
}

// RocksDB opened directly, to put values the store would never write.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    rocksdb::DB* raw = nullptr;
    EXPECT_TRUE(rocksdb::DB::Open(rocksdb::Options(), path, &raw).ok()) << path;
    db_.reset(raw);
  }
  std::string Get(const std::string& key) {
    std::string v;
    EXPECT_TRUE(db_->Get(rocksdb::ReadOptions(), key, &v).ok()) << key;
    return v;
  }
  void Put(const std::string& key, const std::string& value) {
    ASSERT_TRUE(db_->Put(rocksdb::WriteOptions(), key, value).ok());
  }
  void Delete(const std::string& key) {
    ASSERT_TRUE(db_->Delete(rocksdb::WriteOptions(), key).ok());
  }

 private:
  std::unique_ptr<rocksdb::DB> db_;
};

std::string FeaturesKey(uint64_t id) { return "f:" + encoding::BigEndian64(id); }

class VerifyCompactTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::WriteSyntheticSet(tmp_ / "photos", 6, 50, 320, 240); }
  std::string Make(const std::string& name, std::vector<std::string> flags) {
    const std::string db = tmp_ / name;
    std::vector<std::string> args = {"index", tmp_ / "photos", "--db", db,  "--clusters",
                                     "16",    "--backend",     "cpu",  "-q"};
    args.insert(args.end(), flags.begin(), flags.end());
    EXPECT_EQ(RunLookalike(args).code, 0);
    const CliRun clean = RunLookalike({"verify", "--db", db});
    EXPECT_EQ(clean.code, 0) << clean.err;
    return db;
  }
  // Ids of the images whose records hold the most and fewest descriptors.
  std::pair<uint64_t, uint64_t> MostAndFewest(const std::string& db) {
    uint64_t most = 0, fewest = 0;
    uint32_t hi = 0, lo = ~0u;
    Store::Open(db, Store::Mode::kReadOnly)->ForEachImage([&](const ImageRecord& r) {
      if (r.num_descriptors > hi) hi = r.num_descriptors, most = r.id;
      if (r.num_descriptors < lo) lo = r.num_descriptors, fewest = r.id;
    });
    EXPECT_NE(hi, lo);
    return {most, fewest};
  }
  CliRun Verify(const std::string& db) { return RunLookalike({"verify", "--db", db}); }
  TempDir tmp_;
};

TEST_F(VerifyCompactTest, FindsValuesThatDoNotFitTheDatabase) {
  const std::string derived = Make("derived", {});
  const std::string stored = Make("stored", {"--pca-min-images", "0", "--pca-dim", "8"});
  const std::string older = Make("older", {"--descriptor-bytes", "0"});
  const auto [most, fewest] = MostAndFewest(derived);

  // Another image's features (checksum valid): the keypoint count is wrong.
  {
    RawDb raw(derived);
    raw.Put(FeaturesKey(fewest), raw.Get(FeaturesKey(most)));
  }
  CliRun r = Verify(derived);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("local features: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("keypoints, the record says"), std::string::npos) << r.err;

  // Features of the older format (same hash kind): the wrong format.
  {
    RawDb raw(stored);
    RawDb old(older);
    raw.Put(FeaturesKey(most), old.Get(FeaturesKey(most)));
  }
  r = Verify(stored);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("local features: format 1, the database's is 2"), std::string::npos)
      << r.err;

  // No features where the vector is derived from them; stored vectors
  // without the projection; a quantizer that does not decode.
  {
    RawDb raw(derived);
    raw.Delete(FeaturesKey(most));
    std::string junk = "not a quantizer";
    encoding::PutFixed64(&junk, encoding::Fnv1a64(junk.data(), junk.size()));
    raw.Put("m:dq", junk);
    std::string words = "not a vocabulary";
    encoding::PutFixed64(&words, encoding::Fnv1a64(words.data(), words.size()));
    raw.Put("m:wv", words);
  }
  r = Verify(derived);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no local features, and its vector is derived from them"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("descriptor quantizer (m:dq)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("model word vocabulary (m:wv): "), std::string::npos) << r.err;
  { RawDb(stored).Delete("m:pca"); }
  r = Verify(stored);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no projection (m:pca)"), std::string::npos) << r.err;
  // The older layout still verifies clean.
  EXPECT_EQ(Verify(older).code, 0);
}

}  // namespace
}  // namespace lookalike
