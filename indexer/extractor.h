// Local descriptors of a grey image: SIFT (Lowe, IJCV 2004) through OpenCV,
// by default as RootSIFT (Arandjelović & Zisserman, CVPR 2012: L1-normalise,
// then element-wise square root, so that Euclidean distance on RootSIFT is
// the Hellinger kernel on SIFT).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "indexer/image_file.h"

namespace lookalike {

struct ExtractorOptions {
  std::string type = "rootsift";     // "rootsift" | "sift"
  float contrast_threshold = 0.04f;  // SIFT DoG contrast threshold, (0, 1); lower = more keypoints
  int max_features = 0;              // keep the strongest N keypoints; 0 = all
  // An image with fewer keypoints is re-detected with the contrast threshold
  // halved (down to kMinContrastThreshold) until it has this many: small,
  // blurred or low-contrast copies otherwise keep a handful of keypoints,
  // too few for VLAD or spatial verification. 300 measured on the dev set
  // (indexer/README.md, "The encoding"); 0 = off.
  int min_keypoints = 300;
  // Throws std::invalid_argument naming the offending field.
  void Validate() const;
};

// Where a descriptor was found, in the pixels of the (downscaled) image it
// was extracted from; what spatial verification needs.
struct Keypoint {
  float x = 0, y = 0;  // centre, pixels
  float size = 0;      // diameter of the described region, pixels
  float angle = 0;     // dominant orientation, degrees in [0, 360)
  // The detector's strength (SIFT's DoG contrast); 0 when unknown: stored
  // features do not keep it, only a freshly extracted query has it.
  float response = 0;
};

// Row-major num x dim descriptors of one image, and the keypoint of each row.
struct Descriptors {
  int64_t num = 0;
  int dim = 0;
  std::vector<float> values;
  std::vector<Keypoint> keypoints;  // num entries
};

// Lowest contrast threshold the min_keypoints retries go down to.
inline constexpr float kMinContrastThreshold = 0.005f;

// Not thread-safe (OpenCV detectors keep state); create one per thread.
class DescriptorExtractor {
 public:
  virtual ~DescriptorExtractor() = default;
  // Descriptors of the image; none (num = 0) for a flat or tiny image.
  virtual Descriptors Extract(const GrayImage& image) = 0;
  virtual int dim() const = 0;
};

// Dimension of the descriptors of `options.type` (128 for SIFT and RootSIFT);
// what the codebook and the model are sized by.
int DescriptorDim(const ExtractorOptions& options);

// Creates the extractor `options` describe; they must have passed Validate().
std::unique_ptr<DescriptorExtractor> CreateExtractor(const ExtractorOptions& options);

// In-place RootSIFT of num x dim descriptors: L1-normalise each row (rows of
// zeros stay zero), then element-wise square root.
void RootSiftInPlace(float* descriptors, int64_t num, int dim);

}  // namespace lookalike
