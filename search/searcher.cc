#include "search/searcher.h"

#include <faiss/Index.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "indexer/colour.h"
#include "indexer/file_walker.h"
#include "indexer/model.h"
#include "util/threads.h"
#include "indexer/projection.h"
#include "search/search_index.h"

namespace lookalike {
namespace fs = std::filesystem;

void SearchOptions::Validate() const {
  if (k < 1 || k > 100000)
    throw std::invalid_argument("-k must be in 1..100000, got " + std::to_string(k));
  if (rerank < 0 || rerank > 10000)
    throw std::invalid_argument("--rerank must be in 0..10000, got " + std::to_string(rerank));
  if (min_inliers < 5)
    throw std::invalid_argument("--min-inliers must be >= 5 (four matches always fit a "
                                "homography), got " + std::to_string(min_inliers));
  if (expansion < 0 || expansion > 100)
    throw std::invalid_argument("--expansion must be in 0..100, got " +
                                std::to_string(expansion));
  if (threads < 0)
    throw std::invalid_argument("threads must be >= 0, got " + std::to_string(threads));
  if (!(colour_weight >= 0 && colour_weight <= 100))
    throw std::invalid_argument("--colour-weight must be in [0, 100], got " +
                                std::to_string(colour_weight));
  if (colour_depth < 0 || colour_depth > 100000)
    throw std::invalid_argument("--colour-depth must be in 0..100000, got " +
                                std::to_string(colour_depth));
  verify.Validate();
  index.Validate();
}

namespace {

// The search index as rows 0..ntotal-1 of Impl::ids and Impl::paths (ids
// ascending): search() turns the image ids VectorIndex returns into rows.
struct RowIndex {
  std::unique_ptr<VectorIndex> index;
  const std::vector<uint64_t>* ids = nullptr;
  int64_t ntotal = 0;
  int64_t d = 0;
  void search(int64_t n, const float* x, int64_t k, float* distances,
              faiss::Index::idx_t* labels) const {
    index->Search(x, n, k, distances, labels);
    for (int64_t i = 0; i < n * k; ++i) {
      if (labels[i] < 0) continue;
      const auto it = std::lower_bound(ids->begin(), ids->end(), static_cast<uint64_t>(labels[i]));
      labels[i] = it != ids->end() && *it == static_cast<uint64_t>(labels[i])
                      ? static_cast<faiss::Index::idx_t>(it - ids->begin())
                      : -1;
    }
  }
};

}  // namespace

struct Searcher::Impl {
  SearchOptions options;
  std::unique_ptr<Store> store;
  std::unique_ptr<ImageEncoder> encoder;
  std::unique_ptr<RowIndex> index;
  SearchProjection projection;       // stored VLAD -> index vectors (PCA or identity)
  std::vector<uint64_t> ids;         // row -> image id, ascending
  std::vector<std::string> paths;    // faiss row -> path
  int64_t num_zero = 0;
};

Searcher::Searcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Searcher::~Searcher() = default;

std::unique_ptr<Searcher> Searcher::Open(const std::string& db_path,
                                         const SearchOptions& options) {
  options.Validate();
  // Verification runs candidates on OpenMP threads; one BLAS thread each.
  SetLibraryThreads(options.threads > 0 ? options.threads
                                        : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->store = Store::Open(db_path, Store::Mode::kReadOnly);
  impl->encoder = std::make_unique<ImageEncoder>(impl->store->model(), options.backend);
  impl->projection = SearchProjection::FromStore(*impl->store);
  // The persisted search index, reconciled in memory with the records if it
  // is stale (read-only: `lookalike index` writes it), or built from the
  // stored vectors if there is none.
  const SearchVectorMap map{impl->projection.out_dim(),
                            [&](const float* in, int64_t n, float* out) {
                              impl->projection.Apply(in, n, out);
                            }};
  SearchIndexSync sync = SyncSearchIndex(*impl->store, map, options.index);
  if (options.index.nprobe > 0)
    sync.index->set_nprobe(std::min(options.index.nprobe, sync.index->nlist()));
  impl->num_zero = sync.num_zero;
  impl->ids.reserve(sync.manifest.size());
  impl->paths.reserve(sync.manifest.size());
  size_t next = 0;
  impl->store->ForEachImage([&](const ImageRecord& rec) {
    if (next < sync.manifest.size() && sync.manifest[next].id == rec.id) {
      impl->ids.push_back(rec.id);
      impl->paths.push_back(rec.path);
      ++next;
    }
  });
  if (next != sync.manifest.size())
    throw std::runtime_error("database " + db_path + " changed while the search index loaded");
  impl->index = std::make_unique<RowIndex>();
  impl->index->ntotal = sync.index->ntotal();
  impl->index->d = sync.index->dim();
  impl->index->index = std::move(sync.index);
  impl->index->ids = &impl->ids;
  return std::unique_ptr<Searcher>(new Searcher(std::move(impl)));
}

namespace {
// The inner product of two unit vectors as a cosine: float rounding can put
// an image's similarity with itself a hair above 1, and scores promise [-1, 1].
float Cosine(float inner_product) { return std::clamp(inner_product, -1.0f, 1.0f); }
}  // namespace

std::vector<std::vector<Hit>> Searcher::SearchVectors(const float* vectors,
                                                      int64_t num) const {
  std::vector<std::vector<Hit>> out(num);
  const int64_t n_index = impl_->index->ntotal;
  if (num == 0 || n_index == 0) return out;
  const int64_t k = std::min<int64_t>(impl_->options.k, n_index);
  std::vector<float> scores(num * k);
  std::vector<faiss::Index::idx_t> labels(num * k);
  std::vector<float> projected;
  if (!impl_->projection.identity()) {
    projected.resize(static_cast<size_t>(num * impl_->projection.out_dim()));
    impl_->projection.Apply(vectors, num, projected.data());
    vectors = projected.data();
  }
  impl_->index->search(num, vectors, k, scores.data(), labels.data());
  for (int64_t q = 0; q < num; ++q) {
    for (int64_t r = 0; r < k; ++r) {
      const faiss::Index::idx_t row = labels[q * k + r];
      if (row < 0) continue;
      out[q].push_back(
          Hit{impl_->ids[row], impl_->paths[row], Cosine(scores[q * k + r]),
              Cosine(scores[q * k + r]), -1});
    }
  }
  return out;
}

namespace {

// Hit::score of a verified result; see there.
float CombinedScore(float similarity, int inliers) {
  const float evidence = static_cast<float>(inliers) / (static_cast<float>(inliers) + 20.0f);
  return 1.0f - (1.0f - similarity) * (1.0f - evidence);
}

struct Candidate {
  int64_t row = 0;
  float similarity = 0;  // VLAD cosine with the (possibly expanded) query
  float score = 0;
  float base = 0;        // similarity + colour_weight x colour (Hit::score)
  float colour = -1;     // colour similarity with the query; -1 = not used
};

}  // namespace

std::vector<Hit> Searcher::SearchQuery(const float* vlad, const LocalFeatures& features,
                                       const std::vector<uint8_t>& colour) const {
  const SearchOptions& opt = impl_->options;
  const RowIndex& index = *impl_->index;
  const int64_t n_index = index.ntotal;
  std::vector<Hit> hits;
  if (n_index == 0) return hits;
  const int64_t dim = impl_->projection.in_dim();  // full VLAD (query, expansion)
  const bool fuse_colour = opt.colour_weight > 0 && opt.colour_depth > 0 && !colour.empty() &&
                           impl_->store->stores_colour();
  const int64_t depth = std::min<int64_t>(
      n_index, std::max({opt.k, opt.rerank, fuse_colour ? opt.colour_depth : 0}));
  const bool rerank = opt.rerank > 0 && features.num() >= 5;

  // Colour similarity of a candidate, read from its record once per query
  // (records are small; the candidates are at most colour_depth).
  std::unordered_map<int64_t, float> colour_cache;
  auto colour_of = [&](int64_t row) {
    const auto it = colour_cache.find(row);
    if (it != colour_cache.end()) return it->second;
    const auto record = impl_->store->FindByPath(impl_->paths[row]);
    const float c = record ? ColourSimilarity(colour, record->colour) : 0.0f;
    colour_cache.emplace(row, c);
    return c;
  };
  auto vlad_search = [&](const float* q) {
    std::vector<float> scores(depth);
    std::vector<faiss::Index::idx_t> labels(depth);
    std::vector<float> projected;
    if (!impl_->projection.identity()) {
      projected.resize(static_cast<size_t>(impl_->projection.out_dim()));
      impl_->projection.Apply(q, 1, projected.data());
      q = projected.data();
    }
    index.search(1, q, depth, scores.data(), labels.data());
    std::vector<Candidate> c;
    for (int64_t r = 0; r < depth; ++r) {
      if (labels[r] < 0) continue;
      const float s = Cosine(scores[r]);
      c.push_back(Candidate{labels[r], s, s, s, -1.0f});
    }
    if (fuse_colour && !c.empty()) {
      // The weight is in units of this query's similarity spread over the
      // candidates: PCA-whitening, K and the collection change how much VLAD
      // similarities vary (six-fold between full and whitened VLAD on the
      // dev set), and colour must weigh the same against them either way.
      // Robust spread (1.4826 x the median absolute deviation): the few true
      // matches a query has must not inflate it, or colour would outweigh
      // the VLAD evidence of a near-duplicate.
      std::vector<float> sims;
      sims.reserve(c.size());
      for (const Candidate& cand : c) sims.push_back(cand.similarity);
      auto median = [](std::vector<float>* v) {
        auto mid = v->begin() + static_cast<std::ptrdiff_t>(v->size() / 2);
        std::nth_element(v->begin(), mid, v->end());
        return *mid;
      };
      const float centre = median(&sims);
      for (float& x : sims) x = std::abs(x - centre);
      const float spread = c.size() < 3 ? 0.0f : 1.4826f * median(&sims);
      const float colour_weight =
          opt.colour_weight * (spread > 1e-6f ? spread : Searcher::kDefaultSimilaritySpread);
      for (Candidate& cand : c) {
        cand.colour = colour_of(cand.row);
        // Divided by 1 + w so b stays in [-1, 1] without clamping (clamping
        // would tie near-duplicates at 1) and is 1 only for the image itself.
        cand.base = (cand.similarity + colour_weight * cand.colour) / (1.0f + colour_weight);
        cand.score = cand.base;
      }
      std::stable_sort(c.begin(), c.end(),
                       [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
    }
    return c;
  };
  std::unordered_map<int64_t, int> inliers;  // row -> inliers (-1: no stored features)
  // A candidate with fewer matches than min_inliers cannot be verified.
  VerifyOptions verify = opt.verify;
  verify.min_matches = std::max(verify.min_matches, opt.min_inliers);
  auto verify_and_sort = [&](std::vector<Candidate>* list) {
    const size_t n = std::min<size_t>(list->size(), static_cast<size_t>(opt.rerank));
    std::vector<int64_t> todo;
    for (size_t i = 0; i < n; ++i)
      if (!inliers.count((*list)[i].row)) todo.push_back((*list)[i].row);
    std::vector<int> found(todo.size(), -1);
    std::exception_ptr failure;
    const int threads = opt.threads > 0 ? opt.threads : omp_get_max_threads();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (size_t t = 0; t < todo.size(); ++t) {
      try {
        const auto blob = impl_->store->GetFeatures(impl_->ids[todo[t]]);
        if (blob) found[t] = VerifyPair(features, DecodeLocalFeatures(*blob), verify).inliers;
      } catch (...) {
#pragma omp critical(lookalike_search_failure)
        if (!failure) failure = std::current_exception();
      }
    }
    if (failure) std::rethrow_exception(failure);
    for (size_t t = 0; t < todo.size(); ++t) inliers[todo[t]] = found[t];
    for (size_t i = 0; i < list->size(); ++i) {
      Candidate& c = (*list)[i];
      c.score = c.base;
      const auto it = inliers.find(c.row);
      if (it != inliers.end() && it->second >= opt.min_inliers)
        c.score = std::clamp(CombinedScore(c.base, it->second), -1.0f, 1.0f);
    }
    std::stable_sort(list->begin(), list->end(),
                     [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
  };

  std::vector<Candidate> list = vlad_search(vlad);
  if (rerank) {
    verify_and_sort(&list);
    if (opt.expansion > 0) {
      // Average query expansion over verified results only: unverified
      // neighbours would drag the query towards false matches.
      std::vector<float> expanded(vlad, vlad + dim);
      int used = 0;
      for (const Candidate& c : list) {
        if (used == opt.expansion) break;
        const auto it = inliers.find(c.row);
        if (it == inliers.end() || it->second < opt.min_inliers) continue;
        const auto v = impl_->store->GetVector(impl_->ids[c.row]);
        if (!v || static_cast<int64_t>(v->size()) != dim) continue;
        for (int64_t j = 0; j < dim; ++j) expanded[j] += (*v)[j];
        ++used;
      }
      if (used > 0) {
        double norm2 = 0;
        for (float x : expanded) norm2 += double{x} * x;
        const float inv = static_cast<float>(1.0 / std::sqrt(std::max(norm2, 1e-30)));
        for (float& x : expanded) x *= inv;
        list = vlad_search(expanded.data());
        verify_and_sort(&list);
      }
    }
  }
  for (const Candidate& c : list) {
    if (static_cast<int>(hits.size()) == opt.k) break;
    const auto it = inliers.find(c.row);
    hits.push_back(Hit{impl_->ids[c.row], impl_->paths[c.row], c.score, c.similarity,
                       it == inliers.end() ? -1 : it->second, c.colour});
  }
  return hits;
}

std::vector<QueryResult> Searcher::SearchFiles(const std::vector<std::string>& queries) {
  std::vector<QueryResult> results(queries.size());
  for (size_t i = 0; i < queries.size(); ++i) {
    const auto start = std::chrono::steady_clock::now();
    results[i].query = queries[i];
    ImageEncoder::Result enc = impl_->encoder->EncodeFile(queries[i], impl_->options.limits);
    if (!enc.error) results[i].hits = SearchQuery(enc.vlad.data(), enc.features, enc.colour);
    results[i].error = std::move(enc.error);
    results[i].seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return results;
}

int64_t Searcher::num_indexed() const { return impl_->index->ntotal; }
int64_t Searcher::num_zero_vectors() const { return impl_->num_zero; }
const ModelRecord& Searcher::model() const { return impl_->store->model(); }
Backend Searcher::backend() const { return impl_->encoder->backend(); }

std::vector<std::string> ExpandQueryPaths(const std::vector<std::string>& args,
                                          std::vector<FileError>* errors) {
  std::vector<std::string> out;
  for (const std::string& arg : args) {
    std::error_code ec;
    const fs::file_status st = fs::status(arg, ec);
    if (fs::is_directory(st)) {
      WalkResult walk = ListImageFiles(arg, {});
      for (auto& e : walk.errors) errors->push_back(std::move(e));
      out.insert(out.end(), walk.files.begin(), walk.files.end());
    } else if (fs::exists(st)) {
      out.push_back(arg);
    } else {
      errors->push_back(FileError{FileErrorCode::kVanished, arg, "no such file or folder"});
    }
  }
  return out;
}

}  // namespace lookalike
