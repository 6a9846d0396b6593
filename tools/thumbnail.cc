#include "tools/thumbnail.h"

#include <algorithm>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <vector>

#include "indexer/image_codecs.h"

namespace lookalike {

Thumbnail ThumbnailOfBytes(const std::string& name, const std::string& bytes, int max_side,
                           const ImageFileLimits& limits) {
  Thumbnail t;
  const auto* d = reinterpret_cast<const unsigned char*>(bytes.data());
  const ImageFormat format = DetectImageFormat(d, bytes.size());
  if (format == ImageFormat::kUnknown) {
    t.error = name + ": not an image lookalike reads";
    return t;
  }
  const auto header = ReadHeaderSize(format, d, bytes.size());
  if (header && uint64_t{header->width} * header->height > limits.max_pixels) {
    t.error = name + ": more pixels than the limit of " + std::to_string(limits.max_pixels);
    return t;
  }
  const int flags = ColourDecodeFlags(format, header, max_side);
  cv::Mat image;
  try {
    const cv::Mat buffer(1, static_cast<int>(bytes.size()), CV_8U, const_cast<char*>(bytes.data()));
    image = DecodeImage(buffer, flags);
    if (image.empty()) {
      t.error = name + ": the decoder rejected the data";
      return t;
    }
    if (image.depth() != CV_8U) image.convertTo(image, CV_8U, 1.0 / 256.0);
    const int longest = std::max(image.cols, image.rows);
    if (longest > max_side) {
      const double scale = static_cast<double>(max_side) / longest;
      cv::Mat small;
      cv::resize(image, small,
                 cv::Size(std::max(1, static_cast<int>(image.cols * scale + 0.5)),
                          std::max(1, static_cast<int>(image.rows * scale + 0.5))),
                 0, 0, cv::INTER_AREA);
      image = small;
    }
    std::vector<uchar> out;
    if (!EncodeJpeg(image, 85, &out)) {
      t.error = name + ": could not encode the thumbnail";
      return t;
    }
    t.jpeg.assign(out.begin(), out.end());
  } catch (const cv::Exception& e) {
    t.error = name + ": decoder error: " + e.what();
  }
  return t;
}

Thumbnail ThumbnailOfRecord(const Store& store, const ImageRecord& record, int max_side,
                            const ImageFileLimits& limits) {
  ReadResult read = ReadImageBytes(record.path, limits);
  if (read.error) {
    Thumbnail t;
    t.error = record.path + ": " + read.error->message;
    return t;
  }
  if (store.ContentHash(read.bytes.data(), read.bytes.size()) != record.content_hash) {
    Thumbnail t;
    t.error = record.path + ": the file changed since it was indexed; run 'lookalike index' again";
    return t;
  }
  return ThumbnailOfBytes(record.path, read.bytes, max_side, limits);
}

}  // namespace lookalike
