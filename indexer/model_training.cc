#include "indexer/model_training.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <set>

#include "indexer/codebook.h"
#include "indexer/descriptor_quantizer.h"
#include "indexer/model.h"
#include "indexer/projection.h"
#include "indexer/vlad.h"
#include "indexer/word_signatures.h"
#include "storage/encoding.h"
#include "util/threads.h"
#include "util/timing.h"

namespace lookalike {
namespace {

using Clock = SteadyClock;

// What reading the sample gave.
struct TrainingSample {
  std::vector<float> descriptors;  // a seeded subset of each image's, row-major
  int64_t num_descriptors = 0;
  int64_t images_with_features = 0;
  std::unordered_map<std::string, ProcessedFile> reusable;
  std::vector<FileError> errors;  // reported later, by the encoding pass
};

// The schema a new database is created in: the compact one unless the
// options ask for the older layout (no descriptor quantisation).
uint32_t NewSchema(const ModelOptions& options) {
  return options.quantizer.bytes > 0 ? kSchemaVersion : kFullFeaturesSchemaVersion;
}

FileProcessing TrainingProcessing(const ModelOptions& options, const ImageFileLimits& limits) {
  FileProcessing how;
  how.max_side = options.encoding.max_side;
  how.extractor = options.encoding.extractor;
  how.limits = limits;
  // Hashes of the reused training images are taken before the database
  // exists, with the hash of the schema it is created in.
  how.hash_kind = HashKindForSchema(NewSchema(options));
  how.thumbnails = Store::KeepsThumbnails(NewSchema(options));
  return how;
}

// Reads the sample; keeps up to `quota` descriptors per image for k-means and
// whole results for reuse within options.training_cache_bytes.
TrainingSample CollectTrainingSample(const std::vector<FileTask>& sample,
                                     const ModelOptions& options, const ImageFileLimits& limits,
                                     int threads, IndexObserver* observer,
                                     const std::atomic<bool>* cancel) {
  const int64_t n = static_cast<int64_t>(sample.size());
  const int64_t quota = DescriptorQuota(options.codebook, n);
  const int dim = DescriptorDim(options.encoding.extractor);
  TrainingSample out;
  std::vector<std::vector<float>> per_image(sample.size());
  size_t cached_bytes = 0;
  int64_t sampled = 0;
  ProcessFiles(
      sample, threads, TrainingProcessing(options, limits), cancel, [&](ProcessedFile&& p) {
        if (observer) observer->OnProgress(++sampled, n);
        if (p.error) {
          out.errors.push_back(*p.error);
          return;
        }
        out.images_with_features += p.descriptors.num > 0;
        SampleDescriptors(p.descriptors, quota,
                          options.codebook.seed ^ encoding::Fnv1a64(p.path.data(), p.path.size()),
                          &per_image[p.task_index]);
        const size_t bytes = p.descriptors.values.size() * sizeof(float) +
                             p.descriptors.keypoints.size() * sizeof(Keypoint) + p.features.size();
        if (cached_bytes + bytes <= options.training_cache_bytes) {
          cached_bytes += bytes;
          std::string path = p.path;
          out.reusable.emplace(std::move(path), std::move(p));
        }
      });
  for (auto& v : per_image) {  // in sample order, so k-means sees a fixed order
    out.descriptors.insert(out.descriptors.end(), v.begin(), v.end());
    std::vector<float>().swap(v);
  }
  out.num_descriptors = static_cast<int64_t>(out.descriptors.size()) / dim;
  return out;
}

Codebook TrainCodebook(const TrainingSample& sample, size_t num_sampled, const std::string& root,
                       const ModelOptions& options, int threads, IndexSummary* summary,
                       IndexObserver* observer) {
  const int k = options.codebook.num_clusters;
  if (sample.num_descriptors < k) {
    for (const FileError& e : sample.errors) ReportSkipped(e, summary, observer);
    throw std::runtime_error("cannot learn a codebook of " + std::to_string(k) + " clusters from " +
                             std::to_string(sample.num_descriptors) + " descriptors found in " +
                             std::to_string(num_sampled) + " sampled images of " + root +
                             (sample.errors.empty()
                                  ? std::string()
                                  : " (" + std::to_string(sample.errors.size()) +
                                        " of them could not be used, see above)") +
                             "; add images or lower --clusters");
  }
  if (observer)
    observer->OnPhase("k-means: " + std::to_string(k) + " clusters from " +
                      std::to_string(sample.num_descriptors) + " descriptors");
  const auto t = Clock::now();
  SetLibraryThreads(threads);
  Codebook codebook = Codebook::Train(sample.descriptors.data(), sample.num_descriptors,
                                      DescriptorDim(options.encoding.extractor), options.codebook);
  summary->stages.train = SecondsBetween(t, Clock::now());
  return codebook;
}

// The training images the PCA learns from: those whose descriptors are still
// held, then, if they are fewer than max(--pca-min-images, 2 x --pca-dim),
// others of the sample, to be extracted again.
std::vector<FileTask> ImagesToExtractAgain(const std::vector<FileTask>& sample,
                                           const TrainingSample& training, int64_t held,
                                           int64_t want) {
  std::set<std::string> failed;
  for (const FileError& e : training.errors) failed.insert(e.path);
  std::vector<FileTask> again;
  for (const FileTask& t : sample)
    if (held + static_cast<int64_t>(again.size()) < want && !training.reusable.count(t.path) &&
        !failed.count(t.path))
      again.push_back(t);
  return again;
}

// PCA(-whitening) learned from the VLAD vectors of the training images
// (always encoded on the CPU: a one-off of at most a few hundred images),
// from their exact descriptors, as the vectors a database with a projection
// stores are. Its matrix's bits are chosen for `collection_images` (the files
// the database is created with) when options ask for automatic bits. nullopt
// when the sample is too small or the run was cancelled. With `all_vlad`,
// every training image's VLAD vector is encoded (the PCA still learns from
// the same ones as without it) and left there, row-major, for the search
// quantizer.
std::optional<ProjectionRecord> LearnSampleProjection(
    const Codebook& codebook, const std::vector<FileTask>& sample, const TrainingSample& training,
    int64_t collection_images, const ModelOptions& options, const ImageFileLimits& limits,
    Backend backend, int threads, IndexObserver* observer, const std::atomic<bool>* cancel,
    std::vector<float>* all_vlad) {
  auto encoder = CreateVladEncoder(Backend::kCpu, codebook, options.encoding.vlad);
  const int64_t vlad_dim = encoder->vlad_dim();
  ProjectionOptions projection = options.projection;
  projection.component_bits = ComponentBitsFor(projection, collection_images, vlad_dim);
  const int64_t want = std::min<int64_t>(
      training.images_with_features,
      std::max<int64_t>(options.projection.min_images, 2 * int64_t{options.projection.out_dim}));
  std::vector<const ProcessedFile*> held;
  for (const auto& entry : training.reusable)
    if (entry.second.descriptors.num > 0) held.push_back(&entry.second);
  std::sort(held.begin(), held.end(),
            [](const ProcessedFile* a, const ProcessedFile* b) { return a->path < b->path; });
  const std::vector<FileTask> again =
      ImagesToExtractAgain(sample, training, static_cast<int64_t>(held.size()), want);
  if (observer && ResolveBackend(backend) == Backend::kCuda)
    observer->OnPhase("PCA sample encoded on the CPU (a one-off of at most " +
                      std::to_string(want) + " images)");
  if (observer)
    observer->OnPhase("PCA: " + std::to_string(options.projection.out_dim) + " components at " +
                      std::to_string(projection.component_bits) +
                      (options.projection.component_bits == 0
                           ? " bits (for " + std::to_string(collection_images) + " files)"
                           : std::string(" bits")) +
                      " from the VLAD vectors of " + std::to_string(held.size() + again.size()) +
                      " training images" +
                      (again.empty() ? std::string()
                                     : " (" + std::to_string(again.size()) + " extracted again)"));
  std::vector<float> vectors;
  vectors.reserve((held.size() + again.size()) * static_cast<size_t>(vlad_dim));
  int64_t num = 0;
  auto add = [&](const Descriptors& d) {
    if (d.num == 0) return;
    vectors.resize(static_cast<size_t>((num + 1) * vlad_dim));
    const int64_t offsets[2] = {0, d.num};
    encoder->Encode(d.values.data(), offsets, 1, vectors.data() + num * vlad_dim);
    ++num;
  };
  for (const ProcessedFile* p : held) add(p->descriptors);
  ProcessFiles(again, threads, TrainingProcessing(options, limits), cancel, [&](ProcessedFile&& p) {
    if (!p.error) add(p.descriptors);
  });
  const int64_t pca_num = num;  // the PCA learns from these, with or without all_vlad
  if (all_vlad && !(cancel && cancel->load())) {
    // The other training images after them (in completion order, which only
    // the quantizer sees): the PCA's input stays the same set.
    std::set<std::string> taken;
    for (const FileTask& t : again) taken.insert(t.path);
    std::vector<FileTask> more;
    for (FileTask& t : ImagesToExtractAgain(sample, training, static_cast<int64_t>(held.size()),
                                            training.images_with_features))
      if (!taken.count(t.path)) more.push_back(std::move(t));
    ProcessFiles(more, threads, TrainingProcessing(options, limits), cancel,
                 [&](ProcessedFile&& p) {
                   if (!p.error) add(p.descriptors);
                 });
  }
  if ((cancel && cancel->load()) || !ShouldLearnProjection(options.projection, pca_num))
    return std::nullopt;
  ProjectionRecord learned = LearnProjection(vectors.data(), pca_num, vlad_dim, projection);
  if (all_vlad) *all_vlad = std::move(vectors);
  return learned;
}

}  // namespace

std::vector<size_t> SeededIndices(size_t n, uint64_t seed, int max_items) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  order.resize(std::min(order.size(), static_cast<size_t>(std::max(0, max_items))));
  std::sort(order.begin(), order.end());
  return order;
}

int64_t DescriptorQuota(const CodebookOptions& codebook, int64_t num_images) {
  const int64_t target = int64_t{codebook.num_clusters} * codebook.max_points_per_cluster;
  return std::max<int64_t>(64, (4 * target + num_images - 1) / std::max<int64_t>(1, num_images));
}

void SampleDescriptors(const Descriptors& d, int64_t quota, uint64_t seed,
                       std::vector<float>* out) {
  if (d.num <= quota) {
    out->insert(out->end(), d.values.begin(), d.values.end());
    return;
  }
  std::vector<int64_t> idx(d.num);
  for (int64_t i = 0; i < d.num; ++i) idx[i] = i;
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < quota; ++i) {
    std::uniform_int_distribution<int64_t> pick(i, d.num - 1);
    std::swap(idx[i], idx[pick(rng)]);
  }
  std::sort(idx.begin(), idx.begin() + quota);
  for (int64_t i = 0; i < quota; ++i)
    out->insert(out->end(), d.values.begin() + idx[i] * d.dim,
                d.values.begin() + (idx[i] + 1) * d.dim);
}

std::vector<FileTask> SeededSample(const std::vector<std::string>& files,
                                   const ModelOptions& options) {
  std::vector<FileTask> sample;
  for (size_t i : SeededIndices(files.size(), options.codebook.seed, options.train_images))
    sample.push_back(FileTask{files[i], std::nullopt});
  return sample;
}

TrainedDatabase TrainAndCreate(const std::vector<std::string>& files, const std::string& root,
                               const std::string& db_path, const ModelOptions& options,
                               const ImageFileLimits& limits, Backend backend, int threads,
                               IndexSummary* summary, IndexObserver* observer,
                               const std::atomic<bool>* cancel,
                               const SearchQuantizerTrainer& search_quantizer) {
  const std::vector<FileTask> sample = SeededSample(files, options);
  if (observer) {
    observer->OnPhase("sampling " + std::to_string(sample.size()) +
                      " images to learn the codebook");
    observer->OnStart(static_cast<int64_t>(sample.size()));
  }
  TrainedDatabase out;
  TrainingSample training =
      CollectTrainingSample(sample, options, limits, threads, observer, cancel);
  if (cancel && cancel->load()) return out;
  const Codebook codebook =
      TrainCodebook(training, sample.size(), root, options, threads, summary, observer);
  std::optional<DescriptorQuantizer> quantizer;
  uint32_t schema = NewSchema(options);
  if (LayoutOf(schema).compact && training.num_descriptors < kQuantizerMinDescriptors) {
    schema = kFullFeaturesSchemaVersion;  // hashes taken so far are the same in both
    if (observer)
      observer->OnPhase("older layout (schema 2): " + std::to_string(training.num_descriptors) +
                        " descriptors are too few to learn the descriptor quantizer from");
  }
  if (LayoutOf(schema).compact) {
    QuantizerOptions q = options.quantizer;
    q.seed = options.codebook.seed;
    if (observer)
      observer->OnPhase("descriptor quantizer: " + std::to_string(q.bytes) +
                        " bytes per descriptor");
    const auto t = Clock::now();
    quantizer = DescriptorQuantizer::Train(training.descriptors.data(), training.num_descriptors,
                                           DescriptorDim(options.encoding.extractor), q, threads);
    summary->stages.quantizer = SecondsBetween(t, Clock::now());
  }
  // The word index's vocabulary, part of the model: from the same sample,
  // at most max(512, 32 x sub-words) descriptors per codebook word on
  // average, taken at an even stride (about 1 s for the default 8,192 words).
  std::string vocabulary;
  {
    const auto t = Clock::now();
    WordVocabularyOptions w = options.words;
    w.seed = options.codebook.seed;
    const int dim = codebook.dim();
    const int64_t cap = int64_t{codebook.num_clusters()} * std::max(512, 32 * w.fine_per_word);
    const int64_t step = (training.num_descriptors + cap - 1) / cap;
    std::vector<float> strided;
    const float* rows = training.descriptors.data();
    int64_t n = training.num_descriptors;
    if (step > 1) {
      for (int64_t i = 0; i < training.num_descriptors; i += step)
        strided.insert(strided.end(), rows + i * dim, rows + (i + 1) * dim);
      rows = strided.data();
      n = static_cast<int64_t>(strided.size()) / dim;
    }
    if (observer)
      observer->OnPhase("word vocabulary: " + std::to_string(codebook.num_clusters()) + " x " +
                        std::to_string(w.fine_per_word) + " words from " + std::to_string(n) +
                        " descriptors");
    SetLibraryThreads(threads);
    vocabulary = WordVocabulary::Train(codebook, rows, n, w).Serialize();
    summary->stages.words = SecondsBetween(t, Clock::now());
  }
  std::vector<float>().swap(training.descriptors);  // k-means is done with them
  std::optional<ProjectionRecord> projection;
  const bool learn = ShouldLearnProjection(options.projection, training.images_with_features);
  if (options.projection.out_dim > 0 && !learn && observer)
    observer->OnPhase("no PCA: " + std::to_string(training.images_with_features) +
                      " training images with features, fewer than --pca-min-images " +
                      std::to_string(options.projection.min_images) +
                      "; search uses the full VLAD vectors until the collection reaches it");
  std::vector<float> sample_vlad;
  if (learn) {
    const auto t = Clock::now();
    projection = LearnSampleProjection(
        codebook, sample, training, static_cast<int64_t>(files.size()), options, limits, backend,
        threads, observer, cancel, search_quantizer ? &sample_vlad : nullptr);
    if (cancel && cancel->load()) return out;
    summary->stages.pca = SecondsBetween(t, Clock::now());
  }
  // The search vectors' quantizer, part of the model when asked for: from
  // every training image's search vector (the projection applied).
  std::string search_lists;
  if (search_quantizer && projection) {
    const SearchProjection apply = SearchProjection::FromRecord(&*projection, projection->in_dim);
    const int64_t n = static_cast<int64_t>(sample_vlad.size()) / apply.in_dim();
    std::vector<float> vectors(static_cast<size_t>(n * apply.out_dim()));
    apply.Apply(sample_vlad.data(), n, vectors.data());
    if (observer)
      observer->OnPhase("search quantizer: inverted lists from the search vectors of " +
                        std::to_string(n) + " training images");
    search_lists = search_quantizer(vectors.data(), n, apply.out_dim());
  }
  out.store =
      Store::Create(db_path, MakeModelRecord(options.encoding, codebook, options.codebook.seed),
                    projection ? &*projection : nullptr, schema,
                    quantizer ? quantizer->Serialize() : std::string(), vocabulary, search_lists);
  out.reusable = std::move(training.reusable);
  return out;
}

}  // namespace lookalike
