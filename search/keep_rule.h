// Which of two images of the same picture to keep: dedup's keep rules.
//
// The default rule, `original`, keeps the image the other is an edit of.
// Between two images verified to show the same picture it asks, in order:
//   1. content:    does one show picture the other lacks (the other is a
//                  crop, or a rotation that cut its corners away)? Mapped
//                  by the pair's homography: the picture of each that falls
//                  outside the other's frame.
//   2. borders:    same picture, but one has uniform margins outside the
//                  other's frame (added borders, the filled corners of a
//                  rotated copy)?
//   3. resolution: does one hold the shared content in more pixels (the
//                  other is a downscale)? Measured from the verified
//                  matches' spread in each image, not from file sizes.
//   4. colour:     is one a greyscale copy of the other?
//   5. EXIF:       does only one keep camera metadata?
//   6. encoding:   lossless over JPEG, unless the lossless file is a
//                  converted JPEG (an opaque alpha channel added, or the
//                  8-pixel block edges of a JPEG in its pixels);
//   7. tones:      over the picture both show, has one end of one's tone
//                  range moved in while both reach the other end
//                  (brightened: no blacks left; darkened: no whites), or
//                  does one clip clearly more of its tones at one end?
//   8. quality:    between two JPEGs, the higher estimated quality, unless
//                  that file was written more than 2 s after the other (a
//                  JPEG saved again at a higher quality is still the copy);
// and then, as every rule ends: more pixels, the older modification time,
// the shorter path (fewer folders, then fewer bytes), the path's bytes.
// Byte-identical files skip straight to the modification time.
//
// The other rules order by one fact and end the same way: `newest`,
// `oldest` (modification time), `largest` (pixels, then file size), `path`
// (the shorter path). Files under a reference folder (--keep-in) come before
// everything, whatever the rule.
#pragma once

#include <array>
#include <string>

#include "search/image_traits.h"
#include "storage/store.h"

namespace lookalike {

enum class KeepRule { kOriginal, kNewest, kOldest, kLargest, kPath };
// "original", "newest", "oldest", "largest", "path".
const char* KeepRuleName(KeepRule rule);
// The inverse; throws std::invalid_argument listing the names.
KeepRule ParseKeepRule(const std::string& name);

// What decided between two images, in the order the rules ask.
enum class KeepCriterion {
  kNone,  // nothing told them apart (the same record facts and path)
  kReference,
  kContent,
  kBorders,
  kResolution,
  kColour,
  kExif,
  kEncoding,
  kTones,
  kJpegQuality,
  kPixels,
  kFileSize,
  kOlder,
  kNewer,
  kShorterPath,
  kPathOrder,
};

// One image as a keep rule sees it. Borrowed pointers, owned by the caller.
struct KeepCandidate {
  const ImageRecord* record = nullptr;  // path, pixels, file size, mtime
  const ImageTraits* traits = nullptr;  // null (or not read): the record only
  bool reference = false;               // under a reference folder (--keep-in)
};

// How the two images of a verified pair map onto each other.
struct PairGeometry {
  bool valid = false;
  // a's feature frame -> b's (the downscaled frames the stored keypoints live
  // in), row-major 3 x 3, fitted to the pair's inliers.
  std::array<double, 9> homography{};
  int width_a = 0, height_a = 0, width_b = 0, height_b = 0;  // feature frames
  // Linear scale of the shared content in b's original pixels over a's: 0.5
  // when b is a to half size.
  double scale = 1;
};

struct KeepVerdict {
  int prefer = 0;  // -1: keep a rather than b; +1: b rather than a
  KeepCriterion criterion = KeepCriterion::kNone;
  // Why the other one is not kept, in words about it ("a crop of the
  // keeper", "JPEG quality 50, the keeper's 90"); empty when prefer is 0.
  std::string reason;
};

// Compares a and b under `rule`. `geometry` (may be null) is their verified
// pair's; `identical` says they hold the same bytes. Never throws; pure.
KeepVerdict CompareForKeeping(KeepRule rule, const KeepCandidate& a, const KeepCandidate& b,
                              const PairGeometry* geometry, bool identical);

// What a keeper won by, in words about the keeper ("in a reference folder",
// "the most complete picture", "the oldest"), for a group's keep reason.
const char* KeeperStrength(KeepCriterion criterion);

// Where two images of a pair have pixels the other lacks, as shares of each
// one's own frame (search/keep_rule.cc, CompareFrames).
struct FrameComparison {
  // Picture (content mask) of a that falls outside b's frame: what b cut
  // away; and the same of b.
  double picture_only_in_a = 0, picture_only_in_b = 0;
  // Uniform margin of a outside b's frame: borders or filled corners a added
  // around the shared picture; and the same of b.
  double filled_only_in_a = 0, filled_only_in_b = 0;
  // Over the picture both show: the share of each one's pixels clipped at
  // the top and the bottom of the tone range (ImageTraits::highlights,
  // shadows).
  double highlights_a = 0, shadows_a = 0, highlights_b = 0, shadows_b = 0;
  // Over the same picture, the grey levels its tones span (the 2nd
  // percentile of its cells' darkest grey to the 98th of their lightest).
  int black_a = 0, white_a = 255, black_b = 0, white_b = 255;
};

// Maps each frame into the other by the pair's homography (at the masks'
// resolution) and measures FrameComparison. False when the masks or the
// geometry are missing or degenerate. Pure; for the keep rule and tests.
bool CompareFrames(const ImageTraits& a, const ImageTraits& b, const PairGeometry& g,
                   FrameComparison* out);

}  // namespace lookalike
