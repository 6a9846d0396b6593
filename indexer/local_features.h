// The local features an image keeps for spatial verification: its SIFT
// keypoints (position, scale, orientation) and descriptors quantised to one
// byte per component. Encoded once at index time and stored beside the VLAD
// vector (storage keeps the blob opaque); queries go through the same
// quantisation so both sides of a match are treated alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "indexer/extractor.h"

namespace lookalike {

struct LocalFeatures {
  uint32_t width = 0, height = 0;  // the (downscaled) frame keypoints live in
  int dim = 0;
  std::vector<Keypoint> keypoints;
  // num x dim, each row L2-normalised (Euclidean distance of unit rows is a
  // function of their dot product, so matching is one matrix product).
  std::vector<float> descriptors;

  int64_t num() const { return static_cast<int64_t>(keypoints.size()); }
};

// Blob layout (little-endian): u32 format (1), u32 num, u32 dim, u32 width,
// u32 height, f32 scale, num x (f32 x, y, size, angle), num x dim u8
// (round(value * scale), scale = 255 / the image's largest component).
// About 16 + dim bytes per keypoint (144 for SIFT).
std::string EncodeLocalFeatures(const Descriptors& descriptors, uint32_t width, uint32_t height);

// Throws encoding::CorruptValue if the blob is malformed.
LocalFeatures DecodeLocalFeatures(const std::string& blob);

// The features a query sees: descriptors through the stored quantisation.
LocalFeatures MakeLocalFeatures(const Descriptors& descriptors, uint32_t width, uint32_t height);

}  // namespace lookalike
