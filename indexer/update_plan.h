// The "plan the update" phase of `index`: what to do with each listed file
// (skip it as unchanged, reuse its training result, or process it) and which
// stored records lost their file. Reads the store, changes nothing.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "indexer/file_processing.h"
#include "indexer/file_walker.h"
#include "storage/store.h"

namespace lookalike {

struct UpdatePlan {
  std::vector<FileTask> tasks;       // new or changed files to read and encode
  std::vector<ProcessedFile> ready;  // training results reused as they are
  std::vector<ImageRecord> gone;     // records under the folder whose file is gone
  // Same size and mtime as stored: skipped unread (unless the image still
  // needs a thumbnail: then a task with FileTask::needs_thumbnail).
  int64_t unchanged = 0;
  int64_t num_to_encode() const { return static_cast<int64_t>(tasks.size() + ready.size()); }
};

// Plans the update of `store` from the listing `walk` of `root`. Results of
// files processed while training (`reusable`, keyed by path) move into
// `ready` unless their file is unchanged; `reusable` is left empty. Records
// under a folder that could not be listed are kept: absence there is not
// evidence of deletion.
UpdatePlan PlanUpdate(const WalkResult& walk, const std::string& root, const Store& store,
                      std::unordered_map<std::string, ProcessedFile>* reusable);

}  // namespace lookalike
