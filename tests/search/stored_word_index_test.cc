// The word index under its own keys (search/stored_word_index.h) against the
// in-memory WordIndex as the oracle: the same images, the same scores to the
// bit and the same ranks, across segments, removals, changed images,
// compaction, an uncommitted segment left by a killed run, and a reload.
#include "search/stored_word_index.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "search/word_index.h"
#include "storage/encoding.h"
#include "storage/store.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
constexpr int kDim = 128;
constexpr int kClusters = 16;

std::vector<float> RandomUnit(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> x(static_cast<size_t>(n) * kDim);
  for (int64_t i = 0; i < n; ++i) {
    double norm = 0;
    for (int j = 0; j < kDim; ++j) norm += double{x[i * kDim + j] = g(rng)} * x[i * kDim + j];
    for (int j = 0; j < kDim; ++j) x[i * kDim + j] /= static_cast<float>(std::sqrt(norm));
  }
  return x;
}

ModelRecord MakeModel() {
  ModelRecord m;
  m.num_clusters = kClusters;
  m.dim = kDim;
  m.centroids = RandomUnit(kClusters, 1);
  m.codebook_hash = encoding::Fnv1a64(m.centroids.data(), m.centroids.size() * sizeof(float));
  return m;
}

class StoredWordIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::path(testing::TempDir()) /
           ("stored_words_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
    store_ = Store::Create((tmp_ / "db").string(), model_);
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(tmp_);
  }
  WordVocabulary Train() const {
    const std::vector<float> sample = RandomUnit(3000, 2);
    WordVocabularyOptions o;
    o.fine_per_word = 4;
    return WordVocabulary::Train(codebook_, sample.data(), 3000, o);
  }
  // An "image" of `n` random descriptors.
  std::vector<WordSignature> Image(uint64_t seed, int64_t n = 150) const {
    const auto x = RandomUnit(n, seed);
    return vocabulary_.Encode(x.data(), n);
  }
  // Adds images a..b (ids), image id's content Image(seed + id), to both.
  void AddImages(uint64_t a, uint64_t b, uint64_t seed, WordIndex* oracle,
                 StoredWordIndex* stored) const {
    for (uint64_t id = a; id <= b; ++id) {
      const auto sig = Image(seed + id);
      oracle->Add(id, sig);
      stored->Add(id, sig);
    }
  }
  // Commits `words` as `index` does (with a stand-in blob) and returns its
  // table's hash.
  uint64_t Commit(StoredWordIndex* words) {
    words->SetWriter(store_.get());
    const WordIndexCommit c = words->Commit();
    store_->PutSearchIndex("blob", &c);
    return Hash64(HashKind::kXxh3_64, c.table.data(), c.table.size());
  }
  // Every query ranks the same images with the same float scores.
  void ExpectSame(const WordIndex& oracle, const StoredWordIndex& stored, uint64_t seed) {
    ASSERT_EQ(oracle.ntotal(), stored.ntotal());
    ASSERT_EQ(oracle.num_postings(), stored.num_postings());
    std::mt19937_64 rng(seed);
    for (int q = 0; q < 25; ++q) {
      // Mostly partial copies of held images (many near-ties), some unrelated.
      std::vector<WordSignature> query = Image(rng() % 400 + 1000, 40 + rng() % 200);
      if (q % 5 == 0) query = Image(rng() + 100000);
      const int64_t m = 1 + static_cast<int64_t>(rng() % 60);
      const auto a = oracle.Search(query, m);
      const auto b = stored.Search(query, m);
      ASSERT_EQ(a.size(), b.size()) << "query " << q;
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].first, b[i].first) << "query " << q << " rank " << i;
        EXPECT_EQ(a[i].second, b[i].second) << "query " << q << " rank " << i;
      }
    }
  }

  fs::path tmp_;
  ModelRecord model_ = MakeModel();
  Codebook codebook_{kClusters, kDim, model_.centroids};
  WordVocabulary vocabulary_ = Train();
  std::unique_ptr<Store> store_;
};

TEST_F(StoredWordIndexTest, ScoresAndRanksAsTheInMemoryIndexAcrossUpdates) {
  WordIndex oracle(vocabulary_);
  StoredWordIndex stored(*store_, vocabulary_);
  stored.SetWriter(store_.get());
  stored.set_segment_images(37);  // several segments, one partly filled
  std::mt19937_64 rng(7);
  std::vector<uint64_t> ids;
  uint64_t id = 0;
  for (int i = 0; i < 200; ++i) {
    id += 1 + rng() % 3;  // gaps, as removed images leave them
    ids.push_back(id);
    const auto sig = Image(1000 + i);
    oracle.Add(id, sig);
    stored.Add(id, sig);
  }
  // Before the commit: written segments plus images still in memory.
  ExpectSame(oracle, stored, 1);
  uint64_t hash = Commit(&stored);
  ExpectSame(oracle, stored, 2);
  auto loaded = StoredWordIndex::Load(*store_, codebook_, hash);
  ASSERT_NE(loaded, nullptr);
  ExpectSame(oracle, *loaded, 3);
  EXPECT_TRUE(loaded->Check().empty());

  // A second run: some images removed, some changed (same id, new content:
  // their old postings stay behind, dead), some added with lower and
  // higher ids.
  std::vector<int64_t> removed, changed;
  for (size_t i = 0; i < ids.size(); i += 7) removed.push_back(static_cast<int64_t>(ids[i]));
  for (size_t i = 3; i < ids.size(); i += 11)
    if (i % 7 != 0) changed.push_back(static_cast<int64_t>(ids[i]));
  for (auto* list : {&removed, &changed}) {
    EXPECT_EQ(oracle.Remove(*list), static_cast<int64_t>(list->size()));
    EXPECT_EQ(loaded->Remove(*list), static_cast<int64_t>(list->size()));
  }
  loaded->SetWriter(store_.get());
  loaded->set_segment_images(37);
  for (size_t i = 0; i < changed.size(); ++i) {
    const auto sig = Image(1000 + 400 - i);  // another image's content
    oracle.Add(static_cast<uint64_t>(changed[i]), sig);
    loaded->Add(static_cast<uint64_t>(changed[i]), sig);
  }
  for (int i = 0; i < 60; ++i) {
    const auto sig = Image(5000 + i);
    oracle.Add(id + 1 + i, sig);
    loaded->Add(id + 1 + i, sig);
  }
  ExpectSame(oracle, *loaded, 4);
  hash = Commit(loaded.get());
  ExpectSame(oracle, *loaded, 5);
  auto again = StoredWordIndex::Load(*store_, codebook_, hash);
  ASSERT_NE(again, nullptr);
  ExpectSame(oracle, *again, 6);
  EXPECT_TRUE(again->Check().empty());
}

TEST_F(StoredWordIndexTest, CompactionKeepsResultsAndDropsDeadPostings) {
  WordIndex oracle(vocabulary_);
  StoredWordIndex stored(*store_, vocabulary_);
  stored.SetWriter(store_.get());
  stored.set_segment_images(10);  // 12 segments > kMaxSegments: compacted
  AddImages(1, 120, 1000, &oracle, &stored);
  const uint64_t hash = Commit(&stored);
  ExpectSame(oracle, stored, 2);  // the compacted index, still in use
  auto loaded = StoredWordIndex::Load(*store_, codebook_, hash);
  ASSERT_NE(loaded, nullptr);
  ExpectSame(oracle, *loaded, 1);
  EXPECT_TRUE(loaded->Check().empty());
  // One segment left: every other list was deleted with the commit.
  EXPECT_EQ(store_->NextWordSegment(), 13u);
  // ... and that one holds live postings only: as many as the oracle.
  EXPECT_EQ(loaded->stored_postings(), oracle.num_postings());
  EXPECT_EQ(loaded->num_postings(), oracle.num_postings());
}

// Search checks whether a posting is live in a byte per image when ids are
// dense and segments few; ids far apart (merged shards' ranges) and many
// segments take the row-by-row path. Both score as the in-memory index.
TEST_F(StoredWordIndexTest, SparseIdsAndManySegmentsScoreAsTheInMemoryIndex) {
  WordIndex oracle(vocabulary_);
  StoredWordIndex sparse(*store_, vocabulary_);
  sparse.SetWriter(store_.get());
  sparse.set_segment_images(16);
  for (uint64_t i = 1; i <= 60; ++i) {
    const auto sig = Image(1000 + i);
    oracle.Add(i << 21, sig);  // beyond any dense map
    sparse.Add(i << 21, sig);
  }
  ExpectSame(oracle, sparse, 1);

  WordIndex oracle2(vocabulary_);
  StoredWordIndex many(*store_, vocabulary_);
  many.SetWriter(store_.get());
  many.set_segment_images(1);  // a segment per image: 260 of them
  for (uint64_t id = 1; id <= 260; ++id) {
    const auto sig = Image(1000 + id % 400, 40);
    oracle2.Add(id, sig);
    many.Add(id, sig);
  }
  ExpectSame(oracle2, many, 2);
}

// `merge` joins a shard's persisted word index: its live postings copied
// into one new segment with the ids re-keyed (dead ones, of images the shard
// removed or changed, dropped), scoring as if the images had been encoded
// again; the shard is only read.
// Postings per word of an in-memory index: what the stored table counts.
std::map<uint32_t, uint64_t> ListSizes(const WordIndex& index) {
  std::map<uint32_t, uint64_t> sizes;
  index.ForEachList([&](uint32_t word, const std::vector<std::pair<uint64_t, uint64_t>>& p) {
    sizes[word] = p.size();
  });
  return sizes;
}

// The postings a query's words hold in `sizes`.
uint64_t QueryPostings(const std::vector<WordSignature>& query,
                       const std::map<uint32_t, uint64_t>& sizes) {
  uint64_t total = 0;
  for (const WordSignature& q : query) {
    const auto it = sizes.find(q.word);
    if (it != sizes.end()) total += it->second;
  }
  return total;
}

TEST_F(StoredWordIndexTest, AddFromJoinsAnotherDatabasesIndexWithIdsReKeyed) {
  const std::string shard_path = (tmp_ / "shard").string();
  auto shard_store = Store::Create(shard_path, model_);
  WordIndex shard_oracle(vocabulary_);
  uint64_t shard_hash = 0;
  {
    StoredWordIndex shard(*shard_store, vocabulary_);
    shard.SetWriter(shard_store.get());
    shard.set_segment_images(23);
    AddImages(1, 90, 2000, &shard_oracle, &shard);
    WordIndexCommit c = shard.Commit();
    shard_store->PutSearchIndex("blob", &c);
    // A second run removes some and changes some: dead postings stay behind.
    std::vector<int64_t> gone = {3, 17, 40, 41, 88}, changed = {5, 60};
    for (const auto* list : {&gone, &changed}) {
      shard_oracle.Remove(*list);
      shard.Remove(*list);
    }
    for (int64_t id : changed) {
      const auto sig = Image(5000 + static_cast<uint64_t>(id));
      shard_oracle.Add(static_cast<uint64_t>(id), sig);
      shard.Add(static_cast<uint64_t>(id), sig);
    }
    c = shard.Commit();
    shard_store->PutSearchIndex("blob", &c);
    shard_hash = Hash64(HashKind::kXxh3_64, c.table.data(), c.table.size());
    ASSERT_GT(shard.stored_postings(), shard.num_postings()) << "no dead postings to drop";
  }
  auto shard = StoredWordIndex::Load(*shard_store, codebook_, shard_hash);
  ASSERT_NE(shard, nullptr);

  constexpr uint64_t kOffset = 1000;
  WordIndex oracle(vocabulary_);
  StoredWordIndex stored(*store_, vocabulary_);
  stored.SetWriter(store_.get());
  AddImages(1, 40, 1000, &oracle, &stored);
  for (uint64_t id = 1; id <= 90; ++id) {
    std::vector<int64_t> one = {static_cast<int64_t>(id)};
    if (shard_oracle.Remove(one) == 0) continue;
    const uint64_t seed = id == 5 || id == 60 ? 5000 + id : 2000 + id;
    oracle.Add(id + kOffset, Image(seed));
  }
  EXPECT_EQ(stored.AddFrom(*shard, kOffset), 85);
  ExpectSame(oracle, stored, 1);
  EXPECT_THROW(stored.AddFrom(*shard, kOffset), std::logic_error);
  const uint64_t hash = Commit(&stored);
  auto loaded = StoredWordIndex::Load(*store_, codebook_, hash);
  ASSERT_NE(loaded, nullptr);
  ExpectSame(oracle, *loaded, 2);
  EXPECT_TRUE(loaded->Check().empty());
  // Only the live postings were copied: none is dead.
  EXPECT_EQ(loaded->stored_postings(), oracle.num_postings());
  // ... and the table counts them per word, as a query's bound reads them.
  const std::map<uint32_t, uint64_t> sizes = ListSizes(oracle);
  for (uint64_t seed = 1001; seed <= 1005; ++seed) {
    const std::vector<WordSignature> query = Image(seed);
    uint64_t all = 0;
    loaded->WordsRead(query, 0, &all);
    EXPECT_EQ(all, QueryPostings(query, sizes));
  }
  // Without a writer nothing is joined.
  StoredWordIndex reader(*store_, vocabulary_);
  EXPECT_THROW(reader.AddFrom(*shard, 5000), std::logic_error);
}

TEST_F(StoredWordIndexTest, AnUncommittedSegmentIsNeverRead) {
  WordIndex oracle(vocabulary_);
  StoredWordIndex stored(*store_, vocabulary_);
  AddImages(1, 50, 1000, &oracle, &stored);
  const uint64_t hash = Commit(&stored);
  // A run killed after writing a segment, before its commit.
  {
    auto run = StoredWordIndex::Load(*store_, codebook_, hash);
    run->SetWriter(store_.get());
    run->set_segment_images(5);
    run->Remove({1, 2, 3});
    for (uint64_t id = 1; id <= 8; ++id) run->Add(id + 100, Image(9000 + id));
  }
  auto loaded = StoredWordIndex::Load(*store_, codebook_, hash);
  ExpectSame(oracle, *loaded, 1);
  EXPECT_TRUE(loaded->Check().empty());
  // The next run writes above it, and its commit deletes it.
  loaded->SetWriter(store_.get());
  const auto sig = Image(777);
  oracle.Add(500, sig);
  loaded->Add(500, sig);
  const uint64_t next = Commit(loaded.get());
  auto after = StoredWordIndex::Load(*store_, codebook_, next);
  ExpectSame(oracle, *after, 2);
  EXPECT_TRUE(after->Check().empty());
  EXPECT_EQ(store_->Verify(), std::vector<std::string>());
}

TEST_F(StoredWordIndexTest, ATableOtherThanTheNamedOneIsRefused) {
  StoredWordIndex stored(*store_, vocabulary_);
  stored.Add(1, Image(1));
  const uint64_t hash = Commit(&stored);
  EXPECT_THROW(StoredWordIndex::Load(*store_, codebook_, hash + 1), encoding::CorruptValue);
  store_->PutSearchIndex("blob");  // no word index: every w: key goes
  EXPECT_EQ(StoredWordIndex::Load(*store_, codebook_, hash), nullptr);
  EXPECT_EQ(store_->NextWordSegment(), 0u);
}

TEST_F(StoredWordIndexTest, ADamagedListIsReportedNotScored) {
  StoredWordIndex stored(*store_, vocabulary_);
  for (uint64_t id = 1; id <= 20; ++id) stored.Add(id, Image(1000 + id));
  const uint64_t hash = Commit(&stored);
  store_.reset();
  {
    // Flip a byte in one stored list, bypassing the store.
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), (tmp_ / "db").string(), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    it->Seek("w:s");
    ASSERT_TRUE(it->Valid() && it->key().starts_with("w:s"));
    std::string value = it->value().ToString();
    value[5] ^= 0x40;
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), it->key(), value).ok());
  }
  store_ = Store::Open((tmp_ / "db").string(), Store::Mode::kReadOnly);
  const std::vector<std::string> problems = store_->Verify();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("checksum mismatch"), std::string::npos) << problems[0];
  auto loaded = StoredWordIndex::Load(*store_, codebook_, hash);
  EXPECT_FALSE(loaded->Check().empty());
  bool threw = false;
  try {
    for (uint64_t seed = 1001; seed <= 1020; ++seed) loaded->Search(Image(seed), 5);
  } catch (const StoreError& e) {
    threw = e.kind() == StoreError::Kind::kCorrupt;
  }
  EXPECT_TRUE(threw) << "a query reading the damaged list is refused, not scored";
}

// A bound on the postings a query reads keeps its most selective words: the
// kept words' stored postings fit the bound, none skipped is rarer than one
// kept, and the ranking is the in-memory index's over the kept words alone.
// A bound above what the query's lists hold changes nothing.
TEST_F(StoredWordIndexTest, APostingBoundReadsTheMostSelectiveWords) {
  WordIndex oracle(vocabulary_);
  StoredWordIndex stored(*store_, vocabulary_);
  stored.SetWriter(store_.get());
  stored.set_segment_images(40);
  AddImages(1, 150, 1000, &oracle, &stored);
  stored.Remove({7, 8});  // dead postings are still read: they still count
  const uint64_t hash = Commit(&stored);
  auto loaded = StoredWordIndex::Load(*store_, codebook_, hash);
  ASSERT_NE(loaded, nullptr);
  const std::map<uint32_t, uint64_t> sizes = ListSizes(oracle);
  oracle.Remove({7, 8});
  for (uint64_t seed = 1001; seed <= 1010; ++seed) {
    const std::vector<WordSignature> query = Image(seed, 120);
    uint64_t all = 0;
    EXPECT_EQ(loaded->WordsRead(query, 0, &all).size(), query.size());
    EXPECT_EQ(all, QueryPostings(query, sizes));
    // Unbounded and bounded above the total: the same floats.
    const auto full = loaded->Search(query, 20);
    EXPECT_EQ(loaded->Search(query, 20, static_cast<int64_t>(all)), full);
    // Half of them.
    const int64_t bound = static_cast<int64_t>(all / 2);
    uint64_t read = 0;
    const std::vector<size_t> kept = loaded->WordsRead(query, bound, &read);
    ASSERT_FALSE(kept.empty());
    ASSERT_LT(kept.size(), query.size());
    EXPECT_LE(read, static_cast<uint64_t>(bound));
    std::vector<WordSignature> kept_words;
    uint64_t most_kept = 0;
    for (size_t i : kept) {
      kept_words.push_back(query[i]);
      most_kept = std::max(most_kept, sizes.at(query[i].word));
    }
    EXPECT_EQ(read, QueryPostings(kept_words, sizes));
    for (size_t i = 0, k = 0; i < query.size(); ++i) {
      if (k < kept.size() && kept[k] == i) {
        ++k;
        continue;
      }
      EXPECT_GE(sizes.count(query[i].word) ? sizes.at(query[i].word) : 0, most_kept)
          << "a skipped word is rarer than a kept one";
    }
    // Scored over the kept words: the in-memory index's ranking of them
    // (scores differ by the query-size factor only).
    const auto bounded = loaded->Search(query, 20, bound);
    const auto expected = oracle.Search(kept_words, 20);
    ASSERT_EQ(bounded.size(), expected.size());
    const float scale = std::sqrt(static_cast<float>(kept_words.size()) / query.size());
    for (size_t r = 0; r < bounded.size(); ++r) {
      EXPECT_EQ(bounded[r].first, expected[r].first) << "rank " << r;
      EXPECT_NEAR(bounded[r].second, expected[r].second * scale, 1e-5f) << "rank " << r;
    }
  }
}

// A table written before the per-word counts (format 1) is read and searched
// whole (no bound can apply); the next writer's commit counts the lists
// again, and the bound works from then on.
TEST_F(StoredWordIndexTest, AnOlderTableIsSearchedWholeAndRecountedByTheNextCommit) {
  WordIndex oracle(vocabulary_);
  StoredWordIndex stored(*store_, vocabulary_);
  AddImages(1, 60, 1000, &oracle, &stored);
  stored.SetWriter(store_.get());
  WordIndexCommit c = stored.Commit();
  // The same table in format 1: no word count section.
  std::string old;
  encoding::PutFixed32(&old, 1);
  encoding::Reader r(c.table, "table");
  r.Fixed32();
  const uint32_t segments = r.Fixed32();
  encoding::PutFixed32(&old, segments);
  for (uint32_t i = 0; i < segments; ++i) encoding::PutFixed32(&old, r.Fixed32());
  const uint32_t words = r.Fixed32();
  r.Raw(size_t{words} * 4);
  const size_t rest = r.remaining();
  old += std::string(r.Raw(rest), rest);
  c.table = old;
  store_->PutSearchIndex("blob", &c);
  auto loaded =
      StoredWordIndex::Load(*store_, codebook_, Hash64(HashKind::kXxh3_64, old.data(), old.size()));
  ASSERT_NE(loaded, nullptr);
  EXPECT_TRUE(loaded->needs_rewrite());
  ExpectSame(oracle, *loaded, 1);
  const std::vector<WordSignature> query = Image(1005);
  EXPECT_EQ(loaded->WordsRead(query, 1).size(), query.size()) << "no counts: every word is read";
  const uint64_t hash = Commit(loaded.get());
  auto recounted = StoredWordIndex::Load(*store_, codebook_, hash);
  ASSERT_NE(recounted, nullptr);
  EXPECT_FALSE(recounted->needs_rewrite());
  ExpectSame(oracle, *recounted, 2);
  uint64_t all = 0;
  recounted->WordsRead(query, 0, &all);
  EXPECT_EQ(all, QueryPostings(query, ListSizes(oracle)));
  EXPECT_LT(recounted->WordsRead(query, static_cast<int64_t>(all / 2)).size(), query.size());
}

}  // namespace
}  // namespace lookalike
