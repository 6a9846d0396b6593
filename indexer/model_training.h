// The "train the model" phase of `index`, run once, when a database is
// created: a seeded sample of the folder is read, its descriptors learn the
// codebook (k-means), the VLAD vectors of the sample learn the PCA
// projection, and the database is created with that model (atomically).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "indexer/file_processing.h"
#include "indexer/index_options.h"
#include "indexer/index_summary.h"
#include "storage/store.h"

namespace lookalike {

// Trains the search vectors' quantizer stored with a model (m:ivq) on n
// row-major search vectors of `dim` dimensions; returns its bytes.
using SearchQuantizerTrainer =
    std::function<std::string(const float* vectors, int64_t n, int64_t dim)>;

struct TrainedDatabase {
  std::unique_ptr<Store> store;  // the new database; null when cancelled
  // Training images whose processed results fit options.training_cache_bytes,
  // by path: the encoding phase commits them without reading them again.
  std::unordered_map<std::string, ProcessedFile> reusable;
};

// Up to `max_items` of the indices 0..n-1, chosen by `seed`, in ascending
// order: the seeded sample of a list.
std::vector<size_t> SeededIndices(size_t n, uint64_t seed, int max_items);

// Descriptors kept per image of a training sample of `num_images` images:
// four times what k-means subsamples, spread over the images, at least 64.
int64_t DescriptorQuota(const CodebookOptions& codebook, int64_t num_images);

// Appends a seeded subset of up to `quota` of an image's descriptors (all of
// them when it has no more) to `out`, row-major, in their order.
void SampleDescriptors(const Descriptors& d, int64_t quota, uint64_t seed, std::vector<float>* out);

// The training sample: up to options.train_images of `files`, chosen by
// options.codebook.seed, in listing order.
std::vector<FileTask> SeededSample(const std::vector<std::string>& files,
                                   const ModelOptions& options);

// Learns the model from a seeded sample of `files` (listed under `root`),
// read within `limits` (`backend` is only named in progress), and creates
// the database at `db_path` with it. The caller holds the
// CreationLock. Fills summary->stages.train and .pca; returns a null store if
// *cancel became true. Throws std::runtime_error when the sample has too few
// descriptors for the codebook (after reporting the sample's unusable files),
// StoreError when the database cannot be created.
// With `search_quantizer` (and a PCA), it is called once with the
// search vectors of every training image with features (row-major n x dim)
// and what it returns is stored with the model (m:ivq; `train
// --search-lists-for`, composed in tools/ since search sits above the
// indexer).
TrainedDatabase TrainAndCreate(const std::vector<std::string>& files, const std::string& root,
                               const std::string& db_path, const ModelOptions& options,
                               const ImageFileLimits& limits, Backend backend, int threads,
                               IndexSummary* summary, IndexObserver* observer,
                               const std::atomic<bool>* cancel,
                               const SearchQuantizerTrainer& search_quantizer = {});

}  // namespace lookalike
