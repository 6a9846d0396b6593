#include "indexer/projection_growth.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "indexer/model_training.h"
#include "indexer/search_vectors.h"
#include "storage/folder_swap.h"
#include "util/test_hooks.h"

namespace lookalike {

GrownProjection LearnProjectionIfGrown(Store* store, const ProjectionOptions& options,
                                       int train_images, const std::atomic<bool>* cancel) {
  GrownProjection out;
  if (!store->compact() || options.out_dim <= 0) return out;
  const int64_t vlad_dim = static_cast<int64_t>(store->model().vlad_dim());
  std::optional<ProjectionRecord> stored;
  ProjectionOptions learn = options;
  if (store->vector_dim() != 0) {
    // Only an automatic choice is revisited, and only upwards: 4 bits is the
    // most it gives, and 16 or 32 were asked for.
    if (options.component_bits != 0) return out;
    stored = store->GetProjection();
    if (!stored || !ProjectionRecord::Gridded(stored->component_bits) ||
        stored->component_bits >= 4)
      return out;
    // A finer copy of the same model: the stored settings, and its
    // components unless they were capped by a sample smaller than asked for
    // (out_dim = samples - 1), when this run's --pca-dim applies.
    learn.whiten = stored->whiten;
    learn.eigen_regularization = stored->eigen_regularization;
    learn.power_alpha = stored->power_alpha;
    if (stored->out_dim + 1 < stored->num_samples)
      learn.out_dim = static_cast<int>(stored->out_dim);
    // The totals bound the images with features without reading a record.
    const auto totals = store->totals();
    if (totals &&
        static_cast<int64_t>(stored->component_bits) >=
            ComponentBitsFor(learn,
                             static_cast<int64_t>(store->num_images() - totals->without_features),
                             vlad_dim))
      return out;
  }
  // Counted from the records, not the totals: a database written before the
  // totals existed has none.
  std::vector<std::pair<std::string, uint64_t>> with_features;  // (path, id)
  store->ForEachImage([&](const ImageRecord& r) {
    if (r.status == ImageStatus::kOk && r.num_descriptors > 0)
      with_features.emplace_back(r.path, r.id);
  });
  const int64_t images = static_cast<int64_t>(with_features.size());
  if (!ShouldLearnProjection(learn, images)) return out;
  learn.component_bits = ComponentBitsFor(learn, images, vlad_dim);
  if (stored) {
    if (static_cast<int64_t>(stored->component_bits) >= learn.component_bits) return out;
  } else if (store->GetProjection()) {
    return out;
  }

  // Full VLAD from the features, whatever the database stores now.
  const SearchVectors derived = SearchVectors::FullVladFromFeatures(*store);
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
      LearnProjection(vlad.data(), static_cast<int64_t>(sample.size()), vlad_dim, learn);
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
  TestStopPoint("projection-learned");
  if (stored)
    store->ReplaceProjection(record, order, vectors.data());
  else
    store->AddProjection(record, order, vectors.data());
  TestStopPoint("projection-stored");
  out.learned = true;
  out.replaced = stored.has_value();
  out.sample = static_cast<int64_t>(sample.size());
  out.components = record.out_dim;
  out.bits = static_cast<int>(record.component_bits);
  out.old_bits = stored ? static_cast<int>(stored->component_bits) : 0;
  return out;
}

}  // namespace lookalike
