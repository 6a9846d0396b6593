#include "search/keep_rule.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <stdexcept>

namespace lookalike {

const char* KeepRuleName(KeepRule rule) {
  switch (rule) {
    case KeepRule::kOriginal:
      return "original";
    case KeepRule::kNewest:
      return "newest";
    case KeepRule::kOldest:
      return "oldest";
    case KeepRule::kLargest:
      return "largest";
    case KeepRule::kPath:
      return "path";
  }
  return "original";
}

KeepRule ParseKeepRule(const std::string& name) {
  for (KeepRule r : {KeepRule::kOriginal, KeepRule::kNewest, KeepRule::kOldest, KeepRule::kLargest,
                     KeepRule::kPath})
    if (name == KeepRuleName(r)) return r;
  throw std::invalid_argument("unknown keep rule '" + name +
                              "': use original, newest, oldest, largest or path");
}

const char* KeeperStrength(KeepCriterion criterion) {
  switch (criterion) {
    case KeepCriterion::kNone:
      return "indistinguishable from the others";
    case KeepCriterion::kReference:
      return "in a reference folder (--keep-in)";
    case KeepCriterion::kContent:
      return "shows the most of the picture (the others are crops of it)";
    case KeepCriterion::kBorders:
      return "no added borders";
    case KeepCriterion::kResolution:
      return "the highest resolution (the others are downscaled)";
    case KeepCriterion::kColour:
      return "in colour (the others are greyscale)";
    case KeepCriterion::kTones:
      return "the untouched tones (the others are brightened, darkened or clipped)";
    case KeepCriterion::kExif:
      return "keeps its EXIF metadata";
    case KeepCriterion::kEncoding:
      return "the least lossy encoding";
    case KeepCriterion::kJpegQuality:
      return "the highest JPEG quality";
    case KeepCriterion::kPixels:
      return "the most pixels";
    case KeepCriterion::kFileSize:
      return "the largest file";
    case KeepCriterion::kOlder:
      return "the oldest modification time";
    case KeepCriterion::kNewer:
      return "the newest modification time";
    case KeepCriterion::kShorterPath:
      return "the shortest path";
    case KeepCriterion::kPathOrder:
      return "the first path";
  }
  return "";
}

namespace {

// Shares of content that differ by less than this are the same picture: the
// homography is fitted to matches and extrapolated to the frame's edges.
constexpr double kContentMargin = 0.05;
// An image whose content share is this much lower has added margins.
constexpr double kBorderMargin = 0.03;
// Linear scales within this factor of 1 are the same resolution.
constexpr double kScaleMargin = 1.05;
// An end of the tone range this many grey levels further in counts as moved
// ...
constexpr int kRangeMargin = 12;
// ... and one this close to black or white as clipped there.
constexpr int kClippedLevels = 8;
// Clipped tones: this much more of the shared picture at one end of the
// range counts as a tone edit.
constexpr double kClipMargin = 0.03;
// JPEG qualities closer than this are the same encoding.
constexpr int kQualityMargin = 5;
// Modification times closer than this (ns) were written together: they do
// not tell which file came first.
constexpr int64_t kSameTimeNs = 2'000'000'000;

std::string Percent(double share) {
  char s[16];
  std::snprintf(s, sizeof s, "%.0f %%", 100 * share);
  return s;
}

bool Lossless(ImageFormat f) {
  return f == ImageFormat::kPng || f == ImageFormat::kBmp || f == ImageFormat::kTiff ||
         f == ImageFormat::kPnm;
}

// Why a lossless file is a converted JPEG, or empty when nothing says so.
std::string Conversion(const ImageTraits& t) {
  if (!Lossless(t.format)) return "";
  if (t.opaque_alpha) return "an opaque alpha channel added";
  if (t.block_edges > kJpegHistory) return "a JPEG's block edges in its pixels";
  return "";
}

int Depth(const std::string& path) {
  return static_cast<int>(std::count(path.begin(), path.end(), '/'));
}

uint64_t Pixels(const ImageRecord& r) { return uint64_t{r.width} * r.height; }

std::string Size(const ImageRecord& r) {
  return std::to_string(r.width) + "x" + std::to_string(r.height);
}

// A verdict for whichever of a (sign -1) or b (+1) `a_wins` names.
KeepVerdict Prefer(bool a_wins, KeepCriterion c, std::string reason) {
  return KeepVerdict{a_wins ? -1 : 1, c, std::move(reason)};
}

// Over the cells `region` marks (all of its content when `region` is
// empty): the shares of t's pixels clipped at each end of the tone range,
// and the grey levels its tones span.
void Tones(const ImageTraits& t, const cv::Mat& region, double* highlights, double* shadows,
           int* black, int* white) {
  double high = 0, low = 0, cells = 0;
  std::vector<uint8_t> darkest, lightest;
  for (int y = 0; y < t.mask_height; ++y)
    for (int x = 0; x < t.mask_width; ++x) {
      const size_t i = static_cast<size_t>(y) * t.mask_width + x;
      if (region.empty() ? !t.mask[i] : !region.at<uint8_t>(y, x)) continue;
      high += t.highlights[i];
      low += t.shadows[i];
      darkest.push_back(t.darkest[i]);
      lightest.push_back(t.lightest[i]);
      ++cells;
    }
  *highlights = cells > 0 ? high / (255 * cells) : 0;
  *shadows = cells > 0 ? low / (255 * cells) : 0;
  if (darkest.empty()) return;
  auto percentile = [](std::vector<uint8_t>& v, double q) {
    const size_t k = static_cast<size_t>(q * static_cast<double>(v.size() - 1));
    std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
    return static_cast<int>(v[k]);
  };
  *black = percentile(darkest, 0.02);
  *white = percentile(lightest, 0.98);
}

// The comparisons of the `original` rule that need the files' traits and
// the pair's geometry (1-8 in keep_rule.h); prefer 0 when none decides.
KeepVerdict CompareOriginals(const ImageTraits& a, const ImageTraits& b, int64_t a_mtime_ns,
                             int64_t b_mtime_ns, const PairGeometry* g) {
  FrameComparison f;
  const bool framed = g && g->valid && CompareFrames(a, b, *g, &f);
  if (!framed) {
    Tones(a, cv::Mat(), &f.highlights_a, &f.shadows_a, &f.black_a, &f.white_a);
    Tones(b, cv::Mat(), &f.highlights_b, &f.shadows_b, &f.black_b, &f.white_b);
  }
  if (framed && std::abs(f.picture_only_in_a - f.picture_only_in_b) > kContentMargin) {
    // The one showing picture the other lacks is the fuller one; the other
    // is a crop (or a rotation that cut the corners away).
    const bool a_wins = f.picture_only_in_a > f.picture_only_in_b;
    const double lost = a_wins ? f.picture_only_in_a : f.picture_only_in_b;
    return Prefer(a_wins, KeepCriterion::kContent,
                  "a crop of the keeper (lacks " + Percent(lost) + " of its picture)");
  }
  if (framed && std::abs(f.filled_only_in_a - f.filled_only_in_b) > kBorderMargin) {
    const bool a_wins = f.filled_only_in_a < f.filled_only_in_b;
    return Prefer(a_wins, KeepCriterion::kBorders,
                  "added borders or filled corners (" +
                      Percent(std::max(f.filled_only_in_a, f.filled_only_in_b)) + " of its frame)");
  }
  if (g && g->valid && (g->scale > kScaleMargin || g->scale < 1 / kScaleMargin)) {
    const bool a_wins = g->scale < 1;
    return Prefer(a_wins, KeepCriterion::kResolution,
                  "a downscale of the keeper (" + Percent(a_wins ? g->scale : 1 / g->scale) +
                      " of its resolution)");
  }
  if (a.grey != b.grey) return Prefer(b.grey, KeepCriterion::kColour, "greyscale");
  if (a.exif != b.exif)
    return Prefer(a.exif, KeepCriterion::kExif, "no EXIF metadata (the keeper has it)");
  const std::string a_converted = Conversion(a), b_converted = Conversion(b);
  const bool a_jpeg = a.format == ImageFormat::kJpeg, b_jpeg = b.format == ImageFormat::kJpeg;
  if ((a_jpeg && Lossless(b.format)) || (b_jpeg && Lossless(a.format))) {
    const ImageTraits& lossless = a_jpeg ? b : a;
    const std::string& converted = a_jpeg ? b_converted : a_converted;
    if (!converted.empty())
      return Prefer(a_jpeg, KeepCriterion::kEncoding,
                    "a JPEG saved again as " + std::string(ImageFormatName(lossless.format)) +
                        " (" + converted + ")");
    return Prefer(!a_jpeg, KeepCriterion::kEncoding, "JPEG, where the keeper is lossless");
  }
  if (Lossless(a.format) && Lossless(b.format) && a_converted.empty() != b_converted.empty())
    return Prefer(a_converted.empty(), KeepCriterion::kEncoding,
                  "a converted JPEG (" + (a_converted.empty() ? b_converted : a_converted) + ")");
  // Over the shared picture: a brightness shift moves one end of the tone
  // range inward (brightened: the blacks are gone) and pushes the other
  // into clipping, where the original's already was (it reached white, or
  // black). Only that shape decides: a range narrower or wider at both ends
  // is as much a faded copy as a contrast-stretched original, and the
  // other way round.
  auto shifted = [&](int black_x, int white_x, int black_y, int white_y) {
    // x lost its blacks, both reach white; or x lost its whites, both
    // reach black.
    return (black_x - black_y > kRangeMargin && white_x >= 255 - kClippedLevels &&
            white_y >= 255 - kClippedLevels) ||
           (white_y - white_x > kRangeMargin && black_x <= kClippedLevels &&
            black_y <= kClippedLevels);
  };
  const bool a_shifted = shifted(f.black_a, f.white_a, f.black_b, f.white_b);
  const bool b_shifted = shifted(f.black_b, f.white_b, f.black_a, f.white_a);
  if (a_shifted != b_shifted) {
    const bool a_wins = b_shifted;
    return Prefer(a_wins, KeepCriterion::kTones,
                  "tones span grey " + std::to_string(a_wins ? f.black_b : f.black_a) + "-" +
                      std::to_string(a_wins ? f.white_b : f.white_a) + ", the keeper's " +
                      std::to_string(a_wins ? f.black_a : f.black_b) + "-" +
                      std::to_string(a_wins ? f.white_a : f.white_b) + ": brightened or darkened");
  }
  // ... and how much more each clips than the other at the end where it
  // clips more.
  const double a_more = std::max(f.highlights_a - f.highlights_b, f.shadows_a - f.shadows_b);
  const double b_more = std::max(f.highlights_b - f.highlights_a, f.shadows_b - f.shadows_a);
  if (std::abs(a_more - b_more) > kClipMargin) {
    const bool a_wins = b_more > a_more;
    return Prefer(a_wins, KeepCriterion::kTones,
                  "clips " + Percent(std::max(a_more, b_more)) +
                      " more of the picture's tones than the keeper: brightened, darkened or "
                      "contrast-stretched");
  }
  // The higher quality, unless that file was written clearly later: a JPEG
  // saved again at a higher quality than its original's gains nothing, and
  // its newer time then tells which came first (the common tail below).
  if (a_jpeg && b_jpeg && a.jpeg_quality > 0 && b.jpeg_quality > 0 &&
      std::abs(a.jpeg_quality - b.jpeg_quality) >= kQualityMargin &&
      (a.jpeg_quality > b.jpeg_quality ? a_mtime_ns - b_mtime_ns : b_mtime_ns - a_mtime_ns) <=
          kSameTimeNs) {
    const bool a_wins = a.jpeg_quality > b.jpeg_quality;
    return Prefer(a_wins, KeepCriterion::kJpegQuality,
                  "JPEG quality " + std::to_string(std::min(a.jpeg_quality, b.jpeg_quality)) +
                      ", the keeper's " + std::to_string(std::max(a.jpeg_quality, b.jpeg_quality)));
  }
  return {};
}

// What every rule ends with: pixels, the older file, the shorter path.
KeepVerdict CompareRecords(const ImageRecord& a, const ImageRecord& b) {
  if (Pixels(a) != Pixels(b))
    return Prefer(Pixels(a) > Pixels(b), KeepCriterion::kPixels,
                  "fewer pixels (" + Size(Pixels(a) > Pixels(b) ? b : a) + ", the keeper's " +
                      Size(Pixels(a) > Pixels(b) ? a : b) + ")");
  if (a.mtime_ns != b.mtime_ns)
    return Prefer(a.mtime_ns < b.mtime_ns, KeepCriterion::kOlder, "modified later than the keeper");
  if (Depth(a.path) != Depth(b.path))
    return Prefer(Depth(a.path) < Depth(b.path), KeepCriterion::kShorterPath,
                  "in a deeper folder than the keeper");
  if (a.path.size() != b.path.size())
    return Prefer(a.path.size() < b.path.size(), KeepCriterion::kShorterPath,
                  "a longer path than the keeper's");
  if (a.path != b.path)
    return Prefer(a.path < b.path, KeepCriterion::kPathOrder, "its path sorts after the keeper's");
  return {};
}

}  // namespace

bool CompareFrames(const ImageTraits& a, const ImageTraits& b, const PairGeometry& g,
                   FrameComparison* out) {
  if (!g.valid || a.mask.empty() || b.mask.empty() || g.width_a <= 0 || g.height_a <= 0 ||
      g.width_b <= 0 || g.height_b <= 0)
    return false;
  const cv::Matx33d h(g.homography.data());
  // Feature frame -> mask frame of each image.
  const cv::Matx33d to_a(static_cast<double>(a.mask_width) / g.width_a, 0, 0, 0,
                         static_cast<double>(a.mask_height) / g.height_a, 0, 0, 0, 1);
  const cv::Matx33d to_b(static_cast<double>(b.mask_width) / g.width_b, 0, 0, 0,
                         static_cast<double>(b.mask_height) / g.height_b, 0, 0, 0, 1);
  const cv::Matx33d m = to_b * h * to_a.inv();
  const double det = m(0, 0) * m(1, 1) - m(0, 1) * m(1, 0);
  if (!std::isfinite(det) || std::abs(det) < 1e-3 || std::abs(det) > 1e3) return false;
  const cv::Mat mask_a(a.mask_height, a.mask_width, CV_8U, const_cast<uint8_t*>(a.mask.data()));
  const cv::Mat mask_b(b.mask_height, b.mask_width, CV_8U, const_cast<uint8_t*>(b.mask.data()));
  // Each frame warped into the other: where the other image has pixels at all.
  cv::Mat frame_a_in_b, frame_b_in_a;
  cv::warpPerspective(cv::Mat(mask_a.size(), CV_8U, cv::Scalar(1)), frame_a_in_b, cv::Mat(m),
                      mask_b.size(), cv::INTER_NEAREST, cv::BORDER_CONSTANT, 0);
  cv::warpPerspective(cv::Mat(mask_b.size(), CV_8U, cv::Scalar(1)), frame_b_in_a, cv::Mat(m.inv()),
                      mask_a.size(), cv::INTER_NEAREST, cv::BORDER_CONSTANT, 0);
  const double area_a = static_cast<double>(mask_a.total()),
               area_b = static_cast<double>(mask_b.total());
  const cv::Mat outside_b = frame_b_in_a == 0, outside_a = frame_a_in_b == 0;
  out->picture_only_in_a = cv::countNonZero(mask_a & outside_b) / area_a;
  out->picture_only_in_b = cv::countNonZero(mask_b & outside_a) / area_b;
  out->filled_only_in_a = cv::countNonZero((mask_a == 0) & outside_b) / area_a;
  out->filled_only_in_b = cv::countNonZero((mask_b == 0) & outside_a) / area_b;
  if (!a.highlights.empty() && !b.highlights.empty()) {
    Tones(a, mask_a & (frame_b_in_a != 0), &out->highlights_a, &out->shadows_a, &out->black_a,
          &out->white_a);
    Tones(b, mask_b & (frame_a_in_b != 0), &out->highlights_b, &out->shadows_b, &out->black_b,
          &out->white_b);
  }
  return true;
}

KeepVerdict CompareForKeeping(KeepRule rule, const KeepCandidate& a, const KeepCandidate& b,
                              const PairGeometry* geometry, bool identical) {
  if (a.reference != b.reference)
    return Prefer(a.reference, KeepCriterion::kReference,
                  "outside the reference folders, where the keeper is inside");
  const ImageRecord& ra = *a.record;
  const ImageRecord& rb = *b.record;
  switch (rule) {
    case KeepRule::kOriginal:
      if (!identical && a.traits && b.traits && a.traits->read && b.traits->read) {
        KeepVerdict v = CompareOriginals(*a.traits, *b.traits, ra.mtime_ns, rb.mtime_ns, geometry);
        if (v.prefer != 0) return v;
      }
      break;
    case KeepRule::kNewest:
      if (ra.mtime_ns != rb.mtime_ns)
        return Prefer(ra.mtime_ns > rb.mtime_ns, KeepCriterion::kNewer,
                      "modified before the keeper (--keep newest)");
      break;
    case KeepRule::kOldest:
      if (ra.mtime_ns != rb.mtime_ns)
        return Prefer(ra.mtime_ns < rb.mtime_ns, KeepCriterion::kOlder,
                      "modified later than the keeper (--keep oldest)");
      break;
    case KeepRule::kLargest:
      if (Pixels(ra) != Pixels(rb)) break;  // the common tail compares pixels first
      if (ra.size_bytes != rb.size_bytes)
        return Prefer(ra.size_bytes > rb.size_bytes, KeepCriterion::kFileSize,
                      "a smaller file than the keeper (--keep largest)");
      break;
    case KeepRule::kPath:
      if (Depth(ra.path) != Depth(rb.path) || ra.path.size() != rb.path.size()) {
        ImageRecord path_a, path_b;  // the paths alone
        path_a.path = ra.path;
        path_b.path = rb.path;
        KeepVerdict v = CompareRecords(path_a, path_b);
        v.reason += " (--keep path)";
        return v;
      }
      break;
  }
  KeepVerdict v = CompareRecords(ra, rb);
  if (identical && v.prefer != 0) v.reason = "the same bytes, " + v.reason;
  return v;
}

}  // namespace lookalike
