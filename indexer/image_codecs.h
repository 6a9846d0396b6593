// OpenCV's image decoders and encoders, loaded on first use from the module
// liblookalike_codecs.so (image_codecs_module.cc): libopencv_imgcodecs
// brings about 110 shared libraries with it (GDAL, GDCM, OpenEXR, poppler,
// ...), whose loading and relocation were three quarters of the start-up of
// every command, `--help` included. Commands that decode pay it once, at
// their first image.
#pragma once

#include <opencv2/core.hpp>
#include <vector>

namespace lookalike {

// cv::imdecode of `bytes` (a 1 x n CV_8U row) with cv::IMREAD_* `flags`.
// Throws what imdecode throws (cv::Exception), and std::runtime_error naming
// the module and the reason when it cannot be loaded. Thread-safe.
cv::Mat DecodeImage(const cv::Mat& bytes, int flags);

// cv::imencode(".jpg", image, *out, {cv::IMWRITE_JPEG_QUALITY, quality});
// false when the encoder refuses. Throws as DecodeImage.
bool EncodeJpeg(const cv::Mat& image, int quality, std::vector<uchar>* out);

}  // namespace lookalike
