// `lookalike index`: build or update a database from a folder of images.
// BuildIndex runs these phases, each in its own file:
//   list the folder (file_walker.h)
//   -> open the database, or train the model and create it (model_training.h)
//   -> plan the update: unchanged / to encode / gone (update_plan.h)
//   -> remove the records of files that are gone
//   -> read, decode and extract on worker threads (file_processing.h),
//      encode in batches and commit each image atomically (encode_commit.h).
// The persisted search index is updated by the `index` command afterwards
// (search/ sits above the indexer).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "indexer/codebook.h"
#include "indexer/descriptor_quantizer.h"
#include "indexer/image_file.h"
#include "indexer/model.h"
#include "indexer/projection.h"
#include "indexer/vlad.h"
#include "storage/store.h"

namespace lookalike {

struct IndexOptions {
  std::string image_dir;      // folder to index (recursively)
  std::string db_path;        // database folder (created if missing)
  EncodingSettings encoding;  // used for a new database only
  CodebookOptions codebook;   // used for a new database only
  // PCA of VLAD vectors: learned by a new database, or by a run that brings
  // one without a projection to projection.min_images (indexer/projection_growth.h).
  ProjectionOptions projection;
  // Compact local features (new database only): bytes per descriptor; 0
  // creates a database of the older, 8x larger layout (schema 2).
  QuantizerOptions quantizer;
  int train_images = 1000;  // images sampled to learn the codebook; >= 1
  // Bytes of the training images' descriptors kept for reuse (encoding, PCA)
  // instead of being extracted again.
  size_t training_cache_bytes = size_t{256} << 20;
  // Database whose model (codebook, PCA, descriptor quantizer, settings) a
  // new database copies instead of training one; an existing database must
  // have the same ModelFingerprint. Empty = train (or use the stored model).
  std::string model_from;
  // Index only the files of shard shard_index of num_shards (ShardOf their
  // path relative to image_dir); num_shards 0 = every file. Needs model_from.
  uint32_t shard_index = 0;
  uint32_t num_shards = 0;
  static constexpr uint32_t kMaxShards = 65536;
  int threads = 0;        // decode/extract threads; 0 = all cores
  int batch_images = 32;  // images per encoder batch; 1..4096
  Backend backend = Backend::kAuto;
  ImageFileLimits limits;

  // Throws std::invalid_argument naming the offending field.
  void Validate() const;
};

// Wall-clock seconds summed over the threads that did each stage.
struct StageTimes {
  double read_decode = 0;  // read, hash, decode, downscale; split into:
  double read = 0;         //   open, read, hash the file
  double decode = 0;       //   check and decode (reduced-size JPEG decoding included)
  double resize = 0;       //   downscale to the max side
  double extract = 0;      // SIFT + RootSIFT, and the colour histogram (indexer/colour.h)
  double train = 0;        // k-means (new database only)
  double pca = 0;          // VLAD of the training sample + PCA (when one is learned)
  double encode = 0;       // assignment + VLAD (encoder thread); split into:
  double assign = 0;       //   nearest centroid (0 on CUDA, which does not separate it)
  double aggregate = 0;    //   the rest: batch assembly, sort, residual sums, normalisation
  double store = 0;        // RocksDB writes (encoder thread)
};

struct IndexSummary {
  bool created = false;   // a new database was created
  int64_t listed = 0;     // candidate image files found
  int64_t indexed = 0;    // new or changed files encoded and stored
  int64_t unchanged = 0;  // skipped without decoding (same size and mtime)
  int64_t touched = 0;    // mtime changed, same content hash: record updated only
  // Images stored before thumbnails were kept whose file (same bytes) was
  // decoded for one (indexer/grey_thumbnail.h); not counted as indexed.
  int64_t thumbnails_added = 0;
  int64_t removed = 0;                     // records of files that disappeared
  int64_t no_features = 0;                 // stored as zero vectors (subset of indexed)
  int64_t ignored = 0;                     // non-image files in the folder
  std::map<std::string, int64_t> skipped;  // error code -> count
  int64_t total_skipped() const;
  bool cancelled = false;  // stopped early by a signal (committed work kept)
  // Components of the PCA projection an existing database learned in this
  // run, having grown to --pca-min-images or to the size that affords its
  // matrix more bits (0 = none learned), and those bits.
  int64_t projection_learned = 0;
  int projection_bits = 0;
  int projection_replaced_bits = 0;  // the bits of the one it replaced (0 = none)
  double seconds = 0;
  StageTimes stages;
  std::string backend;  // "cpu" | "cuda"
  int threads = 0;
};

// Receives events; called from the thread that calls BuildIndex.
class IndexObserver {
 public:
  virtual ~IndexObserver() = default;
  virtual void OnStart(int64_t /*num_to_process*/) {}
  virtual void OnPhase(const std::string& /*phase*/) {}
  virtual void OnProgress(int64_t /*done*/, int64_t /*total*/) {}
  virtual void OnFileError(const FileError& /*error*/) {}
  // An image's record and vector were committed (its WriteBatch returned):
  // from here on it survives a crash of the process.
  virtual void OnCommitted(const ImageRecord& /*record*/) {}
};

// `lookalike train`: learns the model from a seeded sample of
// options.image_dir and creates options.db_path holding it and no image
// (atomically, under the creation lock). An existing database is left as it
// is (summary.created false). Throws like BuildIndex.
IndexSummary TrainModel(const IndexOptions& options, IndexObserver* observer,
                        const std::atomic<bool>* cancel = nullptr);

// Creates the database if needed (learning the codebook on a seeded sample),
// then encodes new and changed files and removes records of files that
// disappeared. Per-file problems go to the observer and the summary; fatal
// problems throw (StoreError, std::runtime_error). If `cancel` becomes true the
// current batch is committed and the function returns early.
IndexSummary BuildIndex(const IndexOptions& options, IndexObserver* observer,
                        const std::atomic<bool>* cancel = nullptr);

}  // namespace lookalike
