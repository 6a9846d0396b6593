// The "encode and commit" phase of `index`: processed files are gathered in
// batches, VLAD-encoded together, and each image is committed with one
// atomic store write (record, vector, path entry and local features), so a
// crash keeps every image committed before it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "indexer/descriptor_quantizer.h"
#include "indexer/file_processing.h"
#include "indexer/index_summary.h"
#include "indexer/projection.h"
#include "indexer/vlad.h"
#include "storage/store.h"

namespace lookalike {

// Encodes batches of processed files and commits each image atomically.
// Counts everything in the summary and reports to the observer (may be
// null). Not thread-safe: called from the consuming thread only.
class BatchCommitter {
 public:
  // `total` is the number of files the phase will Add (for progress).
  // `quantizer` (compact databases; may be null) compacts every file's
  // features before encoding (CompactFeatures); `projection` maps VLAD
  // vectors to the vectors the store keeps when it keeps search vectors
  // (Store::vector_dim() != VLAD dimension).
  BatchCommitter(Store* store, VladEncoder* encoder, const DescriptorQuantizer* quantizer,
                 const SearchProjection* projection, int batch_images, IndexSummary* summary,
                 IndexObserver* observer, int64_t total);

  // Takes one processed file: an error is reported (a vanished file's record
  // removed), a touched file's record updated, anything else queued for the
  // next batch, which is encoded once it is full.
  void Add(ProcessedFile&& p);
  // Encodes and commits the queued files.
  void Flush();

 private:
  void AddStageTimes(const ProcessedFile& p);
  void Commit(const ProcessedFile& p, const float* vlad);
  void Progress();

  Store* store_;
  VladEncoder* encoder_;
  const DescriptorQuantizer* quantizer_;
  const SearchProjection* projection_;
  int batch_images_;
  IndexSummary* summary_;
  IndexObserver* observer_;
  int64_t total_;
  int64_t done_ = 0;
  std::vector<ProcessedFile> batch_;
  int64_t batch_descriptors_ = 0;
  std::vector<float> descriptors_;
  std::vector<int64_t> offsets_;
  std::vector<float> vlad_;
  std::vector<float> stored_;  // vlad_ projected, when the store keeps search vectors
};

}  // namespace lookalike
