// lookalike-make-copy [--kind KIND] IN OUT: writes a transformed copy of a
// photo. The default kind (crop, rotation, downscale, brightness, JPEG
// quality 40) is the copy the Quick start searches for (tools/quickstart.sh);
// the other kinds are the generated duplicates tools/eval_dedup.sh measures
// `dedup` on (and its keep rule: each is an edit of IN, never an original).
#include <iostream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <set>
#include <string>
#include <vector>

namespace {

constexpr char kUsage[] =
    "usage: lookalike-make-copy [--kind KIND] IN OUT\n"
    "Writes a copy of IN (JPEG, or PNG for png-alpha). KIND:\n"
    "  copy (default)  cropped, rotated 8 degrees, downscaled, brightened, quality 40\n"
    "  reencode        quality 50\n"
    "  resize          half size, quality 85\n"
    "  crop            the central 70 % of each side, quality 85\n"
    "  flip            mirrored left to right, quality 90\n"
    "  rotate90        turned a quarter clockwise, quality 90\n"
    "  rotate10        rotated 10 degrees on the same canvas, black corners, quality 90\n"
    "  brighten        brightness +40, quality 90\n"
    "  border          a black border of 8 % of each side added, quality 90\n"
    "  png-alpha       the same pixels as PNG with an opaque alpha channel added\n";

bool Write(const std::string& path, const cv::Mat& image, int quality) {
  if (quality == 0) return cv::imwrite(path, image);
  return cv::imwrite(path, image, {cv::IMWRITE_JPEG_QUALITY, quality});
}

}  // namespace

int main(int argc, char** argv) {
  std::string kind = "copy";
  if (argc == 5 && std::string(argv[1]) == "--kind") {
    kind = argv[2];
    argv += 2;
    argc -= 2;
  }
  const std::set<std::string> kinds = {"copy",     "reencode", "resize",   "crop",   "flip",
                                       "rotate90", "rotate10", "brighten", "border", "png-alpha"};
  if (argc != 3 || !kinds.count(kind)) {
    std::cerr << kUsage;
    return 2;
  }
  cv::Mat image = cv::imread(argv[1], cv::IMREAD_COLOR);
  if (image.empty()) {
    std::cerr << "lookalike-make-copy: cannot decode " << argv[1] << "\n";
    return 2;
  }
  int quality = 90;
  if (kind == "copy") {
    // Keep 75 % of each side, off-centre.
    const int w = image.cols * 3 / 4, h = image.rows * 3 / 4;
    image = image(cv::Rect(image.cols / 10, image.rows / 8, w, h)).clone();
    const cv::Point2f centre(image.cols / 2.0f, image.rows / 2.0f);
    cv::warpAffine(image, image, cv::getRotationMatrix2D(centre, 8.0, 1.0), image.size(),
                   cv::INTER_LINEAR, cv::BORDER_REFLECT);
    cv::resize(image, image, cv::Size(), 0.6, 0.6, cv::INTER_AREA);
    image.convertTo(image, -1, 1.1, 20);
    quality = 40;
  } else if (kind == "reencode") {
    quality = 50;
  } else if (kind == "resize") {
    cv::resize(image, image, cv::Size(), 0.5, 0.5, cv::INTER_AREA);
    quality = 85;
  } else if (kind == "crop") {
    const int w = image.cols * 7 / 10, h = image.rows * 7 / 10;
    image = image(cv::Rect((image.cols - w) / 2, (image.rows - h) / 2, w, h)).clone();
    quality = 85;
  } else if (kind == "flip") {
    cv::flip(image, image, 1);
  } else if (kind == "rotate90") {
    cv::rotate(image, image, cv::ROTATE_90_CLOCKWISE);
  } else if (kind == "rotate10") {
    const cv::Point2f centre(image.cols / 2.0f, image.rows / 2.0f);
    cv::warpAffine(image, image, cv::getRotationMatrix2D(centre, 10.0, 1.0), image.size(),
                   cv::INTER_LINEAR, cv::BORDER_CONSTANT, cv::Scalar());
  } else if (kind == "brighten") {
    image.convertTo(image, -1, 1.0, 40);
  } else if (kind == "border") {
    const int bx = image.cols * 8 / 100, by = image.rows * 8 / 100;
    cv::copyMakeBorder(image, image, by, by, bx, bx, cv::BORDER_CONSTANT, cv::Scalar());
  } else if (kind == "png-alpha") {
    cv::cvtColor(image, image, cv::COLOR_BGR2BGRA);
    quality = 0;
  }
  if (!Write(argv[2], image, quality)) {
    std::cerr << "lookalike-make-copy: cannot write " << argv[2] << "\n";
    return 2;
  }
  return 0;
}
