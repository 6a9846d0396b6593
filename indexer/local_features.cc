#include "indexer/local_features.h"

#include <algorithm>
#include <cmath>

#include "storage/encoding.h"

namespace lookalike {
namespace {
constexpr uint32_t kFormat = 1;
}  // namespace

std::string EncodeLocalFeatures(const Descriptors& d, uint32_t width, uint32_t height) {
  std::string s;
  const size_t num = static_cast<size_t>(d.num);
  float max_value = 0;
  for (float v : d.values) max_value = std::max(max_value, v);
  const float scale = max_value > 0 ? 255.0f / max_value : 1.0f;
  s.reserve(24 + num * (16 + static_cast<size_t>(d.dim)));
  encoding::PutFixed32(&s, kFormat);
  encoding::PutFixed32(&s, static_cast<uint32_t>(num));
  encoding::PutFixed32(&s, static_cast<uint32_t>(d.dim));
  encoding::PutFixed32(&s, width);
  encoding::PutFixed32(&s, height);
  encoding::PutFloat(&s, scale);
  for (size_t i = 0; i < num; ++i) {
    const Keypoint& k = d.keypoints[i];
    encoding::PutFloat(&s, k.x);
    encoding::PutFloat(&s, k.y);
    encoding::PutFloat(&s, k.size);
    encoding::PutFloat(&s, k.angle);
  }
  for (float v : d.values)
    s.push_back(
        static_cast<char>(static_cast<uint8_t>(std::clamp(std::lround(v * scale), 0L, 255L))));
  return s;
}

LocalFeatures DecodeLocalFeatures(const std::string& blob) {
  encoding::Reader r(blob, "local features");
  if (const uint32_t format = r.Fixed32(); format != kFormat)
    throw encoding::CorruptValue("local features: unknown format " + std::to_string(format));
  LocalFeatures f;
  const uint32_t num = r.Fixed32();
  f.dim = static_cast<int>(r.Fixed32());
  f.width = r.Fixed32();
  f.height = r.Fixed32();
  const float scale = r.Float();
  if (f.dim <= 0 || f.dim > 1024 || !(scale > 0) || !std::isfinite(scale))
    throw encoding::CorruptValue("local features: bad header");
  // Checked before allocating: a corrupt count must not become a huge resize.
  if (uint64_t{num} * (16 + static_cast<uint64_t>(f.dim)) != blob.size() - 24)
    throw encoding::CorruptValue("local features: size does not match the keypoint count");
  f.keypoints.resize(num);
  for (Keypoint& k : f.keypoints) {
    k.x = r.Float();
    k.y = r.Float();
    k.size = r.Float();
    k.angle = r.Float();
  }
  const auto* q = reinterpret_cast<const uint8_t*>(r.Raw(size_t{num} * f.dim));
  r.ExpectEnd();
  f.descriptors.resize(size_t{num} * f.dim);
  for (uint32_t i = 0; i < num; ++i) {
    float* row = f.descriptors.data() + size_t{i} * f.dim;
    double norm2 = 0;
    for (int j = 0; j < f.dim; ++j) {
      row[j] = q[size_t{i} * f.dim + j];
      norm2 += double{row[j]} * row[j];
    }
    const float inv = norm2 > 0 ? static_cast<float>(1.0 / std::sqrt(norm2)) : 0.0f;
    for (int j = 0; j < f.dim; ++j) row[j] *= inv;
  }
  return f;
}

LocalFeatures MakeLocalFeatures(const Descriptors& d, uint32_t width, uint32_t height) {
  return DecodeLocalFeatures(EncodeLocalFeatures(d, width, height));
}

}  // namespace lookalike
