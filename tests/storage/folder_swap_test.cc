// What `lookalike migrate` builds on in storage/: images stored under the ids
// they had, the writer lock held without opening the database, and the
// sibling folder: what each state of a replacement looks like, and that only
// a recognised leftover is ever removed (by migrate or by the next writer).
#include "storage/folder_swap.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "storage/encoding.h"
#include "storage/store.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

ModelRecord SmallModel() {
  ModelRecord m;
  m.dim = 4;
  m.num_clusters = 2;
  m.max_side = 512;
  m.centroids = {1, 0, 0, 0, 0, 1, 0, 0};
  m.codebook_hash = encoding::Fnv1a64(m.centroids.data(), m.centroids.size() * sizeof(float));
  return m;
}

ImageRecord Record(uint64_t id, const std::string& path, uint32_t descriptors) {
  ImageRecord r;
  r.id = id;
  r.path = path;
  r.size_bytes = 100 + id;
  r.mtime_ns = 1'700'000'000'000'000'000 + static_cast<int64_t>(id);
  r.content_hash = 0xC0FFEE00ull + id;
  r.num_descriptors = descriptors;
  r.status = descriptors ? ImageStatus::kOk : ImageStatus::kNoFeatures;
  r.colour.assign(288, static_cast<uint8_t>(id));
  return r;
}

TEST(PutImageWithIdTest, KeepsIdsCountsTotalsAndTheAllocator) {
  TempDir tmp;
  const std::string db = tmp / "db";
  {
    // Schema 3 without a PCA keeps no vectors: none is read.
    auto store = Store::Create(db, SmallModel());
    ASSERT_EQ(store->vector_dim(), 0u);
    store->PutImageWithId(Record(5, "/p/five", 10), nullptr, "five's features");
    store->PutImageWithId(Record(2, "/p/two", 0), nullptr);
    store->PutImageWithId(Record(9, "/p/nine", 7), nullptr, "nine's features");
    EXPECT_EQ(store->num_images(), 3u);
    EXPECT_EQ(store->next_id(), 10u);
    ASSERT_TRUE(store->totals());
    EXPECT_EQ(store->totals()->descriptors, 17u);
    EXPECT_EQ(store->totals()->without_features, 1u);
    // Replaced under its id with another path: the old path entry goes.
    store->PutImageWithId(Record(5, "/p/five-moved", 12), nullptr, "five's new features");
    EXPECT_EQ(store->num_images(), 3u);
    EXPECT_FALSE(store->FindByPath("/p/five"));
    EXPECT_EQ(store->FindByPath("/p/five-moved")->id, 5u);
    EXPECT_EQ(store->GetFeatures(5), "five's new features");
    EXPECT_EQ(store->totals()->descriptors, 19u);
    store->RaiseNextId(20);
    store->RaiseNextId(4);
    EXPECT_EQ(store->next_id(), 20u);
    // A new image after them gets a fresh id.
    ImageRecord fresh = Record(0, "/p/fresh", 3);
    store->PutImage(&fresh, nullptr, "fresh features");
    EXPECT_EQ(fresh.id, 20u);
  }
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  EXPECT_EQ(store->num_images(), 4u);
  EXPECT_EQ(store->next_id(), 21u);
  EXPECT_EQ(store->FindById(2)->colour, Record(2, "", 0).colour);
  EXPECT_EQ(store->Verify(), std::vector<std::string>());
}

TEST(WriterLockTest, ExcludesWritersBothWays) {
  TempDir tmp;
  const std::string db = tmp / "db";
  Store::Create(db, SmallModel(), nullptr, 2);
  {
    const WriterLock lock(db);
    try {
      Store::Open(db, Store::Mode::kReadWrite);
      ADD_FAILURE() << "opened for writing under the writer lock";
    } catch (const StoreError& e) {
      EXPECT_EQ(e.kind(), StoreError::Kind::kLocked) << e.what();
    }
    EXPECT_THROW(WriterLock again(db), StoreError);
    // Readers are not excluded.
    EXPECT_EQ(Store::Open(db, Store::Mode::kReadOnly)->schema_version(), 2u);
  }
  auto writer = Store::Open(db, Store::Mode::kReadWrite);
  try {
    const WriterLock lock(db);
    ADD_FAILURE() << "took the writer lock from an open writer";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.kind(), StoreError::Kind::kLocked) << e.what();
    EXPECT_NE(std::string(e.what()).find("in use by another process"), std::string::npos);
  }
}

TEST(SiblingTest, EveryStateOfAReplacementIsRecognised) {
  TempDir tmp;
  const std::string db = tmp / "db", sibling = SiblingPath(db);
  EXPECT_EQ(sibling, db + ".migrating");
  EXPECT_EQ(SiblingPath(db + "/"), sibling);
  Store::Create(db, SmallModel(), nullptr, 2);
  EXPECT_EQ(InspectSibling(db, 3), Sibling::kNone);
  // A copy being built.
  Store::Create(sibling, SmallModel(), nullptr, 3);
  EXPECT_EQ(InspectSibling(db, 3), Sibling::kCopy);
  // Exchanged: the original lies beside the copy.
  ExchangeFolders(sibling, db);
  EXPECT_EQ(Store::Open(db, Store::Mode::kReadOnly)->schema_version(), 3u);
  EXPECT_EQ(InspectSibling(db, 3), Sibling::kOriginal);
  RemoveSibling(db);
  EXPECT_FALSE(fs::exists(sibling));
  EXPECT_EQ(InspectSibling(db, 3), Sibling::kNone);
  // A removal interrupted after the marker (only the marker left), or after
  // everything (an empty folder): still the original's, finished by the
  // next writer's open.
  for (const bool with_marker : {true, false}) {
    fs::create_directories(sibling);
    if (with_marker) std::ofstream(sibling + "/LOOKALIKE-REMOVING");
    EXPECT_EQ(InspectSibling(db, 3), Sibling::kOriginal);
    Store::Open(db, Store::Mode::kReadWrite);
    EXPECT_FALSE(fs::exists(sibling));
  }
  // Anything else is foreign and stays, beside either schema.
  fs::create_directories(sibling);
  std::ofstream(sibling + "/notes.txt") << "mine";
  EXPECT_EQ(InspectSibling(db, 3), Sibling::kForeign);
  Store::Open(db, Store::Mode::kReadWrite);
  EXPECT_TRUE(fs::exists(sibling + "/notes.txt"));
  const std::string old_db = tmp / "old";
  Store::Create(old_db, SmallModel(), nullptr, 2);
  fs::rename(sibling, SiblingPath(old_db));
  EXPECT_EQ(InspectSibling(old_db, 3), Sibling::kForeign);
  fs::remove_all(SiblingPath(old_db));
  fs::create_directories(SiblingPath(old_db));
  EXPECT_EQ(InspectSibling(old_db, 3), Sibling::kForeign) << "an empty folder beside schema 2";
  fs::remove(SiblingPath(old_db));
  // A second schema-2 database beside a schema-2 one is not a copy.
  Store::Create(SiblingPath(old_db), SmallModel(), nullptr, 2);
  EXPECT_EQ(InspectSibling(old_db, 3), Sibling::kForeign);
}

}  // namespace
}  // namespace lookalike
