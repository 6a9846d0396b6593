// Brings a database's persisted search index up to date as `lookalike index`
// does at the end of a run, without walking a folder: for the benchmark
// databases whose images exist only as records (bench/grow_distractors).
//
// usage: build/bench/sync_search_index --db DB [--show]
//   --show  only print what the persisted index is (a read-only sync)
#include <cstdio>
#include <exception>
#include <string>

#include "indexer/search_vectors.h"
#include "search/search_index.h"
#include "storage/store.h"

int main(int argc, char** argv) {
  const bool show = argc == 4 && std::string(argv[3]) == "--show";
  if ((argc != 3 && !show) || std::string(argv[1]) != "--db") {
    std::fprintf(stderr, "usage: sync_search_index --db DB [--show]\n");
    return 2;
  }
  try {
    if (show) {
      auto store = lookalike::Store::Open(argv[2], lookalike::Store::Mode::kReadOnly);
      lookalike::VectorIndexOptions o;
      o.nprobe = -1;  // as stored
      const lookalike::SearchIndexSync sync =
          lookalike::SyncSearchIndex(*store, lookalike::SearchVectors(*store), o);
      std::printf("persisted: %s; %s\n", sync.loaded ? "loaded" : "not loaded",
                  sync.Summary().c_str());
      return 0;
    }
    auto store = lookalike::Store::Open(argv[2], lookalike::Store::Mode::kReadWrite);
    const lookalike::SearchVectors vectors(*store);
    const lookalike::SearchIndexSync sync =
        lookalike::UpdateSearchIndex(store.get(), vectors, lookalike::VectorIndexOptions());
    std::printf("search index: %s\n", sync.Summary().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sync_search_index: %s\n", e.what());
    return 1;
  }
  return 0;
}
