#include "search/searcher.h"

#include <faiss/IndexFlat.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "indexer/file_walker.h"
#include "indexer/model.h"

namespace lookalike {
namespace fs = std::filesystem;

void SearchOptions::Validate() const {
  if (k < 1 || k > 100000)
    throw std::invalid_argument("-k must be in 1..100000, got " + std::to_string(k));
}

struct Searcher::Impl {
  SearchOptions options;
  std::unique_ptr<Store> store;
  std::unique_ptr<ImageEncoder> encoder;
  std::unique_ptr<faiss::IndexFlatIP> index;
  std::vector<uint64_t> ids;         // faiss row -> image id
  std::vector<std::string> paths;    // faiss row -> path
  int64_t num_zero = 0;
};

Searcher::Searcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Searcher::~Searcher() = default;

std::unique_ptr<Searcher> Searcher::Open(const std::string& db_path,
                                         const SearchOptions& options) {
  options.Validate();
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->store = Store::Open(db_path, Store::Mode::kReadOnly);
  impl->encoder = std::make_unique<ImageEncoder>(impl->store->model(), options.backend);
  const int64_t dim = static_cast<int64_t>(impl->store->model().vlad_dim());
  impl->index = std::make_unique<faiss::IndexFlatIP>(dim);
  // Add in chunks so the staging buffer stays small.
  std::vector<float> chunk;
  constexpr int64_t kChunk = 256;
  chunk.reserve(kChunk * dim);
  auto flush = [&] {
    if (chunk.empty()) return;
    impl->index->add(static_cast<faiss::Index::idx_t>(chunk.size() / dim), chunk.data());
    chunk.clear();
  };
  impl->store->ForEachVector([&](const ImageRecord& rec, const float* v) {
    if (rec.status == ImageStatus::kNoFeatures) {
      ++impl->num_zero;  // the zero vector matches nothing
      return;
    }
    impl->ids.push_back(rec.id);
    impl->paths.push_back(rec.path);
    chunk.insert(chunk.end(), v, v + dim);
    if (static_cast<int64_t>(chunk.size()) >= kChunk * dim) flush();
  });
  flush();
  return std::unique_ptr<Searcher>(new Searcher(std::move(impl)));
}

std::vector<std::vector<Hit>> Searcher::SearchVectors(const float* vectors,
                                                      int64_t num) const {
  std::vector<std::vector<Hit>> out(num);
  const int64_t n_index = impl_->index->ntotal;
  if (num == 0 || n_index == 0) return out;
  const int64_t k = std::min<int64_t>(impl_->options.k, n_index);
  std::vector<float> scores(num * k);
  std::vector<faiss::Index::idx_t> labels(num * k);
  impl_->index->search(num, vectors, k, scores.data(), labels.data());
  for (int64_t q = 0; q < num; ++q) {
    for (int64_t r = 0; r < k; ++r) {
      const faiss::Index::idx_t row = labels[q * k + r];
      if (row < 0) continue;
      out[q].push_back(Hit{impl_->ids[row], impl_->paths[row], scores[q * k + r]});
    }
  }
  return out;
}

std::vector<QueryResult> Searcher::SearchFiles(const std::vector<std::string>& queries) {
  std::vector<QueryResult> results(queries.size());
  std::vector<float> vectors;
  std::vector<size_t> rows;  // result index of each encoded query
  for (size_t i = 0; i < queries.size(); ++i) {
    results[i].query = queries[i];
    ImageEncoder::Result enc = impl_->encoder->EncodeFile(queries[i], impl_->options.limits);
    if (enc.error) {
      results[i].error = enc.error;
      continue;
    }
    vectors.insert(vectors.end(), enc.vlad.begin(), enc.vlad.end());
    rows.push_back(i);
  }
  auto hits = SearchVectors(vectors.data(), static_cast<int64_t>(rows.size()));
  for (size_t j = 0; j < rows.size(); ++j) results[rows[j]].hits = std::move(hits[j]);
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
