#include "indexer/projection_growth.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "indexer/model_training.h"
#include "indexer/search_vectors.h"

namespace lookalike {

GrownProjection LearnProjectionIfGrown(Store* store, const ProjectionOptions& options,
                                       int train_images, const std::atomic<bool>* cancel) {
  GrownProjection out;
  if (store->schema_version() < 3 || store->vector_dim() != 0 || options.out_dim <= 0) return out;
  // Counted from the records, not the totals: a database written before the
  // totals existed has none.
  std::vector<std::pair<std::string, uint64_t>> with_features;  // (path, id)
  store->ForEachImage([&](const ImageRecord& r) {
    if (r.status == ImageStatus::kOk && r.num_descriptors > 0)
      with_features.emplace_back(r.path, r.id);
  });
  if (!ShouldLearnProjection(options, static_cast<int64_t>(with_features.size()))) return out;
  if (store->GetProjection()) return out;

  const SearchVectors derived(*store);  // no projection: full VLAD from the features
  const int64_t vlad_dim = derived.dim();
  // Chosen in path order: ids follow the order images were committed in,
  // which threads and interrupted runs change; the same collection must
  // learn the same projection.
  std::sort(with_features.begin(), with_features.end());
  std::vector<uint64_t> sample;
  for (size_t i : SeededIndices(with_features.size(), store->model().seed, train_images))
    sample.push_back(with_features[i].second);
  std::vector<float> vlad(sample.size() * static_cast<size_t>(vlad_dim));
  derived.Read(sample, vlad.data());
  if (cancel && cancel->load()) return out;
  const ProjectionRecord record =
      LearnProjection(vlad.data(), static_cast<int64_t>(sample.size()), vlad_dim, options);
  std::vector<float>().swap(vlad);
  const SearchProjection projection = SearchProjection::FromRecord(&record, vlad_dim);

  // Every image's search vector, in id order as ForEach gives them (zero for
  // one without features, as Apply maps it). This run holds the database's
  // write lock: no image comes or goes meanwhile.
  const size_t num_images = store->num_images();
  std::vector<uint64_t> order;
  std::vector<float> vectors(num_images * record.out_dim);
  order.reserve(num_images);
  derived.ForEach([&](const std::vector<ImageRecord>& records, const float* full) {
    const int64_t n = static_cast<int64_t>(records.size());
    if (order.size() + records.size() > num_images)
      throw std::runtime_error("the database changed while its projection was learned");
    projection.Apply(full, n, vectors.data() + order.size() * record.out_dim);
    for (const ImageRecord& r : records) order.push_back(r.id);
  });
  if (cancel && cancel->load()) return out;
  store->AddProjection(record, order, vectors.data());
  out.learned = true;
  out.sample = static_cast<int64_t>(sample.size());
  out.components = record.out_dim;
  return out;
}

}  // namespace lookalike
