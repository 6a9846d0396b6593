// Tests of the searcher over a generated index: self-retrieval, k, ordering,
// zero-vector images, bad queries, query expansion, and searching while a
// writer holds the database.
#include "search/searcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "indexer/file_walker.h"
#include "indexer/pipeline.h"
#include "storage/store.h"
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
    IndexOptions o;
    o.image_dir = dir();
    o.db_path = db();
    o.codebook.num_clusters = 16;
    o.threads = 2;
    o.backend = Backend::kCpu;
    const IndexSummary s = BuildIndex(o, nullptr);
    ASSERT_EQ(s.indexed, kImages + 1);
    ASSERT_EQ(s.no_features, 1);
  }
  std::unique_ptr<Searcher> Open(int k, int rerank = 0) {
    SearchOptions o;
    o.k = k;
    o.rerank = rerank;
    o.backend = Backend::kCpu;
    return Searcher::Open(db(), o);
  }
  std::string dir() const { return tmp_ / "photos"; }
  std::string db() const { return tmp_ / "db"; }

  TempDir tmp_;
  std::vector<std::string> paths_;
  std::string flat_;
};

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
    EXPECT_NEAR(r.hits[0].score, 1.0f, 1e-4) << r.query;
    EXPECT_LT(r.hits[1].score, 0.999f) << "distinct images must not look identical";
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
  EXPECT_GE(top.inliers, SearchOptions().min_inliers) << "a rotated copy verifies";
  EXPECT_GT(top.score, top.similarity) << "spatial evidence raises the score";
  EXPECT_LE(top.score, 1.0f);
  for (const Hit& h : verified[0].hits) {
    EXPECT_GE(h.inliers, 0) << "every candidate within the re-ranking depth was verified";
    if (h.inliers < SearchOptions().min_inliers) {
      EXPECT_EQ(h.score, h.similarity) << "unverified results keep their VLAD similarity";
    }
  }
  // Without re-ranking, scores are the VLAD similarities and nothing is verified.
  for (const Hit& h : plain[0].hits) {
    EXPECT_EQ(h.inliers, -1);
    EXPECT_EQ(h.score, h.similarity);
  }
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
  const auto expanded =
      ExpandQueryPaths({paths_[2], tmp_ / "queries", tmp_ / "nope.jpg"}, &errors);
  const std::string root = AbsolutePath(tmp_ / "queries");
  EXPECT_EQ(expanded,
            (std::vector<std::string>{paths_[2], root + "/b.png", root + "/sub/a.png"}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, tmp_ / "nope.jpg");
  EXPECT_EQ(errors[0].code, FileErrorCode::kVanished);
}

TEST_F(SearcherTest, WorksWhileAWriterHoldsTheDatabase) {
  auto writer = Store::Open(db(), Store::Mode::kReadWrite);
  // A write committed by the running writer is visible to a new searcher.
  std::vector<float> copy;
  writer->ForEachVector([&](const ImageRecord& r, const float* v) {
    if (copy.empty() && r.status == ImageStatus::kOk)
      copy.assign(v, v + writer->model().vlad_dim());
  });
  ImageRecord extra;
  extra.path = tmp_ / "elsewhere/extra.png";
  writer->PutImage(&extra, copy.data());

  auto searcher = Open(3);
  EXPECT_EQ(searcher->num_indexed(), kImages + 1);
  const auto results = searcher->SearchFiles({paths_[6]});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].error.has_value());
  EXPECT_EQ(results[0].hits.at(0).path, AbsolutePath(paths_[6]));
  // The searcher did not disturb the writer.
  ImageRecord more;
  more.path = tmp_ / "elsewhere/more.png";
  EXPECT_NO_THROW(writer->PutImage(&more, copy.data()));
}

TEST(SearcherOpenTest, ErrorsAndValidation) {
  TempDir tmp;
  SearchOptions o;
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
}

}  // namespace
}  // namespace lookalike
