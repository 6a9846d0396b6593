// Writes a database's search vectors (what the search index is built from:
// the stored VLAD vectors mapped by the database's PCA(-whitening), unit
// length) to an .fvecs file (per vector: int32 dimension, then that many
// float32), for bench/search_scale's `--data real-spectrum --real FILE`.
// Opens the database read-only; images without features (zero vectors) are
// skipped, as the search index skips them. With --paths, also writes each
// written vector's image path, one per line, in the same order.
//
//   build/bench/dump_search_vectors --db DB --out real.fvecs [--paths real.paths]
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "indexer/search_vectors.h"
#include "storage/store.h"

namespace {

using namespace lookalike;

// Calls fn(path, search vector, its dimension) for every image with
// features, in id order, whatever the schema stores (SearchVectors).
void ForEachSearchVector(const Store& store,
                         const std::function<void(const std::string&, const float*, int64_t)>& fn) {
  const SearchVectors vectors(store);
  vectors.ForEach([&](const std::vector<ImageRecord>& records, const float* v) {
    for (size_t i = 0; i < records.size(); ++i)
      if (records[i].status != ImageStatus::kNoFeatures)
        fn(records[i].path, v + i * vectors.dim(), vectors.dim());
  });
}

}  // namespace

int main(int argc, char** argv) {
  std::string db, out, paths;
  bool usage = argc % 2 == 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--db")
      db = argv[i + 1];
    else if (flag == "--out")
      out = argv[i + 1];
    else if (flag == "--paths")
      paths = argv[i + 1];
    else
      usage = true;
  }
  if (usage || db.empty() || out.empty()) {
    std::cerr << "usage: dump_search_vectors --db DB --out FILE.fvecs [--paths FILE]\n";
    return 2;
  }
  try {
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    std::ofstream f(out, std::ios::binary);
    std::ofstream p;
    if (!paths.empty()) p.open(paths);
    if (!f || (!paths.empty() && !p)) {
      std::cerr << "dump_search_vectors: cannot write " << out << " or " << paths << "\n";
      return 2;
    }
    int64_t n = 0, dim = 0;
    ForEachSearchVector(*store, [&](const std::string& path, const float* v, int64_t d) {
      const int32_t d32 = static_cast<int32_t>(d);
      f.write(reinterpret_cast<const char*>(&d32), sizeof d32);
      f.write(reinterpret_cast<const char*>(v), static_cast<std::streamsize>(d * sizeof(float)));
      if (p.is_open()) p << path << "\n";
      dim = d;
      ++n;
    });
    f.close();
    if (!f) {
      std::cerr << "dump_search_vectors: write to " << out << " failed\n";
      return 2;
    }
    std::cerr << "dump_search_vectors: " << n << " vectors of " << dim << " dimensions to " << out
              << "\n";
  } catch (const std::exception& e) {
    std::cerr << "dump_search_vectors: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
