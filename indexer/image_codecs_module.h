// The interface between lookalike and its codec module
// (liblookalike_codecs.so, built from image_codecs_module.cc). Both sides
// are compiled from this header by the same build; kImageCodecsAbi changes
// whenever it does, so a module left from another build is refused.
#pragma once

#include <opencv2/core.hpp>
#include <vector>

namespace lookalike {

constexpr int kImageCodecsAbi = 1;
constexpr const char* kImageCodecsFile = "liblookalike_codecs.so";
constexpr const char* kImageCodecsEntry = "lookalike_image_codecs";

// The module's functions (see image_codecs.h for their contracts).
struct ImageCodecsApi {
  cv::Mat (*decode)(const cv::Mat& bytes, int flags);
  bool (*encode_jpeg)(const cv::Mat& image, int quality, std::vector<uchar>* out);
};

}  // namespace lookalike
