// simulate_shards: shard databases of N simulated images for the merge
// benchmark (bench/merge_scale.sh), derived from a real database's images so
// record, feature and vector sizes and the vectors' spectrum are realistic.
//
// usage: simulate_shards --from REAL --out DIR --images N --shards S [--seed X]
//                        [--search-index] [--no-search-lists]
//
// REAL is a database indexed by `lookalike` (schema 3 with a PCA, so it
// stores search vectors). DIR/shard-<s> is created with REAL's model (as
// `index --model-from REAL` would) and receives images s, s + S, s + 2S, ...
// Simulated image i takes the record (sizes, descriptor count, colour) and
// the local features (f: blob) of real image a, and the search vector
// normalise(v_a + 0.7 v_b + g), with a and b seeded picks among REAL's images
// and g Gaussian noise of the same expected norm as v_a: every vector is
// distinct and lies in the subspace real photos span. Paths are
// /simulated/<i / 1000>/<i>.jpg, content hashes distinct. Written through
// Store::PutImage, one atomic batch per image, as `index` commits.
// --search-index: each shard then gets its persisted search index as the
// `index` run that wrote it would (UpdateSearchIndex; no word index), so
// `merge` can join the shards' inverted lists when REAL's model has a search
// quantizer. --no-search-lists: the shards' model leaves REAL's search
// quantizer out (a model trained without --search-lists-for).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "indexer/search_vectors.h"
#include "search/search_index.h"
#include "storage/store.h"
#include "util/timing.h"

using namespace lookalike;

int main(int argc, char** argv) {
  std::string from, out;
  int64_t images = 0;
  int shards = 0;
  uint64_t seed = 1;
  bool search_index = false, search_lists = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--search-index" || a == "--no-search-lists") {
      if (a == "--search-index")
        search_index = true;
      else
        search_lists = false;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "simulate_shards: %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--from")
      from = v;
    else if (a == "--out")
      out = v;
    else if (a == "--images")
      images = std::atoll(v.c_str());
    else if (a == "--shards")
      shards = std::atoi(v.c_str());
    else if (a == "--seed")
      seed = std::strtoull(v.c_str(), nullptr, 10);
    else {
      std::fprintf(stderr, "simulate_shards: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  if (from.empty() || out.empty() || images < 1 || shards < 1) {
    std::fprintf(stderr,
                 "usage: simulate_shards --from REAL --out DIR --images N --shards S [--seed X] "
                 "[--search-index] [--no-search-lists]\n");
    return 2;
  }
  try {
    auto real = Store::Open(from, Store::Mode::kReadOnly);
    const int64_t dim = static_cast<int64_t>(real->vector_dim());
    if (dim == 0 || real->schema_version() < 3) {
      std::fprintf(stderr, "simulate_shards: %s stores no search vectors (needs a PCA)\n",
                   from.c_str());
      return 2;
    }
    std::vector<ImageRecord> records;
    std::vector<float> vectors;
    std::vector<std::string> features;
    real->ForEachVector([&](const ImageRecord& r, const float* v) {
      if (r.status != ImageStatus::kOk) return;
      records.push_back(r);
      vectors.insert(vectors.end(), v, v + dim);
      features.push_back(real->GetFeatures(r.id).value_or(std::string()));
    });
    const int64_t n_real = static_cast<int64_t>(records.size());
    std::printf("real images: %lld, search vectors %lld-d\n", static_cast<long long>(n_real),
                static_cast<long long>(dim));
    const auto projection = real->GetProjection();
    const auto quantizer = real->GetDescriptorQuantizer();
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> pick(0, n_real - 1);
    std::normal_distribution<float> noise(0.0f, 1.0f / std::sqrt(static_cast<float>(dim)));
    std::vector<float> v(dim);
    for (int s = 0; s < shards; ++s) {
      const std::string path = out + "/shard-" + std::to_string(s);
      const auto words = real->GetModelWordVocabulary();
      const auto lists = search_lists ? real->GetModelSearchQuantizer() : std::nullopt;
      auto store = Store::Create(path, real->model(), projection ? &*projection : nullptr,
                                 real->schema_version(), quantizer ? *quantizer : std::string(),
                                 words ? *words : std::string(), lists ? *lists : std::string());
      const auto t = SteadyClock::now();
      int64_t written = 0;
      for (int64_t i = s; i < images; i += shards) {
        const int64_t a = pick(rng), b = pick(rng);
        double norm = 0;
        for (int64_t d = 0; d < dim; ++d) {
          v[d] = vectors[a * dim + d] + 0.7f * vectors[b * dim + d] + noise(rng);
          norm += double{v[d]} * v[d];
        }
        const float inv = static_cast<float>(1.0 / std::sqrt(norm));
        for (float& x : v) x *= inv;
        ImageRecord r = records[a];
        r.id = 0;
        r.path = "/simulated/" + std::to_string(i / 1000) + "/" + std::to_string(i) + ".jpg";
        r.content_hash = std::hash<std::string>()(r.path) ^ seed;
        store->PutImage(&r, v.data(), features[a]);
        ++written;
      }
      std::string index;
      if (search_index) {
        VectorIndexOptions o;
        o.words = false;
        const SearchVectors vectors(*store);
        index = ", search index " + UpdateSearchIndex(store.get(), vectors, o).Summary();
      }
      store->Flush();
      const double seconds = SecondsBetween(t, SteadyClock::now());
      std::printf("%s: %lld images in %.1f s (%.0f records/s), %.1f MiB%s\n", path.c_str(),
                  static_cast<long long>(written), seconds, written / seconds,
                  store->SizeOnDisk() / 1048576.0, index.c_str());
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "simulate_shards: %s\n", e.what());
    return 2;
  }
  return 0;
}
