// The per-file work of `index`, run on worker threads: read, hash, decode,
// downscale, extract descriptors and the colour histogram. Used by both the
// training phase (a sample) and the encoding phase (everything to update).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "indexer/descriptor_quantizer.h"
#include "indexer/extractor.h"
#include "indexer/image_file.h"
#include "indexer/index_summary.h"
#include "storage/store.h"

namespace lookalike {

// A file to process, with its stored record if it has one.
struct FileTask {
  std::string path;
  std::optional<ImageRecord> existing;
  // The stored image has no thumbnail (indexed before they were kept): when
  // the file still holds the same bytes it is decoded for one, not extracted.
  bool needs_thumbnail = false;
};

// One file after reading, decoding and extraction (or its error).
struct ProcessedFile {
  size_t task_index = 0;  // index in the task list it came from
  std::string path;
  std::optional<ImageRecord> existing;
  std::optional<FileError> error;
  bool touched_only = false;  // same content as the stored record: nothing to encode
  ImageRecord record;         // size, mtime, content hash, dimensions, colour
  Descriptors descriptors;
  // EncodeLocalFeatures blob, or EncodeCompactFeatures' once compacted;
  // empty without keypoints.
  std::string features;
  bool compacted = false;  // features (and descriptors) made by CompactFeatures
  std::string thumbnail;   // EncodeGreyThumbnail blob (grey_thumbnail.h); empty if not made
  uint32_t frame_width = 0, frame_height = 0;  // the downscaled frame keypoints live in
  double read_decode_seconds = 0;
  double read_seconds = 0;    // part of read_decode_seconds
  double resize_seconds = 0;  // part of read_decode_seconds
  double colour_seconds = 0;  // part of read_decode_seconds (colour histogram)
  double extract_seconds = 0;
  double compact_seconds = 0;  // CompactFeatures
};

// How files are read and described: the database's settings.
struct FileProcessing {
  int max_side = 0;
  ExtractorOptions extractor;
  ImageFileLimits limits;
  // The database's content hash (Store::hash_kind()): hashes are compared
  // with, and stored beside, hashes of that kind only.
  HashKind hash_kind = HashKind::kXxh3_64;
  // Make each image's thumbnail (the database keeps them:
  // Store::keeps_thumbnails).
  bool thumbnails = true;
  // A compact database's descriptor quantizer (null: features in the older
  // format, or none known yet, as while training): each worker compacts its
  // files' features (CompactFeatures, `derivable` as there), so the
  // quantisation runs on every worker instead of the one encoder thread.
  const DescriptorQuantizer* quantizer = nullptr;
  bool derivable = false;
};

// Processes one file with `extractor` (one per thread).
ProcessedFile ProcessFile(const FileTask& task, size_t index, const FileProcessing& how,
                          DescriptorExtractor* extractor);

// Runs ProcessFile over `tasks` on `threads` workers and hands the results to
// `consume` on the calling thread, in completion order. At most 4 x threads
// results wait in memory, so the descriptors of a whole collection are never
// held at once. Stops early when *cancel becomes true. Rethrows the first
// exception of a worker or of `consume`.
void ProcessFiles(const std::vector<FileTask>& tasks, int threads, const FileProcessing& how,
                  const std::atomic<bool>* cancel,
                  const std::function<void(ProcessedFile&&)>& consume);

// Re-encodes p->features in the compact format (quantised descriptors).
// With `derivable`, also replaces p->descriptors' values by what that blob
// decodes to, so that the VLAD vector encoded from them can be derived again
// from the stored features alone (databases that store no vectors); without
// it the exact descriptors stay for encoding (the vector is stored). A file
// without keypoints is left as it is. Sets p->compacted (a compacted file
// is left as it is) and adds to p->compact_seconds.
void CompactFeatures(const DescriptorQuantizer& quantizer, bool derivable, ProcessedFile* p);

// CompactFeatures on every file of `files` that is not compacted, on
// `threads` threads (the training sample's results, which were extracted
// before the quantizer existed).
void CompactAll(const DescriptorQuantizer& quantizer, bool derivable, int threads,
                std::vector<ProcessedFile>* files);

// Counts `e` as a skipped file in the summary and tells the observer (may be
// null).
void ReportSkipped(const FileError& e, IndexSummary* summary, IndexObserver* observer);

}  // namespace lookalike
