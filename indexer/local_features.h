// The local features an image keeps for spatial verification: its SIFT
// keypoints (position, scale, orientation) and descriptors quantised to one
// byte per component. Encoded once at index time and stored beside the VLAD
// vector (storage keeps the blob opaque); queries go through the same
// quantisation so both sides of a match are treated alike.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "indexer/descriptor_quantizer.h"
#include "indexer/extractor.h"
#include "storage/store.h"

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

// Two blob layouts (little-endian), told apart by their first u32:
//   format 1 (schemas 1-2): u32 num, u32 dim, u32 width, u32 height, f32
//     scale, num x (f32 x, y, size, angle), num x dim u8 (round(value x
//     scale), scale = 255 / the image's largest component). 16 + dim bytes
//     per keypoint (144 for SIFT).
//   format 2 (schema 3): u32 num, u32 dim, u32 width, u32 height, u32 code
//     bytes B, num x (u16 x, u16 y: fixed point over width and height, u8
//     size: 24 x log2(size), u8 angle: 256ths of a turn), num x B product-
//     quantiser codes (DescriptorQuantizer). 6 + B bytes per keypoint (22 at
//     the default B = 16): positions to 1/65535 of the frame (< 0.02 px at
//     1024 px), sizes to 3 %, angles to 1.4 degrees.
std::string EncodeLocalFeatures(const Descriptors& descriptors, uint32_t width, uint32_t height);

// Format 2. `reconstructed`, if given, receives the num x dim descriptors the
// blob decodes to (unit rows): what the database side of matching and VLAD
// encoding must see, so that a value derived from the stored features later
// equals the one computed now.
std::string EncodeCompactFeatures(const Descriptors& descriptors, uint32_t width, uint32_t height,
                                  const DescriptorQuantizer& quantizer,
                                  std::vector<float>* reconstructed = nullptr);

// Descriptors come in `frame` (DescriptorFrame::kQuantizer needs
// `quantizer`; a format-1 blob's exact descriptors are then rotated into it).
// Throws encoding::CorruptValue if the blob is malformed, or is format 2 and
// `quantizer` is null or does not fit it; std::invalid_argument for
// kQuantizer without a quantizer.
LocalFeatures DecodeLocalFeatures(const std::string& blob,
                                  const DescriptorQuantizer* quantizer = nullptr,
                                  DescriptorFrame frame = DescriptorFrame::kOriginal);

// `features` (descriptors of the original frame) with their descriptors
// rotated into `quantizer`'s frame (DescriptorFrame::kQuantizer). Throws
// std::invalid_argument if their dimension is not the quantizer's.
LocalFeatures InQuantizerFrame(LocalFeatures features, const DescriptorQuantizer& quantizer);

// What a blob holds, read from its header without decoding it: format (1
// or 2), keypoints, descriptor dimension and code bytes (0 in format 1).
// Throws encoding::CorruptValue if the header is malformed or the size does
// not match it.
struct LocalFeaturesShape {
  uint32_t format = 0;
  uint32_t num = 0;
  int dim = 0;
  uint32_t code_bytes = 0;
};
LocalFeaturesShape InspectLocalFeatures(const std::string& blob);

// The check `verify` runs on every stored blob (Store::Verify's
// FeaturesCheck): its format is the database's (2 in schema 3, 1 before),
// its keypoints are the record's descriptors, its dimension the model's,
// and compact codes fit the database's descriptor quantizer. Reads and
// decodes the quantizer once; a missing or unusable one is added to
// *problems. Headers are read, codes are not decoded (verify stays a read
// of the database). The returned check refers to `store`.
FeaturesCheck LocalFeaturesCheck(const Store& store, std::vector<std::string>* problems);

// The descriptor quantizer of a compact database (m:dq); nullopt for the
// older layout, which stores none. Throws StoreError(kCorrupt) naming the
// database when it is unreadable.
std::optional<DescriptorQuantizer> LoadDescriptorQuantizer(const Store& store);

// The features a query sees: its exact descriptors (unit rows) at the
// positions the database would store. Format-1 databases quantised both
// sides alike; `quantizer` null selects that.
LocalFeatures MakeLocalFeatures(const Descriptors& descriptors, uint32_t width, uint32_t height,
                                const DescriptorQuantizer* quantizer = nullptr);

}  // namespace lookalike
