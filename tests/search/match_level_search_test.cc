// Match levels end to end through the searcher: generated photos indexed,
// then edits of them searched. A re-encoded, resized, rotated or mirrored
// copy is a copy; a large crop or a picture pasted into another is a part;
// another shot of a generated 3-D scene (the camera moved: a background
// plane seen in perspective, a nearer object shifted by parallax, light from
// another side) is a view; the file's own bytes are identical; an unrelated
// photo matches nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <vector>

#include "indexer/pipeline.h"
#include "search/match_level.h"
#include "search/searcher.h"
#include "tests/indexer/small_index_options.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;

// One shot of a scene: a background plane (`back`, 900 x 700) seen through
// `view` (a homography from the shot's 640 x 480 frame to the plane), a
// nearer object (`thing`) in front of it at `at`, and light falling off
// from left to right by `light` (1 = even).
cv::Mat Shot(const cv::Mat& back, const cv::Mat& thing, const cv::Mat& view, cv::Point at,
             double light) {
  cv::Mat shot;
  cv::warpPerspective(back, shot, view, cv::Size(640, 480),
                      cv::INTER_LINEAR | cv::WARP_INVERSE_MAP);
  thing.copyTo(shot(cv::Rect(at, thing.size())));
  cv::Mat lit;
  shot.convertTo(lit, CV_32FC3);
  for (int x = 0; x < lit.cols; ++x) {
    const float f = static_cast<float>(1.0 - (1.0 - light) * x / (lit.cols - 1));
    lit.col(x) *= f;
  }
  lit.convertTo(shot, CV_8UC3);
  return shot;
}

class MatchLevelSearchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(photos());
    fs::create_directories(queries());
    for (int i = 0; i < 6; ++i) {
      originals_.push_back(testing::MakeSyntheticImage(100 + i, 640, 480));
      testing::WriteImage(photos() + "/photo" + std::to_string(i) + ".png", originals_[i]);
    }
    // The scene's first shot is indexed, the second is a query.
    const cv::Mat back = testing::MakeSyntheticImage(200, 900, 700);
    cv::Mat thing;
    cv::GaussianBlur(testing::MakeSyntheticImage(201, 160, 120), thing, cv::Size(), 2.0);
    const std::vector<cv::Point2f> frame = {{0, 0}, {640, 0}, {640, 480}, {0, 480}};
    const cv::Mat first = cv::getPerspectiveTransform(
        frame, std::vector<cv::Point2f>{{100, 100}, {740, 100}, {740, 580}, {100, 580}});
    testing::WriteImage(photos() + "/scene1.png", Shot(back, thing, first, {260, 160}, 1.0));
    // The camera moved to the left and turned: the plane is seen in
    // perspective, the nearer object shifts more than the plane behind it.
    const cv::Mat second = cv::getPerspectiveTransform(
        frame, std::vector<cv::Point2f>{{80, 90}, {720, 115}, {720, 585}, {80, 600}});
    WriteQuery("scene2.png", Shot(back, thing, second, {330, 140}, 0.6));
    ASSERT_EQ(BuildIndex(testing::SmallIndexOptions(photos(), db()), nullptr).indexed, 7);
  }

  void WriteQuery(const std::string& name, const cv::Mat& image,
                  const std::vector<int>& params = {}) {
    ASSERT_TRUE(cv::imwrite(queries() + "/" + name, image, params)) << name;
  }

  // The level of the hit for photos()/`target` in `query`'s results
  // (none if it is not among them).
  static MatchLevel LevelOf(const QueryResult& r, const std::string& target) {
    for (const Hit& h : r.hits)
      if (fs::path(h.path).filename() == target) return h.level;
    return MatchLevel::kNone;
  }

  std::string photos() const { return tmp_ / "photos"; }
  std::string queries() const { return tmp_ / "queries"; }
  std::string db() const { return tmp_ / "db"; }

  testing::TempDir tmp_;
  std::vector<cv::Mat> originals_;
};

TEST_F(MatchLevelSearchTest, EachEditGetsItsLevel) {
  const std::vector<int> jpeg40 = {cv::IMWRITE_JPEG_QUALITY, 40};
  WriteQuery("reencoded.jpg", originals_[0], jpeg40);
  cv::Mat edited;
  cv::resize(originals_[1], edited, cv::Size(320, 240), 0, 0, cv::INTER_AREA);
  WriteQuery("resized.png", edited);
  cv::rotate(originals_[2], edited, cv::ROTATE_90_CLOCKWISE);
  WriteQuery("rotated.png", edited);
  cv::flip(originals_[3], edited, 1);
  WriteQuery("mirrored.png", edited);
  WriteQuery("cropped.png", originals_[4](cv::Rect(150, 100, 360, 270)).clone());
  cv::Mat composite = testing::MakeSyntheticImage(300, 800, 600), small;
  cv::resize(originals_[5], small, cv::Size(300, 225), 0, 0, cv::INTER_AREA);
  small.copyTo(composite(cv::Rect(420, 300, 300, 225)));
  WriteQuery("pasted.png", composite);
  WriteQuery("unrelated.png", testing::MakeSyntheticImage(400, 640, 480));
  fs::copy_file(photos() + "/photo0.png", queries() + "/same_bytes.png");

  SearchOptions options;
  options.k = 7;
  options.backend = Backend::kCpu;
  options.index.min_word_images = 0;
  options.fusion.word_min_images = 0;  // and fuse its similarity
  auto searcher = Searcher::Open(db(), options);
  const std::map<std::string, std::pair<std::string, MatchLevel>> expected = {
      {"reencoded.jpg", {"photo0.png", MatchLevel::kCopy}},
      {"resized.png", {"photo1.png", MatchLevel::kCopy}},
      {"rotated.png", {"photo2.png", MatchLevel::kCopy}},
      {"mirrored.png", {"photo3.png", MatchLevel::kCopy}},
      {"cropped.png", {"photo4.png", MatchLevel::kPart}},
      {"pasted.png", {"photo5.png", MatchLevel::kPart}},
      {"scene2.png", {"scene1.png", MatchLevel::kView}},
      {"same_bytes.png", {"photo0.png", MatchLevel::kIdentical}},
  };
  std::vector<std::string> paths;
  for (const auto& [name, want] : expected) paths.push_back(queries() + "/" + name);
  paths.push_back(queries() + "/unrelated.png");
  const std::vector<QueryResult> results = searcher->SearchFiles(paths);
  ASSERT_EQ(results.size(), paths.size());
  for (const QueryResult& r : results) {
    ASSERT_FALSE(r.error) << r.query;
    const std::string name = fs::path(r.query).filename();
    const auto it = expected.find(name);
    if (it == expected.end()) {
      for (const Hit& h : r.hits) EXPECT_EQ(h.level, MatchLevel::kNone) << name << " " << h.path;
      continue;
    }
    const auto& [target, level] = it->second;
    EXPECT_EQ(MatchLevelName(LevelOf(r, target)), std::string(MatchLevelName(level))) << name;
    ASSERT_FALSE(r.hits.empty()) << name;
    EXPECT_EQ(fs::path(r.hits[0].path).filename(), target) << name;
    // Every other hit is unrelated.
    for (const Hit& h : r.hits) {
      if (fs::path(h.path).filename() != target) {
        EXPECT_EQ(h.level, MatchLevel::kNone) << name << " " << h.path;
      }
    }
  }
  // The mirrored copy was found through its mirror image, and says so.
  for (const QueryResult& r : results) {
    if (fs::path(r.query).filename() == "mirrored.png") {
      EXPECT_TRUE(r.hits[0].evidence.mirrored);
      EXPECT_GE(r.hits[0].inliers, options.rerank.min_inliers);
    }
  }

  // --min-level keeps the hits at or above the level.
  options.min_level = MatchLevel::kPart;
  const std::vector<QueryResult> kept = Searcher::Open(db(), options)->SearchFiles(paths);
  for (const QueryResult& r : kept) {
    const std::string name = fs::path(r.query).filename();
    for (const Hit& h : r.hits) EXPECT_GE(h.level, MatchLevel::kPart) << name;
    const auto it = expected.find(name);
    const bool wanted = it != expected.end() && it->second.second >= MatchLevel::kPart;
    EXPECT_EQ(r.hits.size(), wanted ? 1u : 0u) << name;
  }

  // Without the mirror search a mirrored copy is no copy.
  options.min_level = MatchLevel::kNone;
  options.mirrored = false;
  const std::vector<QueryResult> plain =
      Searcher::Open(db(), options)->SearchFiles({queries() + "/mirrored.png"});
  EXPECT_LT(LevelOf(plain.at(0), "photo3.png"), MatchLevel::kCopy);
}

}  // namespace
}  // namespace lookalike
