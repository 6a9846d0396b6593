// The PCA projection of a collection that grew: learned when it reaches
// --pca-min-images, learned again at more bits when it reaches the size the
// automatic --pca-bits gives more bits to.
//
// A database created with fewer images with features than --pca-min-images
// keeps no projection: search then derives every image's full VLAD vector
// from its stored features at each open, which costs about 2 ms and 256 KiB
// per image (one query on 760 photos: 1.6 s and 510 MB). The `index` run that
// leaves such a database with enough images learns the projection from a
// seeded sample of its stored images, as creation learns it from the sample
// it extracts, and stores it with every image's search vector in one atomic
// write (Store::AddProjection): from then on search reads 224 bytes per
// image, as in a database that had a projection from the start.
//
// With automatic bits (ProjectionOptions::component_bits 0, the default) a
// small collection stores its matrix at 1 or 2 bits, where the matrix is
// most of its disk (ComponentBitsFor). The run that takes it past the size
// that affords more bits learns the projection again the same way, at those
// bits and with the stored one's settings (components, whitening, power), and
// replaces it and every search vector in one atomic write
// (Store::ReplaceProjection, which also drops the persisted search index
// built from the old vectors). A run that names --pca-bits keeps what is
// stored.
#pragma once

#include <atomic>
#include <cstdint>

#include "indexer/projection.h"
#include "storage/store.h"

namespace lookalike {

struct GrownProjection {
  bool learned = false;
  bool replaced = false;   // learned again: the database had one with fewer bits
  int64_t sample = 0;      // images the projection was learned from
  int64_t components = 0;  // its out_dim
  int bits = 0;            // its component_bits
  int old_bits = 0;        // the replaced one's (when replaced)
};

// Learns and stores a projection when `store` (open for writing, schema 3)
// has none, `options` asks for one (out_dim > 0) and the images with
// features reach ShouldLearnProjection; learns it again when `options` asks
// for automatic bits and the stored one has fewer than ComponentBitsFor gives
// the images with features now; else does nothing. The sample is up to
// `train_images` images with features chosen by the model's seed; their
// VLAD vectors, and every image's search vector, are derived from the stored
// features. Returns what it did; `cancel` (checked between steps) leaves the
// database as it was. Throws StoreError, std::invalid_argument.
GrownProjection LearnProjectionIfGrown(Store* store, const ProjectionOptions& options,
                                       int train_images, const std::atomic<bool>* cancel = nullptr);

}  // namespace lookalike
