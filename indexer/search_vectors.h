// The search vector of every stored image, whatever the database's schema
// keeps: schemas 1-2 store the full VLAD vector (mapped here through the PCA
// projection, if any); schema 3 stores the search vector itself (float16),
// or, without a projection, nothing: the VLAD vector is derived from the
// stored (quantised) local features and the codebook, exactly as the indexer
// computed it. Used by the search index, query expansion and dedup, so none
// of them depends on what is stored.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "indexer/descriptor_quantizer.h"
#include "indexer/projection.h"
#include "indexer/vlad.h"
#include "storage/store.h"

namespace lookalike {

class SearchVectors {
 public:
  // Loads the projection and, when vectors must be derived, the codebook and
  // the descriptor quantizer. Throws StoreError(kCorrupt) / std::runtime_error
  // for an unusable model.
  explicit SearchVectors(const Store& store);
  // A database that stores full VLAD vectors (schemas 1-2) searched through
  // another projection than its own (tests, benchmarks); `projection` must
  // read model().vlad_dim() dimensions (std::invalid_argument otherwise).
  SearchVectors(const Store& store, SearchProjection projection);
  // The full VLAD vectors of a schema-3 database derived from its stored
  // features, whatever vectors it stores (dim() = the VLAD dimension): what
  // a projection is learned again from. Throws std::invalid_argument for an
  // older schema, whose stored vectors are the full VLAD vectors already.
  static SearchVectors FullVladFromFeatures(const Store& store);
  ~SearchVectors();
  SearchVectors(SearchVectors&&) noexcept;

  int64_t dim() const { return projection_.out_dim(); }
  // Maps a query's full VLAD vectors to search vectors (n x dim()).
  const SearchProjection& projection() const { return projection_; }

  // The search vectors of `ids` into out (ids.size() x dim()). Throws
  // StoreError(kCorrupt) if an image has a record but no vector or features.
  void Read(const std::vector<uint64_t>& ids, float* out) const;

  // Loads what ReadMirrored needs (the codebook's VLAD encoder, and the
  // descriptor quantizer of a compact database); call it once before. False
  // when the model's descriptors cannot be mirrored (not SIFT's layout).
  // Throws as the constructor does for an unusable model.
  bool PrepareMirrors();
  // The search vectors of the mirror images (flipped left to right) of
  // `records`' images into out (records.size() x dim()): each image's stored
  // features mirrored (indexer/mirror_features.h) and encoded as the indexer
  // encodes an image (VLAD with the database's codebook, then its
  // projection), all zero for an image without features. What dedup finds
  // mirrored copies with, without extracting again. Needs PrepareMirrors.
  // Throws StoreError(kCorrupt) for missing or corrupt features.
  void ReadMirrored(const std::vector<ImageRecord>& records, float* out) const;

  // Calls fn(records, vectors) over every stored image in id order, in
  // chunks of up to `chunk` images; vectors is records.size() x dim() (all
  // zero for an image without features) and valid during the call only.
  void ForEach(const std::function<void(const std::vector<ImageRecord>&, const float*)>& fn,
               int64_t chunk = 1024) const;

 private:
  enum class Source { kStoredVlad, kStoredSearch, kDerived };
  SearchVectors(const Store& store, SearchProjection projection, Source source);
  // Loads the quantizer and the encoders that kDerived reads through.
  void PrepareDerivation();
  // VLAD encoders of the codebook, one per concurrent caller of Derive (an
  // encoder is not thread-safe; Read and ReadMirrored may be called from
  // several threads).
  class EncoderPool;
  // VLAD vectors of the images from their stored features (mirrored, if
  // asked), n x vlad_dim.
  void Derive(const std::vector<ImageRecord>& records, float* vlad, bool mirrored = false) const;
  // Raw stored vectors (vector_dim floats each) -> search vectors.
  void Map(const float* stored, int64_t n, float* out) const;

  const Store& store_;
  SearchProjection projection_;
  Source source_ = Source::kStoredVlad;
  std::optional<DescriptorQuantizer> quantizer_;
  std::unique_ptr<EncoderPool> encoders_;
};

}  // namespace lookalike
