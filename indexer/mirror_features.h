// The local features of an image's mirror image (flipped left to right),
// computed from the image's own features instead of extracting again: each
// keypoint moves to x' = width - 1 - x with its orientation reflected
// (angle' = 180 - angle), and each SIFT / RootSIFT descriptor's bins are
// permuted to where the mirror puts them. What lets search and dedup find a
// mirrored copy at the cost of a second search, not a second extraction.
#pragma once

#include <cstdint>

#include "indexer/extractor.h"
#include "indexer/grey_thumbnail.h"
#include "indexer/local_features.h"

namespace lookalike {

// SIFT's descriptor layout (OpenCV): 4 x 4 spatial cells, row-major over the
// keypoint's rotated frame, each an 8-bin orientation histogram.
inline constexpr int kSiftCells = 4;
inline constexpr int kSiftOrientations = 8;
inline constexpr int kSiftDim = kSiftCells * kSiftCells * kSiftOrientations;

// The position in a descriptor of SIFT's layout that bin `i` moves to in the
// mirror image's descriptor of the same point: in the keypoint's frame the
// mirror keeps the direction along its orientation and reverses the one
// across it, so the cell rows are reversed, and every gradient's angle
// relative to the orientation changes sign (bin o -> (8 - o) mod 8). A
// permutation of 0..127 (an involution). Element-wise maps such as RootSIFT's
// square root commute with it.
int MirroredSiftBin(int i);

// `row` (kSiftDim floats) permuted by MirroredSiftBin into `out` (not
// aliasing `row`).
void MirrorSiftDescriptor(const float* row, float* out);

// The descriptors of the mirror of a width-pixel-wide image, from those of
// the image: keypoints mirrored as above (size and response kept), rows
// permuted. Throws std::invalid_argument unless dim is kSiftDim (or num 0).
Descriptors MirrorDescriptors(const Descriptors& descriptors, uint32_t width);

// The same for stored-layout features (their frame's width): what dedup
// verifies a pair with when one side is mirrored. Descriptors must be in the
// original frame (DescriptorFrame::kOriginal), not a quantizer's rotated one.
LocalFeatures MirrorFeatures(const LocalFeatures& features);

// A grey thumbnail flipped left to right: the mirror's, which aligned
// correlation compares with a mirrored match's other side.
GreyThumbnail MirrorThumbnail(const GreyThumbnail& thumbnail);

}  // namespace lookalike
