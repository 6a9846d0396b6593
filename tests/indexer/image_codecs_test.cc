// The codec module (OpenCV's imgcodecs, loaded on first decode) and the
// module loader's errors: each names the file and the reason.
#include "indexer/image_codecs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <vector>

#include "indexer/image_codecs_module.h"
#include "util/module.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(ImageCodecsTest, EncodesAndDecodesThroughTheModule) {
  cv::Mat image(24, 32, CV_8UC3, cv::Scalar(10, 120, 240));
  std::vector<uchar> jpeg;
  ASSERT_TRUE(EncodeJpeg(image, 90, &jpeg));
  ASSERT_GT(jpeg.size(), 100u);
  EXPECT_EQ(jpeg[0], 0xff);
  EXPECT_EQ(jpeg[1], 0xd8);
  const cv::Mat bytes(1, static_cast<int>(jpeg.size()), CV_8U, jpeg.data());
  const cv::Mat decoded = DecodeImage(bytes, cv::IMREAD_COLOR);
  ASSERT_EQ(decoded.rows, 24);
  ASSERT_EQ(decoded.cols, 32);
  const cv::Vec3b pixel = decoded.at<cv::Vec3b>(12, 16);
  EXPECT_NEAR(pixel[0], 10, 4);
  EXPECT_NEAR(pixel[2], 240, 4);
  // Not an image: the decoder's empty result, as cv::imdecode gives it.
  const std::string text = "plain text, not an image";
  const cv::Mat text_bytes(1, static_cast<int>(text.size()), CV_8U, const_cast<char*>(text.data()));
  EXPECT_TRUE(DecodeImage(text_bytes, cv::IMREAD_COLOR).empty());
}

TEST(ModuleLoaderTest, FindsTheCodecModuleAndChecksItsInterface) {
  const LoadedModule codecs = LoadModule(kImageCodecsFile, kImageCodecsEntry, kImageCodecsAbi);
  ASSERT_NE(codecs.api, nullptr) << codecs.error;
  EXPECT_TRUE(Contains(codecs.path, kImageCodecsFile)) << codecs.path;
  EXPECT_EQ(FindModule(kImageCodecsFile), codecs.path);

  const LoadedModule other = LoadModule(kImageCodecsFile, kImageCodecsEntry, kImageCodecsAbi + 1);
  EXPECT_EQ(other.api, nullptr);
  EXPECT_TRUE(Contains(other.error, codecs.path)) << other.error;
  EXPECT_TRUE(Contains(other.error, "another version")) << other.error;

  const LoadedModule no_entry = LoadModule(kImageCodecsFile, "no_such_entry", kImageCodecsAbi);
  EXPECT_EQ(no_entry.api, nullptr);
  EXPECT_TRUE(Contains(no_entry.error, "no entry point no_such_entry")) << no_entry.error;
}

TEST(ModuleLoaderTest, AMissingModuleNamesWhereItWasLookedFor) {
  const LoadedModule missing = LoadModule("liblookalike_no_such_module.so", "x", 1);
  EXPECT_EQ(missing.api, nullptr);
  EXPECT_TRUE(Contains(missing.error, "liblookalike_no_such_module.so not found")) << missing.error;
  const std::string folder = fs::read_symlink("/proc/self/exe").parent_path().string();
  EXPECT_TRUE(Contains(missing.error, folder + "/liblookalike_no_such_module.so")) << missing.error;
  EXPECT_TRUE(FindModule("liblookalike_no_such_module.so").empty());
}

TEST(ModuleLoaderTest, AFileThatIsNotALibrarySaysWhyItCannotBeLoaded) {
  // Next to the test binary, the first place looked in; named for this
  // process so parallel runs do not meet.
  const std::string name = "liblookalike_not_a_library_" + std::to_string(getpid()) + ".so";
  const fs::path file = fs::read_symlink("/proc/self/exe").parent_path() / name;
  std::ofstream(file) << "not an ELF file\n";
  const LoadedModule bad = LoadModule(name, "entry", 1);
  fs::remove(file);
  EXPECT_EQ(bad.api, nullptr);
  EXPECT_TRUE(Contains(bad.error, file.string() + " could not be loaded")) << bad.error;
}

}  // namespace
}  // namespace lookalike
