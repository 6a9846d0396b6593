// The PCA projection of a collection that grew past --pca-min-images.
//
// A database created with fewer images with features than that keeps no
// projection: search then derives every image's full VLAD vector from its
// stored features at each open, which costs about 2 ms and 256 KiB per image
// (one query on 760 photos: 1.6 s and 510 MB). The `index` run that leaves
// such a database with enough images learns the projection from a seeded
// sample of its stored images, as creation learns it from the sample it
// extracts, and stores it with every image's search vector in one atomic
// write (Store::AddProjection): from then on search reads 224 bytes per
// image, as in a database that had a projection from the start.
#pragma once

#include <atomic>
#include <cstdint>

#include "indexer/projection.h"
#include "storage/store.h"

namespace lookalike {

struct GrownProjection {
  bool learned = false;
  int64_t sample = 0;      // images the projection was learned from
  int64_t components = 0;  // its out_dim
};

// Learns and stores a projection when `store` (open for writing, schema 3)
// has none, `options` asks for one (out_dim > 0) and the images with
// features reach ShouldLearnProjection; else does nothing. The sample is up to
// `train_images` images with features chosen by the model's seed; their
// VLAD vectors, and every image's search vector, are derived from the stored
// features. Returns what it did; `cancel` (checked between steps) leaves the
// database as it was. Throws StoreError, std::invalid_argument.
GrownProjection LearnProjectionIfGrown(Store* store, const ProjectionOptions& options,
                                       int train_images, const std::atomic<bool>* cancel = nullptr);

}  // namespace lookalike
