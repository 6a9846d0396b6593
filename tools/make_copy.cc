// lookalike-make-copy IN OUT: writes a transformed copy of a photo (crop,
// rotation, downscale, brightness, JPEG quality 40), the kind of copy the
// Quick start searches for. Used by tools/quickstart.sh.
#include <iostream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: lookalike-make-copy IN OUT.jpg\n"
                 "Writes a cropped, rotated, downscaled, brightened JPEG copy of IN.\n";
    return 2;
  }
  cv::Mat image = cv::imread(argv[1], cv::IMREAD_COLOR);
  if (image.empty()) {
    std::cerr << "lookalike-make-copy: cannot decode " << argv[1] << "\n";
    return 2;
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
