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
#include <string>
#include <vector>

#include "indexer/index_options.h"
#include "indexer/index_summary.h"
#include "indexer/model_training.h"

namespace lookalike {

// `lookalike train`: learns the model from a seeded sample of
// options.image_dir and creates options.db_path holding it and no image
// (atomically, under the creation lock). An existing database is left as it
// is (summary.created false). Throws like BuildIndex.
// With `search_quantizer`, BASE's model also carries the search vectors'
// quantizer it trains (TrainAndCreate).
IndexSummary TrainModel(const IndexOptions& options, IndexObserver* observer,
                        const std::atomic<bool>* cancel = nullptr,
                        const SearchQuantizerTrainer& search_quantizer = {});

// Creates the database if needed (learning the codebook on a seeded sample),
// then encodes new and changed files and removes records of files that
// disappeared. Per-file problems go to the observer and the summary; fatal
// problems throw (StoreError, std::runtime_error). If `cancel` becomes true the
// current batch is committed and the function returns early.
IndexSummary BuildIndex(const IndexOptions& options, IndexObserver* observer,
                        const std::atomic<bool>* cancel = nullptr);

}  // namespace lookalike
