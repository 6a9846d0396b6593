// `lookalike migrate` through the command line, on databases of schema 1
// and 2 with and without a PCA: every image kept with its id and record,
// searches give the same top hits before and after, verify passes, the
// database shrinks, `index` afterwards re-indexes nothing; `index` on an
// older schema says how to migrate; a folder in the way is never touched.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "storage/store.h"
#include "tests/subprocess.h"
#include "tests/test_images.h"
#include "tools/cli.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
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

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The old database a case starts from.
struct Layout {
  const char* name;
  uint32_t schema;
  bool pca;
};

// Every record by id, with the id allocator.
struct Records {
  std::map<uint64_t, ImageRecord> by_id;
  uint64_t next_id = 0;
  uint32_t schema = 0;
  uint64_t vector_dim = 0;
};

Records ReadRecords(const std::string& db) {
  Records r;
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  store->ForEachImage([&](const ImageRecord& rec) { r.by_id[rec.id] = rec; });
  r.next_id = store->next_id();
  r.schema = store->schema_version();
  r.vector_dim = store->vector_dim();
  return r;
}

void ExpectSameRecord(const ImageRecord& a, const ImageRecord& b) {
  EXPECT_EQ(a.path, b.path);
  EXPECT_EQ(a.size_bytes, b.size_bytes) << a.path;
  EXPECT_EQ(a.mtime_ns, b.mtime_ns) << a.path;
  EXPECT_EQ(a.content_hash, b.content_hash) << a.path;
  EXPECT_EQ(a.width, b.width) << a.path;
  EXPECT_EQ(a.height, b.height) << a.path;
  EXPECT_EQ(a.num_descriptors, b.num_descriptors) << a.path;
  EXPECT_EQ(a.status, b.status) << a.path;
  EXPECT_EQ(a.colour, b.colour) << a.path;
}

// query -> ranked (path, score), from `search --format tsv`.
using Ranking = std::map<std::string, std::vector<std::pair<std::string, double>>>;

Ranking Search(const std::string& db, const std::vector<std::string>& queries) {
  std::vector<std::string> args = {"search",   "--db", db,          "-k", "3",
                                   "--format", "tsv",  "--backend", "cpu"};
  args.insert(args.end(), queries.begin(), queries.end());
  const CliRun r = RunLookalike(args);
  EXPECT_EQ(r.code, 0) << r.err;
  Ranking ranking;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string x; std::getline(fields, x, '\t');) f.push_back(x);
    if (f.size() == 5) ranking[f[0]].emplace_back(f[2], std::stod(f[3]));
  }
  return ranking;
}

class MigrateTest : public ::testing::TestWithParam<Layout> {
 protected:
  static constexpr int kImages = 12;

  void SetUp() override {
    paths_ = testing::WriteSyntheticSet(tmp_ / "photos", kImages, 31, 320, 240);
    // Transformed copies, not indexed: each must find its original.
    fs::create_directories(tmp_ / "queries");
    for (int i : {1, 6, 10}) {
      const cv::Mat image = testing::MakeSyntheticImage(31 + i, 320, 240);
      const std::string q = tmp_ / ("queries/copy_" + std::to_string(i) + ".jpg");
      testing::WriteImage(q, testing::ApplyTransform(image, testing::Transform::kCrop));
      queries_.push_back(q);
    }
  }

  std::string db() const { return tmp_ / "db"; }

  CliRun Index(const std::string& target) {
    std::vector<std::string> args = {"index",    tmp_ / "photos", "--db", target,      "--clusters",
                                     "16",       "--threads",     "2",    "--backend", "cpu",
                                     "--format", "json"};
    if (GetParam().pca) args.insert(args.end(), {"--pca-min-images", "0", "--pca-dim", "8"});
    if (GetParam().schema == 2) args.insert(args.end(), {"--descriptor-bytes", "0"});
    return RunLookalike(args);
  }

  // The old database, as the release of its schema wrote it.
  void MakeOldDatabase() {
    if (GetParam().schema == 1) {
      // The model (and PCA) of a database built here, in a database created
      // in schema 1 (as the CLI schema tests do); `index` fills it.
      const std::string donor = tmp_ / "donor";
      ASSERT_EQ(Index(donor).code, 0);
      auto source = Store::Open(donor, Store::Mode::kReadOnly);
      const auto projection = source->GetProjection();
      ASSERT_EQ(projection.has_value(), GetParam().pca);
      Store::Create(db(), source->model(), projection ? &*projection : nullptr, 1);
    }
    const CliRun r = Index(db());
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_TRUE(Contains(r.out, "\"indexed\":" + std::to_string(kImages))) << r.out;
    ASSERT_EQ(Store::Open(db(), Store::Mode::kReadOnly)->schema_version(), GetParam().schema);
  }

  std::vector<std::string> AllQueries() const {
    std::vector<std::string> q = paths_;
    q.insert(q.end(), queries_.begin(), queries_.end());
    return q;
  }

  TempDir tmp_;
  std::vector<std::string> paths_, queries_;
};

TEST_P(MigrateTest, KeepsEveryImageAndItsHitsAndShrinks) {
  MakeOldDatabase();
  const Records before = ReadRecords(db());
  ASSERT_EQ(before.by_id.size(), static_cast<size_t>(kImages));
  const Ranking hits_before = Search(db(), AllQueries());
  ASSERT_EQ(hits_before.size(), AllQueries().size());
  const uint64_t bytes_before = Store::Open(db(), Store::Mode::kReadOnly)->SizeOnDisk();

  // `index` on the older layout updates it as it is and says how to migrate.
  CliRun r = Index(db());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(Contains(r.err, "is schema " + std::to_string(GetParam().schema))) << r.err;
  EXPECT_TRUE(Contains(r.err, "lookalike migrate --db " + db())) << r.err;
  EXPECT_EQ(ReadRecords(db()).schema, GetParam().schema);

  r = RunLookalike({"migrate", "--db", db(), "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "\"from_schema\":" + std::to_string(GetParam().schema) +
                                  ",\"schema\":3,\"migrated\":true,\"resumed\":false"))
      << r.out;
  EXPECT_TRUE(Contains(
      r.out, "\"images\":" + std::to_string(kImages) + ",\"converted\":" + std::to_string(kImages)))
      << r.out;
  EXPECT_FALSE(fs::exists(db() + ".migrating")) << "the original was left beside the database";

  // Same ids, same records, the allocator kept; the compact layout.
  const Records after = ReadRecords(db());
  EXPECT_EQ(after.schema, 3u);
  EXPECT_EQ(after.vector_dim, GetParam().pca ? 8u : 0u);
  EXPECT_GE(after.next_id, before.next_id);
  ASSERT_EQ(after.by_id.size(), before.by_id.size());
  for (const auto& [id, rec] : before.by_id) {
    const auto it = after.by_id.find(id);
    ASSERT_NE(it, after.by_id.end()) << "image " << id << " (" << rec.path << ") lost";
    if (GetParam().schema == 1) {
      // Schema 1 kept no colour: the unchanged file gives it, and the hash
      // of schema 3.
      ImageRecord refreshed = rec;
      const std::string bytes = testing::ReadFileBytes(rec.path);
      refreshed.content_hash = Hash64(HashKind::kXxh3_64, bytes.data(), bytes.size());
      EXPECT_EQ(it->second.colour.size(), 288u) << rec.path;
      refreshed.colour = it->second.colour;
      ExpectSameRecord(it->second, refreshed);
    } else {
      ExpectSameRecord(it->second, rec);
    }
  }
  const CliRun verify = RunLookalike({"verify", "--db", db()});
  EXPECT_EQ(verify.code, 0) << verify.out << verify.err;
  const uint64_t bytes_after = Store::Open(db(), Store::Mode::kReadOnly)->SizeOnDisk();
  // (Smaller by far less than 10x here: the quantizer's ~200 KiB dominate 12 images.)
  EXPECT_LT(bytes_after, bytes_before) << "the compact layout is not smaller";
  const CliRun info = RunLookalike({"info", "--db", db(), "--format", "json"});
  EXPECT_TRUE(Contains(info.out, "\"descriptor_bytes\":16,\"descriptor_quantized\":true"))
      << info.out;

  // The same top hit for every query (each indexed image itself, each copy
  // its original), with a score close to the one before. (Ranks 2-3 are
  // unrelated synthetic images at near-equal low scores: their order is noise.)
  const Ranking hits_after = Search(db(), AllQueries());
  ASSERT_EQ(hits_after.size(), hits_before.size());
  double max_change = 0;
  for (const auto& [query, ranked] : hits_before) {
    const auto it = hits_after.find(query);
    ASSERT_NE(it, hits_after.end()) << query;
    ASSERT_FALSE(it->second.empty()) << query;
    EXPECT_EQ(it->second[0].first, ranked[0].first) << query << ": another top hit";
    const double change = std::fabs(it->second[0].second - ranked[0].second);
    std::printf("[ migrate  ] %s: %s top hit %.4f -> %.4f\n", GetParam().name,
                fs::path(query).filename().c_str(), ranked[0].second, it->second[0].second);
    max_change = std::max(max_change, change);
  }
  std::printf("[ migrate  ] %s: %llu -> %llu bytes, largest change of a top score %.4f\n",
              GetParam().name, static_cast<unsigned long long>(bytes_before),
              static_cast<unsigned long long>(bytes_after), max_change);
  EXPECT_LT(max_change, 0.1);

  // Nothing left to do; and `index` finds nothing to re-index and no note.
  r = RunLookalike({"migrate", "--db", db(), "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "\"from_schema\":3,\"schema\":3,\"migrated\":false")) << r.out;
  r = Index(db());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "\"indexed\":0,\"unchanged\":" + std::to_string(kImages))) << r.out;
  EXPECT_FALSE(Contains(r.err, "lookalike migrate")) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Layouts, MigrateTest,
                         ::testing::Values(Layout{"schema1", 1, false},
                                           Layout{"schema2_pca", 2, true},
                                           Layout{"schema2", 2, false}),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return std::string(info.param.name);
                         });

// A database of the current schema created before the model carried the
// word vocabulary: `migrate` adopts its word index's (search unchanged) or,
// without one, learns one from its stored features; `index` then builds the
// word index with it and learns no vocabulary of its own (no w:v).
TEST(MigrateCommandTest, GivesTheModelAWordVocabulary) {
  TempDir tmp;
  const std::vector<std::string> photos =
      testing::WriteSyntheticSet(tmp / "photos", 12, 31, 320, 240);
  const std::vector<std::string> index = {"index",     tmp / "photos", "--clusters", "16",
                                          "--backend", "cpu",          "-q"};
  const auto run = [&](std::vector<std::string> args) {
    const CliRun r = RunLookalike(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return r;
  };
  std::vector<std::string> donor_args = index;
  donor_args.insert(donor_args.end(), {"--db", tmp / "donor"});
  run(donor_args);
  for (const bool with_words : {true, false}) {
    SCOPED_TRACE(with_words ? "a word index to adopt" : "no word index");
    const std::string db = tmp / (with_words ? "adopt" : "learn");
    {
      auto donor = Store::Open(tmp / "donor", Store::Mode::kReadOnly);
      ASSERT_TRUE(donor->GetModelWordVocabulary().has_value());
      const auto projection = donor->GetProjection();
      Store::Create(db, donor->model(), projection ? &*projection : nullptr, kSchemaVersion,
                    *donor->GetDescriptorQuantizer());  // as builds before m:wv created it
    }
    std::vector<std::string> args = index;
    args.insert(args.end(), {"--db", db, "--word-index-min-images", with_words ? "1" : "1000"});
    run(args);
    std::optional<std::string> own;
    {
      auto store = Store::Open(db, Store::Mode::kReadOnly);
      ASSERT_FALSE(store->GetModelWordVocabulary().has_value());
      own = store->GetWordVocabulary();
      ASSERT_EQ(own.has_value(), with_words) << "the old path learns w:v with its word index";
    }
    EXPECT_TRUE(Contains(run({"info", "--db", db, "--format", "json"}).out,
                         "\"word_vocabulary_words\":null"));
    const Ranking before = Search(db, photos);
    CliRun r = run({"migrate", "--db", db, "--format", "json"});
    EXPECT_TRUE(Contains(
        r.out, std::string("\"word_vocabulary\":\"") + (with_words ? "adopted" : "learned") + "\""))
        << r.out;
    {
      auto store = Store::Open(db, Store::Mode::kReadOnly);
      ASSERT_TRUE(store->GetModelWordVocabulary().has_value());
      if (with_words) {
        EXPECT_EQ(store->GetModelWordVocabulary(), own);
      }
    }
    EXPECT_EQ(RunLookalike({"verify", "--db", db}).code, 0);
    EXPECT_TRUE(Contains(run({"info", "--db", db, "--format", "json"}).out,
                         "\"word_vocabulary_words\":256"));  // 16 codebook words x 16
    if (with_words) {
      EXPECT_EQ(Search(db, photos), before) << "the adopted word index changed";
    }
    // The word index built from here on uses the model's vocabulary.
    args = index;
    args.insert(args.end(), {"--db", db, "--word-index-min-images", "1"});
    run(args);
    {
      auto store = Store::Open(db, Store::Mode::kReadOnly);
      EXPECT_TRUE(store->GetWordTable().has_value());
      EXPECT_EQ(store->GetWordVocabulary(), own) << "a vocabulary learned beside the model's";
    }
    r = run({"migrate", "--db", db, "--format", "json"});
    EXPECT_TRUE(Contains(r.out, "\"word_vocabulary\":\"\"")) << r.out;
  }
}

// A folder at DB.migrating that no migration made is never touched, and the
// database stays as it is.
TEST(MigrateCommandTest, RefusesAForeignFolderInTheWay) {
  TempDir tmp;
  testing::WriteSyntheticSet(tmp / "photos", 6, 5, 320, 240);
  const std::string db = tmp / "db";
  ASSERT_EQ(RunLookalike({"index", tmp / "photos", "--db", db, "--clusters", "16",
                          "--descriptor-bytes", "0", "--backend", "cpu", "-q"})
                .code,
            0);
  fs::create_directories(db + ".migrating");
  { std::ofstream(db + ".migrating/notes.txt") << "mine"; }
  const CliRun r = RunLookalike({"migrate", "--db", db});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Contains(r.err, db + ".migrating exists and is not an unfinished migration"))
      << r.err;
  EXPECT_TRUE(fs::exists(db + ".migrating/notes.txt"));
  EXPECT_EQ(Store::Open(db, Store::Mode::kReadOnly)->schema_version(), 2u);
  // Nor after a migration: the folder beside a schema-3 database stays.
  fs::rename(db + ".migrating", tmp / "aside");
  ASSERT_EQ(RunLookalike({"migrate", "--db", db}).code, 0);
  fs::rename(tmp / "aside", db + ".migrating");
  EXPECT_EQ(RunLookalike({"migrate", "--db", db}).code, 0);
  ASSERT_EQ(RunLookalike({"index", tmp / "photos", "--db", db, "-q"}).code, 0);
  EXPECT_TRUE(fs::exists(db + ".migrating/notes.txt"));
}

TEST(MigrateCommandTest, UsageErrors) {
  TempDir tmp;
  CliRun r = RunLookalike({"migrate"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Contains(r.err, "missing --db")) << r.err;
  r = RunLookalike({"migrate", "--db", tmp / "none"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Contains(r.err, "does not exist")) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "none"));
  EXPECT_FALSE(fs::exists(tmp / "none.migrating"));
  r = RunLookalike({"migrate", "--db", tmp / "none", "--descriptor-bytes", "0"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Contains(r.err, "--descriptor-bytes")) << r.err;
  r = RunLookalike({"migrate", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(Contains(r.out, "usage: lookalike migrate --db DB")) << r.out;
  EXPECT_TRUE(Contains(RunLookalike({"--help"}).out, "migrate --db DB"));
}

}  // namespace
}  // namespace lookalike
