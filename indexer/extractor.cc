#include "indexer/extractor.h"

#include <cassert>
#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/features2d.hpp>
#include <stdexcept>

namespace lookalike {

void ExtractorOptions::Validate() const {
  if (type != "rootsift" && type != "sift")
    throw std::invalid_argument("descriptor type must be rootsift or sift, got '" + type + "'");
  if (!(contrast_threshold > 0.0f && contrast_threshold < 1.0f))
    throw std::invalid_argument("SIFT contrast threshold must be in (0, 1), got " +
                                std::to_string(contrast_threshold));
  if (min_keypoints < 0 || min_keypoints > 100000)
    throw std::invalid_argument("min keypoints must be in 0..100000, got " +
                                std::to_string(min_keypoints));
  if (max_features < 0)
    throw std::invalid_argument("max features must be >= 0, got " + std::to_string(max_features));
}

void RootSiftInPlace(float* d, int64_t num, int dim) {
  for (int64_t i = 0; i < num; ++i) {
    float* row = d + i * dim;
    double l1 = 0;
    for (int j = 0; j < dim; ++j) l1 += std::fabs(row[j]);
    const float inv = l1 > 0 ? static_cast<float>(1.0 / l1) : 0.0f;
    for (int j = 0; j < dim; ++j) row[j] = std::sqrt(std::fabs(row[j]) * inv);
  }
}

namespace {

// SIFT's descriptor: 4 x 4 cells x 8 orientations.
constexpr int kSiftDim = 128;

class SiftExtractor final : public DescriptorExtractor {
 public:
  explicit SiftExtractor(const ExtractorOptions& options)
      : root_(options.type == "rootsift"),
        max_features_(options.max_features),
        min_keypoints_(options.min_keypoints),
        contrast_threshold_(options.contrast_threshold),
        sift_(cv::SIFT::create(options.max_features, 3, options.contrast_threshold)) {}

  Descriptors Extract(const GrayImage& image) override {
    Descriptors out;
    out.dim = kSiftDim;
    if (image.width < 16 || image.height < 16) return out;
    const cv::Mat gray(image.height, image.width, CV_8U, const_cast<uint8_t*>(image.pixels.data()));
    std::vector<cv::KeyPoint> keypoints;
    cv::Mat desc;
    sift_->detectAndCompute(gray, cv::noArray(), keypoints, desc);
    // Sparse images: retry with a lower threshold. Deterministic, so a query
    // and its database copy go through the same steps.
    for (float threshold = contrast_threshold_ * 0.5f;
         desc.rows < min_keypoints_ && threshold >= kMinContrastThreshold; threshold *= 0.5f) {
      keypoints.clear();
      desc.release();
      cv::SIFT::create(max_features_, 3, threshold)
          ->detectAndCompute(gray, cv::noArray(), keypoints, desc);
    }
    if (desc.empty()) return out;
    CV_Assert(desc.type() == CV_32F && desc.cols == kSiftDim);
    // OpenCV's retainBest keeps every keypoint tied with the N-th response
    // (orientation duplicates share it), so it can return more than N; it
    // puts the N strongest first, so the cap is a row truncation.
    if (max_features_ > 0 && desc.rows > max_features_) desc = desc.rowRange(0, max_features_);
    if (!desc.isContinuous()) desc = desc.clone();
    out.num = desc.rows;
    out.values.assign(desc.ptr<float>(), desc.ptr<float>() + desc.total());
    out.keypoints.resize(static_cast<size_t>(out.num));
    for (int64_t i = 0; i < out.num; ++i) {
      const cv::KeyPoint& k = keypoints[static_cast<size_t>(i)];
      out.keypoints[static_cast<size_t>(i)] = Keypoint{k.pt.x, k.pt.y, k.size, k.angle, k.response};
    }
    if (root_) RootSiftInPlace(out.values.data(), out.num, out.dim);
    return out;
  }
  int dim() const override { return kSiftDim; }

 private:
  bool root_;
  int max_features_;
  int min_keypoints_;
  float contrast_threshold_;
  cv::Ptr<cv::SIFT> sift_;
};

}  // namespace

int DescriptorDim(const ExtractorOptions&) {
  // Both types are SIFT; a new type answers here.
  return kSiftDim;
}

std::unique_ptr<DescriptorExtractor> CreateExtractor(const ExtractorOptions& options) {
  // Validated with the settings they belong to (EncodingSettings::Validate).
  assert(options.type == "rootsift" || options.type == "sift");
  return std::make_unique<SiftExtractor>(options);
}

}  // namespace lookalike
