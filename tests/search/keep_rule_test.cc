// Tests of dedup's keep rules on generated images: what a file tells
// (AnalyseImageBytes: EXIF, JPEG quality, an added alpha channel, a JPEG's
// block edges in a PNG, borders and filled corners), and, through
// FindDuplicates, that the original is kept where the rule used to keep an
// edited copy: a 10-degree rotation with black corners, a brightened copy, a
// JPEG saved again as PNG with an alpha channel, a byte-identical copy in a
// nested folder, and a copy with black borders. Each copy is given an
// older modification time and a higher JPEG quality than its original
// wherever that is possible, so that only the edit can tell them apart.
// Then the user's rules: --keep-in folders, --keep newest, oldest, largest
// and path.
#include "search/keep_rule.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
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
#include "search/dedup.h"
#include "search/dedup_groups.h"
#include "search/image_traits.h"
#include "storage/store.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::string Encode(const cv::Mat& image, const std::string& ext, int quality = 90) {
  std::vector<uchar> buf;
  std::vector<int> params;
  if (ext == ".jpg") params = {cv::IMWRITE_JPEG_QUALITY, quality};
  EXPECT_TRUE(cv::imencode(ext, image, buf, params));
  return std::string(buf.begin(), buf.end());
}

// A JPEG with a minimal APP1 Exif segment (an empty TIFF directory) after
// its start-of-image marker, as a camera writes one.
std::string WithExif(const std::string& jpeg) {
  const std::string tiff("II*\0\x08\0\0\0\0\0\0\0\0\0", 14);
  const std::string payload = std::string("Exif\0\0", 6) + tiff;
  const size_t length = payload.size() + 2;
  std::string app1 = "\xFF\xE1";
  app1 += static_cast<char>(length >> 8);
  app1 += static_cast<char>(length & 0xFF);
  return jpeg.substr(0, 2) + app1 + payload + jpeg.substr(2);
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

// Sets a file's modification time to `seconds` after the epoch.
void SetTime(const std::string& path, int64_t seconds) {
  const struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

cv::Mat Rotated(const cv::Mat& image, double degrees) {
  cv::Mat out;
  const cv::Point2f centre(image.cols / 2.0f, image.rows / 2.0f);
  cv::warpAffine(image, out, cv::getRotationMatrix2D(centre, degrees, 1.0), image.size(),
                 cv::INTER_LINEAR, cv::BORDER_CONSTANT, cv::Scalar());
  return out;
}

TEST(ImageTraitsTest, ReadsMetadataAndEncoding) {
  const cv::Mat photo = testing::MakeSyntheticImage(5, 320, 240);
  const ImageTraits plain = AnalyseImageBytes(Encode(photo, ".jpg", 50));
  ASSERT_TRUE(plain.read);
  EXPECT_EQ(plain.format, ImageFormat::kJpeg);
  EXPECT_FALSE(plain.exif);
  EXPECT_NEAR(plain.jpeg_quality, 50, 2);
  EXPECT_NEAR(AnalyseImageBytes(Encode(photo, ".jpg", 90)).jpeg_quality, 90, 2);
  EXPECT_TRUE(AnalyseImageBytes(WithExif(Encode(photo, ".jpg"))).exif);
  EXPECT_FALSE(AnalyseImageBytes(WithExif(Encode(photo, ".jpg"))).grey);

  // A PNG drawn as PNG: no alpha, no JPEG history.
  const ImageTraits png = AnalyseImageBytes(Encode(photo, ".png"));
  ASSERT_TRUE(png.read);
  EXPECT_FALSE(png.opaque_alpha);
  EXPECT_LT(png.block_edges, kJpegHistory);
  // The same picture decoded from a JPEG and saved as PNG with alpha.
  const std::string jpeg = Encode(photo, ".jpg", 60);
  cv::Mat decoded = cv::imdecode(std::vector<uchar>(jpeg.begin(), jpeg.end()), cv::IMREAD_COLOR);
  cv::Mat with_alpha;
  cv::cvtColor(decoded, with_alpha, cv::COLOR_BGR2BGRA);
  const ImageTraits converted = AnalyseImageBytes(Encode(with_alpha, ".png"));
  EXPECT_TRUE(converted.opaque_alpha);
  EXPECT_GT(converted.block_edges, kJpegHistory);
  EXPECT_GT(AnalyseImageBytes(Encode(decoded, ".png")).block_edges, kJpegHistory);

  cv::Mat grey, grey_bgr;
  cv::cvtColor(photo, grey, cv::COLOR_BGR2GRAY);
  cv::cvtColor(grey, grey_bgr, cv::COLOR_GRAY2BGR);
  EXPECT_TRUE(AnalyseImageBytes(Encode(grey_bgr, ".png")).grey);
  EXPECT_FALSE(AnalyseImageBytes("not an image").read);
}

TEST(ImageTraitsTest, MarginsAreNotContent) {
  const cv::Mat photo = testing::MakeSyntheticImage(6, 400, 300);
  EXPECT_GT(AnalyseImageBytes(Encode(photo, ".png")).content, 0.99f);
  cv::Mat bordered;
  cv::copyMakeBorder(photo, bordered, 30, 30, 40, 40, cv::BORDER_CONSTANT, cv::Scalar());
  const double picture = 400.0 * 300 / (480.0 * 360);
  EXPECT_NEAR(AnalyseImageBytes(Encode(bordered, ".jpg")).content, picture, 0.03);
  // Rotated on its own canvas: four black corners.
  const ImageTraits rotated = AnalyseImageBytes(Encode(Rotated(photo, 10), ".jpg"));
  EXPECT_LT(rotated.content, 0.95f);
  EXPECT_GT(rotated.content, 0.75f);
  ASSERT_EQ(rotated.mask.size(), static_cast<size_t>(rotated.mask_width * rotated.mask_height));
  EXPECT_EQ(rotated.mask[0], 0) << "the top-left corner is filled";
  EXPECT_EQ(rotated.mask[rotated.mask.size() / 2 + rotated.mask_width / 2], 1);
}

TEST(KeepRuleTest, NamesAndRecordOrder) {
  for (const char* name : {"original", "newest", "oldest", "largest", "path"})
    EXPECT_STREQ(KeepRuleName(ParseKeepRule(name)), name);
  EXPECT_THROW(ParseKeepRule("biggest"), std::invalid_argument);
  ImageRecord a, b;
  a.path = "/photos/x.jpg";
  b.path = "/photos/copies/x.jpg";
  a.width = b.width = 100;
  a.height = b.height = 80;
  a.mtime_ns = b.mtime_ns = 5;
  const KeepCandidate ca{&a, nullptr, false}, cb{&b, nullptr, false};
  KeepVerdict v = CompareForKeeping(KeepRule::kOriginal, ca, cb, nullptr, true);
  EXPECT_EQ(v.prefer, -1);
  EXPECT_EQ(v.criterion, KeepCriterion::kShorterPath);
  b.mtime_ns = 4;  // older: the oldest comes before the shortest path
  EXPECT_EQ(CompareForKeeping(KeepRule::kOriginal, ca, cb, nullptr, true).prefer, 1);
  EXPECT_EQ(CompareForKeeping(KeepRule::kNewest, ca, cb, nullptr, false).prefer, -1);
  EXPECT_EQ(CompareForKeeping(KeepRule::kPath, ca, cb, nullptr, false).prefer, -1);
  // A reference folder's file comes first, whatever the rule.
  const KeepCandidate reference{&b, nullptr, true};
  v = CompareForKeeping(KeepRule::kPath, ca, reference, nullptr, false);
  EXPECT_EQ(v.prefer, 1);
  EXPECT_EQ(v.criterion, KeepCriterion::kReference);
}

// A chain of pairs (0~1, 1~2, 2~3: a calibration series, each pose verified
// against the next) never becomes one group: stars around keepers, every
// member paired with its keeper.
TEST(DedupGroupsTest, ChainsBecomeStars) {
  const std::vector<std::pair<size_t, size_t>> chain = {{0, 1}, {1, 2}, {2, 3}, {3, 4}};
  auto no_preference = [](size_t, size_t) { return KeepVerdict(); };
  auto by_index = [](size_t x, size_t y) { return x < y; };
  const std::vector<Star> stars =
      FormStars(5, chain, std::vector<bool>(5, false), true, no_preference, by_index);
  std::set<size_t> placed;
  for (const Star& s : stars) {
    ASSERT_GE(s.members.size(), 2u);
    for (size_t i = 1; i < s.members.size(); ++i) {
      const auto edge = std::make_pair(std::min(s.members[0], s.members[i]),
                                       std::max(s.members[0], s.members[i]));
      EXPECT_NE(std::find(chain.begin(), chain.end(), edge), chain.end())
          << s.members[i] << " is not paired with its keeper " << s.members[0];
    }
    for (size_t m : s.members) EXPECT_TRUE(placed.insert(m).second) << m << " in two groups";
  }
  EXPECT_EQ(stars.size(), 2u);  // {0, 1} around 0, {2, 3} or {3, 2, 4}: never all five

  // The node every other one is preferred against... keeps the star: here 2
  // is preferred to all its neighbours in a triangle plus a tail.
  const std::vector<std::pair<size_t, size_t>> edges = {{0, 1}, {0, 2}, {1, 2}, {2, 3}};
  auto prefer_two = [](size_t x, size_t y) {
    KeepVerdict v;
    if (x == 2) v.prefer = -1;
    if (y == 2) v.prefer = 1;
    return v;
  };
  const std::vector<Star> around_two =
      FormStars(4, edges, std::vector<bool>(4, false), true, prefer_two, by_index);
  ASSERT_EQ(around_two.size(), 1u);
  EXPECT_EQ(around_two[0].members[0], 2u);
  EXPECT_EQ(around_two[0].members.size(), 4u);
  // A reference folder's node keeps its star whatever the verdicts.
  std::vector<bool> reference(4, false);
  reference[3] = true;
  const std::vector<Star> around_three = FormStars(4, edges, reference, true, prefer_two, by_index);
  ASSERT_FALSE(around_three.empty());
  EXPECT_EQ(around_three[0].members[0], 3u);
}

// One collection holding each case as its own photo and copies.
class KeepTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir;
    photos_ = new std::string(fs::canonical(tmp_->path()).string() + "/photos");
    const std::string& p = *photos_;
    // Originals: camera-like JPEGs (EXIF, quality 85), written first.
    auto original = [&](const std::string& name, uint64_t seed) {
      const cv::Mat image = testing::MakeSyntheticImage(seed, 640, 480);
      WriteBytes(p + "/" + name, WithExif(Encode(image, ".jpg", 85)));
      SetTime(p + "/" + name, 1'600'000'000);
      return image;
    };
    // Copies: written at a higher quality, without EXIF, dated before their
    // original, so that only what was done to them tells them apart.
    auto copy = [&](const std::string& name, const std::string& bytes) {
      WriteBytes(p + "/" + name, bytes);
      SetTime(p + "/" + name, 1'500'000'000);
    };
    const cv::Mat rotated = original("rotated.jpg", 101);
    copy("edits/rotated_10.jpg", Encode(Rotated(rotated, 10), ".jpg", 95));

    // Without EXIF, so that the tones decide (EXIF comes first); its tones
    // stretched from black to white, as a photo's are.
    cv::Mat bright;
    testing::MakeSyntheticImage(102, 640, 480).convertTo(bright, -1, 2.5, -180);
    WriteBytes(p + "/bright.jpg", Encode(bright, ".jpg", 85));
    SetTime(p + "/bright.jpg", 1'600'000'000);
    cv::Mat brighter;
    bright.convertTo(brighter, -1, 1.0, 60);
    copy("edits/bright_plus60.jpg", Encode(brighter, ".jpg", 95));

    // The PNG holds exactly the JPEG's pixels, with an alpha channel.
    const cv::Mat alpha = testing::MakeSyntheticImage(103, 640, 480);
    const std::string jpeg = Encode(alpha, ".jpg", 85);
    WriteBytes(p + "/alpha.jpg", jpeg);
    SetTime(p + "/alpha.jpg", 1'600'000'000);
    cv::Mat decoded = cv::imdecode(std::vector<uchar>(jpeg.begin(), jpeg.end()), cv::IMREAD_COLOR);
    cv::cvtColor(decoded, decoded, cv::COLOR_BGR2BGRA);
    copy("edits/alpha.png", Encode(decoded, ".png"));

    const cv::Mat bordered = original("bordered.jpg", 104);
    cv::Mat with_border;
    cv::copyMakeBorder(bordered, with_border, 40, 40, 50, 50, cv::BORDER_CONSTANT, cv::Scalar());
    copy("edits/bordered_border.jpg", Encode(with_border, ".jpg", 95));

    // Only the original keeps its camera's EXIF.
    copy("edits/exif_saved_again.jpg", Encode(original("exif.jpg", 106), ".jpg", 95));

    // Byte-identical, the same time: the shorter path is the original.
    original("same.jpg", 105);
    fs::create_directories(p + "/a/b");
    fs::copy_file(p + "/same.jpg", p + "/a/b/same.jpg");
    SetTime(p + "/a/b/same.jpg", 1'600'000'000);

    IndexOptions o;
    o.image_dir = p;
    o.db_path = *tmp_ / "db";
    o.model.codebook.num_clusters = 16;
    o.threads = 2;
    o.backend = Backend::kCpu;
    ASSERT_EQ(BuildIndex(o, nullptr).total_skipped(), 0);
  }
  static void TearDownTestSuite() {
    delete photos_;
    delete tmp_;
  }

  // The groups by their original's name: the keeper's path and the members.
  static std::map<std::string, const DedupGroup*> ByCase(const DedupResult& r) {
    std::map<std::string, const DedupGroup*> cases;
    for (const DedupGroup& g : r.groups)
      for (const DedupMember& m : g.members)
        if (fs::path(m.path).parent_path() == *photos_)
          cases[fs::path(m.path).filename().string()] = &g;
    return cases;
  }
  static DedupResult Run(const DedupOptions& o) {
    auto store = Store::Open(*tmp_ / "db", Store::Mode::kReadOnly);
    return FindDuplicates(*store, o);
  }

  static TempDir* tmp_;
  static std::string* photos_;
};

TempDir* KeepTest::tmp_ = nullptr;
std::string* KeepTest::photos_ = nullptr;

TEST_F(KeepTest, TheOriginalIsKept) {
  const DedupResult r = Run(DedupOptions());
  EXPECT_EQ(r.num_unread, 0);
  const auto cases = ByCase(r);
  const std::map<std::string, KeepCriterion> expected = {
      {"rotated.jpg", KeepCriterion::kContent},  {"bright.jpg", KeepCriterion::kTones},
      {"alpha.jpg", KeepCriterion::kEncoding},   {"bordered.jpg", KeepCriterion::kBorders},
      {"same.jpg", KeepCriterion::kShorterPath}, {"exif.jpg", KeepCriterion::kExif},
  };
  for (const auto& [name, criterion] : expected) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(cases.count(name)) << "no group holds " << name;
    const DedupGroup& g = *cases.at(name);
    ASSERT_EQ(g.members.size(), 2u);
    EXPECT_EQ(g.members[0].path, *photos_ + "/" + name) << g.members[0].reason;
    EXPECT_EQ(g.members[0].role, MemberRole::kKeep);
    EXPECT_EQ(g.members[1].role, MemberRole::kDuplicate);
    EXPECT_EQ(g.keep_reason, KeeperStrength(criterion)) << g.members[1].reason;
    EXPECT_GE(g.members[1].level, MatchLevel::kCopy);
  }
  EXPECT_EQ(cases.at("same.jpg")->level, MatchLevel::kIdentical);
  EXPECT_NE(cases.at("alpha.jpg")->members[1].reason.find("opaque alpha"), std::string::npos);
}

TEST_F(KeepTest, ReferenceFoldersAreAlwaysKept) {
  DedupOptions o;
  o.keep_in = {*photos_ + "/edits"};
  const DedupResult r = Run(o);
  for (const DedupGroup& g : r.groups) {
    SCOPED_TRACE(g.members[0].path);
    bool any_reference = false;
    for (const DedupMember& m : g.members) {
      const bool inside = IsUnder(m.path, *photos_ + "/edits");
      any_reference |= inside;
      if (inside) {
        EXPECT_NE(m.role, MemberRole::kDuplicate)
            << "a reference folder's file offered for removal";
      }
    }
    if (any_reference) {
      EXPECT_TRUE(IsUnder(g.members[0].path, *photos_ + "/edits"));
      EXPECT_EQ(g.keep_reason, KeeperStrength(KeepCriterion::kReference));
    }
  }
  EXPECT_EQ(ByCase(r).size(), 6u);
}

TEST_F(KeepTest, UserRules) {
  // The copies are dated before their originals.
  DedupOptions oldest;
  oldest.keep = KeepRule::kOldest;
  const DedupResult by_oldest = Run(oldest);
  for (const auto& [name, g] : ByCase(by_oldest))
    if (name != "same.jpg") {
      EXPECT_NE(g->members[0].path, *photos_ + "/" + name) << name;
    }
  DedupOptions newest;
  newest.keep = KeepRule::kNewest;
  const DedupResult by_newest = Run(newest);
  for (const auto& [name, g] : ByCase(by_newest))
    EXPECT_EQ(fs::path(g->members[0].path).parent_path(), *photos_) << name;
  // The bordered copy has the most pixels.
  DedupOptions largest;
  largest.keep = KeepRule::kLargest;
  const DedupResult by_size = Run(largest);
  EXPECT_EQ(ByCase(by_size).at("bordered.jpg")->members[0].path,
            *photos_ + "/edits/bordered_border.jpg");
  DedupOptions path;
  path.keep = KeepRule::kPath;
  const DedupResult by_path = Run(path);
  for (const auto& [name, g] : ByCase(by_path))
    EXPECT_EQ(g->members[0].path, *photos_ + "/" + name) << name;
}

}  // namespace
}  // namespace lookalike
