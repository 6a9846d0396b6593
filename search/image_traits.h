// What an image file tells about whether it is an original or an edited copy
// of one: the signals dedup's `original` keep rule (search/keep_rule.h)
// weighs between two images of the same picture. Read from the file's bytes
// (metadata and pixels), never from the database.
//
// None of these signals proves anything alone (a camera JPEG can have
// clipped highlights; a scan can lack EXIF); the keep rule only compares
// them between two images already verified to show the same picture, where
// the edit that made one from the other shows as a difference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "indexer/image_file.h"

namespace lookalike {

struct ImageTraits {
  // False when the bytes could not be decoded: then only the record's facts
  // (pixels, modification time, path) can be compared.
  bool read = false;
  ImageFormat format = ImageFormat::kUnknown;
  // Camera metadata: a JPEG APP1 "Exif" segment or a PNG eXIf chunk.
  bool exif = false;
  // Quality 1..100 estimated from the JPEG's luminance quantisation table
  // (IJG scaling of the standard table); 0 = not a JPEG or no table.
  int jpeg_quality = 0;
  // An alpha channel whose every pixel is opaque: added by a conversion (a
  // JPEG saved as PNG), not drawn by anyone.
  bool opaque_alpha = false;
  // Of a lossless file (not JPEG): mean grey step across the 8-pixel block
  // edges of a JPEG's grid over the mean step elsewhere, at full size. About
  // 1 for a picture that never was a JPEG; clearly above (> kJpegHistory) for
  // one decoded from a JPEG and saved again. 0 when not measured.
  float block_edges = 0;
  // True when every pixel's colour channels are equal (within JPEG noise).
  bool grey = false;
  // Per mask cell (below), the share of its pixels at the ends of the tone
  // range, x 255: grey >= 253 (highlights) and <= 2 (shadows). Compared over
  // the picture two images share: a brightened, darkened or contrast-
  // stretched copy clips more at one end than its original.
  std::vector<uint8_t> highlights, shadows;
  // Per mask cell, the darkest and lightest grey (of the image smoothed over
  // 3 x 3 pixels, so JPEG noise does not count): where the picture's tones
  // begin and end. A brightened copy has no blacks left, a darkened one no
  // whites, a faded one neither.
  std::vector<uint8_t> darkest, lightest;
  // Where the picture is: 1 = content, 0 = a uniform margin (an added border,
  // the filled corners of a rotated copy) reached from a corner of the frame.
  // mask_width x mask_height bytes, row-major, the decoded image (EXIF
  // orientation applied, as indexed) scaled so its longest side is
  // kMaskSide.
  std::vector<uint8_t> mask;
  int mask_width = 0, mask_height = 0;
  // Share of the frame that is content, in [0, 1].
  float content = 1;
};

// Block edges above this ratio: a lossless file that was a JPEG before.
inline constexpr float kJpegHistory = 1.25f;
// Longest side of ImageTraits::mask, pixels.
inline constexpr int kMaskSide = 128;

// The traits of one image file's bytes. Never throws for bad data (returns
// read = false). Decodes the pixels once (a JPEG at a reduced scale; a
// lossless file whole, for its block edges and alpha channel), so it costs
// about one decode. Thread-safe.
ImageTraits AnalyseImageBytes(const std::string& bytes);

}  // namespace lookalike
