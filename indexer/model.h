// The encoding model of a database: how images were turned into vectors
// (extractor settings, downscaling, VLAD normalisation) plus the codebook.
// Conversions to and from storage's ModelRecord live here, so storage/ does
// not depend on the indexer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "indexer/codebook.h"
#include "indexer/extractor.h"
#include "indexer/grey_thumbnail.h"
#include "indexer/image_file.h"
#include "indexer/local_features.h"
#include "indexer/vlad.h"
#include "storage/store.h"

namespace lookalike {

// Everything that decides the vector of an image, besides the codebook.
struct EncodingSettings {
  // Longest image side after downscaling, pixels; 0 = never downscale.
  // 512 measured best on the development set (indexer/README.md, "The
  // encoding"): copies are often downscaled, and it is the cheapest to extract.
  int max_side = 512;
  ExtractorOptions extractor;
  VladOptions vlad;

  // Throws std::invalid_argument naming the offending field.
  void Validate() const;
};

// Builds the stored model from settings and a trained codebook.
ModelRecord MakeModelRecord(const EncodingSettings& settings, const Codebook& codebook,
                            uint64_t seed);
// The settings and codebook a database was built with. Throws
// std::runtime_error if the model is one this build cannot encode with.
EncodingSettings SettingsFromModel(const ModelRecord& model);
Codebook CodebookFromModel(const ModelRecord& model);

// Encodes single images exactly as a database was encoded (used for
// queries). Not thread-safe.
class ImageEncoder {
 public:
  // Throws std::runtime_error (unusable model, explicit cuda without device).
  // kAuto encodes on the CPU: for one image the GPU's start-up costs more
  // than it saves.
  // `quantizer`: the database's descriptor quantizer (compact databases),
  // which must outlive the encoder; null for the older layout.
  ImageEncoder(const ModelRecord& model, Backend backend,
               const DescriptorQuantizer* quantizer = nullptr);

  const EncodingSettings& settings() const { return settings_; }
  int64_t vlad_dim() const { return encoder_->vlad_dim(); }
  Backend backend() const { return encoder_->backend(); }

  // Decodes and encodes one file. Returns the error for a bad file.
  struct Result {
    std::vector<float> vlad;  // vlad_dim() floats, L2-normalised or all zero
    int64_t num_descriptors = 0;
    LocalFeatures features;       // for spatial verification
    std::vector<uint8_t> colour;  // colour histogram (indexer/colour.h)
    GreyThumbnail thumbnail;      // kQueryThumbnailSide (indexer/grey_thumbnail.h)
    // Hash64 of the file's bytes, when set_content_hash asked for it: what
    // tells a byte-identical copy among the results (ImageRecord::
    // content_hash). Not set for views.
    std::optional<uint64_t> content_hash;
    std::optional<FileError> error;
    // Other views of the same image that search runs too, each encoded as
    // above (with no views of its own): the picture a uniform border holds,
    // rectified (indexer/pasted_picture.h). Empty for most images, and when
    // pasted_views is off.
    std::vector<Result> views;
    // The image's mirror image (flipped left to right), from the same
    // extraction (indexer/mirror_features.h): features, VLAD vector and
    // thumbnail mirrored, colour the same; what search looks for mirrored
    // copies with. One element when set_mirror_views is on and the image has
    // SIFT features, else empty; no views or mirror of its own.
    std::vector<Result> mirror;
  };
  Result EncodeFile(const std::string& path, const ImageFileLimits& limits);
  // The same for a file's bytes already in memory (an upload), through the
  // same size, pixel and decoder checks as DecodeImageBytes; `name` is used
  // in errors. Bytes equal to a file's give EncodeFile's result exactly.
  Result EncodeBytes(const std::string& name, const std::string& bytes,
                     const ImageFileLimits& limits);

  // Whether a picture pasted onto a uniform border is also encoded as a view
  // of its own (Result::views). On by default.
  void set_pasted_views(bool on) { pasted_views_ = on; }
  // Whether Result::mirror is made. Off by default.
  void set_mirror_views(bool on) { mirror_views_ = on; }
  // Hash each file's bytes with `kind` (the database's Store::hash_kind())
  // into Result::content_hash; nullopt (the default) = do not.
  void set_content_hash(std::optional<HashKind> kind) { content_hash_ = kind; }

 private:
  Result Encode(const std::string& name, LoadResult loaded);
  // The features, VLAD vector and thumbnail of one grey image, with the
  // colour histogram given.
  Result EncodeView(const std::string& name, const GrayImage& gray, std::vector<uint8_t> colour,
                    bool with_mirror = false);

  bool pasted_views_ = true;
  bool mirror_views_ = false;
  std::optional<HashKind> content_hash_;

  const DescriptorQuantizer* quantizer_;
  EncodingSettings settings_;
  std::unique_ptr<DescriptorExtractor> extractor_;
  std::unique_ptr<VladEncoder> encoder_;
};

}  // namespace lookalike
