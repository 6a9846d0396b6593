// Tests of the searcher over a generated index: self-retrieval, k, ordering,
// zero-vector images, bad queries, query expansion, and searching while a
// writer holds the database.
#include "search/searcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <set>
#include <string>
#include <vector>

#include "indexer/file_walker.h"
#include "indexer/pipeline.h"
#include "indexer/search_vectors.h"
#include "search/colour_index.h"
#include "search/ranking.h"
#include "search/search_index.h"
#include "search/tiny_index.h"
#include "storage/store.h"
#include "tests/indexer/small_index_options.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr int kImages = 12;

class SearcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    paths_ = testing::WriteSyntheticSet(dir(), kImages, 1, 320, 240);
    flat_ = AbsolutePath(dir() + "/flat.png");
    testing::WriteImage(flat_, cv::Mat(240, 320, CV_8UC3, cv::Scalar(10, 200, 30)));
    const IndexSummary s = BuildIndex(testing::SmallIndexOptions(dir(), db()), nullptr);
    ASSERT_EQ(s.indexed, kImages + 1);
    ASSERT_EQ(s.no_features, 1);
  }
  std::unique_ptr<Searcher> Open(int k, int rerank = 0,
                                 float colour_weight = SearchOptions().fusion.colour_weight,
                                 float word_weight = SearchOptions().fusion.word_weight) {
    SearchOptions o;
    o.index.min_word_images = 0;   // these few images keep a word index
    o.fusion.word_min_images = 0;  // and fuse its similarity
    o.k = k;
    o.rerank.depth = rerank;
    o.fusion.colour_weight = colour_weight;
    o.fusion.word_weight = word_weight;
    o.backend = Backend::kCpu;
    return Searcher::Open(db(), o);
  }
  // A copy of paths_[6] too small and blurred to verify: a crop of a third
  // of the picture, 64 px wide, JPEG quality 15. Its path; empty if it could
  // not be written.
  std::string WriteTinyCopyOfImage6() const {
    const cv::Mat original = testing::MakeSyntheticImage(1 + 6, 320, 240);
    cv::Mat small, blurred;
    cv::resize(original(cv::Rect(64, 48, 192, 144)), small, cv::Size(64, 48), 0, 0, cv::INTER_AREA);
    cv::GaussianBlur(small, blurred, cv::Size(0, 0), 1.2);
    const std::string copy = tmp_ / "tiny.jpg";
    return cv::imwrite(copy, blurred, {cv::IMWRITE_JPEG_QUALITY, 15}) ? copy : std::string();
  }
  std::string dir() const { return tmp_ / "photos"; }
  std::string db() const { return tmp_ / "db"; }

  TempDir tmp_;
  std::vector<std::string> paths_;
  std::string flat_;
};

// A query's ranking is prepared beside its word lists on a thread of its
// own, or on the calling thread with one thread: the same hits either way,
// and the same as with all cores.
TEST_F(SearcherTest, OneThreadRanksAsSeveralDo) {
  std::vector<std::vector<QueryResult>> runs;
  for (int threads : {1, 2, 0}) {
    SearchOptions o;
    o.index.min_word_images = 0;
    o.fusion.word_min_images = 0;  // and fuse its similarity
    o.k = 6;
    o.rerank.depth = 6;
    o.threads = threads;
    o.backend = Backend::kCpu;
    runs.push_back(Searcher::Open(db(), o)->SearchFiles(paths_));
  }
  for (size_t r = 1; r < runs.size(); ++r) {
    ASSERT_EQ(runs[r].size(), runs[0].size());
    for (size_t q = 0; q < runs[0].size(); ++q) {
      ASSERT_EQ(runs[r][q].hits.size(), runs[0][q].hits.size()) << runs[0][q].query;
      for (size_t i = 0; i < runs[0][q].hits.size(); ++i) {
        EXPECT_EQ(runs[r][q].hits[i].id, runs[0][q].hits[i].id) << runs[0][q].query;
        EXPECT_EQ(runs[r][q].hits[i].score, runs[0][q].hits[i].score) << runs[0][q].query;
        EXPECT_EQ(runs[r][q].hits[i].inliers, runs[0][q].hits[i].inliers) << runs[0][q].query;
      }
    }
  }
  EXPECT_GE(runs[0][0].hits.at(0).inliers, SearchOptions().rerank.min_inliers);  // verification ran
}

// A search that leaves the colour and tiny-image tables in the store (what
// `lookalike search` of one image does) finds the same colour and thumbnail
// candidates, and ranks exactly as one that holds them.
TEST_F(SearcherTest, TablesReadPerQueryRankAsTablesHeld) {
  {
    auto store = Store::Open(db(), Store::Mode::kReadWrite);
    UpdateSearchIndex(store.get(), SearchVectors(*store), VectorIndexOptions());
  }
  {
    auto store = Store::Open(db(), Store::Mode::kReadOnly);
    const SearchVectors vectors(*store);
    const SearchIndexSync lean = SyncSearchIndex(*store, vectors, VectorIndexOptions(), false);
    ASSERT_TRUE(lean.loaded);
    ASSERT_TRUE(lean.tables_stored);
    EXPECT_EQ(lean.colours.rows(), 0);
    EXPECT_EQ(lean.tiny.rows(), 0);
    const SearchIndexSync held = SyncSearchIndex(*store, vectors, VectorIndexOptions(), true);
    EXPECT_FALSE(held.tables_stored);
    ASSERT_EQ(held.colours.rows(), kImages);
    ASSERT_EQ(held.tiny.rows(), kImages);
    std::vector<uint64_t> ids;
    for (const IndexedImage& m : held.manifest) ids.push_back(m.id);
    for (int64_t r = 0; r < held.tiny.rows(); ++r) {
      const auto record = store->FindById(ids[r]);
      ASSERT_TRUE(record.has_value());
      const ColourIndex::Query colour = ColourIndex::Prepare(record->colour);
      const TinyIndex::Row tiny = held.tiny.RowAt(r);
      for (int n : {1, 5, kImages}) {
        const TableQuery query{colour, n, tiny, n};
        const StoredCandidates c = SearchStoredTables(*store, ids, held.generation, query);
        // The same scan made as the index loads, for the first query.
        const SearchIndexSync first =
            SyncSearchIndex(*store, vectors, VectorIndexOptions(), false, &query);
        ASSERT_TRUE(first.first_candidates.has_value());
        EXPECT_EQ(first.first_candidates->by_colour, c.by_colour);
        EXPECT_EQ(first.first_candidates->by_thumbnail, c.by_thumbnail);
        EXPECT_EQ(c.by_colour, held.colours.Search(colour, n)) << record->path;
        EXPECT_EQ(c.by_thumbnail, held.tiny.Search(tiny, n)) << record->path;
        EXPECT_FALSE(c.by_colour.empty());
      }
    }
    // Read against another generation: refused, not mixed.
    EXPECT_THROW(SearchStoredTables(*store, ids, held.generation + 1, TableQuery{}),
                 std::runtime_error);
  }
  std::vector<std::string> queries = paths_;
  queries.push_back(WriteTinyCopyOfImage6());
  std::vector<std::vector<QueryResult>> runs;
  for (bool in_memory : {true, false}) {
    SearchOptions o;
    o.index.min_word_images = 0;
    o.fusion.word_min_images = 0;  // and fuse its similarity
    o.k = 8;
    o.backend = Backend::kCpu;
    o.tables_in_memory = in_memory;
    runs.push_back(Searcher::Open(db(), o)->SearchFiles(queries));
  }
  for (size_t q = 0; q < queries.size(); ++q) {
    ASSERT_EQ(runs[1][q].hits.size(), runs[0][q].hits.size()) << queries[q];
    for (size_t i = 0; i < runs[0][q].hits.size(); ++i) {
      const Hit& a = runs[0][q].hits[i];
      const Hit& b = runs[1][q].hits[i];
      EXPECT_EQ(b.id, a.id) << queries[q];
      EXPECT_EQ(b.score, a.score) << queries[q];
      EXPECT_EQ(b.colour, a.colour) << queries[q];
      EXPECT_EQ(b.thumbnail, a.thumbnail) << queries[q];
    }
  }
}

TEST_F(SearcherTest, EachImageFindsItselfFirst) {
  auto searcher = Open(5);
  EXPECT_EQ(searcher->num_indexed(), kImages);
  EXPECT_EQ(searcher->num_zero_vectors(), 1);
  EXPECT_EQ(searcher->backend(), Backend::kCpu);
  EXPECT_EQ(searcher->model().num_clusters, 16u);
  const std::vector<QueryResult> results = searcher->SearchFiles(paths_);
  ASSERT_EQ(results.size(), paths_.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const QueryResult& r = results[i];
    EXPECT_EQ(r.query, paths_[i]);
    EXPECT_FALSE(r.error.has_value()) << r.query;
    ASSERT_EQ(r.hits.size(), 5u) << r.query;
    EXPECT_EQ(r.hits[0].path, AbsolutePath(paths_[i]));
    // A compact database's vectors come from quantised descriptors, the
    // query's from exact ones: an image finds itself just below 1.
    EXPECT_GT(r.hits[0].score, 0.9f) << r.query;
    EXPECT_LT(r.hits[1].score, r.hits[0].score) << "distinct images must not look identical";
    for (size_t j = 1; j < r.hits.size(); ++j)
      EXPECT_GE(r.hits[j - 1].score, r.hits[j].score) << r.query << " rank " << j + 1;
    for (const Hit& h : r.hits) {
      EXPECT_GE(h.score, -1.0001f);
      EXPECT_LE(h.score, 1.0001f);
      EXPECT_NE(h.id, 0u);
      EXPECT_TRUE(fs::exists(h.path)) << "result paths must be openable: " << h.path;
    }
  }
}

TEST_F(SearcherTest, KIsCappedAtIndexSizeAndZeroVectorsNeverReturned) {
  auto searcher = Open(100);
  const std::vector<QueryResult> results = searcher->SearchFiles({paths_[0], paths_[7]});
  for (const QueryResult& r : results) {
    ASSERT_EQ(r.hits.size(), static_cast<size_t>(kImages)) << "k capped at the searchable images";
    std::vector<std::string> seen;
    for (const Hit& h : r.hits) {
      EXPECT_NE(h.path, flat_) << "a zero-vector image was returned";
      seen.push_back(h.path);
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end()) << "duplicate hits";
    EXPECT_TRUE(std::is_sorted(r.hits.begin(), r.hits.end(),
                               [](const Hit& a, const Hit& b) { return a.score > b.score; }));
  }
  EXPECT_EQ(Open(1)->SearchFiles({paths_[2]})[0].hits.size(), 1u);
}

TEST_F(SearcherTest, TransformedCopyFindsOriginal) {
  const std::string copy = tmp_ / "copy.jpg";
  testing::WriteImage(copy, testing::ApplyTransform(testing::MakeSyntheticImage(1 + 4, 320, 240),
                                                    testing::Transform::kBrightness));
  const auto results = Open(3)->SearchFiles({copy});
  ASSERT_EQ(results.size(), 1u);
  ASSERT_FALSE(results[0].hits.empty());
  EXPECT_EQ(results[0].hits[0].path, AbsolutePath(paths_[4]));
}

// A copy too small and blurred to verify (a crop of a third of the picture,
// 64 px wide, JPEG quality 15) still correlates with its original's
// thumbnail: that evidence raises the original's score, and only its.
TEST_F(SearcherTest, ThumbnailCorrelationRaisesATinyCopyTooPoorToVerify) {
  const std::string copy = WriteTinyCopyOfImage6();
  ASSERT_FALSE(copy.empty());
  auto search = [&](float thumbnail_weight) {
    SearchOptions o;
    o.k = kImages;
    o.thumbnail.weight = thumbnail_weight;
    o.backend = Backend::kCpu;
    const auto results = Searcher::Open(db(), o)->SearchFiles({copy});
    EXPECT_EQ(results.size(), 1u);
    return results[0].hits;
  };
  const std::vector<Hit> with = search(SearchOptions().thumbnail.weight), without = search(0);
  ASSERT_FALSE(with.empty());
  EXPECT_EQ(with[0].path, AbsolutePath(paths_[6]));
  EXPECT_GT(with[0].thumbnail, kThumbnailThreshold);
  EXPECT_LT(with[0].inliers, SearchOptions().rerank.min_inliers)
      << "the copy was verifiable after all";
  std::map<uint64_t, float> score_without;
  for (const Hit& h : without) {
    EXPECT_EQ(h.thumbnail, -1.0f) << "correlated with the weight at 0";
    score_without[h.id] = h.score;
  }
  for (const Hit& h : with) {
    if (h.path == AbsolutePath(paths_[6])) {
      EXPECT_GT(h.score, score_without.at(h.id) + 0.05f);
    } else {
      EXPECT_EQ(h.score, score_without.at(h.id)) << h.path;
    }
  }
}

// The word index's first thumbnail_depth images (those sharing the most
// local features with the query) have their thumbnails correlated too,
// wherever the fused list ranks them: a blurred copy may share a few of its
// original's words, too few to verify, and rank deep after fusion. Here the
// fused list's first image is the only other one correlated (no colour or
// thumbnail candidates).
TEST_F(SearcherTest, TheWordListIsCorrelatedWhereverFusionRanksIt) {
  const std::string copy = WriteTinyCopyOfImage6();
  ASSERT_FALSE(copy.empty());
  auto search = [&](bool word_index, int thumbnail_depth) {
    SearchOptions o;
    // The fixture's database keeps no word index; these few images get one
    // in memory from 0 images on.
    o.index.min_word_images = word_index ? 0 : kImages + 1;
    o.fusion.word_min_images = 0;  // and fuse its similarity
    o.k = kImages;
    o.thumbnail.depth = thumbnail_depth;
    o.fusion.colour_candidates = 0;
    o.thumbnail.candidates = 0;
    o.backend = Backend::kCpu;
    const auto results = Searcher::Open(db(), o)->SearchFiles({copy});
    EXPECT_EQ(results.size(), 1u);
    return results[0].hits;
  };
  auto correlated = [](const std::vector<Hit>& hits) {
    return std::count_if(hits.begin(), hits.end(),
                         [](const Hit& h) { return h.thumbnail != -1.0f; });
  };
  for (int depth : {1, 2, 3}) {
    const std::vector<Hit> without = search(false, depth);
    ASSERT_EQ(without.size(), static_cast<size_t>(kImages));
    EXPECT_EQ(correlated(without), depth) << "without a word index the fused list's first only";
    // With one: also the first `depth` by word similarity, wherever they rank.
    std::vector<Hit> with = search(true, depth);
    ASSERT_EQ(with.size(), static_cast<size_t>(kImages));
    EXPECT_LE(correlated(with), 2 * depth);
    std::sort(with.begin(), with.end(),
              [](const Hit& a, const Hit& b) { return a.words > b.words; });
    for (int i = 0; i < depth; ++i)
      EXPECT_NE(with[i].thumbnail, -1.0f) << with[i].path << ", " << i + 1 << " by words, at depth "
                                          << depth << " was not correlated";
  }
  // Once correlated, the copy's original, too poor to verify, comes first by
  // its thumbnail.
  const std::vector<Hit> all = search(true, kImages);
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all[0].path, AbsolutePath(paths_[6]));
  EXPECT_GT(all[0].thumbnail, kThumbnailThreshold);
  EXPECT_LT(all[0].inliers, SearchOptions().rerank.min_inliers)
      << "the copy was verifiable after all";
}

// The fusion weights' unit is the robust spread of the query's similarities
// over the whole collection, also when the short list holds only part of it
// (colour depth 4 of 12 images here): over the top of the list alone it
// shrinks as the collection grows. w = colour_weight x spread is read back
// from each hit: b = (s + w c) / (1 + w).
TEST_F(SearcherTest, FusionWeighsColourByTheSpreadOverTheWholeCollection) {
  const std::string query = paths_[3];
  SearchOptions o;
  o.rerank.depth = 0;
  o.expansion.results = 0;
  o.thumbnail.weight = 0;
  o.fusion.word_weight = 0;
  o.fusion.colour_candidates = 0;
  o.backend = Backend::kCpu;
  o.k = kImages;
  o.fusion.colour_weight = 0;
  std::vector<float> all;
  for (const Hit& h : Searcher::Open(db(), o)->SearchFiles({query})[0].hits)
    all.push_back(h.similarity);
  ASSERT_EQ(all.size(), static_cast<size_t>(kImages));
  const float expected = o.fusion.colour_weight = SearchOptions().fusion.colour_weight;
  const float spread = RobustSpread(&all);
  o.k = 3;
  o.fusion.colour_depth = 4;
  const std::vector<Hit> hits = Searcher::Open(db(), o)->SearchFiles({query})[0].hits;
  ASSERT_EQ(hits.size(), 3u);
  int checked = 0;
  for (const Hit& h : hits) {
    if (std::abs(h.colour - h.score) < 0.05f) continue;  // w ill-conditioned
    const float w = (h.score - h.similarity) / (h.colour - h.score);
    EXPECT_NEAR(w / expected, spread, 0.02f * spread) << h.path;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// A copy pasted onto black in a steep perspective (SIFT does not undo
// perspective) is searched twice, as it is and rectified: the rectified view
// verifies the original where the pasted one cannot; every image comes at
// most once, and what only the rectified view brought carries evidence of
// its own.
TEST_F(SearcherTest, APastedCopyIsSearchedRectifiedToo) {
  const cv::Mat original = testing::MakeSyntheticImage(1 + 9, 320, 240);
  const std::string copy = tmp_ / "pasted.jpg";
  testing::WriteImage(copy,
                      testing::PasteAt(original, {{195, 40}, {225, 40}, {410, 340}, {10, 340}},
                                       cv::Size(420, 360)));
  auto search = [&](bool pasted_views) {
    SearchOptions o;
    o.k = kImages;
    o.rerank.depth = kImages;
    o.pasted_views = pasted_views;
    o.backend = Backend::kCpu;
    const auto results = Searcher::Open(db(), o)->SearchFiles({copy});
    EXPECT_EQ(results.size(), 1u);
    return results[0].hits;
  };
  const std::vector<Hit> both = search(true), plain = search(false);
  ASSERT_FALSE(both.empty());
  ASSERT_FALSE(plain.empty());
  for (const Hit& h : plain)
    if (h.path == AbsolutePath(paths_[9])) {
      ASSERT_LT(h.inliers, SearchOptions().rerank.min_inliers)
          << "verifiable as it is: no test of views";
    }
  EXPECT_EQ(both[0].path, AbsolutePath(paths_[9]));
  EXPECT_GE(both[0].inliers, SearchOptions().rerank.min_inliers);
  std::map<uint64_t, float> plain_score;
  for (const Hit& h : plain) plain_score[h.id] = h.score;
  std::set<uint64_t> seen;
  for (size_t i = 0; i < both.size(); ++i) {
    const Hit& h = both[i];
    EXPECT_TRUE(seen.insert(h.id).second) << h.path << " twice";
    if (i > 0) {
      EXPECT_GE(both[i - 1].score, h.score);
    }
    const auto found = plain_score.find(h.id);
    if (found == plain_score.end() || h.score > found->second) {
      EXPECT_TRUE(h.inliers >= SearchOptions().rerank.min_inliers ||
                  h.thumbnail > kThumbnailThreshold)
          << h.path << " came from the rectified view without evidence";
    } else {
      EXPECT_EQ(h.score, found->second);
    }
  }
}

// Colour fusion may bury a grey copy far below its original (their colours
// differ), but the original is the copy's nearest VLAD neighbour: verifying
// the VLAD order's head as well finds it wherever fusion put it.
TEST(SearcherColourTest, ColourCannotHideTheVladNearestFromVerification) {
  // Colour photos, and grey pictures of other scenes: a grey query's colour
  // matches the grey ones, its texture the colour original.
  TempDir tmp;
  const std::string dir = tmp / "photos", db = tmp / "db";
  const auto paths = testing::WriteSyntheticSet(dir, 8, 1, 320, 240);
  auto grey_of = [](const cv::Mat& bgr) {
    cv::Mat g;
    cv::cvtColor(bgr, g, cv::COLOR_BGR2GRAY);
    cv::cvtColor(g, g, cv::COLOR_GRAY2BGR);
    return g;
  };
  for (int i = 0; i < 4; ++i)
    testing::WriteImage(dir + "/grey_" + std::to_string(i) + ".png",
                        grey_of(testing::MakeSyntheticImage(100 + i, 320, 240)));
  ASSERT_EQ(BuildIndex(testing::SmallIndexOptions(dir, db), nullptr).indexed, 12);
  const std::string copy = tmp / "grey_copy.jpg";
  testing::WriteImage(copy, grey_of(testing::MakeSyntheticImage(1 + 4, 320, 240)));
  const std::string original = AbsolutePath(paths[4]);
  auto search = [&](int rerank, int rerank_vlad, float colour_weight, int rerank_words = 0) {
    SearchOptions o;
    o.index.min_word_images = 0;   // these few images keep a word index
    o.fusion.word_min_images = 0;  // and fuse its similarity
    o.k = 12;
    o.rerank.depth = rerank;
    o.rerank.vlad_depth = rerank_vlad;
    o.rerank.word_depth = rerank_words;
    o.expansion.results = 0;
    o.fusion.colour_weight = colour_weight;
    o.backend = Backend::kCpu;
    return Searcher::Open(db, o)->SearchFiles({copy}).at(0).hits;
  };
  ASSERT_EQ(search(0, 0, 0).at(0).path, original) << "the VLAD nearest of a grey copy";
  // Colour decides the fused order; verifying only its first misses it.
  const auto fused = search(1, 0, 100);
  ASSERT_NE(fused.at(0).path, original) << "colour must bury the copy for this test to mean much";
  for (const Hit& h : fused)
    if (h.path == original) {
      EXPECT_LT(h.inliers, 0) << "verified without the VLAD head";
    }
  const auto with_head = search(1, 1, 100);
  EXPECT_EQ(with_head.at(0).path, original);
  EXPECT_GE(with_head.at(0).inliers, SearchOptions().rerank.min_inliers);
  // The word index's head alone (shared local features) brings it back too.
  const auto with_words = search(1, 0, 100, 1);
  EXPECT_EQ(with_words.at(0).path, original);
  EXPECT_GE(with_words.at(0).inliers, SearchOptions().rerank.min_inliers);
  // The default head: the VLAD order's without a word head, none with one.
  const auto by_default = search(1, -1, 100, 0);
  EXPECT_EQ(by_default.at(0).path, original);
  EXPECT_GE(by_default.at(0).inliers, SearchOptions().rerank.min_inliers);
}

TEST(RerankDepthTest, DefaultVerifiesFewerFusedCandidatesBesideAWordHead) {
  EXPECT_EQ(SearchOptions().rerank.depth, -1);
  EXPECT_EQ(RerankDepth(-1, false), kRerank);
  EXPECT_EQ(RerankDepth(-1, true), kRerankWithWords);
  EXPECT_LT(kRerankWithWords, kRerank);
  EXPECT_EQ(RerankDepth(0, true), 0) << "0 = off";
  EXPECT_EQ(RerankDepth(70, true), 70) << "a depth the caller sets always holds";
}

TEST(VladHeadDepthTest, DefaultVerifiesTheVladHeadOnlyWithoutAWordHead) {
  EXPECT_EQ(SearchOptions().rerank.vlad_depth, -1);
  EXPECT_EQ(VladHeadDepth(-1, false), kVladHead);
  EXPECT_EQ(VladHeadDepth(-1, true), 0);
  EXPECT_EQ(VladHeadDepth(0, false), 0);
  EXPECT_EQ(VladHeadDepth(7, true), 7) << "a depth the caller sets always holds";
}

// The colour weight w of an unverified hit, from score = (s + w c + v a) /
// (1 + w + v) with v = r w (r = word weight / colour weight, the options';
// a = 0 when word fusion is off).
double ColourWeightOf(const Hit& h, double r) {
  const double a = h.words >= 0 ? h.words : 0.0;
  if (h.words < 0) r = 0;
  return (double{h.score} - h.similarity) / (double{h.colour} + r * a - h.score * (1 + r));
}

// Every unverified hit of one query is ranked by (s + w c + v a) / (1 + w + v)
// with one w > 0 (the query's; SearchOptions::colour_weight) and v = r w.
void ExpectOneColourWeight(const std::vector<Hit>& hits, int min_inliers,
                           double r = double{SearchOptions().fusion.word_weight} /
                                      SearchOptions().fusion.colour_weight) {
  double w = -1;
  bool words = false;
  for (const Hit& h : hits) {
    if (h.inliers >= min_inliers) continue;
    ASSERT_GE(h.colour, 0.0f);
    ASSERT_LE(h.colour, 1.0f);
    words = words || h.words >= 0;
    const double a = h.words >= 0 ? h.words : 0.0;
    const double rr = h.words >= 0 ? r : 0.0;
    if (std::abs(h.colour + rr * a - h.score * (1 + rr)) < 1e-3) continue;  // ill-conditioned
    const double wh = ColourWeightOf(h, r);
    if (w < 0) w = wh;
    EXPECT_NEAR(wh, w, 1e-2 * (1 + w)) << h.path;
  }
  EXPECT_GT(w, 0.0) << "colour took part in the ranking";
  EXPECT_TRUE(words) << "this database keeps a word index: word fusion took part";
}

TEST_F(SearcherTest, VerificationRaisesTheCopyAndLeavesUnverifiedScoresAlone) {
  const std::string copy = tmp_ / "copy.jpg";
  testing::WriteImage(copy, testing::ApplyTransform(testing::MakeSyntheticImage(1 + 6, 320, 240),
                                                    testing::Transform::kRotate));
  const auto plain = Open(kImages, 0)->SearchFiles({copy});
  const auto verified = Open(kImages, kImages)->SearchFiles({copy});
  ASSERT_EQ(verified.size(), 1u);
  ASSERT_EQ(verified[0].hits.size(), static_cast<size_t>(kImages));
  const Hit& top = verified[0].hits[0];
  EXPECT_EQ(top.path, AbsolutePath(paths_[6]));
  EXPECT_GE(top.inliers, SearchOptions().rerank.min_inliers) << "a rotated copy verifies";
  EXPECT_GT(top.score, top.similarity) << "spatial evidence raises the score";
  EXPECT_LE(top.score, 1.0f);
  for (const Hit& h : verified[0].hits) {
    EXPECT_GE(h.inliers, 0) << "every candidate within the re-ranking depth was verified";
  }
  ExpectOneColourWeight(verified[0].hits, SearchOptions().rerank.min_inliers);
  // Without re-ranking, scores are the global similarities and nothing is verified.
  for (const Hit& h : plain[0].hits) EXPECT_EQ(h.inliers, -1);
  ExpectOneColourWeight(plain[0].hits, SearchOptions().rerank.min_inliers);
  // Without colour and words, they are the VLAD similarities.
  for (const Hit& h : Open(kImages, 0, 0.0f, 0.0f)->SearchFiles({copy})[0].hits) {
    EXPECT_EQ(h.colour, -1.0f);
    EXPECT_EQ(h.words, -1.0f);
    EXPECT_EQ(h.score, h.similarity);
  }
  // Words without colour: (s + v a) / (1 + v), one v > 0 for the query, and
  // the copy's original has the best word similarity.
  const auto words_only = Open(kImages, 0, 0.0f)->SearchFiles({copy})[0].hits;
  double v = -1;
  for (const Hit& h : words_only) {
    EXPECT_EQ(h.colour, -1.0f);
    ASSERT_GE(h.words, 0.0f);
    ASSERT_LE(h.words, 1.0f);
    if (h.path == AbsolutePath(paths_[6])) {
      EXPECT_FLOAT_EQ(h.words, 1.0f);
    }
    if (std::abs(h.words - h.score) < 1e-3) continue;
    const double vh = (double{h.score} - h.similarity) / (double{h.words} - h.score);
    if (v < 0) v = vh;
    EXPECT_NEAR(vh, v, 1e-2 * (1 + v)) << h.path;
  }
  EXPECT_GT(v, 0.0) << "words took part in the ranking";
}

// Two database images with the same grey picture (so the same SIFT features
// and VLAD vector) but different colours: colour fusion ranks the one whose
// colours match the query first; without it they tie.
TEST(SearcherColourTest, ColourSeparatesImagesThatLookAlikeInGrey) {
  TempDir tmp;
  const std::string dir = tmp / "photos";
  std::filesystem::create_directories(dir);
  testing::WriteSyntheticSet(dir, 6, 100, 320, 240);  // distractors for the codebook
  cv::Mat grey;
  cv::cvtColor(testing::MakeSyntheticImage(7, 320, 240), grey, cv::COLOR_BGR2GRAY);
  grey = grey * 0.5 + 60;  // in [60, 187]: room to tint without clipping
  // Luma-preserving tint: 0.114 db + 0.587 dg + 0.299 dr = 0.
  cv::Mat blue, grey_bgr;
  cv::cvtColor(grey, grey_bgr, cv::COLOR_GRAY2BGR);
  cv::add(grey_bgr, cv::Scalar(0.299 * 200, 0, 0), blue, cv::noArray(), CV_8UC3);
  cv::subtract(blue, cv::Scalar(0, 0, 0.114 * 200), blue);
  const std::string grey_path = dir + "/grey.png", blue_path = dir + "/blue.png";
  testing::WriteImage(grey_path, grey_bgr);
  testing::WriteImage(blue_path, blue);
  IndexOptions io;
  io.image_dir = dir;
  io.db_path = tmp / "db";
  io.model.codebook.num_clusters = 16;
  io.backend = Backend::kCpu;
  ASSERT_EQ(BuildIndex(io, nullptr).indexed, 8);
  // The query: the blue picture, slightly shifted so it is not a file copy.
  const std::string query = tmp / "query.png";
  testing::WriteImage(query, blue(cv::Rect(4, 3, 310, 232)).clone());
  auto search = [&](float w) {
    SearchOptions o;
    o.index.min_word_images = 0;   // these few images keep a word index
    o.fusion.word_min_images = 0;  // and fuse its similarity
    o.k = 2;
    o.rerank.depth = 0;
    o.fusion.colour_weight = w;
    o.backend = Backend::kCpu;
    return Searcher::Open(io.db_path, o)->SearchFiles({query})[0].hits;
  };
  const std::vector<Hit> plain = search(0.0f);
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_NEAR(plain[0].score, plain[1].score, 0.05f) << "the same picture in grey";
  const std::vector<Hit> fused = search(SearchOptions().fusion.colour_weight);
  ASSERT_EQ(fused.size(), 2u);
  EXPECT_EQ(fused[0].path, AbsolutePath(blue_path));
  EXPECT_EQ(fused[1].path, AbsolutePath(grey_path));
  EXPECT_GT(fused[0].colour, 0.9f);
  EXPECT_LT(fused[1].colour, 0.5f);
  EXPECT_GT(fused[0].score, fused[1].score + 0.005f);
}

// An image only the colour of the query points to, ranked low by VLAD (a
// thumbnail-sized copy's fate among many images): with a VLAD short list of
// one, colour fusion never sees it; the colour candidates bring it in.
TEST(SearcherColourTest, ColourCandidatesReachWhatVladRanksLow) {
  TempDir tmp;
  const std::string dir = tmp / "photos";
  std::filesystem::create_directories(dir);
  testing::WriteSyntheticSet(dir, 8, 100, 320, 240);  // colourful, other textures
  // Another picture in grey, tinted red; the query is a third picture with
  // the same tint: its colours, nothing of its texture.
  auto red = [](uint64_t seed) {
    cv::Mat grey, bgr;
    cv::cvtColor(testing::MakeSyntheticImage(seed, 320, 240), grey, cv::COLOR_BGR2GRAY);
    cv::cvtColor(grey * 0.5 + 40, bgr, cv::COLOR_GRAY2BGR);
    cv::add(bgr, cv::Scalar(0, 0, 110), bgr);
    return bgr;
  };
  const std::string target = dir + "/red.png";
  testing::WriteImage(target, red(7));
  const IndexOptions io = testing::SmallIndexOptions(dir, tmp / "db");
  ASSERT_EQ(BuildIndex(io, nullptr).indexed, 9);
  {
    // What `index` runs next: the persisted index, with its colour table.
    auto store = Store::Open(io.db_path, Store::Mode::kReadWrite);
    const SearchIndexSync sync =
        UpdateSearchIndex(store.get(), SearchVectors(*store), VectorIndexOptions());
    ASSERT_EQ(sync.colours.rows(), 9);
  }
  const std::string query = tmp / "query.png";
  testing::WriteImage(query, red(31));
  auto search = [&](int colour_candidates) {
    SearchOptions o;
    o.k = 1;
    o.rerank.depth = 0;
    o.fusion.colour_depth = 1;  // the VLAD short list: its first image only
    o.fusion.word_weight = 0;
    o.fusion.colour_weight = 100;
    o.fusion.colour_candidates = colour_candidates;
    o.thumbnail.candidates = 0;  // colour candidates alone
    o.backend = Backend::kCpu;
    return Searcher::Open(io.db_path, o)->SearchFiles({query})[0].hits;
  };
  const std::vector<Hit> vlad_only = search(0);
  ASSERT_EQ(vlad_only.size(), 1u);
  ASSERT_NE(vlad_only[0].path, AbsolutePath(target))
      << "VLAD must not rank the tinted picture first for this test to mean anything";
  const std::vector<Hit> with = search(1);
  ASSERT_EQ(with.size(), 1u);
  EXPECT_EQ(with[0].path, AbsolutePath(target));
  EXPECT_GT(with[0].colour, 0.9f);
}

TEST_F(SearcherTest, BadQueryGetsErrorOthersSucceed) {
  const std::string bad = tmp_ / "bad.jpg";
  { std::ofstream(bad, std::ios::binary) << "definitely not an image"; }
  const std::string missing = tmp_ / "missing.png";
  auto searcher = Open(3);
  const auto results = searcher->SearchFiles({paths_[0], bad, paths_[1], missing, flat_});
  ASSERT_EQ(results.size(), 5u);
  EXPECT_FALSE(results[0].error.has_value());
  EXPECT_EQ(results[0].hits.at(0).path, AbsolutePath(paths_[0]));
  ASSERT_TRUE(results[1].error.has_value());
  EXPECT_EQ(results[1].error->code, FileErrorCode::kUnsupportedFormat);
  EXPECT_EQ(results[1].query, bad);
  EXPECT_TRUE(results[1].hits.empty());
  EXPECT_FALSE(results[2].error.has_value());
  EXPECT_EQ(results[2].hits.at(0).path, AbsolutePath(paths_[1]));
  ASSERT_TRUE(results[3].error.has_value());
  EXPECT_EQ(results[3].error->code, FileErrorCode::kVanished);
  // A query without features matches nothing (and says so).
  ASSERT_TRUE(results[4].error.has_value());
  EXPECT_EQ(results[4].error->code, FileErrorCode::kNoFeatures);
  EXPECT_TRUE(results[4].hits.empty());
}

TEST_F(SearcherTest, ExpandQueryPaths) {
  const std::string sub = tmp_ / "queries/sub";
  fs::create_directories(sub);
  testing::WriteImage(tmp_ / "queries/b.png", testing::MakeSyntheticImage(3, 40, 30));
  testing::WriteImage(sub + "/a.png", testing::MakeSyntheticImage(4, 40, 30));
  { std::ofstream(tmp_ / "queries/notes.txt") << "x"; }
  std::vector<FileError> errors;
  const auto expanded = ExpandQueryPaths({paths_[2], tmp_ / "queries", tmp_ / "nope.jpg"}, &errors);
  const std::string root = AbsolutePath(tmp_ / "queries");
  EXPECT_EQ(expanded, (std::vector<std::string>{paths_[2], root + "/b.png", root + "/sub/a.png"}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, tmp_ / "nope.jpg");
  EXPECT_EQ(errors[0].code, FileErrorCode::kVanished);
}

TEST_F(SearcherTest, WorksWhileAWriterHoldsTheDatabase) {
  auto writer = Store::Open(db(), Store::Mode::kReadWrite);
  // A write committed by the running writer is visible to a new searcher.
  // A copy of an indexed image's values (vector, if the database stores
  // them, and local features) under another path.
  std::optional<ImageRecord> source;
  writer->ForEachImage([&](const ImageRecord& r) {
    if (!source && r.status == ImageStatus::kOk) source = r;
  });
  ASSERT_TRUE(source.has_value());
  const auto copy = writer->GetVector(source->id);
  ImageRecord extra = *source;
  extra.id = 0;
  extra.path = tmp_ / "elsewhere/extra.png";
  writer->PutImage(&extra, copy ? copy->data() : nullptr, *writer->GetFeatures(source->id));

  auto searcher = Open(3);
  EXPECT_EQ(searcher->num_indexed(), kImages + 1);
  const auto results = searcher->SearchFiles({paths_[6]});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].error.has_value());
  EXPECT_EQ(results[0].hits.at(0).path, AbsolutePath(paths_[6]));
  // The searcher did not disturb the writer.
  ImageRecord more = *source;
  more.id = 0;
  more.path = tmp_ / "elsewhere/more.png";
  EXPECT_NO_THROW(writer->PutImage(&more, copy ? copy->data() : nullptr));
}

// The noisy-or of search/ranking.h: b without evidence, g = inliers /
// (inliers + 20) from b = 0, 1 for the image itself, rising with inliers.
TEST(RankingTest, NoisyOrScore) {
  EXPECT_FLOAT_EQ(CombinedScore(0.3f, 0), 0.3f);
  EXPECT_FLOAT_EQ(CombinedScore(0.0f, 20), 0.5f);
  EXPECT_FLOAT_EQ(CombinedScore(1.0f, 50), 1.0f);
  EXPECT_FLOAT_EQ(CombinedScore(0.5f, 60), 1.0f - 0.5f * 0.25f);
  EXPECT_LT(CombinedScore(0.2f, 10), CombinedScore(0.2f, 30));
}

// Verification through a hub: a database image showing only what the query
// does not (the right third of a picture whose left half is the query)
// shares nothing verifiable with the query, but verifies against the whole
// picture, which the query verifies strongly. With --hubs (on by default)
// it gains that chain's evidence (its score rises above the score it has
// without), still ranks below its hub and has no level: it was not verified
// against the query. `mirror` makes the query the left half's mirror image,
// which only the mirrored search verifies against the whole picture: its
// verified results are hubs too.
class HubTest : public SearcherTest {
 protected:
  // The query (the left half, mirrored or not) and the right third, written
  // beside the set; the index built.
  std::string WriteHalves(bool mirror) {
    const cv::Mat whole = testing::MakeSyntheticImage(1 + 3, 320, 240);  // paths_[3]
    cv::Mat right, left;
    cv::resize(whole(cv::Rect(214, 0, 106, 240)), right, cv::Size(212, 480));
    cv::resize(whole(cv::Rect(0, 0, 150, 240)), left, cv::Size(300, 480));
    if (mirror) cv::flip(left, left, 1);
    testing::WriteImage(dir() + "/right.png", right);
    const std::string query = tmp_ / "left.png";
    testing::WriteImage(query, left);
    EXPECT_EQ(BuildIndex(testing::SmallIndexOptions(dir(), db()), nullptr).indexed, 1);
    return query;
  }
  // `path`'s hit for `query` (-k 10, the default, so the hub pass must look
  // deeper than k by itself); an empty hit if it is not among them.
  Hit HitOf(const std::string& query, int hubs, const std::string& path) {
    SearchOptions o;
    o.index.min_word_images = 0;
    o.fusion.word_min_images = 0;  // and fuse its similarity
    o.rerank.depth = 6;
    o.expansion.hubs = hubs;
    o.backend = Backend::kCpu;
    const std::vector<QueryResult> results = Searcher::Open(db(), o)->SearchFiles({query});
    for (const Hit& h : results.at(0).hits)
      if (h.path == AbsolutePath(path)) return h;
    return Hit();
  }
  void ExpectRaisedThroughTheWholePicture(bool mirror) {
    const std::string query = WriteHalves(mirror);
    const int hubs = SearchOptions().expansion.hubs;
    ASSERT_GT(hubs, 0);  // on by default
    const Hit hub = HitOf(query, hubs, paths_[3]);
    ASSERT_FALSE(hub.path.empty());
    ASSERT_NE(hub.level, MatchLevel::kNone);
    EXPECT_EQ(hub.evidence.mirrored, mirror);
    ASSERT_GE(hub.evidence.consistent, SearchOptions().rerank.min_inliers);
    const Hit without = HitOf(query, 0, dir() + "/right.png");
    const Hit with = HitOf(query, hubs, dir() + "/right.png");
    ASSERT_FALSE(with.path.empty());
    ASSERT_LT(with.inliers, SearchOptions().rerank.min_inliers);  // not verified directly
    if (!without.path.empty()) {
      EXPECT_GT(with.score, without.score + 0.1f);
    }
    EXPECT_LT(with.score, hub.score);
    EXPECT_EQ(with.level, MatchLevel::kNone);
  }
};

TEST_F(HubTest, RaiseWhatAVerifiedResultVerifies) { ExpectRaisedThroughTheWholePicture(false); }

TEST_F(HubTest, TheMirrorImagesVerifiedResultsAreHubsToo) {
  ExpectRaisedThroughTheWholePicture(true);
}

// A hub is another view or a part, never a copy: what verifies against a
// copy of the query verifies against the query. The same list scored with
// the whole picture as a part (it raises the right third) and as a copy (it
// raises nothing), and a chance fit (few inliers turning alike) is no hub.
TEST_F(HubTest, ACopyOrAChanceFitIsNoHub) {
  const std::string query = WriteHalves(false);
  const Hit whole = HitOf(query, 0, paths_[3]);
  const Hit right = HitOf(query, 0, dir() + "/right.png");
  ASSERT_FALSE(whole.path.empty());
  ASSERT_FALSE(right.path.empty());
  auto store = Store::Open(db(), Store::Mode::kReadOnly);
  const FeatureReader features(*store);
  const SearchOptions o;
  auto scores = [&](MatchLevel level, int consistent) {
    return ScoresThroughHubs(features, o,
                             {{whole.id, whole.score, whole.inliers, consistent, level},
                              {right.id, right.score, right.inliers, 0, MatchLevel::kNone}})
        .scores;
  };
  const int strong = whole.evidence.consistent;
  ASSERT_GE(strong, o.rerank.min_inliers);
  EXPECT_GT(scores(MatchLevel::kPart, strong).at(1), right.score + 0.1f);
  EXPECT_GT(scores(MatchLevel::kView, strong).at(1), right.score + 0.1f);
  EXPECT_EQ(scores(MatchLevel::kCopy, strong).at(1), right.score);
  EXPECT_EQ(scores(MatchLevel::kPart, 3).at(1), right.score);
}

// A hub's own nearest images are verified against it wherever the query's
// list ranks them (or when it does not hold them: they join it), with
// --hub-neighbours; without, only the list's first hub_depth unverified
// results are. The right third is the whole picture's neighbour here; the
// list holds the hub alone.
TEST_F(HubTest, AHubsNeighboursAreVerifiedAgainstIt) {
  const std::string query = WriteHalves(false);
  const Hit whole = HitOf(query, 0, paths_[3]);
  ASSERT_FALSE(whole.path.empty());
  ASSERT_GE(whole.evidence.consistent, SearchOptions().rerank.min_inliers);
  auto store = Store::Open(db(), Store::Mode::kReadOnly);
  const FeatureReader features(*store);
  const auto right = store->FindByPath(AbsolutePath(dir() + "/right.png"));
  ASSERT_TRUE(right.has_value());
  const float similarity = 0.05f;
  std::vector<uint64_t> asked;
  const HubNeighbours neighbours = [&](uint64_t hub, int n) {
    asked.push_back(hub);
    EXPECT_GE(n, 1);
    return std::vector<HubNeighbour>{{whole.id, 1.0f}, {right->id, similarity}};
  };
  const std::vector<RankedResult> list = {
      {whole.id, whole.score, whole.inliers, whole.evidence.consistent, MatchLevel::kPart}};
  SearchOptions o;
  o.expansion.hub_steps = 1;  // (with 2, the right third is a hub too: asked for its own)
  o.expansion.hub_neighbours = 0;
  EXPECT_TRUE(ScoresThroughHubs(features, o, list, neighbours).added.empty());
  EXPECT_TRUE(asked.empty());
  o.expansion.hub_neighbours = 5;
  const ThroughHubs through = ScoresThroughHubs(features, o, list, neighbours);
  EXPECT_EQ(asked, std::vector<uint64_t>{whole.id});
  EXPECT_EQ(through.scores, std::vector<float>{whole.score});  // the hub is not raised
  ASSERT_EQ(through.added.size(), 1u);
  EXPECT_EQ(through.added[0].id, right->id);
  EXPECT_EQ(through.added[0].level, MatchLevel::kNone);
  EXPECT_EQ(through.added[0].inliers, -1);
  EXPECT_GT(through.added[0].score, similarity + 0.1f);  // raised from its similarity
  EXPECT_LT(through.added[0].score, whole.score);
  ASSERT_EQ(through.added_similarity.size(), 1u);
  EXPECT_EQ(through.added_similarity[0], similarity);
}

// The same through the searcher's vector index: with the hub depth at 1 a
// grey copy of the right third (its colour unlike the query's, so that it is
// not the first unverified result) is not verified against the whole
// picture; with --hub-neighbours it is, as the picture's neighbour.
TEST_F(HubTest, ANeighbourBeyondTheHubDepthIsRaised) {
  const std::string query = WriteHalves(false);
  cv::Mat grey, right = cv::imread(dir() + "/right.png");
  cv::cvtColor(right, grey, cv::COLOR_BGR2GRAY);
  cv::cvtColor(grey, grey, cv::COLOR_GRAY2BGR);
  const std::string path = dir() + "/grey.png";
  testing::WriteImage(path, grey);
  ASSERT_EQ(BuildIndex(testing::SmallIndexOptions(dir(), db()), nullptr).indexed, 1);
  auto search = [&](int neighbours) {
    SearchOptions o;
    o.index.min_word_images = 0;
    o.rerank.depth = 6;
    o.k = kImages + 3;
    o.expansion.hub_depth = 1;
    o.expansion.hub_neighbours = neighbours;
    o.backend = Backend::kCpu;
    return Searcher::Open(db(), o)->SearchFiles({query}).at(0).hits;
  };
  auto find = [&](const std::vector<Hit>& hits, const std::string& p) {
    for (const Hit& h : hits)
      if (h.path == AbsolutePath(p)) return h;
    return Hit();
  };
  const std::vector<Hit> without = search(0), with = search(kImages + 3);
  const Hit hub = find(with, paths_[3]), before = find(without, path), after = find(with, path);
  ASSERT_NE(hub.level, MatchLevel::kNone);
  ASSERT_FALSE(before.path.empty());
  ASSERT_FALSE(after.path.empty());
  ASSERT_LT(before.inliers, SearchOptions().rerank.min_inliers);  // not verified directly
  EXPECT_GT(after.score, before.score + 0.1f);
  EXPECT_LT(after.score, hub.score);
  EXPECT_EQ(after.level, MatchLevel::kNone);
}

// Chaining (--hub-steps 2): an image that shares nothing with the query or
// its hub, but much with a result the hub raised, is raised through that
// result, below it; with one step it is not. The chain: the left half (the
// query), the whole picture (its hub), the right third joined to another
// picture (raised through the hub), and that other picture alone.
TEST_F(HubTest, ARaisedResultIsAHubOfTheNextStep) {
  const cv::Mat whole = testing::MakeSyntheticImage(1 + 3, 320, 240);  // paths_[3]
  const cv::Mat other = testing::MakeSyntheticImage(97, 212, 480);
  cv::Mat right, joined, alone;
  cv::resize(whole(cv::Rect(214, 0, 106, 240)), right, cv::Size(212, 480));
  cv::hconcat(right, other, joined);
  cv::resize(other, alone, cv::Size(318, 720));
  const std::string query = WriteHalves(false);
  testing::WriteImage(dir() + "/joined.png", joined);
  testing::WriteImage(dir() + "/alone.png", alone);
  ASSERT_EQ(BuildIndex(testing::SmallIndexOptions(dir(), db()), nullptr).indexed, 2);
  const Hit hub = HitOf(query, 0, paths_[3]);
  ASSERT_FALSE(hub.path.empty());
  ASSERT_GE(hub.evidence.consistent, SearchOptions().rerank.min_inliers);
  auto store = Store::Open(db(), Store::Mode::kReadOnly);
  const FeatureReader features(*store);
  const auto first = store->FindByPath(AbsolutePath(dir() + "/joined.png"));
  const auto second = store->FindByPath(AbsolutePath(dir() + "/alone.png"));
  ASSERT_TRUE(first && second);
  const std::vector<RankedResult> list = {
      {hub.id, hub.score, hub.inliers, hub.evidence.consistent, MatchLevel::kPart},
      {first->id, 0.1f, 2, 0, MatchLevel::kNone},
      {second->id, 0.05f, 0, 0, MatchLevel::kNone}};
  SearchOptions o;
  o.expansion.hub_steps = 1;
  const std::vector<float> one = ScoresThroughHubs(features, o, list).scores;
  EXPECT_GT(one[1], 0.1f + 0.1f);
  EXPECT_EQ(one[2], 0.05f);
  o.expansion.hub_steps = 2;
  const std::vector<float> two = ScoresThroughHubs(features, o, list).scores;
  EXPECT_EQ(two[1], one[1]);
  EXPECT_GT(two[2], 0.05f + 0.1f);
  EXPECT_LT(two[2], two[1]);
}

// `inliers` inlier pairs of which the first `consistent` turn by 30 degrees
// and keep their size; the others each turn by another multiple of 90.
std::pair<std::pair<LocalFeatures, LocalFeatures>, Verification> InlierPairs(int inliers,
                                                                             int consistent) {
  std::pair<LocalFeatures, LocalFeatures> f;
  Verification v;
  for (int i = 0; i < inliers; ++i) {
    Keypoint p;
    p.size = 4.0f;
    p.angle = i < consistent ? 10.0f : 10.0f + 90.0f * (i - consistent + 1);
    f.first.keypoints.push_back(p);
    p.angle = i < consistent ? 40.0f : 10.0f;
    f.second.keypoints.push_back(p);
    v.inlier_pairs.emplace_back(i, i);
  }
  v.inliers = inliers;
  return {f, v};
}

// A verified result (search/ranking.h): min_inliers inliers, and with
// min_consistent, that many of them turning and scaling alike; a chance
// homography's inliers disagree.
TEST(RankingTest, AVerifiedResultNeedsItsConsistentInliers) {
  auto strong = [](int inliers, int consistent, const RerankOptions& options) {
    const auto [f, v] = InlierPairs(inliers, consistent);
    return StronglyVerified(v, f.first, f.second, options);
  };
  RerankOptions any;
  any.min_consistent = 0;
  EXPECT_TRUE(strong(8, 2, any));
  EXPECT_FALSE(strong(7, 7, any));
  RerankOptions o;
  o.min_consistent = 6;
  EXPECT_TRUE(strong(8, 6, o));
  EXPECT_TRUE(strong(40, 40, o));
  EXPECT_FALSE(strong(8, 5, o));
  EXPECT_FALSE(strong(10, 3, o));
  EXPECT_FALSE(strong(7, 7, o));
}

// Weak verification (search/ranking.h): 6 or more inliers of which 5 turn
// and scale alike count when the pair is not verified; fewer inliers, fewer
// consistent ones, a verified pair or weak_inliers 0 do not.
TEST(RankingTest, WeakVerificationNeedsConsistentInliersBelowTheThreshold) {
  const RerankOptions o;  // min_inliers 8, weak_inliers 6, weak_consistent 5
  auto weak = [&](int inliers, int consistent, const RerankOptions& options) {
    const auto [f, v] = InlierPairs(inliers, consistent);
    return WeaklyVerified(v, f.first, f.second, options);
  };
  EXPECT_TRUE(weak(6, 5, o));
  EXPECT_TRUE(weak(7, 7, o));
  EXPECT_FALSE(weak(6, 4, o));
  EXPECT_FALSE(weak(5, 5, o));
  EXPECT_FALSE(weak(8, 8, o));  // verified, not weakly
  RerankOptions strict = o;
  strict.min_consistent = 6;
  EXPECT_TRUE(weak(9, 5, strict));  // not verified (5 < 6 agree), but weakly
  EXPECT_FALSE(weak(9, 4, strict));
  EXPECT_FALSE(weak(9, 6, strict));  // verified
  RerankOptions off = o;
  off.weak_inliers = 0;
  EXPECT_FALSE(weak(7, 7, off));
}

TEST(SearcherOpenTest, ErrorsAndValidation) {
  TempDir tmp;
  SearchOptions o;
  o.index.min_word_images = 0;
  o.fusion.word_min_images = 0;  // and fuse its similarity
  o.backend = Backend::kCpu;
  try {
    Searcher::Open(tmp / "nothing", o);
    FAIL() << "opened a missing database";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.kind(), StoreError::Kind::kNotFound);
  }
  EXPECT_FALSE(fs::exists(tmp / "nothing")) << "search must never create a database";
  o.k = 0;
  EXPECT_THROW(Searcher::Open(tmp / "nothing", o), std::invalid_argument);
  o.k = 100001;
  EXPECT_THROW(o.Validate(), std::invalid_argument);
  o = SearchOptions();
  o.rerank.depth = -2;
  EXPECT_THROW(o.Validate(), std::invalid_argument);
  o = SearchOptions();
  o.rerank.vlad_depth = -2;
  EXPECT_THROW(o.Validate(), std::invalid_argument);
  o.rerank.verify_keypoints = -1;
  o.rerank.vlad_depth = -1;
  EXPECT_THROW(o.Validate(), std::invalid_argument);
  o.rerank.verify_keypoints = 0;
  EXPECT_NO_THROW(o.Validate());
}

// Each stage's group refuses a value out of range with a message naming the
// field and the flag that sets it; SearchOptions::Validate runs every group.
TEST(SearchOptionsTest, ValidateNamesTheFieldAndTheFlag) {
  struct Case {
    void (*set)(SearchOptions*);
    const char* message;
  };
  const Case cases[] = {
      {[](SearchOptions* o) { o->k = 0; }, "k (-k) must be in 1..100000, got 0"},
      {[](SearchOptions* o) { o->threads = -1; }, "threads must be >= 0, got -1"},
      {[](SearchOptions* o) { o->fusion.colour_weight = 101; },
       "fusion.colour_weight (--colour-weight) must be in [0, 100], got 101"},
      {[](SearchOptions* o) { o->fusion.colour_depth = -1; },
       "fusion.colour_depth (--colour-depth) must be in 0..100000, got -1"},
      {[](SearchOptions* o) { o->fusion.colour_candidates = 10001; },
       "fusion.colour_candidates (--colour-candidates) must be in 0..10000, got 10001"},
      {[](SearchOptions* o) { o->fusion.word_weight = -0.5f; },
       "fusion.word_weight (--word-weight) must be in [0, 100], got -0.5"},
      {[](SearchOptions* o) { o->rerank.depth = -2; },
       "rerank.depth (--rerank) must be in -1..10000, got -2"},
      {[](SearchOptions* o) { o->rerank.vlad_depth = 10001; },
       "rerank.vlad_depth (--rerank-vlad) must be in -1..10000, got 10001"},
      {[](SearchOptions* o) { o->rerank.word_depth = -1; },
       "rerank.word_depth (--rerank-words) must be in 0..10000, got -1"},
      {[](SearchOptions* o) { o->rerank.min_inliers = 4; },
       "rerank.min_inliers (--min-inliers) must be >= 5 (four matches always fit a homography), "
       "got 4"},
      {[](SearchOptions* o) { o->rerank.min_consistent = 9; },
       "rerank.min_consistent (--min-consistent) must be in 2..8, got 9"},
      {[](SearchOptions* o) { o->rerank.weak_inliers = 4; },
       "rerank.weak_inliers (--weak-inliers) must be in 5..10000, got 4"},
      {[](SearchOptions* o) { o->rerank.weak_consistent = 7; },
       "rerank.weak_consistent (--weak-consistent) must be in 2..6, got 7"},
      {[](SearchOptions* o) { o->fusion.word_assignments = 0; },
       "fusion.word_assignments (--word-assignments) must be in 1..8, got 0"},
      {[](SearchOptions* o) { o->expansion.hubs = 21; },
       "expansion.hubs (--hubs) must be in 0..20, got 21"},
      {[](SearchOptions* o) { o->expansion.hub_depth = 0; },
       "expansion.hub_depth (--hub-depth) must be in 1..1000, got 0"},
      {[](SearchOptions* o) { o->expansion.hub_neighbours = 1001; },
       "expansion.hub_neighbours (--hub-neighbours) must be in 0..1000, got 1001"},
      {[](SearchOptions* o) { o->expansion.hub_steps = 3; },
       "expansion.hub_steps (--hub-steps) must be in 1..2, got 3"},
      {[](SearchOptions* o) { o->expansion.hub_inliers = 7; },
       "expansion.hub_inliers (--hub-inliers) must be in 8..10000, got 7"},
      {[](SearchOptions* o) { o->rerank.verify_keypoints = -1; },
       "rerank.verify_keypoints (--verify-keypoints) must be in 0..1000000, got -1"},
      {[](SearchOptions* o) { o->rerank.verify.match_dims = -1; },
       "verify.match_dims (--match-dims) must be >= 0, got -1"},
      {[](SearchOptions* o) { o->thumbnail.weight = std::nanf(""); },
       "thumbnail.weight (--thumbnail-weight) must be in [0, 1], got nan"},
      {[](SearchOptions* o) { o->thumbnail.depth = 10001; },
       "thumbnail.depth (--thumbnail-depth) must be in 0..10000, got 10001"},
      {[](SearchOptions* o) { o->thumbnail.candidates = -1; },
       "thumbnail.candidates (--thumbnail-candidates) must be in 0..10000, got -1"},
      {[](SearchOptions* o) { o->expansion.results = 101; },
       "expansion.results (--expansion) must be in 0..100, got 101"},
  };
  for (const Case& c : cases) {
    SearchOptions o;
    c.set(&o);
    try {
      o.Validate();
      ADD_FAILURE() << "accepted: " << c.message;
    } catch (const std::invalid_argument& e) {
      EXPECT_STREQ(e.what(), c.message);
    }
  }
  EXPECT_NO_THROW(SearchOptions().Validate());
}

// The word stage is on at every size: the head of its list is verified
// wherever the fused order put it, and its similarity is fused into that
// order only in collections of fusion.word_min_images images and more.
TEST_F(SearcherTest, TheWordHeadIsVerifiedAtAnySizeAndFusedFromItsMinimum) {
  const std::string copy = tmp_ / "copy.jpg";
  testing::WriteImage(copy, testing::ApplyTransform(testing::MakeSyntheticImage(1 + 6, 320, 240),
                                                    testing::Transform::kRotate));
  auto search = [&](int64_t word_min_images, int word_depth, float word_weight) {
    SearchOptions o;  // the index's default: a word index from the first image
    o.k = kImages;
    o.fusion.word_min_images = word_min_images;
    o.fusion.word_weight = word_weight;
    o.rerank.depth = 1;  // the fused order's first only
    o.rerank.vlad_depth = 0;
    o.rerank.word_depth = word_depth;
    o.expansion.results = 0;
    o.expansion.hubs = 0;
    o.backend = Backend::kCpu;
    const auto results = Searcher::Open(db(), o)->SearchFiles({copy});
    EXPECT_EQ(results.size(), 1u);
    return results.empty() ? std::vector<Hit>() : results[0].hits;
  };
  auto verified = [](const std::vector<Hit>& hits) {
    return std::count_if(hits.begin(), hits.end(), [](const Hit& h) { return h.inliers >= 0; });
  };
  // Below the minimum: not fused (the hits of word weight 0, no word
  // similarity on any), but its head verified.
  const std::vector<Hit> small = search(kImages + 2, kImages, 7.0f);
  const std::vector<Hit> unfused = search(kImages + 2, kImages, 0.0f);
  ASSERT_EQ(small.size(), unfused.size());
  for (size_t i = 0; i < small.size(); ++i) {
    EXPECT_EQ(small[i].id, unfused[i].id);
    EXPECT_EQ(small[i].score, unfused[i].score);
    EXPECT_EQ(small[i].words, -1.0f) << small[i].path;
  }
  EXPECT_EQ(verified(small), kImages) << "the word head holds every image with features";
  EXPECT_EQ(verified(search(kImages + 2, 0, 7.0f)), 1) << "without a word head: the first only";
  // From the minimum on: fused.
  const std::vector<Hit> fused = search(kImages, kImages, 7.0f);
  ASSERT_FALSE(fused.empty());
  EXPECT_TRUE(std::all_of(fused.begin(), fused.end(), [](const Hit& h) { return h.words >= 0; }));
  EXPECT_EQ(fused[0].path, AbsolutePath(paths_[6]));
  EXPECT_THROW(
      [] {
        SearchOptions o;
        o.fusion.word_min_images = -1;
        o.Validate();
      }(),
      std::invalid_argument);
}

// A collection too small for a PCA keeps its full VLAD vectors and no
// persisted index: search builds its word index in memory from the stored
// features, with the model's vocabulary.
TEST(SearcherTransientTest, ACollectionWithoutAPersistedIndexGetsItsWordIndexInMemory) {
  TempDir tmp;
  const std::vector<std::string> paths = testing::WriteSyntheticSet(tmp / "photos", 6, 1, 320, 240);
  IndexOptions io = testing::SmallIndexOptions(tmp / "photos", tmp / "db");
  io.model.codebook.num_clusters = 64;  // 8,192-d VLAD: above what is persisted flat
  ASSERT_EQ(BuildIndex(io, nullptr).indexed, 6);
  auto store = Store::Open(tmp / "db", Store::Mode::kReadOnly);
  ASSERT_FALSE(store->GetSearchIndex().has_value()) << "a persisted index after all";
  ASSERT_TRUE(store->GetModelWordVocabulary().has_value());
  const SearchVectors vectors(*store);
  VectorIndexOptions o;
  const SearchIndexSync sync = SyncSearchIndex(*store, vectors, o);
  ASSERT_TRUE(sync.transient);
  ASSERT_NE(sync.words, nullptr);
  EXPECT_TRUE(sync.words_built);
  EXPECT_EQ(sync.words->ntotal(), 6);
  o.min_word_images = 7;
  EXPECT_EQ(SyncSearchIndex(*store, vectors, o).words, nullptr) << "below its minimum";
  o.min_word_images = 0;
  o.words = false;
  EXPECT_EQ(SyncSearchIndex(*store, vectors, o).words, nullptr) << "--word-index off";
  store.reset();
  // Searched: an image finds itself first through the fused word list too.
  SearchOptions so;
  so.k = 3;
  so.fusion.word_min_images = 0;
  so.backend = Backend::kCpu;
  const auto results = Searcher::Open(tmp / "db", so)->SearchFiles({paths[2]});
  ASSERT_EQ(results.size(), 1u);
  ASSERT_FALSE(results[0].hits.empty());
  EXPECT_EQ(results[0].hits[0].path, AbsolutePath(paths[2]));
  EXPECT_FLOAT_EQ(results[0].hits[0].words, 1.0f);
}

}  // namespace
}  // namespace lookalike
