// The persisted search index end to end: `index` writes it, updates it
// incrementally across runs (files added, changed, deleted), the searcher
// loads it instead of rebuilding, and a stale one (records committed after
// the index was written) is reconciled so results are never wrong or missing.
// Runs with the approximate kind forced, so small collections exercise it.
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "indexer/file_walker.h"
#include "indexer/grey_thumbnail.h"
#include "indexer/pipeline.h"
#include "indexer/projection.h"
#include "search/search_index.h"
#include "search/searcher.h"
#include "search/tiny_index.h"
#include "search/verifier.h"
#include "storage/encoding.h"
#include "storage/store.h"
#include "tests/indexer/small_index_options.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

// fn(record, search vector) for every stored image (SearchVectors).
void ForEachSearchVector(const Store& store,
                         const std::function<void(const ImageRecord&, const float*)>& fn) {
  const SearchVectors vectors(store);
  vectors.ForEach([&](const std::vector<ImageRecord>& records, const float* v) {
    for (size_t i = 0; i < records.size(); ++i) fn(records[i], v + i * vectors.dim());
  });
}

namespace fs = std::filesystem;
using testing::TempDir;

class PhaseRecorder : public IndexObserver {
 public:
  void OnPhase(const std::string& phase) override { phases.push_back(phase); }
  std::string SearchIndexPhase() const {
    for (const std::string& p : phases)
      if (p.rfind("search index: ", 0) == 0) return p;
    return "";
  }
  std::vector<std::string> phases;
};

class PersistedIndexTest : public ::testing::TestWithParam<VectorIndexKind> {
 protected:
  IndexSummary Index(PhaseRecorder* observer) {
    const IndexSummary summary = BuildIndex(testing::SmallIndexOptions(dir(), db()), observer);
    // What `lookalike index` runs next (tools/index_command.cc).
    VectorIndexOptions index;
    index.kind = GetParam();
    index.min_word_images = 0;  // a word index on these few images too
    index.nprobe = 64;          // every list at this size: results as exact as the codes
    auto store = Store::Open(db(), Store::Mode::kReadWrite);
    const SearchIndexSync sync = UpdateSearchIndex(store.get(), SearchVectors(*store), index);
    observer->OnPhase("search index: " + sync.Summary());
    return summary;
  }
  std::unique_ptr<Searcher> Open() {
    SearchOptions o;
    o.k = 3;
    o.rerank.depth = 0;
    o.index.min_word_images = 0;
    o.backend = Backend::kCpu;
    return Searcher::Open(db(), o);
  }
  // The persisted index as a fresh read-only open sees it.
  // Its word index reads the store it was opened with, kept in readers_.
  // `hold_tables` off: as a search of one image loads it.
  SearchIndexSync Persisted(bool hold_tables = true) {
    readers_.push_back(Store::Open(db(), Store::Mode::kReadOnly));
    const Store& store = *readers_.back();
    VectorIndexOptions o;
    o.kind = GetParam();
    o.min_word_images = 0;
    return SyncSearchIndex(store, SearchVectors(store), o, hold_tables);
  }
  std::vector<std::unique_ptr<Store>> readers_;
  // Every stored image with features is found first by its own stored vector.
  void ExpectEachImageFindsItself(const Searcher& searcher) {
    auto store = Store::Open(db(), Store::Mode::kReadOnly);
    int64_t checked = 0;
    // Without a projection (these databases are small) search vectors are
    // the VLAD vectors Searcher::SearchVectors takes.
    ASSERT_FALSE(store->GetProjection().has_value());
    ForEachSearchVector(*store, [&](const ImageRecord& rec, const float* v) {
      if (rec.status != ImageStatus::kOk) return;
      const auto hits = searcher.SearchVectors(v, 1);
      ASSERT_FALSE(hits[0].empty()) << rec.path;
      // Two records may hold the same vector (a copied file): either ranks first.
      EXPECT_GT(hits[0][0].score, 0.97f) << rec.path;
      bool found = false;
      for (const Hit& h : hits[0]) found = found || h.path == rec.path;
      EXPECT_TRUE(found) << rec.path << " is not among its own top 3";
      ++checked;
    });
    EXPECT_EQ(checked, searcher.num_indexed());
  }
  // The word index holds exactly the manifest's images, and each one's own
  // stored features find it first (similarity 1; a copied record ties).
  void ExpectWordsMatchManifest(const SearchIndexSync& p) {
    ASSERT_NE(p.words, nullptr) << "a persisted index keeps a word index";
    EXPECT_EQ(p.words->ntotal(), static_cast<int64_t>(p.manifest.size()));
    auto store = Store::Open(db(), Store::Mode::kReadOnly);
    const FeatureReader features(*store);
    for (const IndexedImage& m : p.manifest) {
      const auto f = features.Read(m.id);
      ASSERT_TRUE(f.has_value());
      const auto hits =
          p.words->Search(p.words->vocabulary().Encode(f->descriptors.data(), f->num()), 2);
      ASSERT_FALSE(hits.empty());
      EXPECT_NEAR(hits[0].second, 1.0f, 1e-4f);
      EXPECT_TRUE(hits[0].first == m.id || (hits.size() > 1 && hits[1].first == m.id))
          << "image " << m.id << " is not first by its own words";
    }
  }
  std::set<std::string> AllHitPaths(const Searcher& searcher) {
    auto store = Store::Open(db(), Store::Mode::kReadOnly);
    std::set<std::string> paths;
    ForEachSearchVector(*store, [&](const ImageRecord& rec, const float* v) {
      if (rec.status != ImageStatus::kOk) return;
      const auto hits = searcher.SearchVectors(v, 1);
      for (const Hit& h : hits[0]) paths.insert(h.path);
    });
    return paths;
  }

  std::string dir() const { return tmp_ / "photos"; }
  std::string db() const { return tmp_ / "db"; }
  TempDir tmp_;
};

TEST_P(PersistedIndexTest, WrittenUpdatedIncrementallyAndReconciled) {
  auto paths = testing::WriteSyntheticSet(dir(), 12, 1, 320, 240);
  PhaseRecorder first;
  ASSERT_EQ(Index(&first).indexed, 12);
  EXPECT_NE(first.SearchIndexPhase().find("built: no persisted search index"), std::string::npos)
      << first.SearchIndexPhase();
  {
    const SearchIndexSync p = Persisted();
    EXPECT_TRUE(p.loaded);
    EXPECT_FALSE(p.changed()) << "the index run left the persisted index current";
    EXPECT_EQ(p.index->kind(), GetParam());
    EXPECT_EQ(p.manifest.size(), 12u);
    ExpectWordsMatchManifest(p);
  }
  ExpectEachImageFindsItself(*Open());

  // Second run: 3 new files, 1 changed, 1 deleted.
  for (int i = 0; i < 3; ++i)
    testing::WriteImage(dir() + "/new_" + std::to_string(i) + ".png",
                        testing::MakeSyntheticImage(100 + i, 320, 240));
  testing::WriteImage(paths[2], testing::MakeSyntheticImage(200, 320, 240));
  fs::last_write_time(paths[2], fs::last_write_time(paths[2]) + std::chrono::seconds(5));
  fs::remove(paths[5]);
  PhaseRecorder second;
  const IndexSummary s = Index(&second);
  EXPECT_EQ(s.indexed, 4);
  EXPECT_EQ(s.removed, 1);
  EXPECT_NE(second.SearchIndexPhase().find("(+4 -2)"), std::string::npos)
      << "only the changed images reach the index: " << second.SearchIndexPhase();
  {
    const SearchIndexSync p = Persisted();
    EXPECT_TRUE(p.loaded);
    EXPECT_FALSE(p.changed());
    EXPECT_EQ(p.manifest.size(), 14u);
    ExpectWordsMatchManifest(p);
    // Current: a load for one image leaves the tables in the store.
    const SearchIndexSync lean = Persisted(/*hold_tables=*/false);
    EXPECT_EQ(lean.tables_stored, p.colours.rows() > 0 || p.tiny.rows() > 0);
    EXPECT_EQ(lean.colours.rows(), 0);
    EXPECT_FALSE(lean.changed());
  }
  auto searcher = Open();
  EXPECT_EQ(searcher->num_indexed(), 14);
  ExpectEachImageFindsItself(*searcher);
  EXPECT_EQ(AllHitPaths(*searcher).count(AbsolutePath(paths[5])), 0u)
      << "a deleted file is never returned";

  // A stale index: records committed after it was written (as a crash
  // between the image commits and the index write leaves them).
  std::string added_path, removed_path;
  {
    auto store = Store::Open(db(), Store::Mode::kReadWrite);
    const auto victim = store->FindByPath(AbsolutePath(paths[7]));
    const auto source = store->FindByPath(AbsolutePath(paths[8]));
    ASSERT_TRUE(victim && source);
    removed_path = victim->path;
    store->RemoveImage(*victim);
    ImageRecord copy = *source;
    copy.id = 0;
    copy.path = tmp_ / "elsewhere/copy_of_8.png";  // outside the folder: kept by index runs
    copy.content_hash ^= 1;
    added_path = copy.path;
    const auto v = store->GetVector(source->id);
    store->PutImage(&copy, v ? v->data() : nullptr, *store->GetFeatures(source->id));
  }
  {
    const SearchIndexSync p = Persisted();
    EXPECT_TRUE(p.loaded);
    EXPECT_EQ(p.added, 1);
    EXPECT_EQ(p.removed, 1);
    ExpectWordsMatchManifest(p);  // reconciled in memory like the vectors
    // A load that would leave the tables in the store reads them after all:
    // reconciling rebuilds them (the stored rows no longer match).
    const SearchIndexSync lean = Persisted(/*hold_tables=*/false);
    EXPECT_FALSE(lean.tables_stored);
    EXPECT_EQ(lean.added, 1);
    EXPECT_GT(p.colours.rows(), 0);
    EXPECT_EQ(lean.colours.rows(), p.colours.rows());
    EXPECT_EQ(lean.colours.table(), p.colours.table());
    EXPECT_EQ(lean.tiny.table(), p.tiny.table());
  }
  searcher = Open();  // read-only: reconciles in memory
  EXPECT_EQ(searcher->num_indexed(), 14);
  ExpectEachImageFindsItself(*searcher);
  const std::set<std::string> returned = AllHitPaths(*searcher);
  EXPECT_EQ(returned.count(removed_path), 0u) << "a removed record is never returned";
  EXPECT_EQ(returned.count(added_path), 1u) << "a record missing from the index is found";
  EXPECT_TRUE(Persisted().changed()) << "search never writes";

  // The next index run writes the reconciled index (and indexes paths[7]
  // again, its file still being there, under a new id).
  PhaseRecorder third;
  Index(&third);
  EXPECT_NE(third.SearchIndexPhase().find("(+2 -1)"), std::string::npos)
      << third.SearchIndexPhase();
  EXPECT_FALSE(Persisted().changed());
  auto store = Store::Open(db(), Store::Mode::kReadOnly);
  EXPECT_TRUE(store->Verify().empty());
}

// An unchanged database is not compared record by record: the persisted
// index carries the store generation its manifest matched. A record deleted
// behind the store's back (raw RocksDB; no lookalike write does that) goes
// unnoticed, which shows the comparison was skipped; a change through the
// store bumps the generation and everything is reconciled.
// `index` writes every manifest image's tiny image (format 6) from its
// thumbnail, reads only what changed on later runs, fills a zero row once the
// image has a thumbnail, and a reader loads the rows as written.
TEST_P(PersistedIndexTest, TinyImagesFollowTheThumbnails) {
  testing::WriteSyntheticSet(dir(), 5, 30, 320, 240);
  PhaseRecorder observer;
  Index(&observer);
  EXPECT_NE(observer.SearchIndexPhase().find("5 tiny images read"), std::string::npos)
      << observer.SearchIndexPhase();
  SearchIndexSync first = Persisted();
  ASSERT_EQ(first.tiny.rows(), static_cast<int64_t>(first.manifest.size()));
  EXPECT_EQ(first.tiny_read, 0) << "a reader computes nothing";
  auto expect_rows_of_thumbnails = [&](const SearchIndexSync& p) {
    auto store = Store::Open(db(), Store::Mode::kReadOnly);
    for (int64_t r = 0; r < p.tiny.rows(); ++r) {
      const auto t = store->GetThumbnails({p.manifest[r].id});
      const TinyIndex::Row want =
          t[0] ? TinyIndex::RowOf(DecodeGreyThumbnail(*t[0])) : TinyIndex::Row{};
      EXPECT_EQ(p.tiny.RowAt(r), want) << "image " << p.manifest[r].id;
    }
  };
  expect_rows_of_thumbnails(first);
  EXPECT_FALSE(TinyIndex::IsZero(first.tiny.RowAt(0)));
  // A run that changes nothing reads no thumbnail (and saves nothing).
  PhaseRecorder unchanged;
  Index(&unchanged);
  EXPECT_EQ(unchanged.SearchIndexPhase().find("tiny images read"), std::string::npos)
      << unchanged.SearchIndexPhase();

  // One more image: only its row is read.
  testing::WriteSyntheticSet(dir() + "/more", 1, 40, 320, 240);
  PhaseRecorder more;
  Index(&more);
  EXPECT_NE(more.SearchIndexPhase().find("; 1 tiny images read"), std::string::npos)
      << more.SearchIndexPhase();
  SearchIndexSync second = Persisted();
  ASSERT_EQ(second.tiny.rows(), 6);
  expect_rows_of_thumbnails(second);

  // An image whose thumbnail was missing (an older build's) has a zero row
  // until a run finds its thumbnail: its thumbnail removed and the index
  // built again without it, then the thumbnail added back.
  const uint64_t id = second.manifest[2].id;
  std::string thumbnail;
  {
    auto store = Store::Open(db(), Store::Mode::kReadWrite);
    const ImageRecord r = *store->FindById(id);
    thumbnail = *store->GetThumbnails({id})[0];
    const auto vector = store->GetVector(id);
    store->PutImageWithId(r, vector ? vector->data() : nullptr, *store->GetFeatures(id));
    ASSERT_FALSE(store->GetThumbnails({id})[0].has_value());
  }
  {
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), db(), &raw).ok());
    std::unique_ptr<rocksdb::DB> owned(raw);
    ASSERT_TRUE(raw->Delete(rocksdb::WriteOptions(), "m:xindex").ok());
  }
  {
    auto store = Store::Open(db(), Store::Mode::kReadWrite);
    VectorIndexOptions o;
    o.kind = GetParam();
    o.min_word_images = 0;
    o.nprobe = 64;
    const SearchIndexSync without = UpdateSearchIndex(store.get(), SearchVectors(*store), o);
    EXPECT_TRUE(TinyIndex::IsZero(without.tiny.RowAt(2)));
    store->PutThumbnail(id, thumbnail);
    const SearchIndexSync with = UpdateSearchIndex(store.get(), SearchVectors(*store), o);
    EXPECT_EQ(with.tiny_read, 1) << "only the row that was zero";
  }
  SearchIndexSync third = Persisted();
  expect_rows_of_thumbnails(third);
  EXPECT_FALSE(TinyIndex::IsZero(third.tiny.RowAt(2)));
}

TEST_P(PersistedIndexTest, UnchangedGenerationSkipsTheRecordComparison) {
  testing::WriteSyntheticSet(dir(), 6, 1, 320, 240);
  PhaseRecorder observer;
  Index(&observer);
  SearchIndexSync before = Persisted();
  ASSERT_TRUE(before.loaded);
  const size_t n = before.manifest.size();
  ASSERT_GE(n, 2u);
  {
    auto store = Store::Open(db(), Store::Mode::kReadOnly);
    ASSERT_TRUE(store->totals().has_value());
    EXPECT_NE(before.generation, 0u);
    EXPECT_EQ(before.generation, store->totals()->generation);
  }
  const uint64_t hidden = before.manifest[0].id, removed = before.manifest[1].id;
  {
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), db(), &raw).ok());
    std::unique_ptr<rocksdb::DB> owned(raw);
    ASSERT_TRUE(raw->Delete(rocksdb::WriteOptions(), "i:" + encoding::BigEndian64(hidden)).ok());
  }
  SearchIndexSync skipped = Persisted();
  EXPECT_TRUE(skipped.loaded);
  EXPECT_EQ(skipped.removed, 0);
  EXPECT_EQ(skipped.manifest.size(), n) << "the records were compared after all";
  {
    auto store = Store::Open(db(), Store::Mode::kReadWrite);
    store->RemoveImage(*store->FindById(removed));
  }
  SearchIndexSync reconciled = Persisted();
  EXPECT_TRUE(reconciled.loaded);
  EXPECT_EQ(reconciled.removed, 2) << "both missing records are found once the generation moved";
  EXPECT_EQ(reconciled.manifest.size(), n - 2);
}

TEST_P(PersistedIndexTest, WordIndexIsDroppedWhenOffAndBuiltWhenMissing) {
  testing::WriteSyntheticSet(dir(), 6, 1, 320, 240);
  PhaseRecorder observer;
  Index(&observer);
  VectorIndexOptions o;
  o.kind = GetParam();
  o.min_word_images = 0;
  o.words = false;
  {
    auto store = Store::Open(db(), Store::Mode::kReadWrite);
    const SearchIndexSync off = UpdateSearchIndex(store.get(), SearchVectors(*store), o);
    EXPECT_TRUE(off.words_dropped);
    EXPECT_EQ(off.words, nullptr);
  }
  {
    // Saved without one: a reader that wants one builds it in memory, from
    // the stored features, and would save it.
    const SearchIndexSync p = Persisted();
    EXPECT_TRUE(p.loaded);
    EXPECT_TRUE(p.words_built);
    EXPECT_TRUE(p.changed());
    ExpectWordsMatchManifest(p);
  }
  o.words = true;
  {
    auto store = Store::Open(db(), Store::Mode::kReadWrite);
    const SearchIndexSync on = UpdateSearchIndex(store.get(), SearchVectors(*store), o);
    EXPECT_TRUE(on.words_built);
    EXPECT_NE(on.Summary().find("word index"), std::string::npos) << on.Summary();
  }
  const SearchIndexSync p = Persisted();
  EXPECT_FALSE(p.changed());
  EXPECT_FALSE(p.words_built);
  ExpectWordsMatchManifest(p);
}

// Under its minimum a collection gets no word index built, but one it has
// is kept and used (a collection that shrank, or indexed with a lower
// minimum); from the minimum on one is built.
TEST_P(PersistedIndexTest, WordIndexBuiltFromItsMinimumAndKeptBelowIt) {
  testing::WriteSyntheticSet(dir(), 6, 1, 320, 240);
  PhaseRecorder observer;
  Index(&observer);  // with a word index (minimum 0)
  const int64_t images = static_cast<int64_t>(Persisted().manifest.size());
  VectorIndexOptions o;
  o.kind = GetParam();
  o.min_word_images = images + 1;
  {
    auto store = Store::Open(db(), Store::Mode::kReadWrite);
    const SearchIndexSync kept = UpdateSearchIndex(store.get(), SearchVectors(*store), o);
    EXPECT_FALSE(kept.words_dropped);
    ASSERT_NE(kept.words, nullptr);
    EXPECT_FALSE(kept.words_built);
    // Dropped (--word-index off), then not built again under the minimum.
    o.words = false;
    EXPECT_TRUE(UpdateSearchIndex(store.get(), SearchVectors(*store), o).words_dropped);
    o.words = true;
    const SearchIndexSync none = UpdateSearchIndex(store.get(), SearchVectors(*store), o);
    EXPECT_EQ(none.words, nullptr);
    EXPECT_FALSE(none.words_built);
  }
  {
    // A reader with the same minimum builds none either.
    auto store = Store::Open(db(), Store::Mode::kReadOnly);
    const SearchIndexSync read = SyncSearchIndex(*store, SearchVectors(*store), o);
    EXPECT_EQ(read.words, nullptr);
  }
  o.min_word_images = images;
  auto store = Store::Open(db(), Store::Mode::kReadWrite);
  const SearchIndexSync built = UpdateSearchIndex(store.get(), SearchVectors(*store), o);
  EXPECT_TRUE(built.words_built);
  ASSERT_NE(built.words, nullptr);
  EXPECT_EQ(built.words->ntotal(), images);
  o.min_word_images = -1;
  EXPECT_THROW(o.Validate(), std::invalid_argument);
}

// The persisted index is derived data, read in its current format only: a
// blob of another format (as older builds wrote) is not read but rebuilt
// from the stored vectors and features, in memory by a reader (the store
// untouched) and saved by the next `index`; the rebuilt index ranks as the
// one it replaces.
TEST_P(PersistedIndexTest, AnIndexOfAnotherFormatIsRebuiltNotRead) {
  testing::WriteSyntheticSet(dir(), 6, 1, 320, 240);
  PhaseRecorder observer;
  Index(&observer);
  std::vector<std::pair<uint64_t, float>> expected;
  std::vector<WordSignature> query;
  std::string blob;
  {
    const SearchIndexSync p = Persisted();
    ASSERT_TRUE(p.loaded);
    ASSERT_NE(p.words, nullptr);
    const FeatureReader features(*readers_.back());
    const auto f = features.Read(p.manifest.at(1).id);
    ASSERT_TRUE(f.has_value());
    query = p.words->vocabulary().Encode(f->descriptors.data(), f->num());
    expected = p.words->Search(query, 10);
    ASSERT_GT(expected.size(), 1u);
    readers_.clear();
    // The same blob, stamped as format 5 (u32 after the magic), without its
    // word index keys: what an older build left.
    auto store = Store::Open(db(), Store::Mode::kReadWrite);
    blob = *store->GetSearchIndex();
    ASSERT_EQ(blob.compare(0, 4, "LKSX"), 0);
    ASSERT_EQ(blob[4], 6) << "the current format";
    blob[4] = 5;
    store->PutSearchIndex(blob);
    EXPECT_FALSE(store->GetWordTable().has_value());
  }
  {
    // A reader rebuilds it all in memory and writes nothing.
    const SearchIndexSync p = Persisted();
    EXPECT_FALSE(p.loaded);
    EXPECT_TRUE(p.rebuilt);
    EXPECT_NE(p.reason.find("format 5"), std::string::npos) << p.reason;
    EXPECT_TRUE(p.words_built);
    EXPECT_EQ(p.colours.rows(), static_cast<int64_t>(p.manifest.size()));
    ExpectWordsMatchManifest(p);
    EXPECT_EQ(p.words->Search(query, 10), expected);
    EXPECT_EQ(*readers_.back()->GetSearchIndex(), blob);
    EXPECT_FALSE(readers_.back()->GetWordTable().has_value());
  }
  ExpectEachImageFindsItself(*Open());
  readers_.clear();
  {
    // The next `index` saves the rebuilt index in the current format.
    auto store = Store::Open(db(), Store::Mode::kReadWrite);
    VectorIndexOptions o;
    o.kind = GetParam();
    o.min_word_images = 0;
    const SearchIndexSync saved = UpdateSearchIndex(store.get(), SearchVectors(*store), o);
    EXPECT_TRUE(saved.rebuilt);
    EXPECT_TRUE(saved.changed());
    EXPECT_NE(saved.Summary().find("format 5"), std::string::npos) << saved.Summary();
    EXPECT_EQ((*store->GetSearchIndex())[4], 6);
    EXPECT_TRUE(store->GetWordTable().has_value());
    EXPECT_TRUE(VerifyWordIndex(*store).empty());
    EXPECT_TRUE(store->Verify().empty());
  }
  const SearchIndexSync p = Persisted();
  EXPECT_TRUE(p.loaded);
  EXPECT_FALSE(p.changed());
  ExpectWordsMatchManifest(p);
  EXPECT_EQ(p.words->Search(query, 10), expected);
  ExpectEachImageFindsItself(*Open());
}

// A small collection's word index (built with a lower minimum) is kept
// when its index of another format is rebuilt: w:t tells it had one.
TEST_P(PersistedIndexTest, AnIndexOfAnotherFormatKeepsItsWordIndex) {
  testing::WriteSyntheticSet(dir(), 6, 1, 320, 240);
  PhaseRecorder observer;
  Index(&observer);
  // Stamped as format 5, its word index keys kept: what an older build left.
  auto store = Store::Open(db(), Store::Mode::kReadWrite);
  std::string blob = *store->GetSearchIndex();
  blob[4] = 5;
  WordIndexCommit words;
  words.table = *store->GetWordTable();
  for (uint32_t s = 0; s < store->NextWordSegment(); ++s) words.segments.push_back(s);
  store->PutSearchIndex(blob, &words);
  // Not read, so not checked: `verify` finds nothing wrong with it.
  EXPECT_TRUE(VerifyWordIndex(*store).empty());
  EXPECT_TRUE(VerifyColourTable(*store).empty());
  EXPECT_TRUE(store->Verify().empty());
  VectorIndexOptions o;
  o.kind = GetParam();
  o.min_word_images = 1000;  // above these 6 images
  const SearchIndexSync kept = SyncSearchIndex(*store, SearchVectors(*store), o);
  EXPECT_TRUE(kept.rebuilt);
  EXPECT_TRUE(kept.had_words);
  ASSERT_NE(kept.words, nullptr);
  EXPECT_TRUE(kept.words_built);
  EXPECT_EQ(kept.words->ntotal(), static_cast<int64_t>(kept.manifest.size()));
  // Without w: keys (no word index before) none is built below the minimum.
  store->PutSearchIndex(blob);
  const SearchIndexSync none = SyncSearchIndex(*store, SearchVectors(*store), o);
  EXPECT_TRUE(none.rebuilt);
  EXPECT_FALSE(none.had_words);
  EXPECT_EQ(none.words, nullptr);
}

// verify's check of the colour table: silent while each row is its image's
// record colour; a row that differs at the generation search trusts is
// reported (a persisted table that a bug got wrong, not a checksum failure).
TEST_P(PersistedIndexTest, ColourTableIsVerifiedAgainstTheRecords) {
  testing::WriteSyntheticSet(dir(), 5, 1, 320, 240);
  PhaseRecorder observer;
  Index(&observer);
  auto store = Store::Open(db(), Store::Mode::kReadWrite);
  EXPECT_TRUE(VerifyColourTable(*store).empty());
  VectorIndexOptions o;
  o.kind = GetParam();
  o.min_word_images = 0;
  SearchIndexSync sync = SyncSearchIndex(*store, SearchVectors(*store), o);
  ASSERT_TRUE(sync.loaded);
  ASSERT_EQ(sync.colours.rows(), static_cast<int64_t>(sync.manifest.size()));
  // The same table with the second image's row replaced by the first's.
  std::vector<uint8_t> table = sync.colours.table();
  std::copy(table.begin(), table.begin() + ColourIndex::kRowBytes,
            table.begin() + ColourIndex::kRowBytes);
  std::vector<uint64_t> ids;
  for (const IndexedImage& m : sync.manifest) ids.push_back(m.id);
  sync.colours.Assign(ids, table);
  SaveSearchIndex(store.get(), sync);
  const std::vector<std::string> problems = VerifyColourTable(*store);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("1 rows differ"), std::string::npos) << problems[0];
}

INSTANTIATE_TEST_SUITE_P(Kinds, PersistedIndexTest,
                         ::testing::Values(VectorIndexKind::kFlat, VectorIndexKind::kIvfSq),
                         [](const auto& info) {
                           return std::string(VectorIndexKindName(info.param));
                         });

}  // namespace
}  // namespace lookalike
