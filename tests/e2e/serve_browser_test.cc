// The `lookalike serve` page in a real browser: headless Chromium (Debian's
// chromium, chromium-driver and python3-selenium, installed by
// tools/install_deps.sh) driven by serve_browser.py against a real server on
// a generated, indexed image set. The script uploads a rotated copy, checks
// its original is ranked first with its thumbnail rendered, opens the match
// view and checks inlier lines were drawn, opens the duplicates page and the
// collection.
#include <gtest/gtest.h>

#include <filesystem>
#include <opencv2/imgcodecs.hpp>

#include "tests/e2e/serve_support.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
using namespace lookalike::testing;

TEST(ServeBrowserTest, UploadSearchMatchViewDuplicatesAndCollectionInChromium) {
  for (const char* tool : {"/usr/bin/chromium", "/usr/bin/chromedriver", "/usr/bin/python3"})
    ASSERT_TRUE(fs::exists(tool)) << tool << " is missing: run tools/install_deps.sh as root";
  TempDir tmp;
  const std::string root = fs::canonical(tmp.path()).string();
  const std::vector<std::string> photos = WriteSyntheticSet(root + "/photos", 10, 1100, 480, 360);
  fs::copy_file(photos[0], root + "/photos/img_000_copy.png");
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
            root + "/chromium-profile"};
  o.timeout_seconds = 900;
  const ProcessResult browser = RunProcess(o);
  EXPECT_EQ(browser.exit_code, 0) << browser.out << browser.Describe();
  EXPECT_EQ(browser.out.rfind("ok", 0), 0u) << browser.out;
  EXPECT_TRUE(server.child().Running()) << "the server died";
}

}  // namespace
}  // namespace lookalike
