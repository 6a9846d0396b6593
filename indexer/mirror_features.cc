#include "indexer/mirror_features.h"

#include <cmath>
#include <opencv2/core.hpp>
#include <stdexcept>
#include <string>

namespace lookalike {

namespace {

Keypoint MirrorKeypoint(const Keypoint& k, uint32_t width) {
  Keypoint m = k;
  m.x = static_cast<float>(width) - 1.0f - k.x;
  float angle = 180.0f - k.angle;
  if (angle < 0) angle += 360.0f;
  if (angle >= 360.0f) angle -= 360.0f;
  m.angle = angle;
  return m;
}

void MirrorRows(const float* in, int64_t num, int dim, float* out) {
  if (num > 0 && dim != kSiftDim)
    throw std::invalid_argument("mirroring needs SIFT descriptors of " + std::to_string(kSiftDim) +
                                " dimensions, got " + std::to_string(dim));
  for (int64_t r = 0; r < num; ++r) MirrorSiftDescriptor(in + r * dim, out + r * dim);
}

}  // namespace

int MirroredSiftBin(int i) {
  const int o = i % kSiftOrientations;
  const int cell = i / kSiftOrientations;
  const int col = cell % kSiftCells, row = cell / kSiftCells;
  const int mirrored_row = kSiftCells - 1 - row;
  const int mirrored_o = (kSiftOrientations - o) % kSiftOrientations;
  return (mirrored_row * kSiftCells + col) * kSiftOrientations + mirrored_o;
}

void MirrorSiftDescriptor(const float* row, float* out) {
  for (int i = 0; i < kSiftDim; ++i) out[MirroredSiftBin(i)] = row[i];
}

Descriptors MirrorDescriptors(const Descriptors& d, uint32_t width) {
  Descriptors m;
  m.num = d.num;
  m.dim = d.dim;
  m.values.resize(d.values.size());
  MirrorRows(d.values.data(), d.num, d.dim, m.values.data());
  m.keypoints.reserve(d.keypoints.size());
  for (const Keypoint& k : d.keypoints) m.keypoints.push_back(MirrorKeypoint(k, width));
  return m;
}

LocalFeatures MirrorFeatures(const LocalFeatures& f) {
  LocalFeatures m;
  m.width = f.width;
  m.height = f.height;
  m.dim = f.dim;
  m.descriptors.resize(f.descriptors.size());
  MirrorRows(f.descriptors.data(), f.num(), f.dim, m.descriptors.data());
  m.keypoints.reserve(f.keypoints.size());
  for (const Keypoint& k : f.keypoints) m.keypoints.push_back(MirrorKeypoint(k, f.width));
  return m;
}

GreyThumbnail MirrorThumbnail(const GreyThumbnail& thumbnail) {
  GreyThumbnail m = thumbnail;
  if (m.empty()) return m;
  const cv::Mat in(thumbnail.height, thumbnail.width, CV_8UC1,
                   const_cast<uint8_t*>(thumbnail.pixels.data()));
  cv::Mat out(m.height, m.width, CV_8UC1, m.pixels.data());
  cv::flip(in, out, 1);
  return m;
}

}  // namespace lookalike
