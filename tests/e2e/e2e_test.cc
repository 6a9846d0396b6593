// End-to-end: generate a photo collection and transformed copies, run the
// real `lookalike` binary to index and search, and check every copy finds
// its original at rank 1.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_images.h"

namespace lookalike {
namespace {

using testing::TempDir;

struct CommandRun {
  int exit_code = -1;
  std::string out;
};

// Runs the lookalike binary with `args` (already shell-safe), capturing stdout.
CommandRun RunLookalike(const std::string& args) {
  CommandRun run;
  const std::string command = std::string(LOOKALIKE_BIN) + " " + args;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return run;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) run.out.append(buf, n);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

std::string Basename(const std::string& path) { return path.substr(path.rfind('/') + 1); }
std::string Stem(const std::string& name) { return name.substr(0, name.rfind('.')); }

TEST(EndToEnd, EveryTransformedCopyFindsItsOriginalAtRankOne) {
  TempDir tmp;
  const std::string photos = tmp / "photos";
  const std::string queries = tmp / "queries";
  std::filesystem::create_directories(photos + "/nested");
  std::filesystem::create_directories(queries);
  // Several container formats, one folder level deep for some.
  static const char* const kExt[] = {"png", "jpg", "webp", "bmp", "tif"};
  constexpr int kNumImages = 32;
  std::map<std::string, std::string> original_of_query;  // query stem -> original stem
  for (int i = 0; i < kNumImages; ++i) {
    const cv::Mat image = testing::MakeSyntheticImage(1000 + i, 640, 480);
    char stem[32];
    std::snprintf(stem, sizeof stem, "photo_%02d", i);
    const std::string dir = i % 4 == 0 ? photos + "/nested" : photos;
    testing::WriteImage(dir + "/" + stem + "." + kExt[i % 5], image);
    for (testing::Transform t : testing::AllTransforms()) {
      const std::string qstem = std::string(stem) + "_" + testing::TransformName(t);
      testing::WriteImage(queries + "/" + qstem + ".jpg", testing::ApplyTransform(image, t));
      original_of_query[qstem] = stem;
    }
  }
  // A file that is not an image is ignored; a broken "image" is skipped.
  std::ofstream(photos + "/notes.txt") << "not an image\n";

  const std::string db = tmp / "db";
  CommandRun index = RunLookalike("index " + photos + " --db " + db + " 2>" + tmp / "index.err");
  ASSERT_EQ(index.exit_code, 0) << index.out;
  EXPECT_NE(index.out.find("indexed    32"), std::string::npos) << index.out;

  CommandRun search = RunLookalike("search --db " + db + " " + queries + " -k 5 --format tsv");
  ASSERT_EQ(search.exit_code, 0) << search.out;
  std::map<std::string, std::string> top1;
  std::map<std::string, int> lines_per_query;
  for (const std::string& line : Split(search.out, '\n')) {
    if (line.empty()) continue;
    const auto cols = Split(line, '\t');
    ASSERT_EQ(cols.size(), 5u) << line;
    const std::string qstem = Stem(Basename(cols[0]));
    ++lines_per_query[qstem];
    EXPECT_EQ(std::stoi(cols[1]), lines_per_query[qstem]) << line;  // ranks 1..k in order
    if (cols[1] == "1") top1[qstem] = Stem(Basename(cols[2]));
    EXPECT_EQ(cols[2][0], '/') << "result paths must be absolute: " << line;
  }
  ASSERT_EQ(top1.size(), original_of_query.size());
  int failures = 0;
  for (const auto& [qstem, original] : original_of_query) {
    EXPECT_EQ(top1[qstem], original) << "query " << qstem;
    failures += top1[qstem] != original;
    EXPECT_EQ(lines_per_query[qstem], 5) << qstem;
  }
  EXPECT_EQ(failures, 0);

  // Re-running is incremental: nothing is decoded again.
  CommandRun again = RunLookalike("index " + photos + " --db " + db + " 2>/dev/null");
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_NE(again.out.find("indexed    0"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("unchanged  32"), std::string::npos) << again.out;
}

TEST(EndToEnd, SkippedInputsGiveExitCodeOneAndNameTheFile) {
  TempDir tmp;
  const std::string photos = tmp / "photos";
  testing::WriteSyntheticSet(photos, 6, 77, 320, 240);
  std::ofstream(photos + "/broken.jpg") << "\xff\xd8\xff this is not really a jpeg";
  const std::string err_file = tmp / "index.err";
  CommandRun index =
      RunLookalike("index " + photos + " --db " + tmp / "db" + " --clusters 8 2>" + err_file);
  EXPECT_EQ(index.exit_code, 1) << index.out;
  std::ifstream err(err_file);
  const std::string err_text((std::istreambuf_iterator<char>(err)),
                             std::istreambuf_iterator<char>());
  EXPECT_NE(err_text.find("broken.jpg"), std::string::npos) << err_text;
  EXPECT_EQ(err_text.find('\r'), std::string::npos) << "no control characters outside a terminal";
  CommandRun info = RunLookalike("info --db " + tmp / "db" + " --format json");
  EXPECT_EQ(info.exit_code, 0);
  EXPECT_NE(info.out.find("\"images\":6"), std::string::npos) << info.out;
}

// A folder holding a GIF, a HEIC and a text file besides photos: both images
// are named with UNSUPPORTED_FORMAT on stderr, in --errors and in the
// summary's skipped counts (exit 1, as for any skipped input); only the text
// file is counted as ignored. The same GIF as a query gets the same code.
TEST(EndToEnd, ImagesOfOtherFormatsAreNamedOnlyOtherFilesIgnored) {
  TempDir tmp;
  const std::string photos = tmp / "photos";
  testing::WriteSyntheticSet(photos, 6, 91, 320, 240);
  std::ofstream(photos + "/anim.gif", std::ios::binary) << testing::TinyGif();
  std::ofstream(photos + "/photo.heic", std::ios::binary)
      << testing::IsoMediaHeader("heic", {"mif1", "heic"});
  std::ofstream(photos + "/notes.txt") << "a shopping list\n";
  const std::string err_file = tmp / "index.err", errors_json = tmp / "errors.jsonl";
  const CommandRun index =
      RunLookalike("index " + photos + " --db " + tmp / "db" +
                   " --clusters 8 --format json --errors " + errors_json + " 2>" + err_file);
  EXPECT_EQ(index.exit_code, 1) << index.out;
  std::ifstream err(err_file);
  const std::string err_text((std::istreambuf_iterator<char>(err)),
                             std::istreambuf_iterator<char>());
  std::ifstream json(errors_json);
  const std::string json_text((std::istreambuf_iterator<char>(json)),
                              std::istreambuf_iterator<char>());
  for (const std::string name : {"anim.gif", "photo.heic"}) {
    bool on_stderr = false, in_json = false;
    for (const std::string& line : Split(err_text, '\n'))
      on_stderr = on_stderr || (line.find(name) != std::string::npos &&
                                line.find("UNSUPPORTED_FORMAT") != std::string::npos);
    for (const std::string& line : Split(json_text, '\n'))
      in_json = in_json || (line.find(photos + "/" + name) != std::string::npos &&
                            line.find("\"UNSUPPORTED_FORMAT\"") != std::string::npos);
    EXPECT_TRUE(on_stderr) << name << " not named on stderr:\n" << err_text;
    EXPECT_TRUE(in_json) << name << " not in --errors:\n" << json_text;
  }
  EXPECT_EQ(err_text.find("notes.txt"), std::string::npos) << err_text;
  EXPECT_NE(index.out.find("\"ignored\":1"), std::string::npos) << index.out;
  EXPECT_NE(index.out.find("\"UNSUPPORTED_FORMAT\":2"), std::string::npos) << index.out;
  EXPECT_NE(index.out.find("\"indexed\":6"), std::string::npos) << index.out;

  const CommandRun query =
      RunLookalike("search --db " + tmp / "db" + " " + photos + "/anim.gif 2>" + err_file);
  EXPECT_EQ(query.exit_code, 1);
  std::ifstream query_err(err_file);
  const std::string query_text((std::istreambuf_iterator<char>(query_err)),
                               std::istreambuf_iterator<char>());
  EXPECT_NE(query_text.find("UNSUPPORTED_FORMAT"), std::string::npos) << query_text;
}

}  // namespace
}  // namespace lookalike
