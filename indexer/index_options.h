// The options of `lookalike index` and `train`: the model a new database is
// created with (ModelOptions, the phase that trains it takes only these), and
// the run's folder, database, sharding and resources (IndexOptions). Each
// struct checks its own fields (Validate, naming the field and its flag).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "indexer/codebook.h"
#include "indexer/descriptor_quantizer.h"
#include "indexer/image_file.h"
#include "indexer/model.h"
#include "indexer/projection.h"
#include "indexer/vlad.h"
#include "indexer/word_signatures.h"

namespace lookalike {

// What a new database learns its model with (the model flags of `index` and
// `train`); an existing database keeps the model it was created with.
struct ModelOptions {
  EncodingSettings encoding;  // extraction and VLAD settings
  CodebookOptions codebook;
  // PCA of VLAD vectors: learned by a new database, or by a run that brings
  // one without a projection to projection.min_images (indexer/projection_growth.h).
  ProjectionOptions projection;
  // Compact local features: bytes per descriptor; 0 creates a database of
  // the older, 8x larger layout (schema 2).
  QuantizerOptions quantizer;
  // The word index's vocabulary, learned from the codebook's sample; its
  // seed is replaced by codebook.seed.
  WordVocabularyOptions words;
  int train_images = 1000;  // --train-images: images sampled to learn the codebook; >= 1
  // Bytes of the training images' descriptors kept for reuse (encoding, PCA)
  // instead of being extracted again.
  size_t training_cache_bytes = size_t{256} << 20;

  // Throws std::invalid_argument naming the offending field.
  void Validate() const;
};

struct IndexOptions {
  std::string image_dir;  // folder to index (recursively)
  std::string db_path;    // --db: database folder (created if missing)
  ModelOptions model;     // used for a new database only
  // Database whose model (codebook, PCA, descriptor quantizer, settings) a
  // new database copies instead of training one; an existing database must
  // have the same ModelFingerprint. Empty = train (or use the stored model).
  std::string model_from;
  // Index only the files of shard shard_index of num_shards (ShardOf their
  // path relative to image_dir); num_shards 0 = every file. Needs model_from.
  uint32_t shard_index = 0;
  uint32_t num_shards = 0;
  static constexpr uint32_t kMaxShards = 65536;
  int threads = 0;        // --threads: decode/extract threads; 0 = all cores
  int batch_images = 32;  // --batch: images per encoder batch; 1..4096
  Backend backend = Backend::kAuto;
  ImageFileLimits limits;

  // Throws std::invalid_argument naming the offending field.
  void Validate() const;
};

}  // namespace lookalike
