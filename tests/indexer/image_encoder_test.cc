// ImageEncoder: encoding a file's bytes from memory (an upload) gives what
// encoding the file gives, through the same caps and decoder checks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "indexer/model.h"
#include "storage/store.h"
#include "tests/indexer/small_index_options.h"
#include "tests/subprocess.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

using testing::TempDir;

TEST(ImageEncoderTest, EncodeBytesEqualsEncodeFileAndKeepsTheCaps) {
  TempDir tmp;
  const std::vector<std::string> paths =
      testing::WriteSyntheticSet(tmp / "photos", 3, 40, 320, 240);
  BuildIndex(testing::SmallIndexOptions(tmp / "photos", tmp / "db"), nullptr);
  auto store = Store::Open(tmp / "db", Store::Mode::kReadOnly);
  ImageEncoder encoder(store->model(), Backend::kCpu);
  const ImageFileLimits limits;
  for (const std::string& path : paths) {
    const ImageEncoder::Result file = encoder.EncodeFile(path, limits);
    const ImageEncoder::Result bytes =
        encoder.EncodeBytes("upload.png", testing::ReadFileBytes(path), limits);
    ASSERT_FALSE(file.error) << file.error->message;
    ASSERT_FALSE(bytes.error) << bytes.error->message;
    EXPECT_GT(file.num_descriptors, 0);
    EXPECT_EQ(bytes.num_descriptors, file.num_descriptors);
    EXPECT_EQ(bytes.vlad, file.vlad);
    EXPECT_EQ(bytes.colour, file.colour);
    EXPECT_EQ(bytes.features.descriptors, file.features.descriptors);
  }
  ImageFileLimits small;
  small.max_file_bytes = 1000;
  const ImageEncoder::Result big =
      encoder.EncodeBytes("big.png", testing::ReadFileBytes(paths[0]), small);
  ASSERT_TRUE(big.error);
  EXPECT_EQ(big.error->code, FileErrorCode::kFileTooLarge);
  EXPECT_EQ(big.error->path, "big.png");
  const ImageEncoder::Result junk = encoder.EncodeBytes("junk", "not an image at all", limits);
  ASSERT_TRUE(junk.error);
  EXPECT_EQ(junk.error->code, FileErrorCode::kUnsupportedFormat);
}

}  // namespace
}  // namespace lookalike
