#include "indexer/model.h"

#include <algorithm>
#include <opencv2/core.hpp>
#include <optional>
#include <stdexcept>

#include "indexer/colour.h"
#include "indexer/mirror_features.h"
#include "indexer/pasted_picture.h"

namespace lookalike {

void EncodingSettings::Validate() const {
  if (max_side != 0 && (max_side < 32 || max_side > 16384))
    throw std::invalid_argument("max side must be 0 (keep) or in 32..16384 px, got " +
                                std::to_string(max_side));
  extractor.Validate();
  vlad.Validate();
}

namespace {

// The one map between the stored model's settings (storage/model_record.h)
// and EncodingSettings, in both directions: MakeModelRecord runs it with
// ToRecord, SettingsFromModel with ToSettings. A setting the model stores is
// one line here and one in ModelRecord::Fields.
template <class Model, class Settings, class Copy>
void MapSettings(Model& m, Settings& s, Copy copy) {
  copy(m.descriptor_type, s.extractor.type);
  copy(m.max_side, s.max_side);
  copy(m.contrast_threshold, s.extractor.contrast_threshold);
  copy(m.max_features, s.extractor.max_features);
  copy(m.min_keypoints, s.extractor.min_keypoints);
  copy(m.power_alpha, s.vlad.power_alpha);
  copy(m.intra_normalize, s.vlad.intra_normalize);
  copy(m.residual_normalize, s.vlad.residual_normalize);
}

struct ToRecord {
  template <class Stored, class Setting>
  void operator()(Stored& stored, const Setting& setting) const {
    stored = static_cast<Stored>(setting);
  }
};

struct ToSettings {
  template <class Stored, class Setting>
  void operator()(const Stored& stored, Setting& setting) const {
    setting = static_cast<Setting>(stored);
  }
};

}  // namespace

ModelRecord MakeModelRecord(const EncodingSettings& settings, const Codebook& codebook,
                            uint64_t seed) {
  ModelRecord m;
  MapSettings(m, settings, ToRecord());
  m.dim = static_cast<uint32_t>(codebook.dim());
  m.num_clusters = static_cast<uint32_t>(codebook.num_clusters());
  m.seed = seed;
  m.centroids = codebook.centroids();
  m.codebook_hash = codebook.Fingerprint();
  return m;
}

EncodingSettings SettingsFromModel(const ModelRecord& model) {
  EncodingSettings s;
  MapSettings(model, s, ToSettings());
  try {
    s.Validate();
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("the database's model is not one this build can "
                                         "encode with (") +
                             e.what() + "); re-index into a new --db");
  }
  const int dim = DescriptorDim(s.extractor);
  if (model.dim != static_cast<uint32_t>(dim))
    throw std::runtime_error("the database's descriptors have dimension " +
                             std::to_string(model.dim) + ", this build extracts " +
                             std::to_string(dim) + "; re-index into a new --db");
  return s;
}

Codebook CodebookFromModel(const ModelRecord& model) {
  return Codebook(static_cast<int>(model.num_clusters), static_cast<int>(model.dim),
                  model.centroids);
}

ImageEncoder::ImageEncoder(const ModelRecord& model, Backend backend,
                           const DescriptorQuantizer* quantizer)
    : quantizer_(quantizer),
      settings_(SettingsFromModel(model)),
      extractor_(CreateExtractor(settings_.extractor)),
      // One image at a time, the GPU's start-up (the CUDA runtime, cuBLAS, a
      // context: about a second) costs more than its encoding saves, so
      // `auto` is the CPU here; an explicit kCuda still asks for the device.
      encoder_(CreateVladEncoder(backend == Backend::kAuto ? Backend::kCpu : backend,
                                 CodebookFromModel(model), settings_.vlad)) {}

ImageEncoder::Result ImageEncoder::EncodeFile(const std::string& path,
                                              const ImageFileLimits& limits) {
  if (!content_hash_) return Encode(path, LoadImageFile(path, settings_.max_side, limits));
  // LoadImageFile's two steps, keeping the bytes long enough to hash them.
  ReadResult read = ReadImageBytes(path, limits);
  if (read.error) {
    Result result;
    result.error = std::move(read.error);
    return result;
  }
  LoadResult loaded = DecodeImageBytes(path, read.bytes, settings_.max_side, limits);
  if (loaded.image) loaded.image->mtime_ns = read.stat.mtime_ns;
  Result result = Encode(path, std::move(loaded));
  if (!result.error)
    result.content_hash = Hash64(*content_hash_, read.bytes.data(), read.bytes.size());
  return result;
}

ImageEncoder::Result ImageEncoder::EncodeBytes(const std::string& name, const std::string& bytes,
                                               const ImageFileLimits& limits) {
  if (bytes.size() > limits.max_file_bytes) {
    Result result;
    result.error = FileError{FileErrorCode::kFileTooLarge, name,
                             std::to_string(bytes.size()) + " bytes, more than the limit of " +
                                 std::to_string(limits.max_file_bytes)};
    return result;
  }
  Result result = Encode(name, DecodeImageBytes(name, bytes, settings_.max_side, limits));
  if (content_hash_ && !result.error)
    result.content_hash = Hash64(*content_hash_, bytes.data(), bytes.size());
  return result;
}

ImageEncoder::Result ImageEncoder::Encode(const std::string& path, LoadResult loaded) {
  if (loaded.error) {
    Result result;
    result.error = std::move(loaded.error);
    return result;
  }
  LoadedImage& image = *loaded.image;
  Result result = EncodeView(path, image.gray, std::move(image.colour), mirror_views_);
  if (result.error || !pasted_views_) return result;
  // A picture pasted onto a uniform border, rotated or in perspective: its
  // rectified view finds the original where the pasted one cannot
  // (search/README.md, "Pasted pictures").
  const cv::Mat grey(image.gray.height, image.gray.width, CV_8UC1, image.gray.pixels.data());
  const std::optional<PastedPicture> pasted = FindPastedPicture(grey);
  if (!pasted) return result;
  const cv::Mat upright = RectifyPastedPicture(grey, *pasted);
  if (upright.empty()) return result;
  ColourImage& small = image.colour_preview;
  const cv::Mat preview(small.height, small.width, CV_8UC(std::max(1, small.channels)),
                        small.pixels.data());
  const cv::Mat upright_colour =
      small.pixels.empty()
          ? cv::Mat()
          : RectifyPastedPicture(preview, *pasted, static_cast<double>(small.width) / grey.cols);
  GrayImage view;
  view.width = upright.cols;
  view.height = upright.rows;
  view.pixels.assign(upright.datastart, upright.dataend);
  Result rectified = EncodeView(
      path, view, upright_colour.empty() ? result.colour : ColourHistogram(upright_colour));
  if (!rectified.error) result.views.push_back(std::move(rectified));
  return result;
}

ImageEncoder::Result ImageEncoder::EncodeView(const std::string& path, const GrayImage& gray,
                                              std::vector<uint8_t> colour, bool with_mirror) {
  Result result;
  result.colour = std::move(colour);
  result.thumbnail = MakeGreyThumbnail(gray, kQueryThumbnailSide);
  const Descriptors d = extractor_->Extract(gray);
  result.num_descriptors = d.num;
  result.features = MakeLocalFeatures(d, static_cast<uint32_t>(gray.width),
                                      static_cast<uint32_t>(gray.height), quantizer_);
  result.vlad.assign(static_cast<size_t>(encoder_->vlad_dim()), 0.0f);
  const int64_t offsets[2] = {0, d.num};
  // From the exact descriptors, also against a compact database whose
  // vectors come from quantised ones: asymmetric, as in FAISS's IVFADC,
  // and measured better than quantising the query alike (dev set mAP 0.917
  // against 0.903). The price: an
  // indexed image no longer finds itself at similarity exactly 1.
  encoder_->Encode(d.values.data(), offsets, 1, result.vlad.data());
  if (d.num == 0)
    result.error =
        FileError{FileErrorCode::kNoFeatures, path, "no keypoints found (flat or tiny image)"};
  if (with_mirror && d.num > 0 && d.dim == kSiftDim) {
    Result mirror;
    mirror.colour = result.colour;
    mirror.thumbnail = MirrorThumbnail(result.thumbnail);
    const Descriptors m = MirrorDescriptors(d, static_cast<uint32_t>(gray.width));
    mirror.num_descriptors = m.num;
    mirror.features = MakeLocalFeatures(m, static_cast<uint32_t>(gray.width),
                                        static_cast<uint32_t>(gray.height), quantizer_);
    mirror.vlad.assign(static_cast<size_t>(encoder_->vlad_dim()), 0.0f);
    encoder_->Encode(m.values.data(), offsets, 1, mirror.vlad.data());
    result.mirror.push_back(std::move(mirror));
  }
  return result;
}

}  // namespace lookalike
