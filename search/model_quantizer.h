// The model's search quantizer (m:ivq): a trained, empty ivfsq index over
// the search vectors that `train` can store in BASE, so that every shard
// made with `index --model-from BASE` fills a copy of the same inverted
// lists and `merge` joins them (VectorIndex::MergeFrom) instead of training
// and filling an index from every stored vector (search/search_index.md, "Merging
// the vector index").
#pragma once

#include <cstdint>
#include <string>

#include "search/vector_index.h"
#include "storage/store.h"

namespace lookalike {

// Lists of a model quantizer trained on n sample vectors for a collection
// of about `collection_images`: AutoNlist of the collection, but at most
// AutoNlist(n) (k-means needs about 8 sample vectors per list).
int64_t ModelQuantizerLists(int64_t n, int64_t collection_images);

// Trains the model's search quantizer on n search vectors (row-major
// n x dim, L2-normalised: the training sample's, projected), with
// ModelQuantizerLists(n, collection_images) lists and the seed `seed`;
// returns its VectorIndex::Serialize bytes, for Store::Create. Throws
// std::invalid_argument for n < 1 or collection_images < 1.
std::string TrainModelQuantizer(const float* vectors, int64_t n, int64_t dim,
                                int64_t collection_images, uint64_t seed);

// `options` for the search index of `store`, whose search vectors have
// `dim` dimensions: when its model carries a search quantizer of that
// dimension and `options` ask for auto or ivfsq, an ivfsq index built as a
// copy of it (kind ivfsq at every size, nlist its lists, model_quantizer
// set: never trained on the collection, never re-learned as it grows).
// Otherwise `options` unchanged. Throws StoreError(kCorrupt) for a damaged
// m:ivq, std::runtime_error for one search cannot read.
VectorIndexOptions ApplyModelQuantizer(const Store& store, int64_t dim, VectorIndexOptions options);

}  // namespace lookalike
