#include "indexer/pipeline.h"

#include <chrono>
#include <opencv2/core.hpp>
#include <stdexcept>
#include <unordered_map>

#include "indexer/encode_commit.h"
#include "indexer/file_processing.h"
#include "indexer/file_walker.h"
#include "indexer/model_training.h"
#include "indexer/projection_growth.h"
#include "indexer/update_plan.h"
#include "storage/store.h"
#include "util/threads.h"
#include "util/timing.h"

namespace lookalike {

namespace {

using Clock = SteadyClock;

// Opens the database, or creates it under the creation lock by training the
// model (the training images' results are kept in *reusable for encoding).
// Null when training was cancelled.
// The model source of --model-from, opened read-only.
std::unique_ptr<Store> OpenModelSource(const IndexOptions& options) {
  try {
    return Store::Open(AbsolutePath(options.model_from), Store::Mode::kReadOnly);
  } catch (const StoreError& e) {
    throw StoreError(e.kind(), std::string("--model-from: ") + e.what());
  }
}

// A new database at `db_path` with the model of `base` (no training).
std::unique_ptr<Store> CreateFromModel(const Store& base, const std::string& db_path) {
  const auto projection = base.GetProjection();
  const auto quantizer = base.GetDescriptorQuantizer();
  const auto words = base.GetModelWordVocabulary();
  const auto lists = base.GetModelSearchQuantizer();
  return Store::Create(db_path, base.model(), projection ? &*projection : nullptr,
                       base.schema_version(), quantizer ? *quantizer : std::string(),
                       words ? *words : std::string(), lists ? *lists : std::string());
}

// Opens `db_path` and checks it has the model of `base`.
// Checked on a read-only open first, so a refused database is left untouched.
std::unique_ptr<Store> OpenWithModelOf(const Store& base, const std::string& db_path) {
  Store::CheckSameModel({&base, Store::Open(db_path, Store::Mode::kReadOnly).get()});
  return Store::Open(db_path, Store::Mode::kReadWrite);
}

std::unique_ptr<Store> OpenOrCreate(const WalkResult& walk, const std::string& root,
                                    const std::string& db_path, const IndexOptions& options,
                                    int threads, IndexSummary* summary, IndexObserver* observer,
                                    const std::atomic<bool>* cancel,
                                    std::unordered_map<std::string, ProcessedFile>* reusable) {
  std::unique_ptr<Store> base;
  if (!options.model_from.empty()) base = OpenModelSource(options);
  if (!Store::IsDatabase(db_path)) {
    Store::CheckCanCreate(db_path);
    CreationLock lock(db_path);
    // Another process may have created it while we waited for the lock.
    if (!Store::IsDatabase(db_path)) {
      if (base) {
        if (observer) observer->OnPhase("copying the model of " + base->path());
        summary->created = true;
        return CreateFromModel(*base, db_path);
      }
      TrainedDatabase trained =
          TrainAndCreate(walk.files, root, db_path, options.model, options.limits, options.backend,
                         threads, summary, observer, cancel);
      // A run cancelled while training created nothing.
      summary->created = trained.store != nullptr;
      *reusable = std::move(trained.reusable);
      return std::move(trained.store);  // the store's own lock protects it from here on
    }
  }
  if (base) return OpenWithModelOf(*base, db_path);
  return Store::Open(db_path, Store::Mode::kReadWrite);
}

// The "encode and commit" phase: reused training results first, then every
// planned file through the workers.
void EncodeAndCommit(UpdatePlan* plan, Store* store, const IndexOptions& options, int threads,
                     Backend backend, IndexSummary* summary, IndexObserver* observer,
                     const std::atomic<bool>* cancel) {
  const EncodingSettings settings = SettingsFromModel(store->model());
  auto encoder = CreateVladEncoder(backend, CodebookFromModel(store->model()), settings.vlad);
  const int64_t total = plan->num_to_encode();
  if (observer) {
    observer->OnPhase("encoding " + std::to_string(total) + " images");
    observer->OnStart(total);
  }
  // A compact database stores quantised descriptors and the projected vector.
  std::optional<DescriptorQuantizer> quantizer;
  if (const auto blob = store->GetDescriptorQuantizer())
    quantizer = DescriptorQuantizer::Deserialize(*blob);
  const SearchProjection projection = SearchProjection::FromStore(*store);
  // Stored vectors are encoded from the exact descriptors; where none is
  // stored, from the quantised ones search will derive it from.
  const bool derivable = store->vector_dim() == 0;
  BatchCommitter committer(store, encoder.get(), quantizer ? &*quantizer : nullptr, &projection,
                           options.batch_images, summary, observer, total);
  // The training sample's results were extracted before the quantizer
  // existed: compacted here on every thread, not on the committing one.
  if (quantizer) CompactAll(*quantizer, derivable, threads, &plan->ready);
  for (ProcessedFile& p : plan->ready) committer.Add(std::move(p));
  plan->ready.clear();
  FileProcessing how;
  how.max_side = settings.max_side;
  how.extractor = settings.extractor;
  how.limits = options.limits;
  how.hash_kind = store->hash_kind();
  how.thumbnails = store->keeps_thumbnails();
  how.quantizer = quantizer ? &*quantizer : nullptr;
  how.derivable = derivable;
  ProcessFiles(plan->tasks, threads, how, cancel,
               [&](ProcessedFile&& p) { committer.Add(std::move(p)); });
  committer.Flush();
  if (observer && encoder->num_cpu_fallback_images() > 0)
    observer->OnPhase(std::to_string(encoder->num_cpu_fallback_images()) +
                      " images had more descriptors than the GPU buffers hold and were "
                      "encoded on the CPU");
}

}  // namespace

IndexSummary TrainModel(const IndexOptions& options, IndexObserver* observer,
                        const std::atomic<bool>* cancel,
                        const SearchQuantizerTrainer& search_quantizer) {
  options.Validate();
  const auto start = Clock::now();
  IndexSummary summary;
  const int threads = ResolveThreads(options.threads);
  summary.threads = threads;
  summary.backend = BackendName(ResolveBackend(options.backend));
  const std::string root = AbsolutePath(options.image_dir);
  const std::string db_path = AbsolutePath(options.db_path);
  cv::setNumThreads(1);
  if (!Store::IsDatabase(db_path)) {
    Store::CheckCanCreate(db_path);
    if (observer) observer->OnPhase("listing " + root);
    const WalkResult walk = ListImageFiles(root, {db_path});
    summary.listed = static_cast<int64_t>(walk.files.size());
    summary.ignored = walk.ignored;
    CreationLock lock(db_path);
    if (!Store::IsDatabase(db_path)) {
      TrainedDatabase trained =
          TrainAndCreate(walk.files, root, db_path, options.model, options.limits, options.backend,
                         threads, &summary, observer, cancel, search_quantizer);
      summary.created = trained.store != nullptr;
      summary.cancelled = !summary.created;
    }
  }
  summary.seconds = SecondsBetween(start, Clock::now());
  return summary;
}

IndexSummary BuildIndex(const IndexOptions& options, IndexObserver* observer,
                        const std::atomic<bool>* cancel) {
  options.Validate();
  const auto start = Clock::now();
  IndexSummary summary;
  const int threads = ResolveThreads(options.threads);
  summary.threads = threads;
  const std::string root = AbsolutePath(options.image_dir);
  const std::string db_path = AbsolutePath(options.db_path);
  // Our threads parallelise across images; OpenCV's own pool would multiply.
  cv::setNumThreads(1);
  const Backend backend = ResolveBackend(options.backend);
  summary.backend = BackendName(backend);

  if (observer) observer->OnPhase("listing " + root);
  WalkResult walk = ListImageFiles(root, {db_path});
  if (options.num_shards > 0) {
    walk.files = FilesOfShard(walk.files, root, options.shard_index, options.num_shards);
    if (observer)
      observer->OnPhase("shard " + std::to_string(options.shard_index) + "/" +
                        std::to_string(options.num_shards) + ": " +
                        std::to_string(walk.files.size()) + " files");
  }
  summary.listed = static_cast<int64_t>(walk.files.size());
  summary.ignored = walk.ignored;
  for (const FileError& e : walk.errors) ReportSkipped(e, &summary, observer);

  std::unordered_map<std::string, ProcessedFile> reusable;
  std::unique_ptr<Store> store =
      OpenOrCreate(walk, root, db_path, options, threads, &summary, observer, cancel, &reusable);
  if (!store) {  // cancelled while training
    summary.cancelled = true;
    summary.seconds = SecondsBetween(start, Clock::now());
    return summary;
  }
  SetLibraryThreads(1);

  UpdatePlan plan = PlanUpdate(walk, root, *store, &reusable);
  summary.unchanged = plan.unchanged;
  for (const ImageRecord& r : plan.gone) {
    store->RemoveImage(r);
    ++summary.removed;
  }
  EncodeAndCommit(&plan, store.get(), options, threads, backend, &summary, observer, cancel);
  summary.cancelled = cancel && cancel->load();
  // A collection that has grown enough gets its projection now, or a matrix
  // with more bits (indexer/projection_growth.h). Not a shard's
  // run: shards share their model with the database they merge into.
  if (!summary.cancelled && options.model_from.empty()) {
    const auto t = Clock::now();
    SetLibraryThreads(threads);  // the sample's Gram matrix and the projection
    const GrownProjection grown = LearnProjectionIfGrown(store.get(), options.model.projection,
                                                         options.model.train_images, cancel);
    SetLibraryThreads(1);
    if (grown.learned) {
      summary.projection_learned = grown.components;
      summary.projection_bits = grown.bits;
      summary.projection_replaced_bits = grown.old_bits;
      summary.stages.pca += SecondsBetween(t, Clock::now());
      if (observer && grown.replaced)
        observer->OnPhase("PCA: learned again at " + std::to_string(grown.bits) + " bits (was " +
                          std::to_string(grown.old_bits) +
                          "), the collection having grown, from the stored features of " +
                          std::to_string(grown.sample) +
                          " images; every search vector replaced, the search index rebuilt");
      else if (observer)
        observer->OnPhase(
            "PCA: " + std::to_string(grown.components) + " components at " +
            std::to_string(grown.bits) + " bits learned from the stored features of " +
            std::to_string(grown.sample) + " images (the collection has reached --pca-min-images " +
            std::to_string(options.model.projection.min_images) + "); search now reads one " +
            std::to_string(grown.components) + "-d vector per image");
    }
    summary.cancelled = cancel && cancel->load();
  }
  summary.seconds = SecondsBetween(start, Clock::now());
  return summary;
}

}  // namespace lookalike
