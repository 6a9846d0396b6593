// VectorIndex: the exact kind against a brute-force oracle, the approximate
// kind's recall on clustered data, add/remove, range search, the serialized
// form (round trip, corruption detected), merging shards and options.
#include "search/vector_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include "util/threads.h"

namespace lookalike {
namespace {

void Normalize(float* v, int64_t d) {
  double s = 0;
  for (int64_t j = 0; j < d; ++j) s += double{v[j]} * v[j];
  for (int64_t j = 0; j < d; ++j) v[j] = static_cast<float>(v[j] / std::sqrt(s));
}

// n unit vectors around `clusters` centres (spread relative to the centres).
std::vector<float> Clustered(int64_t n, int64_t d, int clusters, float spread, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> centres(clusters * d), out(n * d);
  for (float& c : centres) c = g(rng);
  std::uniform_int_distribution<int> pick(0, clusters - 1);
  for (int64_t i = 0; i < n; ++i) {
    const float* c = &centres[pick(rng) * d];
    for (int64_t j = 0; j < d; ++j) out[i * d + j] = c[j] + spread * g(rng);
    Normalize(&out[i * d], d);
  }
  return out;
}

std::vector<int64_t> Ids(int64_t n, int64_t first = 1) {
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = first + 3 * i;  // sparse, like image ids
  return ids;
}

// Brute-force top k by inner product in double: (score, id), best first.
std::vector<std::pair<double, int64_t>> Oracle(const std::vector<float>& db,
                                               const std::vector<int64_t>& ids, int64_t d,
                                               const float* q, int64_t k) {
  std::vector<std::pair<double, int64_t>> all;
  for (size_t i = 0; i < ids.size(); ++i) {
    double s = 0;
    for (int64_t j = 0; j < d; ++j) s += double{db[i * d + j]} * q[j];
    all.emplace_back(s, ids[i]);
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  all.resize(std::min<size_t>(all.size(), k));
  return all;
}

VectorIndexOptions Kind(VectorIndexKind kind) {
  VectorIndexOptions o;
  o.kind = kind;
  return o;
}

TEST(VectorIndexTest, FlatReturnsTheTrueNeighbours) {
  const int64_t n = 700, d = 37, k = 10;  // awkward sizes
  const auto db = Clustered(n, d, 20, 1.0f, 1);
  const auto ids = Ids(n);
  auto index = VectorIndex::Build(d, Kind(VectorIndexKind::kFlat), ids.data(), db.data(), n);
  EXPECT_EQ(index->kind(), VectorIndexKind::kFlat);
  EXPECT_EQ(index->ntotal(), n);
  EXPECT_EQ(index->dim(), d);
  const auto queries = Clustered(25, d, 20, 1.0f, 2);
  std::vector<float> scores(25 * k);
  std::vector<int64_t> got(25 * k);
  index->Search(queries.data(), 25, k, scores.data(), got.data());
  for (int64_t q = 0; q < 25; ++q) {
    const auto truth = Oracle(db, ids, d, &queries[q * d], k);
    for (int64_t r = 0; r < k; ++r) {
      EXPECT_NEAR(scores[q * k + r], truth[r].first, 1e-5) << "query " << q << " rank " << r;
      // Ties aside, the ids are the oracle's.
      if (r + 1 < k && truth[r].first - truth[r + 1].first > 1e-5) {
        EXPECT_EQ(got[q * k + r], truth[r].second) << "query " << q << " rank " << r;
      }
    }
  }
}

TEST(VectorIndexTest, FewerVectorsThanKArePadded) {
  const int64_t d = 8;
  const auto db = Clustered(3, d, 2, 0.5f, 3);
  const auto ids = Ids(3);
  for (VectorIndexKind kind : {VectorIndexKind::kFlat, VectorIndexKind::kIvfSq}) {
    auto index = VectorIndex::Build(d, Kind(kind), ids.data(), db.data(), 3);
    std::vector<float> s(5);
    std::vector<int64_t> l(5);
    index->Search(db.data(), 1, 5, s.data(), l.data());
    EXPECT_EQ(l[0], ids[0]) << VectorIndexKindName(kind);
    EXPECT_EQ(l[3], -1);
    EXPECT_EQ(l[4], -1);
    EXPECT_TRUE(std::isinf(s[4]) && s[4] < 0);
  }
  auto empty = VectorIndex::Create(d, Kind(VectorIndexKind::kFlat));
  std::vector<float> s(2);
  std::vector<int64_t> l(2);
  empty->Search(db.data(), 1, 2, s.data(), l.data());
  EXPECT_EQ(l[0], -1);
}

TEST(VectorIndexTest, ApproximateKindRecallOnClusteredData) {
  const int64_t n = 20000, d = 48, k = 10, nq = 200;
  const auto db = Clustered(n, d, 200, 0.5f, 4);
  const auto ids = Ids(n);
  VectorIndexOptions o = Kind(VectorIndexKind::kIvfSq);
  o.nprobe = 16;
  auto index = VectorIndex::Build(d, o, ids.data(), db.data(), n);
  EXPECT_EQ(index->kind(), VectorIndexKind::kIvfSq);
  EXPECT_EQ(index->nlist(), AutoNlist(n));
  EXPECT_EQ(index->code_bytes(), d);  // 8 bits per dimension fit 128 bytes
  // At most ~d + 8 bytes per vector plus the coarse centroids.
  EXPECT_LT(index->MemoryBytes(),
            n * (d + 8) + index->nlist() * d * 4 + index->nlist() * 64 + 4096);
  // Queries: perturbed database vectors.
  std::mt19937_64 rng(5);
  std::normal_distribution<float> g;
  std::vector<float> queries(nq * d);
  for (int64_t q = 0; q < nq; ++q) {
    for (int64_t j = 0; j < d; ++j) queries[q * d + j] = db[(q * 97) * d + j] + 0.05f * g(rng);
    Normalize(&queries[q * d], d);
  }
  std::vector<float> s(nq * k);
  std::vector<int64_t> l(nq * k);
  index->Search(queries.data(), nq, k, s.data(), l.data());
  int64_t hits = 0;
  for (int64_t q = 0; q < nq; ++q) {
    const auto truth = Oracle(db, ids, d, &queries[q * d], k);
    std::set<int64_t> want;
    for (const auto& t : truth) want.insert(t.second);
    for (int64_t r = 0; r < k; ++r) hits += want.count(l[q * k + r]);
    // Scores estimated from 8-bit residual codes are close to the truth.
    EXPECT_NEAR(s[q * k], truth[0].first, 0.02);
  }
  const double recall = static_cast<double>(hits) / (nq * k);
  EXPECT_GE(recall, 0.9) << "recall@10 of ivfsq at nprobe 16";
  // Fewer probes cannot find more.
  index->set_nprobe(1);
  index->Search(queries.data(), nq, k, s.data(), l.data());
  int64_t hits1 = 0;
  for (int64_t q = 0; q < nq; ++q) {
    const auto truth = Oracle(db, ids, d, &queries[q * d], k);
    for (int64_t r = 0; r < k; ++r)
      for (const auto& t : truth) hits1 += t.second == l[q * k + r];
  }
  EXPECT_LE(hits1, hits);
}

// A query's lists split among threads give what one thread scanning them
// all gives: the same ids in the same order with the same scores, also
// among duplicated vectors (ties), one query at a time or many.
TEST(VectorIndexTest, ParallelOverListsSearchesAsOverQueries) {
  const int64_t n = 20000, d = 48, k = 50, nq = 40;
  auto db = Clustered(n, d, 200, 0.5f, 6);
  for (int64_t i = 0; i < 2000; ++i)  // every tenth vector repeats the one before
    std::copy_n(&db[(10 * i) * d], d, &db[(10 * i + 1) * d]);
  const auto ids = Ids(n);
  VectorIndexOptions o = Kind(VectorIndexKind::kIvfSq);
  o.nprobe = 48;
  auto index = VectorIndex::Build(d, o, ids.data(), db.data(), n);
  std::vector<float> queries(db.begin(), db.begin() + nq * d);
  const ScopedOmpThreads threads(4);
  auto search = [&](bool over_lists, bool one_at_a_time) {
    index->set_parallel_over_lists(over_lists);
    std::vector<float> s(nq * k);
    std::vector<int64_t> l(nq * k);
    if (one_at_a_time) {
      for (int64_t q = 0; q < nq; ++q) index->Search(&queries[q * d], 1, k, &s[q * k], &l[q * k]);
    } else {
      index->Search(queries.data(), nq, k, s.data(), l.data());
    }
    return std::make_pair(s, l);
  };
  const auto by_queries = search(false, false);
  EXPECT_EQ(search(false, true), by_queries);
  EXPECT_EQ(search(true, true), by_queries);
  EXPECT_EQ(search(true, false), by_queries);
  // The duplicates tie and both are found.
  EXPECT_EQ(by_queries.first[0], by_queries.first[1]);
  EXPECT_EQ(std::set<int64_t>({by_queries.second[0], by_queries.second[1]}),
            std::set<int64_t>({ids[0], ids[1]}));
}

TEST(VectorIndexTest, AddAndRemove) {
  const int64_t n = 600, d = 24;
  const auto db = Clustered(n, d, 10, 0.5f, 6);
  const auto ids = Ids(n);
  for (VectorIndexKind kind : {VectorIndexKind::kFlat, VectorIndexKind::kIvfSq}) {
    SCOPED_TRACE(VectorIndexKindName(kind));
    // Build on the first half, add the second.
    auto index = VectorIndex::Build(d, Kind(kind), ids.data(), db.data(), n / 2);
    index->Add(ids.data() + n / 2, db.data() + (n / 2) * d, n - n / 2);
    EXPECT_EQ(index->ntotal(), n);
    if (kind == VectorIndexKind::kIvfSq) index->set_nprobe(index->nlist());
    std::vector<float> s(1);
    std::vector<int64_t> l(1);
    for (int64_t i = 0; i < n; i += 37) {
      index->Search(&db[i * d], 1, 1, s.data(), l.data());
      EXPECT_EQ(l[0], ids[i]) << "vector " << i << " finds itself";
    }
    // Remove every other vector (and an id that was never added).
    std::vector<int64_t> gone;
    for (int64_t i = 0; i < n; i += 2) gone.push_back(ids[i]);
    gone.push_back(999999);
    EXPECT_EQ(index->Remove(gone), n / 2);
    EXPECT_EQ(index->ntotal(), n - n / 2);
    const std::set<int64_t> removed(gone.begin(), gone.end());
    std::vector<float> s10(10);
    std::vector<int64_t> l10(10);
    for (int64_t i = 0; i < n; i += 7) {
      index->Search(&db[i * d], 1, 10, s10.data(), l10.data());
      for (int64_t id : l10) EXPECT_EQ(removed.count(id), 0u) << "removed id " << id << " returned";
      if (i % 2 == 1) {
        EXPECT_EQ(l10[0], ids[i]);
      }
    }
    EXPECT_EQ(index->Remove({}), 0);
    // Export lists exactly the remaining ids.
    std::vector<int64_t> exported;
    std::vector<float> vectors;
    index->Export(&exported, &vectors);
    std::sort(exported.begin(), exported.end());
    std::vector<int64_t> want;
    for (int64_t i = 1; i < n; i += 2) want.push_back(ids[i]);
    EXPECT_EQ(exported, want);
    ASSERT_EQ(vectors.size(), exported.size() * d);
  }
  auto untrained = VectorIndex::Create(d, Kind(VectorIndexKind::kIvfSq));
  EXPECT_THROW(untrained->Add(ids.data(), db.data(), 1), std::logic_error);
}

TEST(VectorIndexTest, RangeSearchMatchesTheOracle) {
  const int64_t n = 400, d = 16;
  const auto db = Clustered(n, d, 8, 0.4f, 7);
  const auto ids = Ids(n);
  auto index = VectorIndex::Build(d, Kind(VectorIndexKind::kFlat), ids.data(), db.data(), n);
  const float threshold = 0.8f;
  const auto result = index->RangeSearch(db.data(), 5, threshold, 1000);
  ASSERT_EQ(result.size(), 5u);
  for (int64_t q = 0; q < 5; ++q) {
    const auto all = Oracle(db, ids, d, &db[q * d], n);
    size_t expected = 0;
    for (const auto& t : all) expected += t.first >= threshold + 1e-5;
    EXPECT_GE(result[q].size(), expected);
    EXPECT_EQ(result[q][0].id, ids[q]);
    for (size_t i = 0; i < result[q].size(); ++i) {
      EXPECT_GE(result[q][i].score, threshold);
      if (i) {
        EXPECT_GE(result[q][i - 1].score, result[q][i].score);
      }
    }
  }
  EXPECT_EQ(index->RangeSearch(db.data(), 1, threshold, 2)[0].size(), 2u);
  // The approximate kind finds the vector itself at a high threshold.
  auto approx = VectorIndex::Build(d, Kind(VectorIndexKind::kIvfSq), ids.data(), db.data(), n);
  approx->set_nprobe(approx->nlist());
  const auto near = approx->RangeSearch(db.data(), 3, 0.99f, 10);
  for (int q = 0; q < 3; ++q) {
    ASSERT_FALSE(near[q].empty());
    EXPECT_EQ(near[q][0].id, ids[q]);
  }
}

// What dedup relies on: a flat index filled from a stream (Reserve, then
// Adds in chunks) answers range searches exactly as one built at once, equal
// scores in id order, and holds no more than the room reserved.
TEST(VectorIndexTest, ReservedStreamMatchesBuildAndBreaksTiesById) {
  const int64_t n = 300, d = 24;
  auto db = Clustered(n, d, 6, 0.5f, 11);
  // Every tenth vector repeats the one before: exact ties.
  for (int64_t i = 10; i < n; i += 10) std::copy(&db[(i - 1) * d], &db[i * d], &db[i * d]);
  std::vector<int64_t> rows(n);
  for (int64_t i = 0; i < n; ++i) rows[i] = i;
  auto built = VectorIndex::Build(d, Kind(VectorIndexKind::kFlat), rows.data(), db.data(), n);
  auto streamed = VectorIndex::Create(d, Kind(VectorIndexKind::kFlat));
  streamed->Reserve(n + 4);
  const int64_t reserved_bytes = streamed->MemoryBytes();
  EXPECT_GE(reserved_bytes, (n + 4) * (4 * d + 8));
  for (int64_t i = 0; i < n; i += 37) {
    const int64_t m = std::min<int64_t>(37, n - i);
    streamed->Add(rows.data() + i, db.data() + i * d, m);
  }
  EXPECT_EQ(streamed->ntotal(), n);
  EXPECT_EQ(streamed->MemoryBytes(), reserved_bytes) << "an Add reallocated";
  const auto a = built->RangeSearch(db.data(), n, 0.2f, 6);
  const auto b = streamed->RangeSearch(db.data(), n, 0.2f, 6);
  int64_t ties = 0;
  for (int64_t q = 0; q < n; ++q) {
    ASSERT_EQ(a[q].size(), b[q].size()) << q;
    for (size_t i = 0; i < a[q].size(); ++i) {
      EXPECT_EQ(a[q][i].id, b[q][i].id);
      EXPECT_EQ(a[q][i].score, b[q][i].score);
      if (i && a[q][i].score == a[q][i - 1].score) {
        EXPECT_LT(a[q][i - 1].id, a[q][i].id);
        ++ties;
      }
    }
  }
  EXPECT_GT(ties, 0) << "the data must contain ties";
}

TEST(VectorIndexTest, SerializeRoundTripAndCorruption) {
  const int64_t n = 900, d = 20, k = 5;
  const auto db = Clustered(n, d, 12, 0.5f, 8);
  const auto ids = Ids(n);
  for (VectorIndexKind kind : {VectorIndexKind::kFlat, VectorIndexKind::kIvfSq}) {
    SCOPED_TRACE(VectorIndexKindName(kind));
    VectorIndexOptions o = Kind(kind);
    o.nprobe = 3;
    auto index = VectorIndex::Build(d, o, ids.data(), db.data(), n);
    const std::string blob = index->Serialize();
    auto back = VectorIndex::Deserialize(blob);
    EXPECT_EQ(back->kind(), kind);
    EXPECT_EQ(back->ntotal(), n);
    EXPECT_EQ(back->dim(), d);
    EXPECT_EQ(back->nprobe(), index->nprobe());
    EXPECT_EQ(back->Describe(), index->Describe());
    std::vector<float> s1(50 * k), s2(50 * k);
    std::vector<int64_t> l1(50 * k), l2(50 * k);
    index->Search(db.data(), 50, k, s1.data(), l1.data());
    back->Search(db.data(), 50, k, s2.data(), l2.data());
    EXPECT_EQ(l1, l2);
    EXPECT_EQ(s1, s2);
    EXPECT_EQ(back->Serialize(), blob);

    for (size_t at : {size_t{0}, size_t{9}, blob.size() / 2, blob.size() - 1}) {
      std::string bad = blob;
      bad[at] ^= 0x20;
      EXPECT_THROW(VectorIndex::Deserialize(bad), std::runtime_error) << "flipped byte " << at;
    }
    EXPECT_THROW(VectorIndex::Deserialize(blob.substr(0, blob.size() - 100)), std::runtime_error);
    EXPECT_THROW(VectorIndex::Deserialize(std::string()), std::runtime_error);
    EXPECT_THROW(VectorIndex::Deserialize(std::string(4000, 'x')), std::runtime_error);
  }
}

// With the model's quantizer, Build starts from a copy of it (nothing is
// trained on the collection): its lists join with another copy's, and it
// holds what Add-ing the vectors to a copy gives.
TEST(VectorIndexTest, BuildFillsTheModelsQuantizer) {
  const int64_t n = 1203, d = 24, k = 5, nq = 40;
  const auto db = Clustered(n, d, 20, 0.6f, 5);
  const auto ids = Ids(n);
  VectorIndexOptions o;
  o.nlist = 16;
  auto trained = VectorIndex::Train(d, o, db.data(), 400);
  VectorIndexOptions with = Kind(VectorIndexKind::kIvfSq);
  with.model_quantizer = std::make_shared<const std::string>(trained->Serialize());
  auto built = VectorIndex::Build(d, with, ids.data(), db.data(), 600);
  EXPECT_EQ(built->nlist(), 16);
  EXPECT_EQ(built->nprobe(), AutoNprobe(600, 16));
  auto rest = VectorIndex::Deserialize(*with.model_quantizer);
  rest->Add(ids.data() + 600, db.data() + 600 * d, n - 600);
  built->MergeFrom({rest.get()});  // refused unless both are copies of `trained`
  trained->Add(ids.data(), db.data(), n);
  trained->set_nprobe(built->nprobe());
  std::vector<float> s1(nq * k), s2(nq * k);
  std::vector<int64_t> l1(nq * k), l2(nq * k);
  trained->Search(db.data(), nq, k, s1.data(), l1.data());
  built->Search(db.data(), nq, k, s2.data(), l2.data());
  EXPECT_EQ(l1, l2);
  EXPECT_EQ(s1, s2);
  // Without it, Build trains its own lists, which do not join.
  VectorIndexOptions alone = Kind(VectorIndexKind::kIvfSq);
  alone.nlist = 16;
  auto own = VectorIndex::Build(d, alone, ids.data(), db.data(), 600);
  EXPECT_THROW(own->MergeFrom({VectorIndex::Deserialize(*with.model_quantizer).get()}),
               std::invalid_argument);
  // A quantizer of other vectors is refused.
  EXPECT_THROW(VectorIndex::Build(d + 1, with, ids.data(), db.data(), 10), std::invalid_argument);
}

// A sharded build: shards fill copies of one trained index and MergeFrom
// joins them into the index Add-ing every vector to one copy gives.
TEST(VectorIndexTest, MergedShardsSearchLikeOneIndex) {
  const int64_t n = 3001, d = 24, k = 7, nq = 60;
  const auto db = Clustered(n, d, 30, 0.6f, 21);
  const auto ids = Ids(n);
  VectorIndexOptions o;
  o.nlist = 32;
  o.nprobe = 9;
  const std::string trained = VectorIndex::Train(d, o, db.data(), 800)->Serialize();
  auto whole = VectorIndex::Deserialize(trained);
  EXPECT_EQ(whole->ntotal(), 0);
  EXPECT_EQ(whole->nlist(), 32);
  whole->Add(ids.data(), db.data(), n);

  // Shards of awkward sizes, one of them empty.
  const std::vector<int64_t> cuts = {0, 1000, 1000, 2333, n};
  std::vector<std::unique_ptr<VectorIndex>> shards;
  std::vector<VectorIndex*> raw;
  for (size_t s = 0; s + 1 < cuts.size(); ++s) {
    shards.push_back(VectorIndex::Deserialize(trained));
    shards.back()->Add(ids.data() + cuts[s], db.data() + cuts[s] * d, cuts[s + 1] - cuts[s]);
    raw.push_back(shards.back().get());
  }
  auto merged = std::move(shards[0]);
  raw.erase(raw.begin());
  merged->MergeFrom(raw);
  EXPECT_EQ(merged->ntotal(), n);
  for (VectorIndex* shard : raw) EXPECT_EQ(shard->ntotal(), 0);
  EXPECT_EQ(merged->Describe(), whole->Describe());

  std::vector<float> s1(nq * k), s2(nq * k);
  std::vector<int64_t> l1(nq * k), l2(nq * k);
  whole->Search(db.data(), nq, k, s1.data(), l1.data());
  merged->Search(db.data(), nq, k, s2.data(), l2.data());
  // Shards in id order append to each list in the order Add fills it: the
  // same lists, so the same results, ties included.
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(l1, l2);
  std::vector<int64_t> eids, mids;
  std::vector<float> ev, mv;
  whole->Export(&eids, &ev);
  merged->Export(&mids, &mv);
  std::sort(eids.begin(), eids.end());
  std::sort(mids.begin(), mids.end());
  EXPECT_EQ(eids, mids);

  // Separately trained, flat, itself or listed twice: refused, nothing changed.
  VectorIndexOptions other = o;
  other.seed = 99;
  auto stranger = VectorIndex::Train(d, other, db.data() + 800 * d, 800);
  stranger->Add(ids.data(), db.data(), 10);
  EXPECT_THROW(merged->MergeFrom({stranger.get()}), std::invalid_argument);
  auto flat = VectorIndex::Create(d, Kind(VectorIndexKind::kFlat));
  EXPECT_THROW(merged->MergeFrom({flat.get()}), std::invalid_argument);
  EXPECT_THROW(flat->MergeFrom({merged.get()}), std::invalid_argument);
  EXPECT_THROW(merged->MergeFrom({merged.get()}), std::invalid_argument);
  auto copy = VectorIndex::Deserialize(trained);
  EXPECT_THROW(merged->MergeFrom({copy.get(), copy.get()}), std::invalid_argument);
  EXPECT_THROW(merged->MergeFrom({copy.get()}, {1, 2}), std::invalid_argument);
  EXPECT_THROW(merged->MergeFrom({copy.get()}, {-1}), std::invalid_argument);
  EXPECT_EQ(merged->ntotal(), n);
  EXPECT_EQ(stranger->ntotal(), 10);
  EXPECT_THROW(VectorIndex::Train(d, Kind(VectorIndexKind::kFlat), db.data(), 800),
               std::invalid_argument);

  // Shard-local ids moved into the merged id space by an offset per shard.
  const int64_t offset = 1000000;
  copy->Add(ids.data(), db.data(), 5);
  merged->MergeFrom({copy.get()}, {offset});
  EXPECT_EQ(merged->ntotal(), n + 5);
  std::vector<float> top(k);
  std::vector<int64_t> top_ids(k);
  merged->Search(db.data() + 2 * d, 1, k, top.data(), top_ids.data());
  EXPECT_NE(std::find(top_ids.begin(), top_ids.end(), ids[2] + offset), top_ids.end());
  EXPECT_NE(std::find(top_ids.begin(), top_ids.end(), ids[2]), top_ids.end());
}

TEST(VectorIndexTest, OptionsAndKinds) {
  VectorIndexOptions o;
  EXPECT_NO_THROW(o.Validate());
  EXPECT_EQ(VectorIndex::ResolveKind(o, o.auto_threshold - 1, 256), VectorIndexKind::kFlat);
  EXPECT_EQ(VectorIndex::ResolveKind(o, o.auto_threshold, 256), VectorIndexKind::kIvfSq);
  // Full VLAD (no PCA) stays exact: the stored vectors are the index.
  EXPECT_EQ(VectorIndex::ResolveKind(o, 1 << 30, 65536), VectorIndexKind::kFlat);
  o.kind = VectorIndexKind::kFlat;
  EXPECT_EQ(VectorIndex::ResolveKind(o, 1 << 30, 256), VectorIndexKind::kFlat);
  o.kind = VectorIndexKind::kIvfSq;
  EXPECT_EQ(VectorIndex::ResolveKind(o, 10, 65536), VectorIndexKind::kIvfSq);
  for (const char* name : {"auto", "flat", "ivfsq"})
    EXPECT_STREQ(VectorIndexKindName(ParseVectorIndexKind(name)), name);
  EXPECT_THROW(ParseVectorIndexKind("hnsw"), std::invalid_argument);
  auto bad = [](auto change) {
    VectorIndexOptions b;
    change(&b);
    EXPECT_THROW(b.Validate(), std::invalid_argument);
  };
  bad([](VectorIndexOptions* b) { b->auto_threshold = 0; });
  bad([](VectorIndexOptions* b) { b->nlist = -1; });
  bad([](VectorIndexOptions* b) {
    b->nlist = 16;
    b->nprobe = 17;
  });
  bad([](VectorIndexOptions* b) { b->max_bytes_per_vector = 8; });
  bad([](VectorIndexOptions* b) { b->max_train_vectors = -1; });
  EXPECT_THROW(VectorIndex::Create(0, Kind(VectorIndexKind::kFlat)), std::invalid_argument);
  EXPECT_THROW(VectorIndex::Create(8, VectorIndexOptions()), std::invalid_argument);  // auto
  // Code size follows the byte budget: 8, 6 then 4 bits per dimension.
  const auto db = Clustered(200, 240, 4, 0.5f, 9);
  const auto ids = Ids(200);
  for (auto [budget, bytes] : {std::pair<int64_t, int64_t>{256, 240}, {188, 180}, {128, 120}}) {
    VectorIndexOptions b = Kind(VectorIndexKind::kIvfSq);
    b.max_bytes_per_vector = budget;
    EXPECT_EQ(VectorIndex::Build(240, b, ids.data(), db.data(), 200)->code_bytes(), bytes)
        << "budget " << budget;
  }
  EXPECT_EQ(AutoNprobe(1000000, 2048), 615);  // 30 % of the lists
  EXPECT_EQ(AutoNprobe(100000, 512), 154);
  EXPECT_EQ(AutoNprobe(20000, 256), 102);
  EXPECT_EQ(AutoNprobe(100, 4), 4);
  EXPECT_EQ(AutoNlist(1000000), 2048);
  EXPECT_EQ(AutoNlist(20000), 256);
  EXPECT_EQ(AutoNlist(20), 2);
  EXPECT_EQ(AutoNlist(1), 1);
  EXPECT_EQ(AutoNlist(int64_t{1} << 40), 4096);
}

}  // namespace
}  // namespace lookalike
