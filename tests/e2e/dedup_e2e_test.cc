// End-to-end: the real `lookalike` binary indexes generated photos with
// re-encoded, resized and cropped copies plus distinct photos, then `dedup`
// prints the expected groups as a table, TSV and JSON, each member with its
// role, level and reason; usage errors exit 2; a file name with a tab and a
// newline is escaped and round-trips through JSON. Then acting on the
// groups: the remove lists and the review script (which removes nothing
// until its lines are uncommented), --move-to with its manifest, re-run and
// --undo, never moving a keeper, a reference folder's file or over an
// existing file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/json_lite.h"
#include "tests/subprocess.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
using testing::JsonParser;
using testing::TempDir;
using testing::Transform;

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

testing::ProcessResult Lookalike(std::vector<std::string> args) {
  testing::ProcessOptions o;
  o.argv = testing::LookalikeArgs(LOOKALIKE_BIN, std::move(args));
  return testing::RunProcess(o);
}

class DedupCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir;
    const std::string photos = fs::canonical(tmp_->path()).string() + "/photos";
    const std::vector<std::string> originals = testing::WriteSyntheticSet(photos, 7, 300);
    expected_ = new std::set<std::set<std::string>>;
    expected_copy_ = new std::set<std::set<std::string>>;
    for (int i = 0; i < 2; ++i) {
      const cv::Mat image = cv::imread(originals[i], cv::IMREAD_COLOR);
      std::set<std::string> group = {originals[i]}, copies = group;
      for (Transform t : {Transform::kJpeg, Transform::kScale, Transform::kCrop}) {
        // The first group's cropped copy has a tab and a newline in its name.
        std::string name = "copy" + std::to_string(i) + "_" + testing::TransformName(t);
        if (i == 0 && t == Transform::kCrop) name += "\twith\nbreaks";
        const std::string path = photos + "/" + name + ".jpg";
        testing::WriteImage(path, testing::ApplyTransform(image, t));
        group.insert(path);
        if (t != Transform::kCrop) copies.insert(path);  // 49 % of the picture: a part
      }
      expected_->insert(group);
      expected_copy_->insert(copies);
    }
    const testing::ProcessResult index =
        Lookalike({"index", photos, "--db", *tmp_ / "db", "--clusters", "32", "--quiet"});
    ASSERT_EQ(index.exit_code, 0) << index.Describe();
  }
  static void TearDownTestSuite() {
    delete expected_;
    delete expected_copy_;
    delete tmp_;
  }
  static TempDir* tmp_;
  // The groups at level part (with the crops) and at copy (without).
  static std::set<std::set<std::string>>* expected_;
  static std::set<std::set<std::string>>* expected_copy_;
};

TempDir* DedupCliTest::tmp_ = nullptr;
std::set<std::set<std::string>>* DedupCliTest::expected_ = nullptr;
std::set<std::set<std::string>>* DedupCliTest::expected_copy_ = nullptr;

TEST_F(DedupCliTest, TsvListsEachGroupOnceWithEscapedPaths) {
  const testing::ProcessResult run =
      Lookalike({"dedup", "--db", *tmp_ / "db", "--level", "part", "--format", "tsv", "-v"});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  std::map<std::string, std::set<std::string>> groups;
  std::map<std::string, int> keepers;
  std::vector<std::string> order;
  for (const std::string& line : testing::SplitLines(run.out)) {
    const std::vector<std::string> f = testing::SplitOn(line, '\t');
    ASSERT_EQ(f.size(), 6u) << "group, path, score, role, level, reason; got: " << line;
    const double score = std::stod(f[2]);
    EXPECT_GT(score, 0.0);
    EXPECT_LE(score, 1.0);
    if (groups.find(f[0]) == groups.end()) order.push_back(f[0]);
    EXPECT_TRUE(groups[f[0]].insert(testing::UnescapeField(f[1])).second)
        << "listed twice: " << f[1];
    if (f[3] == "keep") {
      ++keepers[f[0]];
      EXPECT_EQ(f[4], "-");
      EXPECT_EQ(groups[f[0]].size(), 1u) << "the keeper comes first";
    } else {
      EXPECT_EQ(f[3], "duplicate");
      EXPECT_TRUE(f[4] == "part" || f[4] == "copy" || f[4] == "identical") << f[4];
    }
    EXPECT_FALSE(f[5].empty()) << "every member says why it is (not) kept";
  }
  EXPECT_EQ(order, (std::vector<std::string>{"1", "2"})) << "groups numbered from 1, in order";
  EXPECT_EQ(keepers, (std::map<std::string, int>{{"1", 1}, {"2", 1}}));
  std::set<std::set<std::string>> got;
  for (const auto& [id, members] : groups) got.insert(members);
  EXPECT_EQ(got, *expected_) << run.out;
  EXPECT_NE(run.err.find("2 groups holding 8 images"), std::string::npos) << run.err;
  // Deterministic: a second run prints the same bytes.
  EXPECT_EQ(Lookalike({"dedup", "--db", *tmp_ / "db", "--level", "part", "--format", "tsv"}).out,
            run.out);
}

TEST_F(DedupCliTest, TableIsTheDefault) {
  const testing::ProcessResult run = Lookalike({"dedup", "--db", *tmp_ / "db"});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  EXPECT_EQ(run.out.rfind("duplicates at level copy or above: 2 groups among 13 images", 0), 0u)
      << run.out;
  EXPECT_NE(run.out.find("\ngroup 2: copy, 3 images; keep: "), std::string::npos) << run.out;
  const testing::ProcessResult view = Lookalike({"dedup", "--db", *tmp_ / "db", "--level", "view"});
  ASSERT_EQ(view.exit_code, 0) << view.Describe();
  EXPECT_EQ(view.out.rfind("similar shots at level view or above", 0), 0u) << view.out;
}

TEST_F(DedupCliTest, JsonHasOneObjectPerGroup) {
  const testing::ProcessResult run = Lookalike({"dedup", "--db", *tmp_ / "db", "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::vector<std::string> lines = testing::SplitLines(run.out);
  ASSERT_EQ(lines.size(), 2u) << run.out;
  std::set<std::set<std::string>> got;
  for (size_t i = 0; i < lines.size(); ++i) {
    const testing::Json group = JsonParser::Parse(lines[i]);
    EXPECT_EQ(group["group"].number, static_cast<double>(i + 1));
    EXPECT_EQ(group["level"].str, "copy");
    EXPECT_FALSE(group["keep_reason"].str.empty());
    std::set<std::string> members;
    for (size_t m = 0; m < group["members"].items.size(); ++m) {
      const testing::Json& member = group["members"].items[m];
      members.insert(member["path"].str);
      EXPECT_GT(member["width"].number, 0);
      EXPECT_GT(member["score"].number, 0);
      EXPECT_GT(member["mtime"].number, 1e9);
      EXPECT_EQ(member["role"].str, m == 0 ? "keep" : "duplicate");
      if (m == 0) {
        EXPECT_EQ(member["path"].str, group["keeper"].str);
        EXPECT_EQ(member["reason"].str, group["keep_reason"].str);
      } else {
        EXPECT_EQ(member["level"].str, "copy");
        EXPECT_FALSE(member["reason"].str.empty());
      }
    }
    got.insert(members);
    ASSERT_FALSE(group["pairs"].items.empty());
    for (const testing::Json& p : group["pairs"].items) {
      EXPECT_TRUE(members.count(p["a"].str) && members.count(p["b"].str));
      EXPECT_EQ(p["level"].str, "copy");
      EXPECT_GE(p["inliers"].number, 12);
      EXPECT_GE(p["score"].number, 0.10);
      EXPECT_GE(p["spread"].number, 0.20);
      EXPECT_FALSE(p["identical"].boolean);
      EXPECT_TRUE(p.Has("mirrored"));
      EXPECT_FALSE(p["mirrored"].boolean);
    }
  }
  EXPECT_EQ(got, *expected_copy_) << run.out;
}

TEST_F(DedupCliTest, ThresholdAndPairsFormat) {
  // Nothing but byte-identical files reaches a score of 1.
  const testing::ProcessResult strict =
      Lookalike({"dedup", "--db", *tmp_ / "db", "--threshold", "1", "--format", "tsv"});
  ASSERT_EQ(strict.exit_code, 0) << strict.Describe();
  EXPECT_EQ(strict.out, "");
  // Every verified candidate pair, with its evidence and verdict.
  const testing::ProcessResult pairs =
      Lookalike({"dedup", "--db", *tmp_ / "db", "--format", "pairs"});
  ASSERT_EQ(pairs.exit_code, 0) << pairs.Describe();
  int duplicates = 0, rejected = 0;
  for (const std::string& line : testing::SplitLines(pairs.out)) {
    const std::vector<std::string> f = testing::SplitOn(line, '\t');
    ASSERT_EQ(f.size(), 13u) << line;
    if (f[8] != "none") {
      EXPECT_EQ(f[12], "0") << "nothing here is mirrored: " << line;
    }
    (f[7] == "1" ? duplicates : rejected)++;
    EXPECT_EQ(f[7] == "1", f[8] == "copy" || f[8] == "identical") << line;
  }
  EXPECT_GE(duplicates, 6);  // two groups of three, complete
  EXPECT_GT(rejected, 0);
}

// A mirrored copy (flipped left to right) is grouped with its original at
// level copy, the pair marked mirrored in the JSON and in the pairs format's
// last column; `--mirrored 0` leaves it out of every group.
TEST(DedupMirroredCliTest, MirroredCopyIsACopy) {
  TempDir tmp;
  const std::string photos = fs::canonical(tmp.path()).string() + "/photos";
  const std::vector<std::string> originals = testing::WriteSyntheticSet(photos, 6, 500);
  cv::Mat mirrored;
  cv::flip(cv::imread(originals[2], cv::IMREAD_COLOR), mirrored, 1);
  const std::string copy = photos + "/mirrored.jpg";
  testing::WriteImage(copy, mirrored);
  const testing::ProcessResult index =
      Lookalike({"index", photos, "--db", tmp / "db", "--clusters", "32", "--quiet"});
  ASSERT_EQ(index.exit_code, 0) << index.Describe();

  const testing::ProcessResult run =
      Lookalike({"dedup", "--db", tmp / "db", "--format", "json", "-v"});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const std::vector<std::string> lines = testing::SplitLines(run.out);
  ASSERT_EQ(lines.size(), 1u) << run.out;
  const testing::Json group = JsonParser::Parse(lines[0]);
  EXPECT_EQ(group["level"].str, "copy");
  ASSERT_EQ(group["members"].items.size(), 2u) << run.out;
  EXPECT_EQ(group["keeper"].str, originals[2]) << "a lossless original over a JPEG copy";
  EXPECT_EQ(group["members"].items[1]["path"].str, copy);
  EXPECT_EQ(group["members"].items[1]["level"].str, "copy");
  ASSERT_EQ(group["pairs"].items.size(), 1u);
  EXPECT_TRUE(group["pairs"].items[0]["mirrored"].boolean) << run.out;
  EXPECT_NE(run.err.find(" mirrored at a level)"), std::string::npos) << run.err;

  const testing::ProcessResult pairs =
      Lookalike({"dedup", "--db", tmp / "db", "--format", "pairs"});
  ASSERT_EQ(pairs.exit_code, 0) << pairs.Describe();
  int mirrored_copies = 0;
  for (const std::string& line : testing::SplitLines(pairs.out)) {
    const std::vector<std::string> f = testing::SplitOn(line, '\t');
    ASSERT_EQ(f.size(), 13u) << line;
    const bool ours =
        std::set<std::string>{f[0], f[1]} == std::set<std::string>{originals[2], copy};
    if (ours) {
      EXPECT_EQ(f[8], "copy") << line;
      EXPECT_EQ(f[12], "1") << line;
      ++mirrored_copies;
    }
  }
  EXPECT_EQ(mirrored_copies, 1) << pairs.out;

  const testing::ProcessResult off =
      Lookalike({"dedup", "--db", tmp / "db", "--mirrored", "0", "--format", "tsv"});
  ASSERT_EQ(off.exit_code, 0) << off.Describe();
  EXPECT_EQ(off.out, "") << "without mirror images a mirrored copy is no copy";
}

TEST_F(DedupCliTest, UsageErrorsExitTwo) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"dedup"},
           {"dedup", "--db", *tmp_ / "db", "--threshold", "0"},
           {"dedup", "--db", *tmp_ / "db", "--threshold", "1.5"},
           {"dedup", "--db", *tmp_ / "db", "--format", "xml"},
           {"dedup", "--db", *tmp_ / "db", "--level", "none"},
           {"dedup", "--db", *tmp_ / "db", "--level", "similar"},
           {"dedup", "--db", *tmp_ / "db", "--keep", "biggest"},
           {"dedup", "--db", *tmp_ / "db", "--undo", *tmp_ / "moved"},
           {"dedup", "--db", *tmp_ / "db", "--min-inliers", "3"},
           {"dedup", "--db", *tmp_ / "db", "--min-spread", "1.5"},
           {"dedup", "--db", *tmp_ / "db", "--neighbours", "0"},
           {"dedup", "--db", *tmp_ / "db", "--nprobe", "70000"},
           {"dedup", "--db", *tmp_ / "db", "--index-kind", "hnsw"},
           {"dedup", "--db", *tmp_ / "missing"},
       }) {
    const testing::ProcessResult run = Lookalike(args);
    EXPECT_EQ(run.exit_code, 2) << args.back() << ": " << run.Describe();
    EXPECT_FALSE(run.err.empty());
    EXPECT_EQ(run.out, "");
  }
  const testing::ProcessResult help = Lookalike({"dedup", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--threshold arg (=0.1)"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--min-spread arg (=0.2)"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--neighbours arg (=5)"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--level arg (=copy)"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--keep arg (=original)"), std::string::npos) << help.out;
}

// Acting on the groups, on a collection of its own per test (the tests
// remove and move its files): three originals, each with a re-encoded and a
// resized copy, the first's in copies/, the second's in the reference
// folder ref/ (so that they keep their group, and the original is the
// duplicate), the third's beside it, one of them named with a tab and a
// newline; and three distinct photos.
class DedupActTest : public ::testing::Test {
 protected:
  void SetUp() override {
    photos_ = fs::canonical(tmp_.path()).string() + "/photos";
    const std::vector<std::string> originals = testing::WriteSyntheticSet(photos_, 6, 500);
    const std::vector<std::string> folders = {photos_ + "/copies", photos_ + "/ref", photos_};
    for (int i = 0; i < 3; ++i) {
      // The second original's copies are in the reference folder: they keep
      // the group, and it is their duplicate.
      (i == 1 ? duplicates_ : keepers_).insert(originals[i]);
      const cv::Mat image = cv::imread(originals[i], cv::IMREAD_COLOR);
      fs::create_directories(folders[i]);
      for (Transform t : {Transform::kJpeg, Transform::kScale}) {
        std::string path = folders[i] + "/copy" + std::to_string(i) + "_" +
                           testing::TransformName(t) +
                           (i == 2 && t == Transform::kJpeg ? "\tand\nbreak" : "") + ".jpg";
        testing::WriteImage(path, testing::ApplyTransform(image, t));
        (i == 1 ? references_ : duplicates_).insert(path);
      }
    }
    const testing::ProcessResult index =
        Lookalike({"index", photos_, "--db", tmp_ / "db", "--clusters", "32", "--quiet"});
    ASSERT_EQ(index.exit_code, 0) << index.Describe();
  }
  // Every regular file under the photos and the move-to folder.
  std::set<std::string> Files(const std::string& dir) const {
    std::set<std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file()) files.insert(e.path().string());
    return files;
  }
  testing::ProcessResult Dedup(std::vector<std::string> args) {
    std::vector<std::string> all = {"dedup", "--db", tmp_ / "db", "--keep-in", photos_ + "/ref"};
    all.insert(all.end(), args.begin(), args.end());
    return Lookalike(all);
  }

  TempDir tmp_;
  std::string photos_;
  std::set<std::string> keepers_, duplicates_, references_;
};

TEST_F(DedupActTest, ListsAndTheReviewScript) {
  const testing::ProcessResult run =
      Dedup({"--format", "json", "--remove-list", tmp_ / "list", "--remove-list0", tmp_ / "list0",
             "--remove-script", tmp_ / "review.sh"});
  // The name with a newline cannot be a line of the list: left out, named.
  EXPECT_EQ(run.exit_code, 1) << run.Describe();
  EXPECT_NE(run.err.find("--remove-list0"), std::string::npos) << run.err;
  const std::string lines = Read(tmp_ / "list"), nul_separated = Read(tmp_ / "list0");
  std::set<std::string> listed;
  for (const std::string& p : testing::SplitOn(nul_separated, '\0'))
    if (!p.empty()) listed.insert(p);
  EXPECT_EQ(listed, duplicates_) << "only duplicates, never a keeper or a reference file";
  std::set<std::string> without_newline;
  for (const std::string& p : duplicates_)
    if (p.find('\n') == std::string::npos) without_newline.insert(p);
  std::set<std::string> line_set;
  for (const std::string& p : testing::SplitLines(lines)) line_set.insert(p);
  EXPECT_EQ(line_set, without_newline);

  // The script as written is valid and removes nothing.
  const std::set<std::string> before = Files(photos_);
  testing::ProcessOptions check;
  check.argv = {"/bin/sh", "-n", tmp_ / "review.sh"};
  ASSERT_EQ(testing::RunProcess(check).exit_code, 0);
  testing::ProcessOptions as_written;
  as_written.argv = {"/bin/sh", tmp_ / "review.sh"};
  const testing::ProcessResult nothing = testing::RunProcess(as_written);
  ASSERT_EQ(nothing.exit_code, 0) << nothing.Describe();
  EXPECT_EQ(Files(photos_), before);
  const std::string script = Read(tmp_ / "review.sh");
  EXPECT_NE(script.find("# level copy with the keeper: "), std::string::npos) << script;
  // Every rm line uncommented: exactly the duplicates go, but the one whose
  // name holds a line break (named in a comment, to remove by hand).
  testing::ProcessOptions uncomment;
  uncomment.argv = {"/bin/sed", "-i", "s/^#rm /rm /", tmp_ / "review.sh"};
  ASSERT_EQ(testing::RunProcess(uncomment).exit_code, 0);
  const testing::ProcessResult removed = testing::RunProcess(as_written);
  ASSERT_EQ(removed.exit_code, 0) << removed.Describe();
  std::set<std::string> expected = before;
  for (const std::string& p : duplicates_)
    if (p.find('\n') == std::string::npos) expected.erase(p);
  EXPECT_EQ(Files(photos_), expected);
}

TEST_F(DedupActTest, MoveToAndUndo) {
  const std::set<std::string> before = Files(photos_);
  const std::string moved = tmp_ / "moved";
  // A file already where one duplicate would go: never overwritten.
  const std::string taken = *duplicates_.begin();
  const std::string taken_at = moved + taken.substr(photos_.size());
  fs::create_directories(fs::path(taken_at).parent_path());
  std::ofstream(taken_at) << "not a photo";
  const testing::ProcessResult run = Dedup({"--move-to", moved});
  EXPECT_EQ(run.exit_code, 1) << run.Describe();
  EXPECT_NE(run.err.find("exists already"), std::string::npos) << run.err;
  EXPECT_EQ(Read(taken_at), "not a photo");
  std::set<std::string> expected_left = before;
  for (const std::string& p : duplicates_)
    if (p != taken) {
      EXPECT_FALSE(fs::exists(p)) << p;
      EXPECT_TRUE(fs::exists(moved + p.substr(photos_.size()))) << p;
      expected_left.erase(p);
    }
  EXPECT_EQ(Files(photos_), expected_left) << "keepers and reference files stay";
  EXPECT_TRUE(fs::exists(moved + "/lookalike-moves.tsv"));

  // Again: nothing more to do but the taken place.
  fs::remove(taken_at);
  const testing::ProcessResult again = Dedup({"--move-to", moved});
  EXPECT_EQ(again.exit_code, 0) << again.Describe();
  EXPECT_NE(again.err.find("1 files moved, " + std::to_string(duplicates_.size() - 1) +
                           " found done by an earlier run"),
            std::string::npos)
      << again.err;
  for (const std::string& p : duplicates_) EXPECT_FALSE(fs::exists(p)) << p;

  // Undo puts every file back and leaves the folder holding the manifest only.
  for (int round = 0; round < 2; ++round) {
    const testing::ProcessResult undo = Lookalike({"dedup", "--undo", moved});
    EXPECT_EQ(undo.exit_code, 0) << undo.Describe();
    EXPECT_EQ(Files(photos_), before);
    EXPECT_EQ(Files(moved), (std::set<std::string>{moved + "/lookalike-moves.tsv"}));
  }
}

}  // namespace
}  // namespace lookalike
