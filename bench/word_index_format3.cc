// word_index_format3: rewrites a database's persisted search index as search
// index format 3 did (the whole word index inside the blob, no w: keys), so
// bench/scale_100k.sh can measure the old layout beside the new one on the
// same images. Holds the whole word index in memory while it writes.
//
// usage: word_index_format3 --db DB
#include <cstdio>
#include <string>

#include "indexer/search_vectors.h"
#include "search/search_index.h"
#include "storage/store.h"

using namespace lookalike;

int main(int argc, char** argv) {
  if (argc != 3 || std::string(argv[1]) != "--db") {
    std::fprintf(stderr, "usage: word_index_format3 --db DB\n");
    return 2;
  }
  try {
    auto store = Store::Open(argv[2], Store::Mode::kReadWrite);
    const SearchVectors vectors(*store);
    const SearchIndexSync sync = SyncSearchIndex(*store, vectors, VectorIndexOptions());
    if (sync.transient || !sync.words) {
      std::fprintf(stderr, "word_index_format3: %s keeps no persisted word index\n", argv[2]);
      return 2;
    }
    SaveSearchIndexFormat3(store.get(), sync);
    store->Flush();
    std::printf("%s: search index format 3, word index of %lld images in the blob\n", argv[2],
                static_cast<long long>(sync.words->ntotal()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "word_index_format3: %s\n", e.what());
    return 2;
  }
  return 0;
}
