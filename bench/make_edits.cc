// make_edits SRC OUT [--seed S] [--only EDIT]
//
// Writes seeded edits of every image under SRC (walked recursively, sorted)
// into OUT, for the match-level calibration (bench/levels_calibration.sh):
// OUT/<path under SRC without extension>__<edit>.<jpg|ext>, and
// OUT/edits.tsv with one line per edit: edit path (relative to OUT), its
// source (relative to SRC), the edit's name and the level a search for it
// should give its source (search/match_level.h). The edits, one of each per
// image:
//
//   identical  the file's bytes                                   identical
//   reencode   JPEG quality 40                                    copy
//   resize     half the width and height (area), JPEG 90          copy
//   crop10     a window keeping 90 % of the area, seeded place    copy
//   rotate90   a quarter turn clockwise                           copy
//   rotate10   10 degrees, the canvas grown to hold it (black)    copy
//   mirror     flipped left to right                              copy
//   brighter   every pixel + 40 (saturating)                      copy
//   crop50     a window keeping 50 % of the area, seeded place    part
//   paste      scaled to 30 % of the area of a generated photo    part
//              (tests/test_images.h, not in any database) and pasted
//              there at a seeded place
//
// Another shot of the same scene cannot be made from one photo: the
// calibration takes those from the development set's multi-view pairs.
// `--only EDIT` writes that edit alone (e.g. `--only mirror` for mirrored
// copies of a set of queries). Edits other than identical are JPEG quality
// 90 unless said otherwise. Deterministic: edit e of image i depends only on
// (seed, i, e). Unreadable files are named on stderr and skipped (exit 1).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <string>
#include <vector>

#include "tests/test_images.h"

namespace fs = std::filesystem;

namespace {

struct Edit {
  const char* name;
  const char* level;
};

constexpr Edit kEdits[] = {
    {"identical", "identical"}, {"reencode", "copy"}, {"resize", "copy"}, {"crop10", "copy"},
    {"rotate90", "copy"},       {"rotate10", "copy"}, {"mirror", "copy"}, {"brighter", "copy"},
    {"crop50", "part"},         {"paste", "part"},
};

int Usage() {
  std::cerr << "usage: make_edits SRC OUT [--seed S] [--only EDIT]\n"
               "Writes seeded edits of every image under SRC into OUT and OUT/edits.tsv "
               "(edit, source, edit name, expected match level).\n";
  return 2;
}

bool IsImage(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".webp" || ext == ".bmp" ||
         ext == ".tif" || ext == ".tiff" || ext == ".ppm" || ext == ".pgm";
}

// A window keeping `share` of the area, at a seeded place.
cv::Mat Crop(const cv::Mat& image, double share, std::mt19937_64* rng) {
  const double side = std::sqrt(share);
  const int w = std::max(1, static_cast<int>(std::lround(image.cols * side)));
  const int h = std::max(1, static_cast<int>(std::lround(image.rows * side)));
  std::uniform_int_distribution<int> x(0, image.cols - w), y(0, image.rows - h);
  return image(cv::Rect(x(*rng), y(*rng), w, h)).clone();
}

// Rotated by `degrees` about its centre, the canvas grown to hold all of it.
cv::Mat RotateWhole(const cv::Mat& image, double degrees) {
  const cv::Point2f centre(0.5f * (image.cols - 1), 0.5f * (image.rows - 1));
  cv::Mat m = cv::getRotationMatrix2D(centre, degrees, 1.0);
  const cv::Rect2f box =
      cv::RotatedRect(centre, image.size(), static_cast<float>(degrees)).boundingRect2f();
  m.at<double>(0, 2) += 0.5 * box.width - centre.x;
  m.at<double>(1, 2) += 0.5 * box.height - centre.y;
  cv::Mat out;
  cv::warpAffine(
      image, out, m,
      cv::Size(static_cast<int>(std::ceil(box.width)), static_cast<int>(std::ceil(box.height))),
      cv::INTER_LINEAR, cv::BORDER_CONSTANT, cv::Scalar(0, 0, 0));
  return out;
}

// `image` scaled to `share` of the area of a generated photo and pasted
// there at a seeded place.
cv::Mat Paste(const cv::Mat& image, double share, uint64_t seed, std::mt19937_64* rng) {
  cv::Mat background = lookalike::testing::MakeSyntheticImage(seed, 800, 600);
  const double scale =
      std::sqrt(share * background.cols * background.rows / (image.cols * image.rows));
  cv::Mat small;
  cv::resize(image, small, cv::Size(), scale, scale, cv::INTER_AREA);
  small = small(
      cv::Rect(0, 0, std::min(small.cols, background.cols), std::min(small.rows, background.rows)));
  std::uniform_int_distribution<int> x(0, background.cols - small.cols),
      y(0, background.rows - small.rows);
  small.copyTo(background(cv::Rect(x(*rng), y(*rng), small.cols, small.rows)));
  return background;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return Usage();
  const fs::path src = argv[1], out = argv[2];
  uint64_t seed = 1;
  std::string only;
  for (int i = 3; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return Usage();
    if (flag == "--seed")
      seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--only")
      only = argv[i + 1];
    else
      return Usage();
  }
  if (!only.empty() && std::none_of(std::begin(kEdits), std::end(kEdits),
                                    [&](const Edit& e) { return only == e.name; })) {
    std::cerr << "make_edits: unknown edit '" << only << "'\n";
    return 2;
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(src))
    if (entry.is_regular_file() && IsImage(entry.path()))
      files.push_back(fs::relative(entry.path(), src));
  std::sort(files.begin(), files.end());
  fs::create_directories(out);
  std::ofstream tsv(out / "edits.tsv");
  tsv << "edit\tsource\tname\tlevel\n";
  const std::vector<int> jpeg90 = {cv::IMWRITE_JPEG_QUALITY, 90};
  const std::vector<int> jpeg40 = {cv::IMWRITE_JPEG_QUALITY, 40};
  int failures = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const fs::path& rel = files[i];
    const cv::Mat image = cv::imread((src / rel).string(), cv::IMREAD_COLOR);
    if (image.empty()) {
      std::cerr << "make_edits: " << (src / rel).string() << ": cannot decode, skipped\n";
      ++failures;
      continue;
    }
    for (size_t e = 0; e < std::size(kEdits); ++e) {
      const Edit& edit = kEdits[e];
      if (!only.empty() && only != edit.name) continue;
      std::mt19937_64 rng(seed * 1000003u + i * 131u + e);
      fs::path target = rel.parent_path() / (rel.stem().string() + "__" + edit.name);
      const std::string name = edit.name;
      if (name == "identical") {
        target += rel.extension();
        fs::create_directories((out / target).parent_path());
        fs::copy_file(src / rel, out / target, fs::copy_options::overwrite_existing);
      } else {
        cv::Mat edited;
        // `edited` starts empty: an edit written into a Mat sharing the
        // source's pixels would change the source for the edits after it.
        if (name == "reencode") {
          edited = image;
        } else if (name == "mirror") {
          cv::flip(image, edited, 1);
        } else if (name == "brighter") {
          image.convertTo(edited, -1, 1.0, 40.0);
        } else if (name == "resize") {
          cv::resize(image, edited,
                     cv::Size(std::max(1, image.cols / 2), std::max(1, image.rows / 2)), 0, 0,
                     cv::INTER_AREA);
        } else if (name == "crop10") {
          edited = Crop(image, 0.9, &rng);
        } else if (name == "crop50") {
          edited = Crop(image, 0.5, &rng);
        } else if (name == "rotate90") {
          cv::rotate(image, edited, cv::ROTATE_90_CLOCKWISE);
        } else if (name == "rotate10") {
          edited = RotateWhole(image, 10.0);
        } else if (name == "paste") {
          edited = Paste(image, 0.3, seed * 7919u + i, &rng);
        }
        target += ".jpg";
        fs::create_directories((out / target).parent_path());
        if (!cv::imwrite((out / target).string(), edited, name == "reencode" ? jpeg40 : jpeg90)) {
          std::cerr << "make_edits: cannot write " << (out / target).string() << "\n";
          return 2;
        }
      }
      tsv << target.string() << '\t' << rel.string() << '\t' << edit.name << '\t' << edit.level
          << '\n';
    }
  }
  return failures ? 1 : 0;
}
