#include "indexer/image_codecs.h"

#include <stdexcept>
#include <string>

#include "indexer/image_codecs_module.h"
#include "util/module.h"

namespace lookalike {
namespace {

const ImageCodecsApi& Codecs() {
  static const LoadedModule module =
      LoadModule(kImageCodecsFile, kImageCodecsEntry, kImageCodecsAbi);
  if (!module.api)
    throw std::runtime_error("cannot decode images: " + module.error +
                             "; it is built with lookalike (tools/build.sh) and installed "
                             "next to the binary");
  return *static_cast<const ImageCodecsApi*>(module.api);
}

}  // namespace

cv::Mat DecodeImage(const cv::Mat& bytes, int flags) { return Codecs().decode(bytes, flags); }

bool EncodeJpeg(const cv::Mat& image, int quality, std::vector<uchar>* out) {
  return Codecs().encode_jpeg(image, quality, out);
}

}  // namespace lookalike
