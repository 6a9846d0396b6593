// Converting a database of schema 1 or 2 to the compact layout (schema 3)
// in place, crash-safely (`lookalike migrate`). Image ids, records (paths,
// sizes, mtimes, content hashes, colour histograms), the model and the PCA
// are kept as they are (a schema-1 record, which has no colour histogram,
// gains it and the XXH3 content hash from its file when the file is
// unchanged); what changes is what each image stores:
//   local features  format 1 (u8 descriptors, f32 geometry) -> format 2
//                   (product-quantiser codes, compact geometry); the
//                   quantizer is learned as creation learns it, from a seeded
//                   sample of the stored descriptors;
//   vector          the full f32 VLAD -> with a PCA, the search vector
//                   projected from it (as `index` encodes it, from exact
//                   descriptors) in float16; without one, nothing (search
//                   derives the VLAD from the stored features).
// The copy is built beside the database (storage/folder_swap.h) and
// exchanged with it once complete and verified; a run killed at any moment
// leaves the original or the complete copy at the database path, and the
// next run (or the next writer to open the database) finishes the job.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "indexer/descriptor_quantizer.h"
#include "indexer/index_options.h"
#include "indexer/index_summary.h"
#include "storage/store.h"

namespace lookalike {

struct MigrationOptions {
  std::string db_path;  // the database to convert
  // Images whose stored descriptors the descriptor quantizer learns from,
  // chosen by the model's seed; as `index --train-images` at creation; >= 1.
  int train_images = ModelOptions().train_images;
  // Bytes per descriptor code; must divide the descriptor dimension and be
  // > 0 (0 would be the older layout). Its seed is replaced by the model's.
  QuantizerOptions quantizer;

  // Throws std::invalid_argument naming the offending field.
  void Validate() const;
};

struct MigrationSummary {
  uint32_t from_schema = 0;  // the database's schema before the run
  uint32_t schema = 0;       // ... and after it (the current one once migrated)
  bool migrated = false;     // this run exchanged the database for its copy
  bool resumed = false;      // continued the copy an interrupted run had left
  bool cancelled = false;    // stopped early; the copy is kept for the next run
  // The original an interrupted run had left beside the database was removed.
  bool leftover_removed = false;
  int64_t images = 0;     // images of the database
  int64_t converted = 0;  // images converted by this run
  int64_t reused = 0;     // already in the copy, unchanged since
  int64_t dropped = 0;    // removed from the copy: gone or changed in the original since
  uint64_t bytes_before = 0, bytes_after = 0;  // database folder sizes
  // What the `migrate` command did to give the model the word index's
  // vocabulary (search/search_index.h, AddWordVocabularyToModel): "adopted"
  // (the word index's own), "learned" (from stored features), "none" (no
  // image has features to learn from), or empty (the model had one).
  std::string word_vocabulary;
  double seconds = 0;
};

// Called with the complete copy just before it is verified, synced and
// exchanged: the `migrate` command writes the persisted search index there
// (search/ sits above the indexer). May throw; the database is then unchanged.
using FinishCopy = std::function<void(Store* copy)>;

// Converts options.db_path (schema 1 or 2) to schema 3, or finishes or
// discards what an interrupted run left. A schema-3 database is left as it is
// (from_schema 3, migrated false). The database is locked against writers
// throughout; search, info and verify keep working on the original until the
// exchange. Needs room for the copy beside the database (about a tenth of
// it). Phases and progress go to `observer` (may be null). If *cancel becomes
// true, stops after the current image, keeping the copy. Throws StoreError
// (locked, corrupt original, a foreign folder at the sibling path, I/O),
// std::runtime_error (too few descriptors to learn the quantizer from).
MigrationSummary MigrateDatabase(const MigrationOptions& options, IndexObserver* observer,
                                 const FinishCopy& finish_copy,
                                 const std::atomic<bool>* cancel = nullptr);

}  // namespace lookalike
