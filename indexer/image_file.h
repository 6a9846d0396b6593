// Reading one image file safely: only regular files, bounded size and pixel
// count (checked from the header before any pixel is allocated), format
// recognised by magic bytes, truncation detected. ReadImageBytes returns the
// bytes and DecodeImageBytes decodes exactly those: the indexer hashes them
// itself, with its database's hash (Store::ContentHash), so nothing here
// hashes file contents. OpenCV stays inside the .cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lookalike {

// Stable per-file outcome codes (printed in errors and JSON error lines).
enum class FileErrorCode {
  kDecodeFailed,       // DECODE_FAILED: the codec rejected the data
  kTruncated,          // TRUNCATED: the file ends before its image data does
  kUnsupportedFormat,  // UNSUPPORTED_FORMAT: not a format lookalike reads
  kTooManyPixels,      // TOO_MANY_PIXELS: header claims more than the limit
  kFileTooLarge,       // FILE_TOO_LARGE: more bytes than the limit
  kNotRegular,         // NOT_REGULAR: FIFO, device, socket, dangling link
  kNoFeatures,         // NO_FEATURES: decoded, but no keypoints were found
  kPermissionDenied,   // PERMISSION_DENIED: cannot open for reading
  kVanished,           // VANISHED: removed between listing and reading
  kReadFailed,         // READ_FAILED: other I/O error
  kTimeout,            // TIMEOUT: reading, decoding or extraction exceeded the time budget
};
const char* FileErrorCodeName(FileErrorCode code);

// A per-file problem: the run reports it and goes on.
struct FileError {
  FileErrorCode code;
  std::string path;     // raw bytes as the file system gave them
  std::string message;  // human readable reason
};

// Formats lookalike decodes, recognised by content, not by extension.
enum class ImageFormat { kUnknown, kJpeg, kPng, kWebp, kTiff, kBmp, kPnm };
const char* ImageFormatName(ImageFormat format);
// Recognises a format from the first bytes of a file (>= 12 bytes for WebP).
ImageFormat DetectImageFormat(const unsigned char* data, size_t size);
// Names the format of an image lookalike does not decode, recognised by its
// first bytes (up to kImageHeadBytes): "GIF", "HEIC", "HEIF", "AVIF",
// "JPEG XL", "JPEG 2000", "OpenEXR", "Photoshop", "ICO", "Radiance HDR",
// "DDS" or "QOI"; nullptr for anything else (a format DetectImageFormat
// recognises, or a file that is not an image, e.g. a video's ISO box).
const char* UnsupportedImageFormat(const unsigned char* data, size_t size);
// The first bytes DetectImageFormat and UnsupportedImageFormat look at.
constexpr size_t kImageHeadBytes = 64;

// Dimensions from the header (JPEG SOF, PNG IHDR, WebP VP8/VP8L/VP8X, BMP,
// TIFF first IFD, PNM), so oversized images are refused before any pixel is
// allocated; nullopt if the header is unreadable.
struct ImageSize {
  uint32_t width = 0;
  uint32_t height = 0;
};
std::optional<ImageSize> ReadHeaderSize(ImageFormat format, const unsigned char* data, size_t size);

// cv::imdecode flags for a colour decode that only needs its longest side to
// cover `max_side` (0 = full size): libjpeg's DCT scaling decodes a JPEG at
// 1/2, 1/4 or 1/8 when that still covers it; other formats decode whole.
int ColourDecodeFlags(ImageFormat format, const std::optional<ImageSize>& header, int max_side);

// True when a JPEG stream holds an end-of-image marker after its first scan
// (OpenCV decodes truncated scans silently, padding with grey).
bool JpegLooksComplete(const unsigned char* data, size_t size);

struct ImageFileLimits {
  uint64_t max_file_bytes = 256ull << 20;  // larger files: FILE_TOO_LARGE
  uint64_t max_pixels = 100'000'000;       // width x height above: TOO_MANY_PIXELS
  bool allow_truncated = false;            // decode truncated or corrupt JPEG/PNG anyway
  // Per-file time budget, seconds (> 0). Checked while reading (between 1 MiB
  // chunks, so a stalled network share is abandoned) and after decoding and
  // extraction; decoding and extraction are bounded in any case by
  // max_pixels and the database's max side.
  double max_seconds = 60.0;
};

// 8-bit single-channel image, row-major, width * height bytes.
struct GrayImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;
};

// 8-bit image of 1 (grey) or 3 (BGR) channels, row-major, width * height *
// channels bytes.
struct ColourImage {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;
};

// A decoded image ready for feature extraction, with what the index records.
struct LoadedImage {
  GrayImage gray;  // downscaled so the longest side <= max_side
  uint32_t original_width = 0;
  uint32_t original_height = 0;
  uint64_t size_bytes = 0;
  int64_t mtime_ns = 0;
  ImageFormat format = ImageFormat::kUnknown;
  // Colour histogram of the decoded image (indexer/colour.h), kColourBins bytes.
  std::vector<uint8_t> colour;
  // What it was computed from: the decoded image at most kColourPreviewSide
  // pixels long (indexer/colour.h), for a query whose histogram is wanted
  // again over a part of it (indexer/pasted_picture.h).
  ColourImage colour_preview;
  // Seconds spent downscaling and computing the colour histogram (both part
  // of the decode call), so the indexer can report them as their own stages.
  double resize_seconds = 0;
  double colour_seconds = 0;
};

// File facts from stat(2) without opening it (for incremental skipping).
struct FileStat {
  uint64_t size_bytes = 0;
  int64_t mtime_ns = 0;
  bool regular = false;
};
// nullopt if the path cannot be stat'ed (vanished); does not follow
// a symlink's target type only for the 'regular' check (lstat + stat).
std::optional<FileStat> StatFile(const std::string& path);

// Opens `path` (regular files only, never blocking on FIFOs), checks the size
// limit and reads all bytes. stat is taken from the opened descriptor.
struct ReadResult {
  std::string bytes;
  FileStat stat;
  std::optional<FileError> error;
};
ReadResult ReadImageBytes(const std::string& path, const ImageFileLimits& limits);

// Reads, checks, decodes (grey, EXIF orientation applied) and downscales
// (INTER_AREA, longest side <= max_side; 0 = keep) one image. Large JPEGs are
// decoded at 1/2, 1/4 or 1/8 scale when that still leaves >= max_side
// pixels. Never throws for a bad file: returns the FileError instead.
struct LoadResult {
  std::optional<LoadedImage> image;
  std::optional<FileError> error;
};
LoadResult LoadImageFile(const std::string& path, int max_side, const ImageFileLimits& limits);

// Same on bytes already in memory (queries, tests); `name` is used in errors.
LoadResult DecodeImageBytes(const std::string& name, const std::string& bytes, int max_side,
                            const ImageFileLimits& limits);

}  // namespace lookalike
