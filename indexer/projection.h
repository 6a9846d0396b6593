// PCA(-whitening) of VLAD vectors (Jégou & Chum, "Negative evidence and
// co-occurrences in image retrieval", ECCV 2012): learned when a database is
// created, from the VLAD vectors of the codebook's training sample (or later,
// from stored features, as the collection grows: indexer/projection_growth.h);
// stored with the model (m:pca); applied to every image's vector when it is
// indexed and to every query.
#pragma once

#include <cstdint>
#include <vector>

#include "storage/store.h"

namespace lookalike {

// How the projection is learned when a database is created.
struct ProjectionOptions {
  // Components kept; 0 = no projection (search uses full VLAD vectors).
  // Capped at (training vectors - 1) when learned, since more components
  // would only span noise. 112 is what fits the large-collection search
  // index in 128 bytes per image (8-bit codes + 8-byte id: 120 B; at 256-d
  // it costs 266 B, and 4-bit codes drop recall@10 to 0.72); Jégou & Chum
  // (ECCV 2012) show PCA-whitened VLAD keeps most of its accuracy at 128-d.
  // On the development set, keeping fewer components than the sample
  // supports lost mAP (indexer/README.md, "PCA-whitening").
  int out_dim = 112;
  // The projection is learned only if the training sample holds at least
  // this many images with features; a smaller new collection searches its
  // full VLAD vectors. 113 = out_dim + 1 at the default: every component is
  // then supported by the sample (measured: a full-rank projection matches
  // full VLAD, a truncated one loses). 0 = always (out_dim still capped).
  int min_images = 113;
  // Divide each component by sqrt(eigenvalue + eigen_regularization x mean
  // eigenvalue), so frequent, co-occurring directions count less.
  bool whiten = true;
  // Relative floor added to every eigenvalue before whitening, >= 0; keeps the
  // smallest components (mostly noise) from being amplified. 1 measured as
  // good as full whitening (0) on the development set (0.799 vs 0.796 mean
  // mAP over 4 seeds, within the noise) and bounds the amplification.
  float eigen_regularization = 1.0f;
  // Signed power applied to each projected component before the final L2
  // normalisation; in (0, 1], 1 = off.
  float power_alpha = 1.0f;
  // Bits per stored matrix value: 32 (float32), 16 (float16: rows are
  // orthonormal, so the rounding error is ~5e-4 relative) or 4 (a uniform
  // 16-level code per value over +-3 RMS of its row, one step per row: a
  // quarter of float16, 3.5 MiB at 112 x 65,536, which otherwise dominates
  // the disk of collections of a few hundred photos), or 2 or 1 (4 or 2
  // levels over +-2 or +-0.8 RMS: 1.75 or 0.9 MiB). VLAD ranking of the dev
  // set's queries among 212 / 437 / 1,942 images, mAP: 4-bit 0.702 / 0.657 /
  // 0.562, 2-bit 0.698 / 0.652 / 0.555, 1-bit 0.689 / 0.641 / 0.547.
  // 0 = automatic (ComponentBitsFor): the most of 4, 2, 1 bits whose matrix
  // costs at most matrix_bytes_per_image per image of the collection, so a
  // few hundred photos get the small matrix and a collection that grows past
  // that gets the projection learned again at more bits
  // (indexer/projection_growth.h).
  int component_bits = 0;
  // The automatic choice's budget: stored matrix bytes per image. 8 KiB
  // keeps a new database of real photos under 40 KiB per photo (about 28
  // KiB of features, thumbnail and vector each) and gives 4 bits from 448
  // images at the default sizes (indexer/README.md, "PCA-whitening").
  int64_t matrix_bytes_per_image = 8192;

  // Throws std::invalid_argument naming the offending field.
  void Validate() const;
};

// True if a new database whose training sample has `num_images` images with
// features learns a projection under `options` (out_dim > 0 and num_images >=
// max(2, min_images)).
bool ShouldLearnProjection(const ProjectionOptions& options, int64_t num_images);

// The bits per matrix value a collection of `images` images stores its
// projection of `vlad_dim`-d vectors with: options.component_bits, or when
// that is 0 (automatic) the most of 4, 2 and 1 whose out_dim x vlad_dim
// matrix takes at most options.matrix_bytes_per_image per image (1 when none
// does).
int ComponentBitsFor(const ProjectionOptions& options, int64_t images, int64_t vlad_dim);

// Learns the projection from `num` VLAD vectors (row-major, `dim` floats each,
// all-zero rows are ignored) with FAISS's PCAMatrix. out_dim is capped at
// (usable rows - 1); `options` must have passed Validate(). Throws
// std::invalid_argument if fewer than 2 usable rows remain, or if
// options.component_bits is 0 (the caller resolves it with
// ComponentBitsFor, knowing the collection's size).
ProjectionRecord LearnProjection(const float* vectors, int64_t num, int64_t dim,
                                 const ProjectionOptions& options);

// Maps stored VLAD vectors (model.vlad_dim() floats) to the vectors the search
// index holds: PCA(-whitening) to out_dim, then L2; identity when the database
// has no projection. Thread-safe after construction.
class SearchProjection {
 public:
  // Throws StoreError(kCorrupt) / std::runtime_error for an unusable projection.
  static SearchProjection FromStore(const Store& store);  // loads it (or identity)
  // From a record (e.g. one just learned); identity for nullptr. `in_dim` is
  // the VLAD dimension of the model it must apply to. Throws
  // std::runtime_error if the record does not fit it.
  static SearchProjection FromRecord(const ProjectionRecord* record, int64_t in_dim);

  int64_t in_dim() const { return in_dim_; }
  int64_t out_dim() const { return out_dim_; }
  bool identity() const { return identity_; }
  // n x in_dim -> n x out_dim, rows L2-normalised; zero rows stay zero.
  // In-place (in == out) is allowed only for the identity.
  void Apply(const float* in, int64_t n, float* out) const;

 private:
  int64_t in_dim_ = 0;
  int64_t out_dim_ = 0;
  bool identity_ = true;
  float power_alpha_ = 1.0f;
  std::vector<float> matrix_;  // out_dim x in_dim, whitening folded in
  std::vector<float> offset_;  // matrix_ x mean, out_dim
};

}  // namespace lookalike
