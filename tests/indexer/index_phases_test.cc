// Tests of the phases BuildIndex is made of, each on its own: the seeded
// training sample, the update plan, the file workers and the batch committer.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "indexer/encode_commit.h"
#include "indexer/file_processing.h"
#include "indexer/file_walker.h"
#include "indexer/model.h"
#include "indexer/model_training.h"
#include "indexer/pipeline.h"
#include "indexer/update_plan.h"
#include "storage/store.h"
#include "tests/indexer/small_index_options.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::vector<std::string> Paths(int n) {
  std::vector<std::string> files;
  for (int i = 0; i < n; ++i) files.push_back("/photos/" + std::to_string(1000 + i) + ".jpg");
  return files;
}

// The shard of a file is part of the on-disk contract between machines and
// versions (re-runs must agree): FNV-1a 64 of the UTF-8 relative path, mod N.
// The expected values were computed independently from the FNV spec.
TEST(ShardTest, StableHashOfTheRelativePath) {
  EXPECT_EQ(ShardOf("a", 4), 0xaf63dc4c8601ec8cull % 4);
  EXPECT_EQ(ShardOf("a/img_001.png", 4), 1u);
  EXPECT_EQ(ShardOf("photos/\xc3\xa9t\xc3\xa9.jpg", 7), 3u);
  EXPECT_EQ(ShardOf("anything", 1), 0u);
  // The same files under another root land in the same shards; every file in
  // exactly one shard.
  const std::vector<std::string> relative = {"a/img_001.png", "b/c d.jpg", "x.png", "a",
                                             "z/y/w.tif"};
  for (const std::string& root : {std::string("/data/photos"), std::string("/mnt/p")}) {
    std::vector<std::string> files;
    for (const std::string& r : relative) files.push_back(root + "/" + r);
    std::multiset<std::string> seen;
    for (uint32_t s = 0; s < 3; ++s)
      for (const std::string& f : FilesOfShard(files, root, s, 3)) {
        seen.insert(f);
        EXPECT_EQ(ShardOf(f.substr(root.size() + 1), 3), s) << f;
      }
    EXPECT_EQ(seen, std::multiset<std::string>(files.begin(), files.end()));
  }
  // The root "/" itself.
  EXPECT_EQ(FilesOfShard({"/a"}, "/", ShardOf("a", 2), 2), std::vector<std::string>{"/a"});
}

TEST(SeededSampleTest, DeterministicSubsetInListingOrder) {
  ModelOptions o;
  o.train_images = 10;
  const std::vector<std::string> files = Paths(50);
  const std::vector<FileTask> a = SeededSample(files, o);
  ASSERT_EQ(a.size(), 10u);
  for (size_t i = 1; i < a.size(); ++i) EXPECT_LT(a[i - 1].path, a[i].path) << "listing order";
  const std::vector<FileTask> b = SeededSample(files, o);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].path, b[i].path) << "same seed, same sample";
  o.codebook.seed += 1;
  const std::vector<FileTask> c = SeededSample(files, o);
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) differs |= a[i].path != c[i].path;
  EXPECT_TRUE(differs) << "another seed draws another sample";
  o.train_images = 1000;
  EXPECT_EQ(SeededSample(files, o).size(), files.size()) << "never more than the folder holds";
}

// Sets a file's mtime to `seconds` since the epoch.
void SetMtime(const std::string& path, time_t seconds) {
  const struct timeval times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimes(path.c_str(), times), 0) << path;
}

TEST(UpdatePlanTest, SortsFilesIntoUnchangedToEncodeAndGone) {
  TempDir tmp;
  const std::string dir = tmp / "photos", db = tmp / "db";
  const auto files = testing::WriteSyntheticSet(dir, 5, 1, 320, 240);
  ASSERT_EQ(BuildIndex(testing::SmallIndexOptions(dir, db), nullptr).indexed, 5);
  // One touched (new mtime), one deleted, one new file.
  SetMtime(files[1], 1'000'000'000);
  fs::remove(files[2]);
  const auto added = testing::WriteSyntheticSet(tmp / "more", 1, 99, 320, 240);
  fs::rename(added[0], dir + "/new.png");

  auto store = Store::Open(db, Store::Mode::kReadOnly);
  const std::string root = AbsolutePath(dir);
  const WalkResult walk = ListImageFiles(root, {AbsolutePath(db)});
  std::unordered_map<std::string, ProcessedFile> reusable;
  ProcessedFile held;
  held.path = AbsolutePath(dir + "/new.png");
  reusable.emplace(held.path, held);
  const UpdatePlan plan = PlanUpdate(walk, root, *store, &reusable);
  EXPECT_TRUE(reusable.empty());
  EXPECT_EQ(plan.unchanged, 3);
  ASSERT_EQ(plan.tasks.size(), 1u);
  EXPECT_EQ(plan.tasks[0].path, AbsolutePath(files[1]));
  ASSERT_TRUE(plan.tasks[0].existing.has_value()) << "a changed file carries its record";
  ASSERT_EQ(plan.ready.size(), 1u) << "the new file's training result is reused";
  EXPECT_EQ(plan.ready[0].path, held.path);
  EXPECT_FALSE(plan.ready[0].existing.has_value());
  ASSERT_EQ(plan.gone.size(), 1u);
  EXPECT_EQ(plan.gone[0].path, AbsolutePath(files[2]));
  EXPECT_EQ(plan.num_to_encode(), 2);
  EXPECT_EQ(store->num_images(), 5u) << "planning changes nothing";
}

TEST(ProcessFilesTest, EveryTaskOnceWithErrorsInPlace) {
  TempDir tmp;
  auto files = testing::WriteSyntheticSet(tmp / "photos", 6, 1, 320, 240);
  std::ofstream(tmp / "photos/broken.png") << "not a png";
  files.push_back(tmp / "photos/broken.png");
  files.push_back(tmp / "photos/missing.png");
  std::vector<FileTask> tasks;
  for (const auto& f : files) tasks.push_back(FileTask{f, std::nullopt});
  FileProcessing how;
  how.max_side = 512;
  std::multiset<size_t> seen;
  int errors = 0;
  ProcessFiles(tasks, 3, how, nullptr, [&](ProcessedFile&& p) {
    seen.insert(p.task_index);
    EXPECT_EQ(p.path, tasks[p.task_index].path);
    if (p.error) {
      ++errors;
      EXPECT_EQ(p.error->path, p.path);
    } else {
      EXPECT_GT(p.descriptors.num, 0) << p.path;
      EXPECT_EQ(p.descriptors.dim, DescriptorDim(how.extractor));
      EXPECT_FALSE(p.features.empty());
    }
  });
  EXPECT_EQ(seen.size(), tasks.size());
  EXPECT_EQ(std::set<size_t>(seen.begin(), seen.end()).size(), tasks.size()) << "each once";
  EXPECT_EQ(errors, 2);
}

TEST(ProcessFilesTest, ConsumerExceptionStopsWorkersAndPropagates) {
  TempDir tmp;
  const auto files = testing::WriteSyntheticSet(tmp / "photos", 8, 1, 160, 120);
  std::vector<FileTask> tasks;
  for (const auto& f : files) tasks.push_back(FileTask{f, std::nullopt});
  FileProcessing how;
  int consumed = 0;
  EXPECT_THROW(ProcessFiles(tasks, 2, how, nullptr,
                            [&](ProcessedFile&&) {
                              if (++consumed == 2) throw std::runtime_error("disk full");
                            }),
               std::runtime_error);
  EXPECT_EQ(consumed, 2);
}

// Workers compact what they extract (FileProcessing::quantizer), and the
// training sample's files are compacted by CompactAll: both give exactly
// the features and descriptors that compacting on the committing thread gave.
TEST(ProcessFilesTest, FeaturesCompactedWhereverTheyAreAreTheSame) {
  TempDir tmp;
  const std::string dir = tmp / "photos", db = tmp / "db";
  testing::WriteSyntheticSet(dir, 4, 1, 320, 240);
  ASSERT_EQ(BuildIndex(testing::SmallIndexOptions(dir, db), nullptr).indexed, 4);
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  const auto quantizer = DescriptorQuantizer::Deserialize(*store->GetDescriptorQuantizer());
  const auto files = testing::WriteSyntheticSet(tmp / "more", 5, 50, 320, 240);
  std::vector<FileTask> tasks;
  for (const auto& f : files) tasks.push_back(FileTask{f, std::nullopt});
  FileProcessing how;
  how.hash_kind = store->hash_kind();
  for (bool derivable : {false, true}) {
    SCOPED_TRACE(derivable ? "derivable" : "stored vectors");
    // As before: extracted, then compacted one by one.
    std::vector<ProcessedFile> want(tasks.size()), later(tasks.size());
    auto extractor = CreateExtractor(how.extractor);
    for (size_t i = 0; i < tasks.size(); ++i) {
      want[i] = ProcessFile(tasks[i], i, how, extractor.get());
      later[i] = want[i];
      EXPECT_FALSE(want[i].compacted);
      CompactFeatures(quantizer, derivable, &want[i]);
      ASSERT_TRUE(want[i].compacted);
    }
    // The training sample's way: all at once on three threads.
    CompactAll(quantizer, derivable, 3, &later);
    // The workers' way.
    FileProcessing compacting = how;
    compacting.quantizer = &quantizer;
    compacting.derivable = derivable;
    std::vector<ProcessedFile> workers(tasks.size());
    ProcessFiles(tasks, 2, compacting, nullptr,
                 [&](ProcessedFile&& p) { workers[p.task_index] = std::move(p); });
    for (size_t i = 0; i < tasks.size(); ++i) {
      for (const ProcessedFile* got : {&later[i], &workers[i]}) {
        EXPECT_TRUE(got->compacted);
        EXPECT_GT(got->compact_seconds, 0.0);
        EXPECT_EQ(got->features, want[i].features) << files[i];
        EXPECT_EQ(got->descriptors.values, want[i].descriptors.values) << files[i];
      }
    }
    // Compacting again changes nothing.
    const std::string before = want[0].features;
    CompactFeatures(quantizer, derivable, &want[0]);
    EXPECT_EQ(want[0].features, before);
  }
}

TEST(BatchCommitterTest, CommitsExactlyTheGoodFilesAndReportsTheRest) {
  TempDir tmp;
  const std::string dir = tmp / "photos", db = tmp / "db";
  auto files = testing::WriteSyntheticSet(dir, 4, 1, 320, 240);
  ASSERT_EQ(BuildIndex(testing::SmallIndexOptions(dir, db), nullptr).indexed, 4);
  auto store = Store::Open(db, Store::Mode::kReadWrite);
  const EncodingSettings settings = SettingsFromModel(store->model());
  auto encoder = CreateVladEncoder(Backend::kCpu, CodebookFromModel(store->model()), settings.vlad);

  const auto more = testing::WriteSyntheticSet(tmp / "more", 3, 50, 320, 240);
  FileProcessing how;
  how.max_side = settings.max_side;
  how.extractor = settings.extractor;
  how.hash_kind = store->hash_kind();
  struct Observer : IndexObserver {
    void OnFileError(const FileError& e) override { errors.push_back(e); }
    void OnCommitted(const ImageRecord& r) override { committed.push_back(r.path); }
    std::vector<FileError> errors;
    std::vector<std::string> committed;
  } observer;
  IndexSummary summary;
  // A compact database: features are quantised with its own quantizer.
  ASSERT_EQ(store->schema_version(), kSchemaVersion);
  const auto quantizer = DescriptorQuantizer::Deserialize(*store->GetDescriptorQuantizer());
  const SearchProjection projection = SearchProjection::FromStore(*store);
  BatchCommitter committer(store.get(), encoder.get(), &quantizer, &projection, 2, &summary,
                           &observer, 5);
  auto extractor = CreateExtractor(how.extractor);
  for (size_t i = 0; i < more.size(); ++i)
    committer.Add(ProcessFile(FileTask{more[i], std::nullopt}, i, how, extractor.get()));
  // A stored image whose file vanished: its record goes.
  const std::optional<ImageRecord> gone = store->FindByPath(AbsolutePath(files[0]));
  ASSERT_TRUE(gone.has_value());
  ProcessedFile vanished;
  vanished.path = gone->path;
  vanished.existing = gone;
  vanished.error = FileError{FileErrorCode::kVanished, gone->path, "gone"};
  committer.Add(std::move(vanished));
  ProcessedFile bad;
  bad.path = tmp / "bad.png";
  bad.error = FileError{FileErrorCode::kDecodeFailed, bad.path, "broken"};
  committer.Add(std::move(bad));
  committer.Flush();

  EXPECT_EQ(summary.indexed, 3);
  EXPECT_EQ(summary.removed, 1);
  EXPECT_EQ(summary.total_skipped(), 2);
  EXPECT_EQ(observer.errors.size(), 2u);
  std::set<std::string> expected(more.begin(), more.end());
  EXPECT_EQ(std::set<std::string>(observer.committed.begin(), observer.committed.end()), expected);
  EXPECT_EQ(store->num_images(), 4u + 3u - 1u);
  for (const auto& p : more) EXPECT_TRUE(store->FindByPath(p).has_value()) << p;
  EXPECT_FALSE(store->FindByPath(gone->path).has_value());
  EXPECT_TRUE(store->Verify().empty());
}

}  // namespace
}  // namespace lookalike
