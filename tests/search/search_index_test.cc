// The persisted search index over a real store with a tiny model: built when
// missing, loaded when current, reconciled when stale (added, changed,
// removed, featureless images), converted when an `auto` collection crosses
// the threshold, rebuilt when corrupt or made for another dimension; the
// colour table (search/colour_index.h) follows the records through all of it.
#include "search/search_index.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "storage/encoding.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

using testing::TempDir;

constexpr uint32_t kClusters = 3, kDim = 5;  // VLAD dimension 15
constexpr int64_t kVlad = kClusters * kDim;

ModelRecord MakeModel() {
  ModelRecord m;
  m.dim = kDim;
  m.num_clusters = kClusters;
  m.centroids.assign(m.vlad_dim(), 0.5f);
  m.codebook_hash = encoding::Fnv1a64(m.centroids.data(), m.centroids.size() * sizeof(float));
  return m;
}

// A colour histogram's bytes for `seed` (ColourIndex only compares bytes).
std::vector<uint8_t> ColourOf(uint64_t seed) {
  std::mt19937_64 rng(seed + 1000003);
  std::vector<uint8_t> c(ColourIndex::kBins);
  for (uint8_t& b : c) b = static_cast<uint8_t>(rng());
  return c;
}

std::vector<float> UnitVector(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> v(kVlad);
  double s = 0;
  for (float& x : v) {
    x = g(rng);
    s += double{x} * x;
  }
  for (float& x : v) x = static_cast<float>(x / std::sqrt(s));
  return v;
}

SearchProjection Identity() { return SearchProjection::FromRecord(nullptr, kVlad); }

// A real projection onto the first `out_dim` VLAD dimensions (no whitening),
// for a search dimension other than the stored one.
SearchProjection Truncation(uint32_t out_dim) {
  ProjectionRecord p;
  p.in_dim = kVlad;
  p.out_dim = out_dim;
  p.whiten = false;
  p.component_bits = 32;
  p.mean.assign(kVlad, 0.0f);
  p.eigenvalues.assign(out_dim, 1.0f);
  p.components.assign(uint64_t{out_dim} * kVlad, 0.0f);
  for (uint32_t c = 0; c < out_dim; ++c) p.components[uint64_t{c} * kVlad + c] = 1.0f;
  return SearchProjection::FromRecord(&p, kVlad);
}

class SearchIndexTest : public ::testing::Test {
 protected:
  void SetUp() override { store_ = Store::Create(tmp_ / "db", MakeModel(), nullptr, 2); }

  // Stores (or replaces) image `name` with the vector of `seed`.
  uint64_t Put(const std::string& name, uint64_t seed, bool features = true) {
    ImageRecord r;
    const auto existing = store_->FindByPath("/" + name);
    if (existing) r = *existing;
    r.path = "/" + name;
    r.content_hash = seed * 7919 + 1;
    r.colour = ColourOf(seed);
    std::vector<float> v = UnitVector(seed);
    if (!features) {
      std::fill(v.begin(), v.end(), 0.0f);
      r.status = ImageStatus::kNoFeatures;
    } else {
      r.status = ImageStatus::kOk;
    }
    store_->PutImage(&r, v.data());
    vectors_[r.id] = v;
    colours_[r.id] = r.colour;
    if (!features) vectors_.erase(r.id);
    return r.id;
  }
  void Remove(const std::string& name) {
    const auto r = store_->FindByPath("/" + name);
    ASSERT_TRUE(r);
    store_->RemoveImage(*r);
    vectors_.erase(r->id);
  }

  // The colour table has one row per manifest image, its record's colour.
  void ExpectColoursMatchStore(const SearchIndexSync& sync) {
    ASSERT_EQ(sync.colours.rows(), static_cast<int64_t>(sync.manifest.size()));
    for (size_t i = 0; i < sync.manifest.size(); ++i) {
      const uint8_t* row = sync.colours.table().data() + i * ColourIndex::kRowBytes;
      EXPECT_EQ(std::vector<uint8_t>(row, row + ColourIndex::kRowBytes),
                ColourIndex::Row(colours_.at(sync.manifest[i].id)))
          << "row " << i;
    }
  }

  // Every stored vector finds itself first, and the index holds exactly the
  // images with features.
  void ExpectMatchesStore(const VectorIndex& index) {
    ASSERT_EQ(index.ntotal(), static_cast<int64_t>(vectors_.size()));
    for (const auto& [id, v] : vectors_) {
      float s = 0;
      int64_t l = -1;
      index.Search(v.data(), 1, 1, &s, &l);
      EXPECT_EQ(l, static_cast<int64_t>(id));
      EXPECT_NEAR(s, 1.0f, 0.02f);
    }
  }

  TempDir tmp_;
  std::unique_ptr<Store> store_;
  std::map<uint64_t, std::vector<float>> vectors_;  // what the index must hold
  std::map<uint64_t, std::vector<uint8_t>> colours_;
};

TEST_F(SearchIndexTest, BuiltWhenMissingThenLoadedWhenCurrent) {
  for (int i = 0; i < 20; ++i) Put("img" + std::to_string(i), i);
  Put("flat", 1000, /*features=*/false);
  VectorIndexOptions o;
  SearchIndexSync first = UpdateSearchIndex(store_.get(), SearchVectors(*store_, Identity()), o);
  EXPECT_FALSE(first.loaded);
  EXPECT_TRUE(first.rebuilt);
  EXPECT_EQ(first.reason, "no persisted search index");
  EXPECT_EQ(first.num_zero, 1);
  EXPECT_EQ(first.index->kind(), VectorIndexKind::kFlat);
  ExpectMatchesStore(*first.index);
  EXPECT_TRUE(store_->Verify().empty());

  SearchIndexSync second = SyncSearchIndex(*store_, SearchVectors(*store_, Identity()), o);
  EXPECT_TRUE(second.loaded);
  EXPECT_FALSE(second.changed());
  EXPECT_EQ(second.num_zero, 1);
  EXPECT_EQ(second.manifest.size(), 20u);
  ExpectMatchesStore(*second.index);
}

TEST_F(SearchIndexTest, StaleIndexIsReconciled) {
  for (VectorIndexKind kind : {VectorIndexKind::kFlat, VectorIndexKind::kIvfSq}) {
    SCOPED_TRACE(VectorIndexKindName(kind));
    VectorIndexOptions o;
    o.kind = kind;
    o.nlist = 2;
    o.nprobe = 2;  // every list: results are exact up to the codes
    for (int i = 0; i < 30; ++i) Put("img" + std::to_string(i), i + 100 * int(kind));
    UpdateSearchIndex(store_.get(), SearchVectors(*store_, Identity()), o);
    // What a crash after these commits (before the index write) leaves.
    const uint64_t changed = Put("img3", 555);
    Put("img4", 556, /*features=*/false);  // now featureless
    Remove("img5");
    Remove("img6");
    Put("new1", 557);
    Put("new2", 558);
    SearchIndexSync sync = SyncSearchIndex(*store_, SearchVectors(*store_, Identity()), o);
    EXPECT_TRUE(sync.loaded);
    EXPECT_FALSE(sync.rebuilt);
    EXPECT_EQ(sync.index->kind(), kind);
    EXPECT_EQ(sync.removed, 4);  // img3 (old vector), img4, img5, img6
    EXPECT_EQ(sync.added, 3);    // img3 (new vector), new1, new2
    ExpectMatchesStore(*sync.index);
    // The changed image is found by its new vector, never by its old one.
    const auto old_v = UnitVector(3 + 100 * int(kind));
    std::vector<float> s(5);
    std::vector<int64_t> l(5);
    sync.index->Search(old_v.data(), 1, 5, s.data(), l.data());
    if (l[0] == static_cast<int64_t>(changed)) {
      EXPECT_LT(s[0], 0.99f);
    }
    SaveSearchIndex(store_.get(), sync);
    SearchIndexSync again = SyncSearchIndex(*store_, SearchVectors(*store_, Identity()), o);
    EXPECT_FALSE(again.changed());
    ExpectMatchesStore(*again.index);
    // Start over for the next kind.
    store_.reset();
    store_ = Store::Create(tmp_ / ("db" + std::to_string(int(kind))), MakeModel(), nullptr, 2);
    vectors_.clear();
  }
}

TEST_F(SearchIndexTest, ColourTableFollowsTheRecords) {
  for (int i = 0; i < 15; ++i) Put("img" + std::to_string(i), i);
  Put("flat", 1000, /*features=*/false);  // not in the manifest, no row
  VectorIndexOptions o;
  const SearchIndexSync built =
      UpdateSearchIndex(store_.get(), SearchVectors(*store_, Identity()), o);
  ExpectColoursMatchStore(built);
  // Persisted: a reader gets it without reading a record.
  const SearchIndexSync loaded = SyncSearchIndex(*store_, SearchVectors(*store_, Identity()), o);
  EXPECT_TRUE(loaded.loaded);
  EXPECT_FALSE(loaded.changed());
  ExpectColoursMatchStore(loaded);
  // An image is most like itself.
  const uint64_t id7 = store_->FindByPath("/img7")->id;
  const std::vector<uint64_t> ids =
      loaded.colours.Search(ColourIndex::Prepare(colours_.at(id7)), 3);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], id7);

  // Changed, removed and added images: the rows follow.
  Put("img3", 333);
  Remove("img5");
  Put("new", 334);
  SearchIndexSync stale = UpdateSearchIndex(store_.get(), SearchVectors(*store_, Identity()), o);
  EXPECT_TRUE(stale.loaded);
  ExpectColoursMatchStore(stale);
  ExpectColoursMatchStore(SyncSearchIndex(*store_, SearchVectors(*store_, Identity()), o));

  // An index of an older format (4 had no colour table): not read but
  // rebuilt, with the table, by a reader and by the writer, which saves it.
  std::string blob = *store_->GetSearchIndex();
  blob[4] = 4;
  store_->PutSearchIndex(blob);
  const SearchIndexSync reread = SyncSearchIndex(*store_, SearchVectors(*store_, Identity()), o);
  EXPECT_TRUE(reread.rebuilt);
  ExpectColoursMatchStore(reread);
  const SearchIndexSync upgraded =
      UpdateSearchIndex(store_.get(), SearchVectors(*store_, Identity()), o);
  EXPECT_TRUE(upgraded.rebuilt);
  EXPECT_TRUE(upgraded.changed());
  ExpectColoursMatchStore(upgraded);
  const SearchIndexSync after = SyncSearchIndex(*store_, SearchVectors(*store_, Identity()), o);
  EXPECT_TRUE(after.loaded);
  EXPECT_FALSE(after.rebuilt);
  ExpectColoursMatchStore(after);
  EXPECT_TRUE(store_->Verify().empty());
}

TEST_F(SearchIndexTest, AutoTurnsApproximateAtTheThresholdAndBack) {
  VectorIndexOptions o;
  o.auto_threshold = 40;
  for (int i = 0; i < 30; ++i) Put("img" + std::to_string(i), i);
  EXPECT_EQ(UpdateSearchIndex(store_.get(), SearchVectors(*store_, Identity()), o).index->kind(),
            VectorIndexKind::kFlat);
  for (int i = 30; i < 45; ++i) Put("img" + std::to_string(i), i);
  SearchIndexSync grown = UpdateSearchIndex(store_.get(), SearchVectors(*store_, Identity()), o);
  EXPECT_TRUE(grown.loaded);
  EXPECT_TRUE(grown.retrained);
  EXPECT_EQ(grown.added, 15);
  EXPECT_EQ(grown.index->kind(), VectorIndexKind::kIvfSq);
  grown.index->set_nprobe(grown.index->nlist());
  ExpectMatchesStore(*grown.index);
  // Hysteresis: just below the threshold it stays approximate...
  for (int i = 0; i < 10; ++i) Remove("img" + std::to_string(i));
  SearchIndexSync below = UpdateSearchIndex(store_.get(), SearchVectors(*store_, Identity()), o);
  EXPECT_EQ(below.index->kind(), VectorIndexKind::kIvfSq);
  EXPECT_FALSE(below.retrained);
  // ...and turns exact again under half of it.
  for (int i = 10; i < 30; ++i) Remove("img" + std::to_string(i));
  SearchIndexSync small = UpdateSearchIndex(store_.get(), SearchVectors(*store_, Identity()), o);
  EXPECT_EQ(small.index->kind(), VectorIndexKind::kFlat);
  ExpectMatchesStore(*small.index);
  EXPECT_TRUE(SyncSearchIndex(*store_, SearchVectors(*store_, Identity()), o).loaded);
}

TEST_F(SearchIndexTest, CorruptOrForeignIndexIsRebuilt) {
  for (int i = 0; i < 12; ++i) Put("img" + std::to_string(i), i);
  VectorIndexOptions o;
  UpdateSearchIndex(store_.get(), SearchVectors(*store_, Identity()), o);
  // Another search dimension (e.g. a different projection): rebuilt.
  SearchIndexSync other = SyncSearchIndex(*store_, SearchVectors(*store_, Truncation(7)), o);
  EXPECT_TRUE(other.rebuilt);
  EXPECT_NE(other.reason.find("another model or dimension"), std::string::npos);
  EXPECT_EQ(other.index->dim(), 7);
  // A flipped byte inside the stored blob: detected, rebuilt, results right.
  const std::string path = store_->path();
  store_.reset();
  {
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), path, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    const std::string key = std::string("x:") + std::string(4, '\0');
    std::string value;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), key, &value).ok());
    value[value.size() / 2] ^= 0x40;
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), key, value).ok());
  }
  store_ = Store::Open(path, Store::Mode::kReadWrite);
  EXPECT_FALSE(store_->Verify().empty());
  SearchIndexSync fixed = UpdateSearchIndex(store_.get(), SearchVectors(*store_, Identity()), o);
  EXPECT_TRUE(fixed.rebuilt);
  EXPECT_NE(fixed.reason.find("checksum"), std::string::npos) << fixed.reason;
  ExpectMatchesStore(*fixed.index);
  ExpectColoursMatchStore(fixed);
  EXPECT_TRUE(store_->Verify().empty());
  EXPECT_TRUE(SyncSearchIndex(*store_, SearchVectors(*store_, Identity()), o).loaded);
}

}  // namespace
}  // namespace lookalike

namespace lookalike {
namespace {

// Full VLAD without a projection (more than kMaxPersistedFlatDim dimensions):
// an exact index is never persisted (it would copy every stored vector), the
// searcher builds it from the stored vectors; an explicit ivfsq still is.
TEST(SearchIndexFullVladTest, ExactIndexOfFullVladIsNotPersisted) {
  testing::TempDir tmp;
  ModelRecord m;
  m.dim = 128;
  m.num_clusters = 33;  // 4224 dimensions
  m.centroids.assign(m.vlad_dim(), 0.25f);
  m.codebook_hash = encoding::Fnv1a64(m.centroids.data(), m.centroids.size() * sizeof(float));
  const int64_t dim = static_cast<int64_t>(m.vlad_dim());
  ASSERT_GT(dim, kMaxPersistedFlatDim);
  auto store = Store::Create(tmp / "db", m, nullptr, 2);
  std::mt19937_64 rng(1);
  std::normal_distribution<float> g;
  std::vector<std::vector<float>> vectors;
  for (int i = 0; i < 10; ++i) {
    std::vector<float> v(dim);
    double s = 0;
    for (float& x : v) {
      x = g(rng);
      s += double{x} * x;
    }
    for (float& x : v) x = static_cast<float>(x / std::sqrt(s));
    ImageRecord r;
    r.path = "/img" + std::to_string(i);
    r.content_hash = i + 1;
    store->PutImage(&r, v.data());
    vectors.push_back(v);
  }
  const SearchVectors identity(*store, SearchProjection::FromRecord(nullptr, dim));
  VectorIndexOptions o;
  const SearchIndexSync update = UpdateSearchIndex(store.get(), identity, o);
  EXPECT_TRUE(update.transient);
  EXPECT_FALSE(update.changed());
  EXPECT_EQ(update.index, nullptr);
  EXPECT_FALSE(store->GetSearchIndex().has_value()) << "nothing persisted";
  const SearchIndexSync search = SyncSearchIndex(*store, identity, o);
  ASSERT_NE(search.index, nullptr);
  EXPECT_EQ(search.index->kind(), VectorIndexKind::kFlat);
  ASSERT_EQ(search.index->ntotal(), 10);
  for (size_t i = 0; i < vectors.size(); ++i) {
    float s = 0;
    int64_t l = -1;
    search.index->Search(vectors[i].data(), 1, 1, &s, &l);
    EXPECT_EQ(l, static_cast<int64_t>(i + 1));
  }
  o.kind = VectorIndexKind::kIvfSq;
  EXPECT_FALSE(UpdateSearchIndex(store.get(), identity, o).transient);
  EXPECT_TRUE(store->GetSearchIndex().has_value());
}

}  // namespace
}  // namespace lookalike
