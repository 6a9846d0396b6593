// The codec module: OpenCV's imgcodecs behind ImageCodecsApi, for the loader
// in image_codecs.cc. Nothing else of lookalike is linked into it.
#include "indexer/image_codecs_module.h"

#include <opencv2/imgcodecs.hpp>

namespace lookalike {
namespace {

cv::Mat Decode(const cv::Mat& bytes, int flags) { return cv::imdecode(bytes, flags); }

bool EncodeJpeg(const cv::Mat& image, int quality, std::vector<uchar>* out) {
  return cv::imencode(".jpg", image, *out, {cv::IMWRITE_JPEG_QUALITY, quality});
}

constexpr ImageCodecsApi kApi{Decode, EncodeJpeg};

}  // namespace
}  // namespace lookalike

extern "C" __attribute__((visibility("default"))) const void* lookalike_image_codecs(int abi) {
  return abi == lookalike::kImageCodecsAbi ? &lookalike::kApi : nullptr;
}
