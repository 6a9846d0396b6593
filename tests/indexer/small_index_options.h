// IndexOptions for the indexer tests' small generated folders: K = 16 (a few
// hundred descriptors suffice), the CPU encoder, two threads by default.
#pragma once

#include <string>

#include "indexer/pipeline.h"

namespace lookalike {
namespace testing {

inline IndexOptions SmallIndexOptions(const std::string& dir, const std::string& db,
                                      int threads = 2) {
  IndexOptions o;
  o.image_dir = dir;
  o.db_path = db;
  o.model.codebook.num_clusters = 16;
  o.threads = threads;
  o.backend = Backend::kCpu;
  return o;
}

}  // namespace testing
}  // namespace lookalike
