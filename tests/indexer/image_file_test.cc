// Tests of safe image reading (format by content, header sizes, truncation,
// limits checked before decoding, special files, downscaling) and of the
// folder walker.
#include "indexer/image_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <string>
#include <vector>

#include "indexer/file_walker.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
using testing::MakeSyntheticImage;
using testing::TempDir;
// Deadline of a call that must not block: only a hang guard (it returns in
// milliseconds), so minutes, never a bound a busy machine could reach.
constexpr auto kHangGuard = std::chrono::minutes(5);

std::string Encode(const cv::Mat& image, const std::string& ext,
                   const std::vector<int>& params = {}) {
  std::vector<uchar> buf;
  if (!cv::imencode(ext, image, buf, params)) return {};
  return std::string(buf.begin(), buf.end());
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

ImageFormat Detect(const std::string& bytes) {
  return DetectImageFormat(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

std::optional<ImageSize> HeaderSize(const std::string& bytes) {
  return ReadHeaderSize(Detect(bytes), reinterpret_cast<const unsigned char*>(bytes.data()),
                        bytes.size());
}

struct FormatCase {
  const char* ext;
  ImageFormat format;
  bool header_size;  // ReadHeaderSize supports it
};

class FormatTest : public ::testing::TestWithParam<FormatCase> {};

TEST_P(FormatTest, DetectsByMagicReadsHeaderAndDecodes) {
  const FormatCase c = GetParam();
  // Awkward, distinct sides so width/height swaps are caught.
  cv::Mat image = MakeSyntheticImage(11, 123, 77);
  if (std::string(c.ext) == ".pgm") cv::cvtColor(image, image, cv::COLOR_BGR2GRAY);
  const std::string bytes = Encode(image, c.ext);
  if (bytes.empty()) GTEST_SKIP() << "OpenCV here cannot write " << c.ext;
  EXPECT_EQ(Detect(bytes), c.format) << c.ext;

  const auto size = HeaderSize(bytes);
  if (c.header_size) {
    ASSERT_TRUE(size.has_value()) << c.ext;
    EXPECT_EQ(size->width, 123u) << c.ext;
    EXPECT_EQ(size->height, 77u) << c.ext;
  }
  const LoadResult r = DecodeImageBytes("x", bytes, 0, ImageFileLimits());
  ASSERT_TRUE(r.image.has_value()) << c.ext << ": " << (r.error ? r.error->message : "");
  EXPECT_EQ(r.image->gray.width, 123);
  EXPECT_EQ(r.image->gray.height, 77);
  EXPECT_EQ(r.image->gray.pixels.size(), 123u * 77u);
  EXPECT_EQ(r.image->original_width, 123u);
  EXPECT_EQ(r.image->original_height, 77u);
  EXPECT_EQ(r.image->format, c.format);
  EXPECT_EQ(r.image->resize_seconds, 0.0) << "no downscaling without a max side";
  // Downscaling is timed on its own (the indexer reports it as a stage).
  const LoadResult small = DecodeImageBytes("x", bytes, 60, ImageFileLimits());
  ASSERT_TRUE(small.image.has_value()) << c.ext;
  EXPECT_EQ(small.image->gray.width, 60);
  EXPECT_GT(small.image->resize_seconds, 0.0) << c.ext;
}

INSTANTIATE_TEST_SUITE_P(Formats, FormatTest,
                         ::testing::Values(FormatCase{".jpg", ImageFormat::kJpeg, true},
                                           FormatCase{".png", ImageFormat::kPng, true},
                                           FormatCase{".webp", ImageFormat::kWebp, true},
                                           FormatCase{".tiff", ImageFormat::kTiff, false},
                                           FormatCase{".bmp", ImageFormat::kBmp, true},
                                           FormatCase{".pgm", ImageFormat::kPnm, false},
                                           FormatCase{".ppm", ImageFormat::kPnm, false}),
                         [](const ::testing::TestParamInfo<FormatCase>& info) {
                           return std::string(info.param.ext + 1);
                         });

TEST(ImageFileTest, LosslessWebpHeaderSize) {
  const cv::Mat image = MakeSyntheticImage(12, 301, 99);
  const std::string bytes = Encode(image, ".webp", {cv::IMWRITE_WEBP_QUALITY, 101});
  if (bytes.empty()) GTEST_SKIP() << "no WebP encoder";
  ASSERT_EQ(Detect(bytes), ImageFormat::kWebp);
  const auto size = HeaderSize(bytes);
  ASSERT_TRUE(size.has_value());
  EXPECT_EQ(size->width, 301u);
  EXPECT_EQ(size->height, 99u);
}

TEST(ImageFileTest, UnknownAndShortInputs) {
  std::mt19937_64 rng(5);
  std::string random(4096, '\0');
  for (char& c : random) c = static_cast<char>(rng());
  random[0] = 0x00;  // no signature starts with NUL
  EXPECT_EQ(Detect(random), ImageFormat::kUnknown);
  const LoadResult r = DecodeImageBytes("noise.jpg", random, 0, ImageFileLimits());
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->code, FileErrorCode::kUnsupportedFormat);
  EXPECT_EQ(r.error->path, "noise.jpg");
  EXPECT_STREQ(FileErrorCodeName(r.error->code), "UNSUPPORTED_FORMAT");

  // Prefixes of signatures are not enough.
  EXPECT_EQ(Detect(std::string("\xFF\xD8", 2)), ImageFormat::kUnknown);
  EXPECT_EQ(Detect(std::string("\x89PNG\r\n", 6)), ImageFormat::kUnknown);
  EXPECT_EQ(Detect("RIFF\x10\0\0\0WAVE"), ImageFormat::kUnknown);  // RIFF but not WebP
  EXPECT_EQ(Detect("P7 "), ImageFormat::kUnknown);
  EXPECT_EQ(Detect("Plain text"), ImageFormat::kUnknown);

  const LoadResult empty = DecodeImageBytes("empty.png", "", 0, ImageFileLimits());
  ASSERT_TRUE(empty.error.has_value());
  EXPECT_EQ(empty.error->code, FileErrorCode::kUnsupportedFormat);
}

TEST(ImageFileTest, PngNamedJpgDecodesByContent) {
  TempDir tmp;
  const std::string path = tmp / "really_a_png.jpg";
  WriteBytes(path, Encode(MakeSyntheticImage(3, 200, 150), ".png"));
  const LoadResult r = LoadImageFile(path, 0, ImageFileLimits());
  ASSERT_TRUE(r.image.has_value()) << (r.error ? r.error->message : "");
  EXPECT_EQ(r.image->format, ImageFormat::kPng);
  EXPECT_EQ(r.image->gray.width, 200);
  EXPECT_EQ(r.image->gray.height, 150);
}

TEST(ImageFileTest, LoadRecordsFileFacts) {
  TempDir tmp;
  const std::string path = tmp / "a.png";
  const std::string bytes = Encode(MakeSyntheticImage(4, 64, 48), ".png");
  WriteBytes(path, bytes);
  const LoadResult r = LoadImageFile(path, 0, ImageFileLimits());
  ASSERT_TRUE(r.image.has_value());
  EXPECT_EQ(r.image->size_bytes, bytes.size());
  const auto st = StatFile(path);
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(st->regular);
  EXPECT_EQ(r.image->mtime_ns, st->mtime_ns);
  EXPECT_NE(r.image->mtime_ns, 0);
}

TEST(ImageFileTest, TruncatedJpegDetectedAndOptionallyDecoded) {
  const cv::Mat image = MakeSyntheticImage(6, 320, 240);
  const std::string full = Encode(image, ".jpg", {cv::IMWRITE_JPEG_QUALITY, 90});
  ASSERT_TRUE(JpegLooksComplete(reinterpret_cast<const unsigned char*>(full.data()), full.size()));
  // Cut in the middle of the entropy-coded scan.
  const std::string cut = full.substr(0, full.size() * 6 / 10);
  EXPECT_FALSE(JpegLooksComplete(reinterpret_cast<const unsigned char*>(cut.data()), cut.size()));
  const LoadResult strict = DecodeImageBytes("cut.jpg", cut, 0, ImageFileLimits());
  ASSERT_TRUE(strict.error.has_value());
  EXPECT_EQ(strict.error->code, FileErrorCode::kTruncated) << strict.error->message;

  ImageFileLimits lenient;
  lenient.allow_truncated = true;
  const LoadResult loose = DecodeImageBytes("cut.jpg", cut, 0, lenient);
  ASSERT_TRUE(loose.image.has_value()) << (loose.error ? loose.error->message : "");
  EXPECT_EQ(loose.image->gray.width, 320);
  EXPECT_EQ(loose.image->gray.height, 240);

  // The complete file is not flagged.
  EXPECT_TRUE(DecodeImageBytes("full.jpg", full, 0, ImageFileLimits()).image.has_value());
}

TEST(ImageFileTest, TruncatedPngDetected) {
  const std::string full = Encode(MakeSyntheticImage(7, 100, 80), ".png");
  const std::string cut = full.substr(0, full.size() / 2);
  const LoadResult r = DecodeImageBytes("cut.png", cut, 0, ImageFileLimits());
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->code, FileErrorCode::kTruncated);
}

TEST(ImageFileTest, PixelLimitFromHeaderBeforeDecoding) {
  // A real image just over the limit.
  const std::string bytes = Encode(MakeSyntheticImage(8, 200, 100), ".png");
  ImageFileLimits limits;
  limits.max_pixels = 200 * 100 - 1;
  const LoadResult over = DecodeImageBytes("big.png", bytes, 0, limits);
  ASSERT_TRUE(over.error.has_value());
  EXPECT_EQ(over.error->code, FileErrorCode::kTooManyPixels);
  limits.max_pixels = 200 * 100;
  EXPECT_TRUE(DecodeImageBytes("ok.png", bytes, 0, limits).image.has_value());

  // A forged header claiming 60000 x 60000 with no pixel data behind it: a
  // decoder would fail (or allocate 3.6 GB); the header check must answer first.
  std::string forged = bytes.substr(0, 33);  // signature + IHDR chunk
  auto put_be32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) forged[at + i] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
  };
  put_be32(16, 60000);
  put_be32(20, 60000);
  forged += std::string("\0\0\0\0IEND\xae\x42\x60\x82", 12);
  ImageFileLimits defaults;
  const LoadResult huge = DecodeImageBytes("forged.png", forged, 0, defaults);
  ASSERT_TRUE(huge.error.has_value());
  EXPECT_EQ(huge.error->code, FileErrorCode::kTooManyPixels) << huge.error->message;
  EXPECT_NE(huge.error->message.find("60000x60000"), std::string::npos) << huge.error->message;

  // Same for a JPEG whose SOF claims more than the limit.
  const std::string jpeg = Encode(MakeSyntheticImage(8, 200, 100), ".jpg");
  limits.max_pixels = 200 * 100 - 1;
  const LoadResult jpeg_over = DecodeImageBytes("big.jpg", jpeg, 0, limits);
  ASSERT_TRUE(jpeg_over.error.has_value());
  EXPECT_EQ(jpeg_over.error->code, FileErrorCode::kTooManyPixels);
}

// EXIF orientation is applied when decoding (OpenCV does it in imdecode, at
// full and reduced size), so a photo taken sideways is indexed and queried
// upright. The header check still sees the stored (unrotated) size.
TEST(ImageFileTest, ExifOrientationApplied) {
  cv::Mat image = MakeSyntheticImage(5, 400, 300);
  std::vector<uchar> jpeg;
  ASSERT_TRUE(cv::imencode(".jpg", image, jpeg));
  // APP1 "Exif": big-endian TIFF header, one IFD entry 0x0112 (Orientation)
  // SHORT count 1 value 6 (rotate 90 degrees clockwise to display).
  const unsigned char exif[] = {'E',  'x',  'i', 'f', 0, 0, 'M', 'M', 0, 0x2a, 0, 0, 0, 8, 0, 1,
                                0x01, 0x12, 0,   3,   0, 0, 0,   1,   0, 6,    0, 0, 0, 0, 0, 0};
  std::string bytes(reinterpret_cast<const char*>(jpeg.data()), 2);
  bytes += "\xff\xe1";
  bytes += static_cast<char>(0);
  bytes += static_cast<char>(sizeof(exif) + 2);
  bytes.append(reinterpret_cast<const char*>(exif), sizeof(exif));
  bytes.append(reinterpret_cast<const char*>(jpeg.data()) + 2, jpeg.size() - 2);

  ImageFileLimits limits;
  const LoadResult full = DecodeImageBytes("rotated.jpg", bytes, 0, limits);
  ASSERT_TRUE(full.image) << full.error->message;
  EXPECT_EQ(full.image->gray.width, 300);
  EXPECT_EQ(full.image->gray.height, 400);
  EXPECT_EQ(full.image->original_width, 400u);  // as stored in the header
  // max_side 150 makes the decoder use libjpeg's 1/2 scaling: still upright.
  const LoadResult reduced = DecodeImageBytes("rotated.jpg", bytes, 150, limits);
  ASSERT_TRUE(reduced.image);
  EXPECT_EQ(reduced.image->gray.width, 113);
  EXPECT_EQ(reduced.image->gray.height, 150);
}

TEST(ImageFileTest, TiffAndPnmHeaderSizes) {
  TempDir dir;
  const cv::Mat image = MakeSyntheticImage(9, 123, 77);
  for (const char* ext : {".tif", ".pgm", ".ppm"}) {
    SCOPED_TRACE(ext);
    std::vector<uchar> buf;
    cv::Mat gray;
    cv::cvtColor(image, gray, cv::COLOR_BGR2GRAY);
    ASSERT_TRUE(cv::imencode(ext, std::string(ext) == ".pgm" ? gray : image, buf));
    const auto format = DetectImageFormat(buf.data(), buf.size());
    const auto size = ReadHeaderSize(format, buf.data(), buf.size());
    ASSERT_TRUE(size.has_value());
    EXPECT_EQ(size->width, 123u);
    EXPECT_EQ(size->height, 77u);
    ImageFileLimits limits;
    limits.max_pixels = 123 * 77 - 1;
    const std::string bytes(buf.begin(), buf.end());
    const LoadResult r = DecodeImageBytes(std::string("x") + ext, bytes, 0, limits);
    ASSERT_TRUE(r.error);
    EXPECT_EQ(r.error->code, FileErrorCode::kTooManyPixels);
  }
}

TEST(ImageFileTest, FileTooLarge) {
  TempDir tmp;
  const std::string path = tmp / "a.png";
  const std::string bytes = Encode(MakeSyntheticImage(9, 64, 64), ".png");
  WriteBytes(path, bytes);
  ImageFileLimits limits;
  limits.max_file_bytes = bytes.size() - 1;
  const LoadResult r = LoadImageFile(path, 0, limits);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->code, FileErrorCode::kFileTooLarge);
  EXPECT_EQ(r.error->path, path);
  limits.max_file_bytes = bytes.size();
  EXPECT_TRUE(LoadImageFile(path, 0, limits).image.has_value());
}

TEST(ImageFileTest, FifoIsNotRegularAndDoesNotBlock) {
  TempDir tmp;
  const std::string fifo = tmp / "pipe.jpg";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto pending =
      std::async(std::launch::async, [&] { return LoadImageFile(fifo, 0, ImageFileLimits()); });
  if (pending.wait_for(kHangGuard) != std::future_status::ready) {
    // Unblock the reader so the test can end, then fail.
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
    pending.wait();
    FAIL() << "reading a FIFO blocked";
  }
  const LoadResult r = pending.get();
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->code, FileErrorCode::kNotRegular) << r.error->message;

  const auto st = StatFile(fifo);
  ASSERT_TRUE(st.has_value());
  EXPECT_FALSE(st->regular);
}

TEST(ImageFileTest, MissingFileVanished) {
  TempDir tmp;
  const LoadResult r = LoadImageFile(tmp / "gone.png", 0, ImageFileLimits());
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->code, FileErrorCode::kVanished);
  EXPECT_EQ(r.error->path, tmp / "gone.png");
  EXPECT_FALSE(StatFile(tmp / "gone.png").has_value());
}

TEST(ImageFileTest, DownscaleKeepsAspectAndLongestSide) {
  struct Case {
    int w, h, max_side;
  };
  for (const Case c : {Case{1000, 400, 320}, Case{333, 999, 250}, Case{641, 479, 640},
                       Case{500, 500, 97}, Case{200, 100, 400}}) {
    const std::string bytes = Encode(MakeSyntheticImage(10, c.w, c.h), ".png");
    const LoadResult r = DecodeImageBytes("x.png", bytes, c.max_side, ImageFileLimits());
    ASSERT_TRUE(r.image.has_value());
    const GrayImage& g = r.image->gray;
    const int expected_longest = std::min(std::max(c.w, c.h), c.max_side);
    EXPECT_EQ(std::max(g.width, g.height), expected_longest) << c.w << "x" << c.h;
    EXPECT_EQ(g.width >= g.height, c.w >= c.h);
    // The short side is the rounded scaled short side: aspect kept to 1 px.
    const double scale = static_cast<double>(expected_longest) / std::max(c.w, c.h);
    EXPECT_NEAR(std::min(g.width, g.height), std::min(c.w, c.h) * scale, 0.5 + 1e-9)
        << c.w << "x" << c.h;
    EXPECT_EQ(g.pixels.size(), static_cast<size_t>(g.width) * g.height);
    EXPECT_EQ(r.image->original_width, static_cast<uint32_t>(c.w));
    EXPECT_EQ(r.image->original_height, static_cast<uint32_t>(c.h));
  }
}

TEST(ImageFileTest, ReducedJpegDecodeStillReachesMaxSide) {
  // Longest sides at and around the 2x/4x/8x thresholds of the DCT-scaled decode.
  struct Case {
    int w, h, max_side;
  };
  for (const Case c : {Case{2400, 1000, 300}, Case{2599, 1001, 300}, Case{2399, 900, 300},
                       Case{1203, 2405, 300}, Case{1200, 700, 600}, Case{1199, 700, 600}}) {
    const std::string bytes =
        Encode(MakeSyntheticImage(13, c.w, c.h), ".jpg", {cv::IMWRITE_JPEG_QUALITY, 80});
    const LoadResult r = DecodeImageBytes("big.jpg", bytes, c.max_side, ImageFileLimits());
    ASSERT_TRUE(r.image.has_value()) << (r.error ? r.error->message : "");
    const GrayImage& g = r.image->gray;
    EXPECT_EQ(std::max(g.width, g.height), c.max_side) << c.w << "x" << c.h;
    const double scale = static_cast<double>(c.max_side) / std::max(c.w, c.h);
    EXPECT_NEAR(std::min(g.width, g.height), std::min(c.w, c.h) * scale, 1.0) << c.w << "x" << c.h;
    EXPECT_EQ(r.image->original_width, static_cast<uint32_t>(c.w));
    EXPECT_EQ(r.image->original_height, static_cast<uint32_t>(c.h));
  }
}

// ---- ListImageFiles ---------------------------------------------------------

TEST(FileWalkerTest, RecursiveSortedContentSniffedLoopSafeExcluding) {
  TempDir tmp;
  const std::string root = tmp / "photos";
  fs::create_directories(root + "/b/deep/er");
  fs::create_directories(root + "/a");
  fs::create_directories(root + "/db");
  const cv::Mat img = MakeSyntheticImage(1, 40, 30);
  WriteBytes(root + "/z.png", Encode(img, ".png"));
  WriteBytes(root + "/a/1.JPG", Encode(img, ".jpg"));
  WriteBytes(root + "/b/deep/er/x.webp", Encode(img, ".png"));  // extension decides listing
  WriteBytes(root + "/b/no_extension", Encode(img, ".jpg"));    // found by content
  WriteBytes(root + "/b/notes.txt", "just text, not an image\n");
  WriteBytes(root + "/b/data.bin", std::string(64, '\x01'));
  WriteBytes(root + "/db/000001.sst", Encode(img, ".png"));  // excluded even though an image
  WriteBytes(root + "/db/CURRENT", "MANIFEST-000001\n");
  fs::create_directory_symlink("..", root + "/b/loop");       // cycle
  fs::create_directory_symlink(root, root + "/a/again");      // cycle to the root
  fs::create_symlink(root + "/z.png", root + "/a/link.png");  // file symlink: listed

  const WalkResult w = ListImageFiles(root, {root + "/db"});
  const std::string abs = AbsolutePath(root);
  const std::vector<std::string> expected = {abs + "/a/1.JPG", abs + "/a/link.png",
                                             abs + "/b/deep/er/x.webp", abs + "/b/no_extension",
                                             abs + "/z.png"};
  EXPECT_EQ(w.files, expected);
  EXPECT_TRUE(std::is_sorted(w.files.begin(), w.files.end()));
  EXPECT_EQ(w.ignored, 2);  // notes.txt, data.bin
  EXPECT_TRUE(w.errors.empty());

  // Without the exclusion the database folder's image-looking file is found.
  const WalkResult all = ListImageFiles(root, {});
  EXPECT_EQ(all.files.size(), expected.size() + 1);
  EXPECT_NE(std::find(all.files.begin(), all.files.end(), abs + "/db/000001.sst"), all.files.end());

  // A relative root gives the same absolute paths.
  const fs::path cwd = fs::current_path();
  fs::current_path(tmp.path());
  const WalkResult rel = ListImageFiles("photos", {"photos/db"});
  fs::current_path(cwd);
  EXPECT_EQ(rel.files, expected);
}

TEST(FileWalkerTest, SpecialFilesReportedOrIgnoredWithoutBlocking) {
  TempDir tmp;
  const std::string root = tmp.path();
  ASSERT_EQ(::mkfifo((root + "/pipe.png").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((root + "/pipe_noext").c_str(), 0600), 0);
  fs::create_symlink(root + "/missing.jpg", root + "/dangling.jpg");
  auto pending = std::async(std::launch::async, [&] { return ListImageFiles(root, {}); });
  if (pending.wait_for(kHangGuard) != std::future_status::ready) {
    for (const char* name : {"/pipe.png", "/pipe_noext"}) {
      const int fd = ::open((root + name).c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    }
    pending.wait();
    FAIL() << "walking a folder with FIFOs blocked";
  }
  const WalkResult w = pending.get();
  EXPECT_TRUE(w.files.empty());
  ASSERT_EQ(w.errors.size(), 2u);
  std::vector<std::string> error_paths;
  for (const auto& e : w.errors) {
    EXPECT_EQ(e.code, FileErrorCode::kNotRegular) << e.path;
    error_paths.push_back(e.path);
  }
  std::sort(error_paths.begin(), error_paths.end());
  EXPECT_EQ(error_paths, (std::vector<std::string>{root + "/dangling.jpg", root + "/pipe.png"}));
  EXPECT_EQ(w.ignored, 1);  // pipe_noext
}

const char* Unsupported(const std::string& bytes) {
  return UnsupportedImageFormat(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

std::string Named(const char* name) { return name ? name : "(none)"; }

TEST(ImageFormatTest, RecognisesImagesOfFormatsItDoesNotRead) {
  using testing::IsoMediaHeader;
  const std::vector<std::pair<std::string, std::string>> images = {
      {testing::TinyGif(), "GIF"},
      {"GIF87a" + std::string(20, '\0'), "GIF"},
      {IsoMediaHeader("heic", {"mif1", "heic"}), "HEIC"},
      {IsoMediaHeader("mif1", {"mif1", "heic"}), "HEIC"},
      {IsoMediaHeader("mif1", {"mif1"}), "HEIF"},
      {IsoMediaHeader("avif", {"mif1", "miaf"}), "AVIF"},
      {IsoMediaHeader("mif1", {"avif", "mif1", "miaf"}), "AVIF"},
      {std::string("\xff\x0a\xfa\x7f", 4), "JPEG XL"},
      {std::string("\0\0\0\x0cJXL \r\n\x87\n\0\0\0\x14", 16), "JPEG XL"},
      {std::string("\0\0\0\x0cjP  \r\n\x87\n\0\0\0\x14", 16), "JPEG 2000"},
      {std::string("\xff\x4f\xff\x51\0\x2f", 6), "JPEG 2000"},
      {std::string("\x76\x2f\x31\x01\x02\0\0\0", 8), "OpenEXR"},
      {"8BPS" + std::string("\0\x01", 2), "Photoshop"},
      {"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n", "Radiance HDR"},
      {"DDS |" + std::string(3, '\0'), "DDS"},
      {"qoif" + std::string(10, '\0'), "QOI"},
      // ICO: one 16 x 16 entry, 1 plane, 32 bits per pixel.
      {std::string("\0\0\1\0\1\0\x10\x10\0\0\1\0\x20\0\x68\x04\0\0\x16\0\0\0", 22), "ICO"},
  };
  for (const auto& [bytes, name] : images) {
    EXPECT_EQ(Named(Unsupported(bytes)), name) << name;
    EXPECT_EQ(Detect(bytes), ImageFormat::kUnknown) << name;
  }
  // Not images, or images lookalike reads: none of these.
  const cv::Mat image = MakeSyntheticImage(3, 32, 24);
  const std::vector<std::string> others = {
      Encode(image, ".jpg"),
      Encode(image, ".png"),
      IsoMediaHeader("isom", {"isom", "iso2", "avc1", "mp41"}),  // an MP4 video
      IsoMediaHeader("qt  ", {"qt  "}),                          // a QuickTime movie
      "GIF8",                                                    // too short
      "plain text\n",
      std::string("\0\0\1\0\x07\0\x10\x10\0\0\1\0\x07\0", 14),  // ICO-like, too short
      std::string("\0\0\1\0\1\0\x10\x10\0\0\1\0\x07\0\x68\x04\0\0\x16\0\0\0", 22),  // 7 bits
      std::string(64, '\0'),
  };
  for (const std::string& bytes : others)
    EXPECT_EQ(Unsupported(bytes), nullptr)
        << Named(Unsupported(bytes)) << " for " << bytes.substr(0, 12);
}

TEST(ImageFormatTest, AnImageOfAnotherFormatIsNamedInItsError) {
  const LoadResult gif = DecodeImageBytes("anim.gif", testing::TinyGif(), 0, ImageFileLimits());
  ASSERT_TRUE(gif.error.has_value());
  EXPECT_EQ(gif.error->code, FileErrorCode::kUnsupportedFormat);
  EXPECT_EQ(gif.error->path, "anim.gif");
  EXPECT_NE(gif.error->message.find("GIF image"), std::string::npos) << gif.error->message;
  EXPECT_NE(gif.error->message.find("convert it"), std::string::npos) << gif.error->message;
  const LoadResult heic = DecodeImageBytes(
      "photo", testing::IsoMediaHeader("heic", {"mif1", "heic"}), 0, ImageFileLimits());
  ASSERT_TRUE(heic.error.has_value());
  EXPECT_EQ(heic.error->code, FileErrorCode::kUnsupportedFormat);
  EXPECT_NE(heic.error->message.find("HEIC image"), std::string::npos) << heic.error->message;
}

// Images of formats lookalike does not read are listed (by content, whatever
// their name), so reading them reports UNSUPPORTED_FORMAT; only files that
// are not images are counted as ignored.
TEST(FileWalkerTest, ImagesOfOtherFormatsAreListedNotIgnored) {
  TempDir tmp;
  const std::string root = tmp.path();
  WriteBytes(root + "/anim.gif", testing::TinyGif());
  WriteBytes(root + "/gif_without_extension", testing::TinyGif());
  WriteBytes(root + "/photo.heic", testing::IsoMediaHeader("heic", {"mif1", "heic"}));
  WriteBytes(root + "/picture.avif", testing::IsoMediaHeader("avif", {"mif1", "miaf"}));
  WriteBytes(root + "/drawing.jxl", std::string("\xff\x0a\xfa\x7f", 4));
  WriteBytes(root + "/film.mp4", testing::IsoMediaHeader("isom", {"isom", "mp41"}));
  WriteBytes(root + "/notes.txt", "just text\n");
  const WalkResult w = ListImageFiles(root, {});
  const std::string abs = AbsolutePath(root);
  EXPECT_EQ(w.files, (std::vector<std::string>{abs + "/anim.gif", abs + "/drawing.jxl",
                                               abs + "/gif_without_extension", abs + "/photo.heic",
                                               abs + "/picture.avif"}));
  EXPECT_EQ(w.ignored, 2);  // film.mp4, notes.txt
  EXPECT_TRUE(w.errors.empty());
}

TEST(FileWalkerTest, RootMustBeADirectory) {
  TempDir tmp;
  EXPECT_THROW(ListImageFiles(tmp / "missing", {}), std::runtime_error);
  WriteBytes(tmp / "file.png", "x");
  EXPECT_THROW(ListImageFiles(tmp / "file.png", {}), std::runtime_error);
}

TEST(FileWalkerTest, ImageExtensions) {
  for (const char* p : {"a.jpg", "a.JPEG", "x/y.Png", "b.webp", "c.tif", "c.TIFF", "d.bmp", "e.pgm",
                        "f.ppm", "g.pnm", "h.jpe"})
    EXPECT_TRUE(HasImageExtension(p)) << p;
  for (const char* p : {"a.txt", "jpg", "a.jpg.bak", "dir.jpg/file", "a.", "a.gif"})
    EXPECT_FALSE(HasImageExtension(p)) << p;
}

}  // namespace
}  // namespace lookalike
