// What a `lookalike index` or `train` run reports: its summary, its stage
// times, and the events an observer receives while it runs. Shared by the
// pipeline and its phases.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "indexer/image_file.h"
#include "storage/records.h"

namespace lookalike {

// Wall-clock seconds summed over the threads that did each stage.
struct StageTimes {
  double read_decode = 0;  // read, hash, decode, downscale; split into:
  double read = 0;         //   open, read, hash the file
  double decode = 0;       //   check and decode (reduced-size JPEG decoding included)
  double resize = 0;       //   downscale to the max side
  double extract = 0;      // SIFT + RootSIFT, and the colour histogram (indexer/colour.h)
  double train = 0;        // k-means (new database only)
  double quantizer = 0;    // the descriptor quantizer (new compact database only)
  double words = 0;        // the word index's vocabulary (new database only)
  double pca = 0;          // VLAD of the training sample + PCA (when one is learned)
  double encode = 0;       // assignment + VLAD (encoder thread); split into:
  double assign = 0;       //   nearest centroid (0 on CUDA, which does not separate it)
  double aggregate = 0;    //   the rest: batch assembly, sort, residual sums, normalisation
  double compact = 0;      // descriptors quantised for the stored features (compact databases)
  double project = 0;      // PCA projection of the stored vectors (encoder thread)
  double store = 0;        // RocksDB writes (encoder thread)
  // The persisted search index brought up to date after the images are
  // stored (by the `index` command: search/ sits above the indexer).
  double search_index = 0;
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
  int64_t total_skipped() const {
    int64_t n = 0;
    for (const auto& kv : skipped) n += kv.second;
    return n;
  }
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

}  // namespace lookalike
