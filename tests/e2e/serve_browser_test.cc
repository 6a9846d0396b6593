// The `lookalike serve` page in a real browser: headless Chromium (Debian's
// chromium, chromium-driver and python3-selenium, installed by
// tools/install_deps.sh) driven by serve_browser.py against a real server on
// a generated, indexed image set with duplicates (a byte-identical copy
// whose name needs shell quoting, a half-size copy) and a large crop (a match
// of level part). The script searches (upload: the matches by level apart
// from the nearest non-matches, and the level filter; count changed with
// Enter, the same file picked again, a pasted image, an indexed image
// without itself), opens the match view, reviews
// the duplicates (keeper, selection, exports, "not duplicates" remembered
// across a reload) and the collection: see serve_browser.py.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "tests/e2e/serve_support.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
using namespace lookalike::testing;

TEST(ServeBrowserTest, SearchMatchViewDuplicateReviewAndCollectionInChromium) {
  for (const char* tool : {"/usr/bin/chromium", "/usr/bin/chromedriver", "/usr/bin/python3"})
    ASSERT_TRUE(fs::exists(tool)) << tool << " is missing: run tools/install_deps.sh as root";
  TempDir tmp;
  const std::string root = fs::canonical(tmp.path()).string();
  const std::vector<std::string> photos = WriteSyntheticSet(root + "/photos", 10, 1100, 480, 360);
  const std::string copy = root + "/photos/img_000 copy's.png";
  fs::copy_file(photos[0], copy);
  cv::Mat half;
  cv::resize(cv::imread(photos[2], cv::IMREAD_COLOR), half, cv::Size(), 0.5, 0.5, cv::INTER_AREA);
  const std::string half_path = root + "/photos/img_002_half.png";
  WriteImage(half_path, half);
  // A large crop of the query's original: a match of level part.
  const std::string part_path = root + "/photos/img_004_part.png";
  WriteImage(part_path, cv::imread(photos[4], cv::IMREAD_COLOR)(cv::Rect(0, 0, 312, 234)).clone());
  const std::string query = root + "/query.jpg";
  WriteImage(query, ApplyTransform(cv::imread(photos[4], cv::IMREAD_COLOR), Transform::kRotate));
  const ProcessResult index = RunLookalike(
      {"index", root + "/photos", "--db", root + "/db", "--clusters", "32", "--quiet"});
  ASSERT_EQ(index.exit_code, 0) << index.Describe();
  ServeProcess server(root + "/db");
  ASSERT_GT(server.port(), 0) << "serve did not print its address";

  ProcessOptions o;
  o.argv = {"/usr/bin/python3",
            SERVE_BROWSER_SCRIPT,
            "http://127.0.0.1:" + std::to_string(server.port()) + "/",
            query,
            photos[4],
            root + "/chromium-profile",
            photos[0],
            copy,
            photos[6],
            photos[2],
            half_path,
            part_path};
  const ProcessResult browser = RunProcess(o);
  EXPECT_EQ(browser.exit_code, 0) << browser.out << browser.Describe();
  EXPECT_EQ(browser.out.rfind("ok", 0), 0u) << browser.out;
  EXPECT_TRUE(server.child().Running()) << "the server died";
  std::printf("%s", browser.out.c_str());
}

}  // namespace
}  // namespace lookalike
