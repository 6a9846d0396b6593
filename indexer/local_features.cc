#include "indexer/local_features.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "storage/encoding.h"
#include "util/rows.h"

namespace lookalike {
namespace {
constexpr uint32_t kFormat = 1;
constexpr uint32_t kCompactFormat = 2;
constexpr size_t kCompactHeader = 24;
constexpr size_t kCompactGeometry = 6;  // bytes of one keypoint's position, size, angle
constexpr float kSizeSteps = 24.0f;     // size codes per octave

uint16_t FixedPoint(float v, uint32_t extent) {
  const float t = extent > 0 ? v / static_cast<float>(extent) : 0.0f;
  return static_cast<uint16_t>(std::clamp(std::lround(t * 65535.0f), 0L, 65535L));
}

void PutFixed16(std::string* s, uint16_t v) {
  s->push_back(static_cast<char>(v & 0xff));
  s->push_back(static_cast<char>(v >> 8));
}

// The header fields both formats share (after the format): num, dim, width,
// height. Returns num; fills the rest of `f`.
uint32_t ReadCommonHeader(encoding::Reader* r, LocalFeatures* f) {
  const uint32_t num = r->Fixed32();
  f->dim = static_cast<int>(r->Fixed32());
  f->width = r->Fixed32();
  f->height = r->Fixed32();
  return num;
}

LocalFeatures DecodeCompact(const std::string& blob, const DescriptorQuantizer* quantizer,
                            DescriptorFrame frame) {
  encoding::Reader r(blob, "local features");
  r.Fixed32();  // format
  LocalFeatures f;
  const uint32_t num = ReadCommonHeader(&r, &f);
  const uint32_t code_bytes = r.Fixed32();
  if (!quantizer)
    throw encoding::CorruptValue("local features: compact format read without its quantizer");
  if (f.dim != quantizer->dim() || code_bytes != static_cast<uint32_t>(quantizer->code_bytes()))
    throw encoding::CorruptValue("local features: codes of " + std::to_string(code_bytes) +
                                 " bytes x " + std::to_string(f.dim) +
                                 "-d do not fit the database's quantizer");
  if (uint64_t{num} * (kCompactGeometry + code_bytes) != blob.size() - kCompactHeader)
    throw encoding::CorruptValue("local features: size does not match the keypoint count");
  const auto* geometry = reinterpret_cast<const uint8_t*>(r.Raw(size_t{num} * kCompactGeometry));
  const auto* codes = reinterpret_cast<const uint8_t*>(r.Raw(size_t{num} * code_bytes));
  r.ExpectEnd();
  f.keypoints.resize(num);
  for (uint32_t i = 0; i < num; ++i) {
    const uint8_t* g = geometry + size_t{i} * kCompactGeometry;
    Keypoint& k = f.keypoints[i];
    k.x = static_cast<float>(g[0] | (g[1] << 8)) * static_cast<float>(f.width) / 65535.0f;
    k.y = static_cast<float>(g[2] | (g[3] << 8)) * static_cast<float>(f.height) / 65535.0f;
    k.size = std::exp2(static_cast<float>(g[4]) / kSizeSteps);
    k.angle = static_cast<float>(g[5]) * (360.0f / 256.0f);
  }
  f.descriptors.resize(size_t{num} * f.dim);
  quantizer->Decode(codes, num, f.descriptors.data(), frame);
  NormaliseRows(f.descriptors.data(), num, f.dim);
  return f;
}
}  // namespace

std::string EncodeCompactFeatures(const Descriptors& d, uint32_t width, uint32_t height,
                                  const DescriptorQuantizer& quantizer,
                                  std::vector<float>* reconstructed) {
  const size_t num = static_cast<size_t>(d.num);
  const size_t code_bytes = static_cast<size_t>(quantizer.code_bytes());
  std::string s;
  s.reserve(kCompactHeader + num * (kCompactGeometry + code_bytes));
  encoding::PutFixed32(&s, kCompactFormat);
  encoding::PutFixed32(&s, static_cast<uint32_t>(num));
  encoding::PutFixed32(&s, static_cast<uint32_t>(d.dim));
  encoding::PutFixed32(&s, width);
  encoding::PutFixed32(&s, height);
  encoding::PutFixed32(&s, static_cast<uint32_t>(code_bytes));
  for (size_t i = 0; i < num; ++i) {
    const Keypoint& k = d.keypoints[i];
    PutFixed16(&s, FixedPoint(k.x, width));
    PutFixed16(&s, FixedPoint(k.y, height));
    const float octaves = std::log2(std::max(k.size, 1.0f));
    s.push_back(static_cast<char>(std::clamp(std::lround(octaves * kSizeSteps), 0L, 255L)));
    s.push_back(static_cast<char>(std::lround(k.angle * (256.0f / 360.0f)) & 0xff));
  }
  const size_t at = s.size();
  s.resize(at + num * code_bytes);
  quantizer.Encode(d.values.data(), d.num, reinterpret_cast<uint8_t*>(&s[at]));
  if (reconstructed) {
    reconstructed->resize(num * d.dim);
    quantizer.Decode(reinterpret_cast<const uint8_t*>(&s[at]), d.num, reconstructed->data());
    NormaliseRows(reconstructed->data(), num, d.dim);
  }
  return s;
}

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

LocalFeatures DecodeLocalFeatures(const std::string& blob, const DescriptorQuantizer* quantizer,
                                  DescriptorFrame frame) {
  if (frame == DescriptorFrame::kQuantizer && !quantizer)
    throw std::invalid_argument("local features: the quantizer's frame needs the quantizer");
  encoding::Reader r(blob, "local features");
  const uint32_t format = r.Fixed32();
  if (format == kCompactFormat) return DecodeCompact(blob, quantizer, frame);
  if (format != kFormat)
    throw encoding::CorruptValue("local features: unknown format " + std::to_string(format));
  LocalFeatures f;
  const uint32_t num = ReadCommonHeader(&r, &f);
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
  f.descriptors.assign(q, q + size_t{num} * f.dim);
  NormaliseRows(f.descriptors.data(), num, f.dim);
  if (frame == DescriptorFrame::kQuantizer) {
    if (f.dim != quantizer->dim())
      throw encoding::CorruptValue("local features: " + std::to_string(f.dim) +
                                   "-d descriptors do not fit the database's quantizer");
    return InQuantizerFrame(std::move(f), *quantizer);
  }
  return f;
}

LocalFeatures InQuantizerFrame(LocalFeatures features, const DescriptorQuantizer& quantizer) {
  if (features.num() == 0) return features;
  if (features.dim != quantizer.dim())
    throw std::invalid_argument("features of " + std::to_string(features.dim) +
                                " dimensions do not fit the " + std::to_string(quantizer.dim()) +
                                "-d descriptor quantizer");
  std::vector<float> rotated(features.descriptors.size());
  quantizer.Rotate(features.descriptors.data(), features.num(), rotated.data());
  features.descriptors = std::move(rotated);
  return features;
}

LocalFeaturesShape InspectLocalFeatures(const std::string& blob) {
  encoding::Reader r(blob, "local features");
  LocalFeaturesShape shape;
  shape.format = r.Fixed32();
  LocalFeatures header;
  shape.num = ReadCommonHeader(&r, &header);
  shape.dim = header.dim;
  if (shape.dim <= 0 || shape.dim > 1024)
    throw encoding::CorruptValue("local features: bad dimension " + std::to_string(shape.dim));
  uint64_t per_keypoint = 0;
  if (shape.format == kFormat) {
    r.Float();  // scale
    per_keypoint = 16 + static_cast<uint64_t>(shape.dim);
  } else if (shape.format == kCompactFormat) {
    shape.code_bytes = r.Fixed32();
    per_keypoint = kCompactGeometry + shape.code_bytes;
  } else {
    throw encoding::CorruptValue("local features: unknown format " + std::to_string(shape.format));
  }
  if (uint64_t{shape.num} * per_keypoint != blob.size() - 24)
    throw encoding::CorruptValue("local features: size does not match the keypoint count");
  return shape;
}

FeaturesCheck LocalFeaturesCheck(const Store& store, std::vector<std::string>* problems) {
  const uint32_t format = store.compact() ? kCompactFormat : kFormat;
  const int dim = static_cast<int>(store.model().dim);
  int code_bytes = -1;  // of the quantizer; -1 = none usable
  if (format == kCompactFormat) {
    try {
      if (const auto blob = store.GetDescriptorQuantizer()) {
        const DescriptorQuantizer q = DescriptorQuantizer::Deserialize(*blob);
        if (q.dim() != dim)
          problems->push_back("descriptor quantizer (m:dq): " + std::to_string(q.dim()) +
                              "-d, the model's descriptors " + std::to_string(dim) + "-d");
        else
          code_bytes = q.code_bytes();
      }
    } catch (const encoding::CorruptValue& e) {
      problems->push_back(std::string("descriptor quantizer (m:dq): ") + e.what());
    } catch (const StoreError& e) {
      problems->push_back(e.what());
    }
  }
  return [format, dim, code_bytes](const ImageRecord& record, const std::string& blob) {
    try {
      const LocalFeaturesShape shape = InspectLocalFeatures(blob);
      if (shape.format != format)
        return "format " + std::to_string(shape.format) + ", the database's is " +
               std::to_string(format);
      if (shape.dim != dim)
        return std::to_string(shape.dim) + "-d descriptors, the model's are " +
               std::to_string(dim) + "-d";
      if (shape.num != record.num_descriptors)
        return std::to_string(shape.num) + " keypoints, the record says " +
               std::to_string(record.num_descriptors);
      if (format == kCompactFormat && static_cast<int>(shape.code_bytes) != code_bytes)
        return code_bytes < 0 ? std::string("compact codes without a usable descriptor quantizer")
                              : std::to_string(shape.code_bytes) +
                                    "-byte codes, the descriptor quantizer's are " +
                                    std::to_string(code_bytes);
      return std::string();
    } catch (const encoding::CorruptValue& e) {
      return std::string(e.what());
    }
  };
}

LocalFeatures MakeLocalFeatures(const Descriptors& d, uint32_t width, uint32_t height,
                                const DescriptorQuantizer* quantizer) {
  if (!quantizer) {
    LocalFeatures f = DecodeLocalFeatures(EncodeLocalFeatures(d, width, height));
    // The stored layout does not keep detector responses; verification of a
    // query picks its strongest features by them.
    for (size_t i = 0; i < f.keypoints.size(); ++i)
      f.keypoints[i].response = d.keypoints[i].response;
    return f;
  }
  LocalFeatures f;
  f.width = width;
  f.height = height;
  f.dim = d.dim;
  f.keypoints = d.keypoints;
  f.descriptors = d.values;
  NormaliseRows(f.descriptors.data(), static_cast<size_t>(d.num), d.dim);
  return f;
}

std::optional<DescriptorQuantizer> LoadDescriptorQuantizer(const Store& store) {
  const auto blob = store.GetDescriptorQuantizer();
  if (!blob) return std::nullopt;
  try {
    return DescriptorQuantizer::Deserialize(*blob);
  } catch (const encoding::CorruptValue& e) {
    throw StoreError(StoreError::Kind::kCorrupt,
                     "database " + store.path() + ": " + e.what() + "; run `lookalike verify`");
  }
}

}  // namespace lookalike
