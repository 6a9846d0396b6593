// lookalike-make-copy [--kind KIND] IN OUT: writes a transformed copy of a
// photo. The default kind (crop, rotation, downscale, brightness, JPEG
// quality 40) is the copy the Quick start searches for (tools/quickstart.sh);
// the plain re-encoded, resized and cropped kinds are the generated
// duplicates tools/eval_dedup.sh calibrates `dedup` on.
#include <iostream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <string>

int main(int argc, char** argv) {
  std::string kind = "copy";
  if (argc == 5 && std::string(argv[1]) == "--kind") {
    kind = argv[2];
    argv += 2;
    argc -= 2;
  }
  if (argc != 3 || (kind != "copy" && kind != "reencode" && kind != "resize" && kind != "crop")) {
    std::cerr << "usage: lookalike-make-copy [--kind copy|reencode|resize|crop] IN OUT.jpg\n"
                 "Writes a JPEG copy of IN: copy (default) = cropped, rotated, downscaled,\n"
                 "brightened, quality 40; reencode = quality 50; resize = half size, quality 85;\n"
                 "crop = the central 70 % of each side, quality 85.\n";
    return 2;
  }
  cv::Mat image = cv::imread(argv[1], cv::IMREAD_COLOR);
  if (image.empty()) {
    std::cerr << "lookalike-make-copy: cannot decode " << argv[1] << "\n";
    return 2;
  }
  if (kind != "copy") {
    int quality = 85;
    if (kind == "reencode") {
      quality = 50;
    } else if (kind == "resize") {
      cv::resize(image, image, cv::Size(), 0.5, 0.5, cv::INTER_AREA);
    } else {
      const int w = image.cols * 7 / 10, h = image.rows * 7 / 10;
      image = image(cv::Rect((image.cols - w) / 2, (image.rows - h) / 2, w, h)).clone();
    }
    if (!cv::imwrite(argv[2], image, {cv::IMWRITE_JPEG_QUALITY, quality})) {
      std::cerr << "lookalike-make-copy: cannot write " << argv[2] << "\n";
      return 2;
    }
    return 0;
  }
  // Keep 75 % of each side, off-centre.
  const int w = image.cols * 3 / 4, h = image.rows * 3 / 4;
  image = image(cv::Rect(image.cols / 10, image.rows / 8, w, h)).clone();
  const cv::Point2f centre(image.cols / 2.0f, image.rows / 2.0f);
  cv::warpAffine(image, image, cv::getRotationMatrix2D(centre, 8.0, 1.0), image.size(),
                 cv::INTER_LINEAR, cv::BORDER_REFLECT);
  cv::resize(image, image, cv::Size(), 0.6, 0.6, cv::INTER_AREA);
  image.convertTo(image, -1, 1.1, 20);
  if (!cv::imwrite(argv[2], image, {cv::IMWRITE_JPEG_QUALITY, 40})) {
    std::cerr << "lookalike-make-copy: cannot write " << argv[2] << "\n";
    return 2;
  }
  return 0;
}
