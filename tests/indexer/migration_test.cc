// MigrateDatabase: a run stopped half-way keeps the database as it was and
// its copy; the next run continues that copy, also when the database was
// updated in between (images gone, changed or added are dropped from the
// copy or converted), and the result holds exactly the database's images.
#include "indexer/migration.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "storage/folder_swap.h"
#include "storage/store.h"
#include "tests/indexer/small_index_options.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// Sets *cancel once `after` images were converted.
class CancelAfter : public IndexObserver {
 public:
  CancelAfter(int64_t after, std::atomic<bool>* cancel) : after_(after), cancel_(cancel) {}
  void OnProgress(int64_t done, int64_t) override {
    if (done >= after_) cancel_->store(true);
  }

 private:
  int64_t after_;
  std::atomic<bool>* cancel_;
};

std::map<uint64_t, std::string> PathsById(const std::string& db) {
  std::map<uint64_t, std::string> paths;
  Store::Open(db, Store::Mode::kReadOnly)->ForEachImage([&](const ImageRecord& r) {
    paths[r.id] = r.path;
  });
  return paths;
}

TEST(MigrationTest, AStoppedRunIsContinuedAfterTheDatabaseChanged) {
  TempDir tmp;
  const auto paths = testing::WriteSyntheticSet(tmp / "photos", 14, 70, 320, 240);
  const std::string db = tmp / "db";
  IndexOptions index = testing::SmallIndexOptions(tmp / "photos", db);
  index.model.quantizer.bytes = 0;  // schema 2
  ASSERT_EQ(BuildIndex(index, nullptr).indexed, 14);
  const auto before = PathsById(db);

  MigrationOptions options;
  options.db_path = db;
  std::atomic<bool> cancel{false};
  CancelAfter stop(9, &cancel);
  bool finisher_called = false;
  const FinishCopy finish = [&](Store*) { finisher_called = true; };
  MigrationSummary s = MigrateDatabase(options, &stop, finish, &cancel);
  EXPECT_TRUE(s.cancelled);
  EXPECT_FALSE(s.migrated);
  EXPECT_FALSE(finisher_called);
  EXPECT_EQ(s.converted, 9);
  EXPECT_EQ(Store::Open(db, Store::Mode::kReadOnly)->schema_version(), 2u);
  EXPECT_EQ(PathsById(db), before);
  ASSERT_EQ(InspectSibling(db, kSchemaVersion), Sibling::kCopy);
  EXPECT_EQ(Store::Open(SiblingPath(db), Store::Mode::kReadOnly)->num_images(), 9u);

  // Meanwhile `index` updates the database in its own schema: the first
  // image (converted already) is deleted, another converted one changes,
  // one is added.
  const std::string gone = before.begin()->second;
  const std::string changed = std::next(before.begin(), 2)->second;
  fs::remove(gone);
  testing::WriteImage(changed, testing::MakeSyntheticImage(999, 300, 200));
  testing::WriteImage(tmp / "photos/added.png", testing::MakeSyntheticImage(998, 320, 240));
  const IndexSummary update = BuildIndex(index, nullptr);
  EXPECT_EQ(update.removed, 1);
  EXPECT_EQ(update.indexed, 2);
  ASSERT_EQ(Store::Open(db, Store::Mode::kReadOnly)->schema_version(), 2u);
  EXPECT_TRUE(Store::Open(db, Store::Mode::kReadOnly)->IdsWithThumbnails().empty())
      << "an older layout is written as it is: no thumbnails";
  const auto updated = PathsById(db);

  cancel = false;
  s = MigrateDatabase(options, nullptr, finish, &cancel);
  EXPECT_TRUE(s.migrated);
  EXPECT_TRUE(s.resumed);
  EXPECT_TRUE(finisher_called);
  EXPECT_EQ(s.dropped, 2) << "the deleted and the changed image stay in the copy";
  EXPECT_EQ(s.reused, 7);
  EXPECT_EQ(s.converted, 15 - 1 - 7);
  EXPECT_EQ(s.images, 14);
  EXPECT_FALSE(fs::exists(SiblingPath(db)));
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  EXPECT_EQ(store->schema_version(), kSchemaVersion);
  EXPECT_EQ(PathsById(db), updated);
  EXPECT_EQ(store->Verify(), std::vector<std::string>());
  const auto record = store->FindByPath(changed);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->width, 300u) << "the changed image was not converted again";
  // The migration carries no thumbnails (it reads no file); the next run
  // gives every image one.
  EXPECT_TRUE(store->IdsWithThumbnails().empty());
  store.reset();
  EXPECT_EQ(BuildIndex(index, nullptr).thumbnails_added, 14);
}

}  // namespace
}  // namespace lookalike
