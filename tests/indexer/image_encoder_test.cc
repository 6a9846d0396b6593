// ImageEncoder: encoding a file's bytes from memory (an upload) gives what
// encoding the file gives, through the same caps and decoder checks.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "indexer/colour.h"
#include "indexer/model.h"
#include "storage/store.h"
#include "tests/indexer/small_index_options.h"
#include "tests/subprocess.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

using testing::TempDir;

// The model a database stores gives back the settings it was made from
// (MakeModelRecord and SettingsFromModel run one map of the settings, both
// ways), each one away from its default so a setting the map drops shows.
TEST(ModelRecordTest, SettingsRoundTripThroughTheStoredModel) {
  EncodingSettings settings;
  settings.max_side = 777;
  settings.extractor.type = "sift";
  settings.extractor.contrast_threshold = 0.02f;
  settings.extractor.max_features = 900;
  settings.extractor.min_keypoints = 250;
  settings.vlad.power_alpha = 0.5f;
  settings.vlad.intra_normalize = false;
  settings.vlad.residual_normalize = true;
  const Codebook codebook(3, 128, std::vector<float>(3 * 128, 0.25f));
  const ModelRecord model = MakeModelRecord(settings, codebook, 99);
  EXPECT_EQ(model.num_clusters, 3u);
  EXPECT_EQ(model.dim, 128u);
  EXPECT_EQ(model.vlad_dim(), 3u * 128u);
  EXPECT_EQ(model.seed, 99u);
  EXPECT_EQ(model.codebook_hash, codebook.Fingerprint());
  const EncodingSettings back = SettingsFromModel(model);
  EXPECT_EQ(back.max_side, settings.max_side);
  EXPECT_EQ(back.extractor.type, settings.extractor.type);
  EXPECT_EQ(back.extractor.contrast_threshold, settings.extractor.contrast_threshold);
  EXPECT_EQ(back.extractor.max_features, settings.extractor.max_features);
  EXPECT_EQ(back.extractor.min_keypoints, settings.extractor.min_keypoints);
  EXPECT_EQ(back.vlad.power_alpha, settings.vlad.power_alpha);
  EXPECT_EQ(back.vlad.intra_normalize, settings.vlad.intra_normalize);
  EXPECT_EQ(back.vlad.residual_normalize, settings.vlad.residual_normalize);
  EXPECT_EQ(CodebookFromModel(model).centroids(), codebook.centroids());
}

// Three synthetic photos indexed, and an encoder for their database.
class ImageEncoderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    paths_ = testing::WriteSyntheticSet(tmp_ / "photos", 3, 40, 320, 240);
    BuildIndex(testing::SmallIndexOptions(tmp_ / "photos", tmp_ / "db"), nullptr);
    store_ = Store::Open(tmp_ / "db", Store::Mode::kReadOnly);
    encoder_ = std::make_unique<ImageEncoder>(store_->model(), Backend::kCpu);
  }

  TempDir tmp_;
  std::vector<std::string> paths_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ImageEncoder> encoder_;
  const ImageFileLimits limits_;
};

TEST_F(ImageEncoderTest, EncodeBytesEqualsEncodeFileAndKeepsTheCaps) {
  for (const std::string& path : paths_) {
    const ImageEncoder::Result file = encoder_->EncodeFile(path, limits_);
    const ImageEncoder::Result bytes =
        encoder_->EncodeBytes("upload.png", testing::ReadFileBytes(path), limits_);
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
      encoder_->EncodeBytes("big.png", testing::ReadFileBytes(paths_[0]), small);
  ASSERT_TRUE(big.error);
  EXPECT_EQ(big.error->code, FileErrorCode::kFileTooLarge);
  EXPECT_EQ(big.error->path, "big.png");
  const ImageEncoder::Result junk = encoder_->EncodeBytes("junk", "not an image at all", limits_);
  ASSERT_TRUE(junk.error);
  EXPECT_EQ(junk.error->code, FileErrorCode::kUnsupportedFormat);
}

// A picture pasted rotated onto a black canvas gets one more view: the
// picture rectified, with its own features, thumbnail and colour (the black
// corners gone from the histogram); a plain photo, or the encoder told not
// to, gets none.
TEST_F(ImageEncoderTest, APastedPictureIsAlsoEncodedRectified) {
  const cv::Mat picture = testing::MakeSyntheticImage(40, 320, 240);
  const cv::Mat pasted = testing::PasteRotated(picture, 22.0, cv::Size(420, 400));
  const std::string path = tmp_ / "pasted.png";
  testing::WriteImage(path, pasted);
  const ImageEncoder::Result enc = encoder_->EncodeFile(path, limits_);
  ASSERT_FALSE(enc.error) << enc.error->message;
  ASSERT_EQ(enc.views.size(), 1u);
  const ImageEncoder::Result& view = enc.views[0];
  EXPECT_FALSE(view.error);
  EXPECT_GT(view.num_descriptors, 0);
  EXPECT_TRUE(view.views.empty());
  EXPECT_NEAR(static_cast<double>(view.thumbnail.width) / view.thumbnail.height, 320.0 / 240.0,
              0.1);
  const std::vector<uint8_t> original = ColourHistogram(picture);
  EXPECT_GT(ColourSimilarity(view.colour, original), ColourSimilarity(enc.colour, original) + 0.05)
      << "the black corners should be out of the view's histogram";

  EXPECT_TRUE(encoder_->EncodeFile(paths_[0], limits_).views.empty()) << "a plain photo";
  encoder_->set_pasted_views(false);
  EXPECT_TRUE(encoder_->EncodeFile(path, limits_).views.empty());
}

}  // namespace
}  // namespace lookalike
