// A tiny grey copy of an image, stored with every image (Store::PutImage's
// thumbnail) and made for every query: what search correlates when local
// features cannot decide. A copy 64-200 px across, blurred and JPEG-compressed
// keeps 3-80 SIFT keypoints, too few to verify, and among thousands of
// unrelated images its VLAD rank is random; its thumbnail still correlates
// with its original's at 0.92-0.97 (search/thumbnail_match.h, search/README.md,
// "Thumbnail correlation").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "indexer/image_file.h"

namespace lookalike {

// The longest side of a stored thumbnail, pixels: 48 x 36 = 1,728 bytes for a
// 4:3 photo. Queries keep twice that (kQueryThumbnailSide), as they are
// shrunk further to be slid over a stored thumbnail as a crop.
inline constexpr int kThumbnailSide = 48;
inline constexpr int kQueryThumbnailSide = 2 * kThumbnailSide;
// The shortest side, however elongated the image: a correlation needs rows.
inline constexpr int kThumbnailMinSide = 8;

struct GreyThumbnail {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // width x height, row-major
  bool empty() const { return pixels.empty(); }
};

// `gray` shrunk by area averaging so its longest side is `side` pixels
// (never enlarged: a smaller image keeps its size), each side at least
// kThumbnailMinSide. Empty for an empty image.
GreyThumbnail MakeGreyThumbnail(const GrayImage& gray, int side);

// The stored value: u8 format (1), u8 width, u8 height, the pixels. Sides are
// 1..255.
std::string EncodeGreyThumbnail(const GreyThumbnail& thumbnail);
// Throws encoding::CorruptValue (unknown format, sizes that do not match).
GreyThumbnail DecodeGreyThumbnail(const std::string& value);

}  // namespace lookalike
