#include "tests/test_images.h"

#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <stdexcept>

namespace lookalike {
namespace testing {

GrayImage ToGrayImage(const cv::Mat& bgr) {
  cv::Mat gray;
  cv::cvtColor(bgr, gray, cv::COLOR_BGR2GRAY);
  GrayImage g;
  g.width = gray.cols;
  g.height = gray.rows;
  g.pixels.assign(gray.data, gray.data + gray.total());
  return g;
}

cv::Mat MakeSyntheticImage(uint64_t seed, int width, int height) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 7);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto color = [&] { return cv::Scalar(uniform(0, 255), uniform(0, 255), uniform(0, 255)); };

  // Smooth random background: low-resolution noise upsampled.
  cv::Mat small(6 + uniform(0, 6), 8 + uniform(0, 6), CV_8UC3);
  cv::randu(small, cv::Scalar::all(0), cv::Scalar::all(256));
  // cv::randu uses its own RNG; reseed it so the background follows `seed`.
  cv::RNG cv_rng(seed + 1);
  cv_rng.fill(small, cv::RNG::UNIFORM, 0, 256);
  cv::Mat image;
  cv::resize(small, image, cv::Size(width, height), 0, 0, cv::INTER_CUBIC);

  // Fine texture: blurred noise added at a random strength.
  cv::Mat noise(height, width, CV_8UC3);
  cv_rng.fill(noise, cv::RNG::UNIFORM, 0, 256);
  cv::GaussianBlur(noise, noise, cv::Size(0, 0), 1.0 + uniform(0, 20) / 10.0);
  cv::addWeighted(image, 0.75, noise, 0.25, 0, image);

  const int num_shapes = 18 + uniform(0, 12);
  for (int i = 0; i < num_shapes; ++i) {
    const cv::Point center(uniform(0, width - 1), uniform(0, height - 1));
    const int size = uniform(8, std::max(9, std::min(width, height) / 6));
    switch (uniform(0, 4)) {
      case 0:
        cv::circle(image, center, size, color(), uniform(0, 1) ? -1 : uniform(2, 6), cv::LINE_AA);
        break;
      case 1:
        cv::rectangle(image, center, center + cv::Point(size, size * uniform(1, 3) / 2), color(),
                      uniform(0, 1) ? -1 : uniform(2, 6), cv::LINE_AA);
        break;
      case 2:
        cv::line(image, center, cv::Point(uniform(0, width - 1), uniform(0, height - 1)), color(),
                 uniform(1, 5), cv::LINE_AA);
        break;
      case 3: {
        std::vector<cv::Point> poly;
        for (int k = 0; k < 3 + uniform(0, 3); ++k)
          poly.emplace_back(center.x + uniform(-size, size), center.y + uniform(-size, size));
        cv::fillPoly(image, std::vector<std::vector<cv::Point>>{poly}, color(), cv::LINE_AA);
        break;
      }
      default:
        cv::ellipse(image, center, cv::Size(size, size / 2 + 1), uniform(0, 180), 0, 360, color(),
                    -1, cv::LINE_AA);
    }
  }
  static const char* const kWords[] = {"lookalike", "VLAD",  "harbour", "2026",  "museum",
                                       "SIFT",      "north", "quay",    "atlas", "orbit"};
  for (int i = 0; i < 4 + uniform(0, 3); ++i) {
    cv::putText(image, kWords[uniform(0, 9)],
                cv::Point(uniform(0, width - 120), uniform(20, height - 5)), uniform(0, 4),
                0.6 + uniform(0, 15) / 10.0, color(), uniform(1, 3), cv::LINE_AA);
  }
  return image;
}

const std::vector<Transform>& AllTransforms() {
  static const std::vector<Transform> kAll = {Transform::kCrop,   Transform::kScale,
                                              Transform::kRotate, Transform::kJpeg,
                                              Transform::kBlur,   Transform::kBrightness};
  return kAll;
}

const char* TransformName(Transform t) {
  switch (t) {
    case Transform::kCrop:
      return "crop";
    case Transform::kScale:
      return "scale";
    case Transform::kRotate:
      return "rotate";
    case Transform::kJpeg:
      return "jpeg";
    case Transform::kBlur:
      return "blur";
    case Transform::kBrightness:
      return "brightness";
  }
  return "?";
}

cv::Mat ApplyTransform(const cv::Mat& image, Transform t) {
  cv::Mat out;
  switch (t) {
    case Transform::kCrop: {  // keep the central 70 % of each side (49 % of the area)
      const int w = image.cols * 7 / 10, h = image.rows * 7 / 10;
      out = image(cv::Rect((image.cols - w) / 2, (image.rows - h) / 3, w, h)).clone();
      break;
    }
    case Transform::kScale:
      cv::resize(image, out, cv::Size(), 0.5, 0.5, cv::INTER_AREA);
      break;
    case Transform::kRotate: {
      const cv::Point2f c(image.cols / 2.0f, image.rows / 2.0f);
      cv::warpAffine(image, out, cv::getRotationMatrix2D(c, 12.0, 1.0), image.size(),
                     cv::INTER_LINEAR, cv::BORDER_REFLECT);
      break;
    }
    case Transform::kJpeg: {
      std::vector<uchar> buf;
      cv::imencode(".jpg", image, buf, {cv::IMWRITE_JPEG_QUALITY, 30});
      out = cv::imdecode(buf, cv::IMREAD_COLOR);
      break;
    }
    case Transform::kBlur:
      cv::GaussianBlur(image, out, cv::Size(0, 0), 1.5);
      break;
    case Transform::kBrightness:
      image.convertTo(out, -1, 1.1, 40);
      break;
  }
  return out;
}

cv::Mat PasteAt(const cv::Mat& picture, const std::vector<cv::Point2f>& corners, cv::Size canvas,
                int fill) {
  const float w = static_cast<float>(picture.cols - 1), h = static_cast<float>(picture.rows - 1);
  const std::vector<cv::Point2f> from = {{0, 0}, {w, 0}, {w, h}, {0, h}};
  cv::Mat out;
  cv::warpPerspective(picture, out, cv::getPerspectiveTransform(from, corners), canvas,
                      cv::INTER_LINEAR, cv::BORDER_CONSTANT, cv::Scalar::all(fill));
  return out;
}

std::vector<cv::Point2f> RotatedCorners(cv::Size size, cv::Size canvas, double degrees) {
  const cv::Point2f centre(canvas.width / 2.0f, canvas.height / 2.0f);
  const float hw = size.width / 2.0f, hh = size.height / 2.0f;
  const double a = degrees * CV_PI / 180.0;
  const float c = static_cast<float>(std::cos(a)), s = static_cast<float>(std::sin(a));
  std::vector<cv::Point2f> out;
  for (const cv::Point2f& p :
       {cv::Point2f(-hw, -hh), cv::Point2f(hw, -hh), cv::Point2f(hw, hh), cv::Point2f(-hw, hh)})
    out.push_back(centre + cv::Point2f(c * p.x - s * p.y, s * p.x + c * p.y));
  return out;
}

cv::Mat PasteRotated(const cv::Mat& picture, double degrees, cv::Size canvas, int fill) {
  return PasteAt(picture, RotatedCorners(picture.size(), canvas, degrees), canvas, fill);
}

void WriteImage(const std::string& path, const cv::Mat& image) {
  if (!cv::imwrite(path, image)) throw std::runtime_error("cannot write test image " + path);
}

std::vector<std::string> WriteSyntheticSet(const std::string& dir, int count, uint64_t first_seed,
                                           int width, int height) {
  std::filesystem::create_directories(dir);
  std::vector<std::string> paths;
  for (int i = 0; i < count; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "img_%03d.png", i);
    const std::string path = dir + "/" + name;
    WriteImage(path, MakeSyntheticImage(first_seed + i, width, height));
    paths.push_back(path);
  }
  return paths;
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "lookalike-test.XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TinyGif() {
  std::string gif = "GIF89a";
  gif += std::string("\x01\x00\x01\x00", 4);  // logical screen 1 x 1
  gif += std::string("\x80\x00\x00", 3);      // global palette of 2 colours
  gif += std::string("\x00\x00\x00\xff\xff\xff", 6);
  gif += std::string("\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x00", 10);  // image 1 x 1
  // LZW, minimum code size 2: clear (4), pixel 0, end (5) in 3-bit codes,
  // least significant bit first: 100 000 101 -> 0x44 0x01.
  gif += std::string("\x02\x02\x44\x01\x00", 5);
  gif += ";";  // trailer
  return gif;
}

std::string IsoMediaHeader(const std::string& major, const std::vector<std::string>& compatible) {
  const uint32_t box = static_cast<uint32_t>(16 + 4 * compatible.size());
  std::string bytes = {static_cast<char>(box >> 24), static_cast<char>(box >> 16),
                       static_cast<char>(box >> 8), static_cast<char>(box)};
  bytes += "ftyp" + major + std::string(4, '\0');
  for (const std::string& brand : compatible) bytes += brand;
  bytes += std::string("\x00\x00\x00\x24meta", 8) + std::string(28, '\x01');
  return bytes;
}

}  // namespace testing
}  // namespace lookalike
