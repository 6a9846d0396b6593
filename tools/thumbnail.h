// Small JPEG previews of images, for the web UI (`serve`) and the HTML
// reports: decoded in colour (EXIF orientation applied), scaled down so the
// longest side is at most a given size, never enlarged. OpenCV stays in the
// .cc.
#pragma once

#include <string>

#include "indexer/image_file.h"
#include "storage/store.h"

namespace lookalike {

struct Thumbnail {
  std::string jpeg;   // JPEG bytes; empty when there is none
  std::string error;  // why there is none (names the file and what to do)
};

// Longest side of a thumbnail, pixels; what the callers accept.
inline constexpr int kMinThumbnailSide = 16;
inline constexpr int kMaxThumbnailSide = 1024;

// A thumbnail of `bytes` (a JPEG, PNG, WebP, TIFF, BMP or PNM file; `name`
// appears in errors). The header's pixel count is checked against
// `limits.max_pixels` before decoding. max_side in
// kMinThumbnailSide..kMaxThumbnailSide. Thread-safe.
Thumbnail ThumbnailOfBytes(const std::string& name, const std::string& bytes, int max_side,
                           const ImageFileLimits& limits);

// A thumbnail of the indexed image `record`: its file is read (regular
// files only, `limits`) and must still hold the bytes that were indexed
// (the store's content hash), so nothing but indexed pictures is ever shown.
// Thread-safe (concurrent store reads).
Thumbnail ThumbnailOfRecord(const Store& store, const ImageRecord& record, int max_side,
                            const ImageFileLimits& limits);

}  // namespace lookalike
