// The persisted search index is derived data, read in its current format
// only: one of another format (as an older build left it) is rebuilt from the
// stored vectors and features, against the real binary. `search` rebuilds it
// in memory and writes nothing; the `index` run that saves it is SIGKILLed
// before its word lists are committed, after they are, and after the save
// (frozen there by LOOKALIKE_TEST_STOP_AT, waited for with waitpid: no timing
// involved). After each kill `verify` passes and search ranks as before; a
// re-run leaves the index in the current format, ranking the same. The
// collection is below the word index's default minimum, so the search (run
// with the defaults) ranks the same only if the rebuilt index keeps the word
// index the old one had.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "storage/store.h"
#include "tests/subprocess.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;

constexpr char kCurrentFormat = 6;  // search/search_index.cc, kFormat

testing::ProcessResult Lookalike(std::vector<std::string> args) {
  testing::ProcessOptions o;
  o.argv = testing::LookalikeArgs(LOOKALIKE_BIN, std::move(args));
  o.timeout_seconds = 600;
  return testing::RunProcess(o);
}

// `index` with a word index on these few images (the default starts at
// 1,000); model flags only matter at creation.
std::vector<std::string> IndexArgs(const std::string& photos, const std::string& db) {
  return {"index", photos,
          "--db",  db,
          "-q",    "--clusters",
          "64",    "--pca-dim",
          "16",    "--threads",
          "2",     "--pca-min-images",
          "2",     "--word-index-min-images",
          "0"};
}

// The persisted search index blob (the store's checksum checked).
std::string Blob(const std::string& db) {
  const auto blob = Store::Open(db, Store::Mode::kReadOnly)->GetSearchIndex();
  return blob ? *blob : std::string();
}

// Stamps the persisted blob as `format`, keeping the word index keys (as
// formats 4 and 5 had them): a database as an older build left it.
void StampFormat(const std::string& db, char format) {
  auto store = Store::Open(db, Store::Mode::kReadWrite);
  std::string blob = *store->GetSearchIndex();
  ASSERT_EQ(blob.compare(0, 4, "LKSX"), 0);
  blob[4] = format;
  WordIndexCommit words;
  words.table = *store->GetWordTable();
  for (uint32_t s = 0; s < store->NextWordSegment(); ++s) words.segments.push_back(s);
  store->PutSearchIndex(blob, &words);
}

// Every stored image searched: the TSV of its top 3 (the whole ranking).
std::string Ranking(const std::string& db, const std::vector<std::string>& queries) {
  std::vector<std::string> args = {"search", "--db", db, "--format", "tsv", "-k", "3"};
  args.insert(args.end(), queries.begin(), queries.end());
  const auto r = Lookalike(args);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  return r.out;
}

void ExpectVerifies(const std::string& db) {
  const auto verify = Lookalike({"verify", "--db", db});
  EXPECT_EQ(verify.exit_code, 0) << verify.Describe() << verify.out;
}

TEST(SearchIndexKillTest, AnotherFormatIsRebuiltAndItsSaveKilledAnywhereKeepsSearchWhole) {
  testing::TempDir tmp;
  const std::string photos = tmp / "photos", base = tmp / "base";
  testing::WriteSyntheticSet(photos, 9, 500, 320, 240);
  ASSERT_EQ(Lookalike(IndexArgs(photos, base)).exit_code, 0);
  std::vector<std::string> queries;
  Store::Open(base, Store::Mode::kReadOnly)->ForEachImage([&](const ImageRecord& r) {
    queries.push_back(r.path);
  });
  ASSERT_EQ(queries.size(), 9u);
  ASSERT_TRUE(Store::Open(base, Store::Mode::kReadOnly)->GetWordTable().has_value());
  const std::string expected = Ranking(base, queries);
  ASSERT_FALSE(expected.empty());
  StampFormat(base, 5);
  const std::string old_blob = Blob(base);

  // A reader rebuilds it in memory, ranks the same, and writes nothing.
  EXPECT_EQ(Ranking(base, queries), expected);
  EXPECT_EQ(Blob(base), old_blob);
  ExpectVerifies(base);

  int trial = 0;
  for (const char* stop : {"search-index-lists-written", "search-index-saved"}) {
    SCOPED_TRACE(std::string("killed at ") + stop);
    const std::string db = tmp / ("db" + std::to_string(trial++));
    fs::copy(base, db, fs::copy_options::recursive);
    testing::ProcessOptions o;
    o.argv = testing::LookalikeArgs(LOOKALIKE_BIN, IndexArgs(photos, db));
    o.timeout_seconds = 600;
    ASSERT_TRUE(testing::KillAtStopPoint(o, stop)) << "the run never reached " << stop;
    // Killed before the save: the old blob; after it: the current format.
    const std::string blob = Blob(db);
    ASSERT_GT(blob.size(), 4u);
    if (std::string(stop) == "search-index-saved")
      EXPECT_EQ(blob[4], kCurrentFormat);
    else
      EXPECT_EQ(blob, old_blob);
    ExpectVerifies(db);
    EXPECT_EQ(Ranking(db, queries), expected);
    const auto rerun = Lookalike(IndexArgs(photos, db));
    ASSERT_EQ(rerun.exit_code, 0) << rerun.Describe();
    EXPECT_EQ(Blob(db)[4], kCurrentFormat);
    EXPECT_TRUE(Store::Open(db, Store::Mode::kReadOnly)->GetWordTable().has_value());
    ExpectVerifies(db);
    EXPECT_EQ(Ranking(db, queries), expected);
  }
}

}  // namespace
}  // namespace lookalike
