// Seeded synthetic photographs for tests (tests never read ../shared): each
// image mixes a textured background, filled shapes, lines and text, so SIFT
// finds plenty of distinctive keypoints; and the transformations a copy of a
// photo typically goes through.
#pragma once

#include <cstdint>
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "indexer/image_file.h"

namespace lookalike {
namespace testing {

// The grey image the extractor sees for a BGR image (OpenCV's conversion).
GrayImage ToGrayImage(const cv::Mat& bgr);

// A distinct BGR image of width x height for each seed.
cv::Mat MakeSyntheticImage(uint64_t seed, int width = 640, int height = 480);

// The copy transformations the end-to-end test checks.
enum class Transform { kCrop, kScale, kRotate, kJpeg, kBlur, kBrightness };
const std::vector<Transform>& AllTransforms();
const char* TransformName(Transform t);

// Applies one transformation (deterministic). kJpeg returns the decoded
// result of a quality-30 JPEG round trip.
cv::Mat ApplyTransform(const cv::Mat& image, Transform t);

// `picture` warped onto a `canvas` filled with grey level `fill`, its
// corners (top-left, top-right, bottom-right, bottom-left) at `corners`: a
// picture pasted in perspective (indexer/pasted_picture.h).
cv::Mat PasteAt(const cv::Mat& picture, const std::vector<cv::Point2f>& corners, cv::Size canvas,
                int fill = 0);
// The corners of a picture of `size` centred on `canvas` and rotated by
// `degrees` (clockwise on screen), and the picture pasted there.
std::vector<cv::Point2f> RotatedCorners(cv::Size size, cv::Size canvas, double degrees);
cv::Mat PasteRotated(const cv::Mat& picture, double degrees, cv::Size canvas, int fill = 0);

// Writes an image (format from the extension); throws on failure.
void WriteImage(const std::string& path, const cv::Mat& image);

// Writes `count` synthetic images named img_000.png ... into `dir` (created),
// returns their paths.
std::vector<std::string> WriteSyntheticSet(const std::string& dir, int count,
                                           uint64_t first_seed = 1, int width = 640,
                                           int height = 480);

// Files of image formats lookalike does not read, built byte by byte: a
// complete 1 x 1 GIF (two-colour palette, one LZW-coded pixel), and the
// start of an ISO base media file whose ftyp box names `major` and
// `compatible` brands ("heic" / "mif1": HEIC, "avif": AVIF, "isom": an MP4
// video), followed by filler; no decoder would accept its body.
std::string TinyGif();
std::string IsoMediaHeader(const std::string& major, const std::vector<std::string>& compatible);

// A fresh, empty temporary directory removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace testing
}  // namespace lookalike
