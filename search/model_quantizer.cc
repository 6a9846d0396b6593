#include "search/model_quantizer.h"

#include <algorithm>
#include <memory>
#include <stdexcept>

namespace lookalike {

int64_t ModelQuantizerLists(int64_t n, int64_t collection_images) {
  return std::min(AutoNlist(std::max<int64_t>(collection_images, 1)), AutoNlist(n));
}

std::string TrainModelQuantizer(const float* vectors, int64_t n, int64_t dim,
                                int64_t collection_images, uint64_t seed) {
  if (n < 1 || collection_images < 1)
    throw std::invalid_argument("the search quantizer needs sample vectors and a collection size");
  VectorIndexOptions o;
  o.kind = VectorIndexKind::kIvfSq;
  o.nlist = ModelQuantizerLists(n, collection_images);
  o.seed = seed;
  return VectorIndex::Train(dim, o, vectors, n)->Serialize();
}

VectorIndexOptions ApplyModelQuantizer(const Store& store, int64_t dim,
                                       VectorIndexOptions options) {
  if (options.kind == VectorIndexKind::kFlat) return options;
  const std::optional<std::string> blob = store.GetModelSearchQuantizer();
  if (!blob) return options;
  const std::unique_ptr<VectorIndex> lists = VectorIndex::Deserialize(*blob);
  if (lists->kind() != VectorIndexKind::kIvfSq || lists->dim() != dim || lists->ntotal() != 0)
    return options;  // not for these vectors (e.g. full VLAD before a PCA)
  options.kind = VectorIndexKind::kIvfSq;
  options.nlist = lists->nlist();
  if (options.nprobe > options.nlist) options.nprobe = options.nlist;
  options.model_quantizer = std::make_shared<const std::string>(*blob);
  return options;
}

}  // namespace lookalike
