// `train`, `index --model-from --shard` and `merge` against the real binary:
// shards merged (at once or one after another) search exactly like one
// `index --model-from` run over the whole folder; refusals (another model,
// another schema, a path in two shards) exit 2 naming both and leave OUT byte
// for byte as it was; a merge SIGKILLed at each of its steps (frozen there by
// LOOKALIKE_TEST_STOP_AT, waited for with waitpid, never a timed sleep)
// leaves OUT as it was or fully merged, verifying, and a re-run finishes it.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "indexer/file_walker.h"
#include "storage/store.h"
#include "tests/subprocess.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
constexpr int kShards = 3;
constexpr int kImages = 36;

testing::ProcessResult Lookalike(std::vector<std::string> args) {
  testing::ProcessOptions o;
  o.argv = testing::LookalikeArgs(LOOKALIKE_BIN, std::move(args));
  return testing::RunProcess(o);
}

// query -> ranked (path, score)
using Results = std::map<std::string, std::vector<std::pair<std::string, double>>>;

// Every stage of search (verification, expansion) unless `quick`.
Results Search(const std::string& db, const std::string& queries, bool quick = false) {
  std::vector<std::string> args = {"search", "--db", db, queries, "--format", "tsv", "-k", "10"};
  if (quick) args.insert(args.end(), {"--rerank", "0", "--rerank-vlad", "0", "--expansion", "0"});
  const auto r = Lookalike(args);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  Results out;
  for (const std::string& line : testing::SplitLines(r.out)) {
    const auto f = testing::SplitOn(line, '\t');
    if (f.size() != 5) continue;
    out[f[0]].emplace_back(testing::UnescapeField(f[2]), std::stod(f[3]));
  }
  return out;
}

// Same queries, same ranked paths, scores within 1e-5.
void ExpectSameResults(const Results& a, const Results& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [query, hits] : a) {
    ASSERT_TRUE(b.count(query)) << what << ": " << query;
    const auto& other = b.at(query);
    ASSERT_EQ(hits.size(), other.size()) << what << ": " << query;
    for (size_t i = 0; i < hits.size(); ++i) {
      EXPECT_EQ(hits[i].first, other[i].first) << what << ": " << query << " rank " << i + 1;
      EXPECT_NEAR(hits[i].second, other[i].second, 1e-5) << what << ": " << query;
    }
  }
}

// Every file of a folder and its bytes.
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  if (!fs::exists(dir)) return files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[e.path().string()] = testing::ReadFileBytes(e.path().string());
  return files;
}

void ExpectVerifies(const std::string& db) {
  const auto v = Lookalike({"verify", "--db", db});
  EXPECT_EQ(v.exit_code, 0) << db << ": " << v.Describe();
}

int64_t NumImages(const std::string& db) {
  const auto r = Lookalike({"info", "--db", db, "--format", "json"});
  const size_t at = r.out.find("\"images\":");
  return at == std::string::npos ? -1 : std::stoll(r.out.substr(at + 9));
}

void Copy(const std::string& from, const std::string& to) {
  fs::remove_all(to);
  fs::copy(from, to, fs::copy_options::recursive);
}

// Photos, a model, the shards and the single-run reference, made once.
class MergeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir();
    const std::string photos = Dir("photos");
    // Two folders, so relative paths have a slash in them.
    testing::WriteSyntheticSet(photos + "/a", kImages / 2, 1, 320, 240);
    testing::WriteSyntheticSet(photos + "/b", kImages - kImages / 2, 500, 320, 240);
    auto train = Model();
    train.insert(train.begin(), {"train", photos, "--db", Dir("base"), "-q"});
    const auto t = Lookalike(train);
    ASSERT_EQ(t.exit_code, 0) << t.Describe();
    const auto single =
        Lookalike({"index", photos, "--db", Dir("single"), "--model-from", Dir("base"), "-q"});
    ASSERT_EQ(single.exit_code, 0) << single.Describe();
    // The shards keep no word index: merge encodes their images' words
    // (WordShard(i) keeps one, whose postings merge joins).
    for (int i = 0; i < kShards; ++i) {
      const auto s = Lookalike({"index", photos, "--db", Shard(i), "--model-from", Dir("base"),
                                "--shard", std::to_string(i) + "/" + std::to_string(kShards),
                                "--word-index-min-images", std::to_string(kImages + 1), "-q"});
      ASSERT_EQ(s.exit_code, 0) << s.Describe();
    }
    // A few queries for the many comparisons of the kill test.
    fs::create_directories(Dir("queries"));
    for (const char* name : {"a/img_000.png", "a/img_007.png", "b/img_003.png"})
      fs::copy_file(photos + "/" + name, Dir("queries") + "/" + fs::path(name).filename().string() +
                                             "-" + std::string(1, name[0]) + ".png");
    quick_reference_ = new Results(Search(Dir("single"), Dir("queries"), true));
    ASSERT_EQ(quick_reference_->size(), 3u);
  }
  static void TearDownTestSuite() {
    delete reference_;
    delete quick_reference_;
    delete words_reference_;
    delete tmp_;
  }
  // Every photo as a query, full search, on the single run (made once, by
  // the tests that compare with it).
  static const Results& Reference() {
    if (!reference_) {
      reference_ = new Results(Search(Dir("single"), Dir("photos")));
      EXPECT_EQ(reference_->size(), static_cast<size_t>(kImages));
    }
    return *reference_;
  }
  // The model flags every database of the suite is trained with.
  static std::vector<std::string> Model() {
    return {"--clusters", "16", "--pca-dim", "8", "--pca-min-images", "10", "--train-images", "20"};
  }
  // Shards of another model (seed) and another schema, for the refusals;
  // made by the tests that need them only.
  static void MakeOtherModels() {
    const std::string photos = Dir("photos");
    const auto model = Model();
    auto other = model;
    other.insert(other.begin(), {"train", photos, "--db", Dir("base-seed"), "--seed", "99", "-q"});
    ASSERT_EQ(Lookalike(other).exit_code, 0);
    auto older = model;
    older.insert(older.begin(),
                 {"train", photos, "--db", Dir("base-schema2"), "--descriptor-bytes", "0", "-q"});
    ASSERT_EQ(Lookalike(older).exit_code, 0);
    for (const char* base : {"base-seed", "base-schema2"}) {
      const auto s =
          Lookalike({"index", photos, "--db", Dir(std::string(base) + "-shard"), "--model-from",
                     Dir(base), "--shard", "1/" + std::to_string(kShards), "-q"});
      ASSERT_EQ(s.exit_code, 0) << s.Describe();
    }
  }
  // Shards made with the word index on (each has one, current), made once.
  static std::string WordShard(int i) {
    const std::string shard = Dir("words-shard" + std::to_string(i));
    if (!fs::exists(shard)) {
      const auto r = Lookalike({"index", Dir("photos"), "--db", shard, "--model-from", Dir("base"),
                                "--shard", std::to_string(i) + "/" + std::to_string(kShards),
                                "--word-index-min-images", "1", "-q"});
      EXPECT_EQ(r.exit_code, 0) << r.Describe();
    }
    return shard;
  }
  // Every photo as a query on one run over the folder with the word index
  // on (made once).
  static const Results& WordsReference() {
    if (!words_reference_) {
      const std::string single = Dir("words-single");
      const auto r = Lookalike({"index", Dir("photos"), "--db", single, "--model-from", Dir("base"),
                                "--word-index-min-images", "1", "-q"});
      EXPECT_EQ(r.exit_code, 0) << r.Describe();
      words_reference_ = new Results(Search(single, Dir("photos")));
      EXPECT_EQ(words_reference_->size(), static_cast<size_t>(kImages));
    }
    return *words_reference_;
  }
  static std::string Dir(const std::string& name) { return *tmp_ / name; }
  static std::string Shard(int i) { return Dir("shard" + std::to_string(i)); }
  static std::vector<std::string> MergeArgs(const std::string& out, std::vector<int> shards) {
    std::vector<std::string> args = {"merge", "--db", out};
    for (int i : shards) args.push_back(Shard(i));
    return args;
  }

  static testing::TempDir* tmp_;
  static Results* reference_;
  static Results* quick_reference_;
  static Results* words_reference_;
};
testing::TempDir* MergeTest::tmp_ = nullptr;
Results* MergeTest::reference_ = nullptr;
Results* MergeTest::quick_reference_ = nullptr;
Results* MergeTest::words_reference_ = nullptr;

TEST_F(MergeTest, ShardsSplitTheFolderExactlyOnce) {
  std::set<std::string> seen;
  int64_t total = 0;
  for (int i = 0; i < kShards; ++i) {
    std::set<std::string> mine;
    Store::Open(Shard(i), Store::Mode::kReadOnly)->ForEachImage([&](const ImageRecord& r) {
      mine.insert(r.path);
    });
    const int64_t n = NumImages(Shard(i));
    EXPECT_EQ(static_cast<int64_t>(mine.size()), n) << Shard(i);
    EXPECT_GT(n, 0) << "shard " << i << " is empty; the hash does not spread " << kImages
                    << " files";
    for (const std::string& p : mine) {
      EXPECT_TRUE(seen.insert(p).second) << p << " in two shards";
      const std::string relative = p.substr(Dir("photos").size() + 1);
      EXPECT_EQ(ShardOf(relative, kShards), static_cast<uint32_t>(i)) << p;
    }
    total += n;
  }
  EXPECT_EQ(total, kImages);
  // A re-run of a shard agrees with itself: nothing to do.
  const auto again =
      Lookalike({"index", Dir("photos"), "--db", Shard(0), "--model-from", Dir("base"), "--shard",
                 "0/" + std::to_string(kShards), "--format", "json"});
  EXPECT_EQ(again.exit_code, 0) << again.Describe();
  EXPECT_NE(again.out.find("\"indexed\":0"), std::string::npos) << again.out;
}

TEST_F(MergeTest, MergedShardsSearchLikeOneRun) {
  const std::string out = Dir("merged-all");
  const auto m = Lookalike(MergeArgs(out, {0, 1, 2}));
  ASSERT_EQ(m.exit_code, 0) << m.Describe();
  ExpectVerifies(out);
  EXPECT_EQ(NumImages(out), kImages);
  ExpectSameResults(Search(out, Dir("photos")), Reference(), "merged at once");
  // A re-run finds everything merged and changes nothing that search sees.
  const auto again = Lookalike(MergeArgs(out, {0, 1, 2}));
  EXPECT_EQ(again.exit_code, 0) << again.Describe();
  EXPECT_NE(again.err.find("already"), std::string::npos) << again.err;
  EXPECT_EQ(NumImages(out), kImages);
}

TEST_F(MergeTest, GrowsIncrementally) {
  const std::string out = Dir("merged-grow");
  ASSERT_EQ(Lookalike(MergeArgs(out, {1})).exit_code, 0);
  ExpectVerifies(out);
  const auto more = Lookalike(MergeArgs(out, {0, 2}));
  ASSERT_EQ(more.exit_code, 0) << more.Describe();
  ExpectVerifies(out);
  EXPECT_EQ(NumImages(out), kImages);
  ExpectSameResults(Search(out, Dir("photos")), Reference(), "merged one after another");
  // OUT can also be a database indexed directly with the same model.
  const std::string direct = Dir("direct");
  Copy(Shard(2), direct);
  ASSERT_EQ(Lookalike(MergeArgs(direct, {0, 1})).exit_code, 0);
  ExpectVerifies(direct);
  ExpectSameResults(Search(direct, Dir("queries"), true), *quick_reference_, "merged into a shard");
}

// The word vocabulary is the model's: `train` learns it, every shard copies
// it, and merge and growth encode with it (no database learns its own: no
// w:v), so with the word stage on a database grown in two runs (the first
// over half the folder) and merged ones rank exactly like one run over the
// whole folder: shards without a word index have their images encoded,
// shards with a current one have their postings joined.
TEST_F(MergeTest, ShardsAndGrowthShareTheModelsWordVocabulary) {
  const std::string photos = Dir("photos");
  std::string vocabulary;
  {
    const auto base = Store::Open(Dir("base"), Store::Mode::kReadOnly);
    ASSERT_TRUE(base->GetModelWordVocabulary().has_value()) << "train stored no vocabulary";
    vocabulary = *base->GetModelWordVocabulary();
  }
  const auto run = [](std::vector<std::string> args) {
    args.insert(args.end(), {"--word-index-min-images", "1", "--format", "json"});
    const auto r = Lookalike(args);
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    return r.out;
  };
  const std::string single = Dir("words-single"), grown = Dir("words-grown"),
                    encoded = Dir("words-merged-encoded"), joined = Dir("words-merged-joined");
  const Results& reference = WordsReference();
  run({"index", photos + "/a", "--db", grown, "--model-from", Dir("base")});
  run({"index", photos, "--db", grown, "--model-from", Dir("base")});
  std::string out = run(MergeArgs(encoded, {0, 1, 2}));
  EXPECT_EQ(out.find("joined"), std::string::npos) << out;
  std::vector<std::string> merge_joined = {"merge", "--db", joined};
  for (int i = 0; i < kShards; ++i) merge_joined.push_back(WordShard(i));
  out = run(merge_joined);
  EXPECT_NE(out.find(std::to_string(kImages) + " images' postings joined"), std::string::npos)
      << out;
  for (const std::string& db : {Shard(0), single, grown, encoded, joined}) {
    SCOPED_TRACE(db);
    const auto store = Store::Open(db, Store::Mode::kReadOnly);
    EXPECT_EQ(store->GetModelWordVocabulary(), vocabulary);
    EXPECT_FALSE(store->GetWordVocabulary().has_value()) << "a vocabulary learned for " << db;
    if (db != Shard(0)) {
      EXPECT_TRUE(store->GetWordTable().has_value()) << "no word index";
    }
  }
  for (const std::string& db : {grown, encoded, joined}) ExpectVerifies(db);
  ExpectSameResults(Search(grown, photos), reference, "grown in two runs");
  ExpectSameResults(Search(encoded, photos), reference, "merged, encoded");
  ExpectSameResults(Search(joined, photos), reference, "merged, joined");
}

TEST_F(MergeTest, RefusalsNameBothAndChangeNothing) {
  MakeOtherModels();
  const std::string out = Dir("merged-refusals");
  ASSERT_EQ(Lookalike(MergeArgs(out, {0})).exit_code, 0);
  const auto before = Snapshot(out);
  struct Case {
    std::vector<std::string> shards;
    std::string words, first, second;
  };
  const std::vector<Case> cases = {
      {{Dir("base-seed-shard")}, "model mismatch", Dir("base-seed-shard"), out},
      {{Dir("base-schema2-shard")}, "schema mismatch", Dir("base-schema2-shard"), out},
      {{Shard(1), Dir("single")}, "is in both", Shard(1), Dir("single")},
      {{Dir("single")}, "is in both", out, Dir("single")},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"merge", "--db", out};
    args.insert(args.end(), c.shards.begin(), c.shards.end());
    const auto r = Lookalike(args);
    EXPECT_EQ(r.exit_code, 2) << r.Describe();
    EXPECT_NE(r.err.find(c.words), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.first), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.second), std::string::npos) << r.err;
    EXPECT_TRUE(Snapshot(out) == before) << "OUT changed by a refused merge: " << r.err;
  }
  // Into a new OUT: shards that disagree create nothing.
  const std::string fresh = Dir("never-created");
  const auto r = Lookalike({"merge", "--db", fresh, Shard(0), Dir("base-seed-shard")});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_NE(r.err.find("model mismatch"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(fresh));
  for (const auto& e : fs::directory_iterator(tmp_->path()))
    EXPECT_EQ(e.path().filename().string().find("never-created"), std::string::npos)
        << e.path() << " left behind";
}

// Runs merge frozen at `stop`, SIGKILLs it there; false if it never got there.
bool KillMergeAt(const std::vector<std::string>& args, const std::string& stop,
                 std::string* describe) {
  testing::ProcessOptions o;
  o.argv = testing::LookalikeArgs(LOOKALIKE_BIN, args);
  int status = 0;
  const bool stopped = testing::KillAtStopPoint(o, stop, &status);
  // It exited instead: the status is the one the wait consumed.
  if (!stopped)
    *describe = "merge never reached " + stop + " (status " + std::to_string(status) + ")";
  return stopped;
}

TEST_F(MergeTest, KilledAtEveryStepLeavesOutWholeAndReRunFinishes) {
  // New OUT: created -> tables written -> ingested -> search index -> rename.
  // Existing OUT: tables written -> ingested (search index not yet updated).
  struct Step {
    std::string stop;
    bool existing;
  };
  const std::vector<Step> steps = {{"merge-created", false},       {"merge-tables-written", false},
                                   {"merge-ingested", false},      {"merge-before-rename", false},
                                   {"merge-tables-written", true}, {"merge-ingested", true}};
  const std::string start = Dir("kill-start");
  ASSERT_EQ(Lookalike(MergeArgs(start, {0})).exit_code, 0);
  const int64_t start_images = NumImages(start);
  for (const Step& step : steps) {
    SCOPED_TRACE(step.stop + (step.existing ? " (existing OUT)" : " (new OUT)"));
    const std::string out = Dir("kill-out");
    fs::remove_all(out);
    if (step.existing) Copy(start, out);
    const std::vector<std::string> args =
        step.existing ? MergeArgs(out, {1, 2}) : MergeArgs(out, {0, 1, 2});
    std::string why;
    ASSERT_TRUE(KillMergeAt(args, step.stop, &why)) << why;
    if (!step.existing) {
      EXPECT_FALSE(fs::exists(out)) << "a killed merge into a new OUT left one";
    } else {
      ExpectVerifies(out);
      const int64_t n = NumImages(out);
      EXPECT_TRUE(n == start_images || n == kImages) << n << " images: neither as it was nor "
                                                     << "fully merged";
    }
    const auto rerun = Lookalike(args);
    ASSERT_EQ(rerun.exit_code, 0) << rerun.Describe();
    ExpectVerifies(out);
    EXPECT_EQ(NumImages(out), kImages);
    ExpectSameResults(Search(out, Dir("queries"), true), *quick_reference_, "re-run after a kill");
    // Nothing of the killed run is left beside OUT.
    for (const auto& e : fs::directory_iterator(tmp_->path())) {
      const std::string name = e.path().filename().string();
      EXPECT_TRUE(name.find("kill-out.merg") == std::string::npos &&
                  name.find(".kill-out.lock") == std::string::npos)
          << name << " left behind";
    }
  }
}

// A merge into an existing OUT killed after joining a shard's word lists
// (written as a segment OUT's table does not list yet) leaves OUT as it was
// before the search index update: merged records, the old search index,
// verifying; the re-run finds the shards merged, encodes their images and
// ranks as one run, the orphaned segment deleted.
TEST_F(MergeTest, KilledWhileJoiningWordListsReRunFinishes) {
  const std::string out = Dir("kill-words");
  const std::vector<std::string> words = {"--word-index-min-images", "1"};
  std::vector<std::string> first = {"merge", "--db", out, WordShard(0)};
  first.insert(first.end(), words.begin(), words.end());
  ASSERT_EQ(Lookalike(first).exit_code, 0);
  std::vector<std::string> rest = {"merge", "--db", out, WordShard(1), WordShard(2)};
  rest.insert(rest.end(), words.begin(), words.end());
  std::string why;
  ASSERT_TRUE(KillMergeAt(rest, "merge-word-lists-joined", &why)) << why;
  ExpectVerifies(out);
  EXPECT_EQ(NumImages(out), kImages);
  const auto rerun = Lookalike(rest);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.Describe();
  ExpectVerifies(out);
  ExpectSameResults(Search(out, Dir("photos")), WordsReference(), "re-run after a kill");
}

// With the model's search quantizer (`train --search-lists-for`), every
// shard fills a copy of the same inverted lists and `merge` joins them
// (and the shards' word lists) instead of filling the merged index from
// every stored vector; the joined index holds the very codes one run over
// the folder computes, so search (word stage on) ranks exactly alike. Merge falls back to filling
// from the stored vectors (same results) when asked to, or when a shard's index is not the model's
// (one indexed --index-kind flat); a merge killed while joining leaves no
// OUT and its re-run finishes.
TEST_F(MergeTest, ShardsFillingTheModelsListsHaveThemJoined) {
  const std::string photos = Dir("photos");
  auto train = Model();
  train.insert(train.begin(),
               {"train", photos, "--db", Dir("base-lists"), "--search-lists-for", "1000", "-q"});
  const auto t = Lookalike(train);
  ASSERT_EQ(t.exit_code, 0) << t.Describe();
  {
    const auto with = Store::Open(Dir("base-lists"), Store::Mode::kReadOnly);
    ASSERT_TRUE(with->GetModelSearchQuantizer().has_value()) << "train stored no search quantizer";
    // Encoding every training image for the quantizer leaves the PCA's
    // sample, and so the PCA, as it is without the flag.
    const auto without = Store::Open(Dir("base"), Store::Mode::kReadOnly);
    ASSERT_TRUE(with->GetProjection() && without->GetProjection());
    EXPECT_EQ(with->GetProjection()->components, without->GetProjection()->components);
    EXPECT_EQ(with->GetProjection()->eigenvalues, without->GetProjection()->eigenvalues);
  }
  const auto info = Lookalike({"info", "--db", Dir("base-lists"), "--format", "json"});
  EXPECT_NE(info.out.find("\"search_lists\":"), std::string::npos) << info.out;
  EXPECT_EQ(info.out.find("\"search_lists\":null"), std::string::npos) << info.out;
  EXPECT_NE(Lookalike({"info", "--db", Dir("base"), "--format", "json"})
                .out.find("\"search_lists\":null"),
            std::string::npos);
  const auto index = [&](const std::string& db, std::vector<std::string> more) {
    std::vector<std::string> args = {"index",
                                     photos,
                                     "--db",
                                     db,
                                     "--model-from",
                                     Dir("base-lists"),
                                     "-v",
                                     "--word-index-min-images",
                                     "1"};
    args.insert(args.end(), more.begin(), more.end());
    const auto r = Lookalike(args);
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    return r.err;
  };
  const std::string single = Dir("lists-single");
  // Small as it is, the database's index is ivfsq: a copy of the model's lists.
  const std::string log = index(single, {});
  EXPECT_NE(log.find("search index: ivfsq"), std::string::npos) << log;
  std::vector<std::string> shards;
  for (int i = 0; i < kShards; ++i) {
    shards.push_back(Dir("lists-shard" + std::to_string(i)));
    index(shards.back(), {"--shard", std::to_string(i) + "/" + std::to_string(kShards)});
  }
  const Results reference = Search(single, photos);
  const auto merge = [&](const std::string& out, const std::vector<std::string>& inputs,
                         std::vector<std::string> more) {
    std::vector<std::string> args = {"merge", "--db",     out,   "--word-index-min-images",
                                     "1",     "--format", "json"};
    args.insert(args.end(), inputs.begin(), inputs.end());
    args.insert(args.end(), more.begin(), more.end());
    const auto r = Lookalike(args);
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    return r.out;
  };
  const std::string joined = Dir("lists-joined");
  std::string out = merge(joined, shards, {});
  EXPECT_NE(out.find("inverted lists of 3 merged shards joined"), std::string::npos) << out;
  EXPECT_NE(out.find(std::to_string(kImages) + " images' postings joined"), std::string::npos)
      << out;
  ExpectVerifies(joined);
  ExpectSameResults(Search(joined, photos), reference, "lists joined");

  const std::string filled = Dir("lists-filled");
  out = merge(filled, shards, {"--join-lists", "off"});
  EXPECT_EQ(out.find("merged shards joined"), std::string::npos) << out;
  EXPECT_NE(out.find("lists not joined: not asked to"), std::string::npos) << out;
  ExpectSameResults(Search(filled, photos), reference, "filled from the stored vectors");

  const std::string flat = Dir("lists-shard-flat");
  index(flat, {"--shard", "1/" + std::to_string(kShards), "--index-kind", "flat"});
  const std::string mixed = Dir("lists-mixed");
  out = merge(mixed, {shards[0], flat, shards[2]}, {});
  EXPECT_EQ(out.find("merged shards joined"), std::string::npos) << out;
  EXPECT_NE(out.find("lists not joined: " + flat), std::string::npos) << out;
  ExpectSameResults(Search(mixed, photos), reference, "a shard of another kind");

  const std::string killed = Dir("lists-killed");
  std::vector<std::string> args = {"merge", "--db", killed, "--word-index-min-images", "1"};
  args.insert(args.end(), shards.begin(), shards.end());
  std::string why;
  ASSERT_TRUE(KillMergeAt(args, "merge-lists-joined", &why)) << why;
  EXPECT_FALSE(fs::exists(killed)) << "a merge killed while joining lists left an OUT";
  out = merge(killed, shards, {});
  EXPECT_NE(out.find("merged shards joined"), std::string::npos) << out;
  ExpectVerifies(killed);
  ExpectSameResults(Search(killed, photos), reference, "re-run after a kill");
}

TEST_F(MergeTest, UsageErrors) {
  MakeOtherModels();
  EXPECT_EQ(Lookalike({"merge", "--db", Dir("x")}).exit_code, 2);
  EXPECT_EQ(Lookalike({"merge", Shard(0)}).exit_code, 2);
  EXPECT_EQ(Lookalike({"merge", "--db", Dir("x"), Shard(0), Shard(0)}).exit_code, 2);
  const auto no_base = Lookalike({"index", Dir("photos"), "--db", Dir("y"), "--shard", "0/2"});
  EXPECT_EQ(no_base.exit_code, 2);
  EXPECT_NE(no_base.err.find("--model-from"), std::string::npos) << no_base.err;
  for (const char* bad : {"2/2", "1", "a/b", "0/0"})
    EXPECT_EQ(Lookalike({"index", Dir("photos"), "--db", Dir("y"), "--model-from", Dir("base"),
                         "--shard", bad})
                  .exit_code,
              2)
        << bad;
  EXPECT_FALSE(fs::exists(Dir("y")));
  // index --model-from on an existing database of another model: exit 2, both named.
  const auto other = Lookalike({"index", Dir("photos"), "--db", Shard(0), "--model-from",
                                Dir("base-seed"), "--shard", "0/3"});
  EXPECT_EQ(other.exit_code, 2) << other.Describe();
  EXPECT_NE(other.err.find(Dir("base-seed")), std::string::npos) << other.err;
  EXPECT_NE(other.err.find("shard0"), std::string::npos) << other.err;
}

}  // namespace
}  // namespace lookalike
