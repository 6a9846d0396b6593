#include "indexer/pipeline.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <opencv2/core.hpp>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "indexer/extractor.h"
#include "indexer/file_walker.h"
#include "indexer/local_features.h"
#include "storage/encoding.h"
#include "storage/store.h"
#include "util/threads.h"

namespace lookalike {

void IndexOptions::Validate() const {
  if (image_dir.empty()) throw std::invalid_argument("image folder must be given");
  if (db_path.empty()) throw std::invalid_argument("--db must be given");
  encoding.Validate();
  codebook.Validate();
  projection.Validate();
  if (train_images < 1)
    throw std::invalid_argument("train images must be >= 1, got " + std::to_string(train_images));
  if (threads < 0 || threads > 1024)
    throw std::invalid_argument("threads must be in 0..1024 (0 = all cores), got " +
                                std::to_string(threads));
  if (!(limits.max_seconds > 0))
    throw std::invalid_argument("seconds per file must be > 0, got " +
                                std::to_string(limits.max_seconds));
  if (batch_images < 1 || batch_images > 4096)
    throw std::invalid_argument("batch images must be in 1..4096, got " +
                                std::to_string(batch_images));
}

int64_t IndexSummary::total_skipped() const {
  int64_t n = 0;
  for (const auto& kv : skipped) n += kv.second;
  return n;
}

namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Task {
  std::string path;
  std::optional<ImageRecord> existing;
};

// One file after reading, decoding and extraction (or its error).
struct Processed {
  size_t task_index = 0;
  std::string path;
  std::optional<ImageRecord> existing;
  std::optional<FileError> error;
  bool touched_only = false;  // same content as the stored record
  ImageRecord record;
  Descriptors descriptors;
  std::string features;  // EncodeLocalFeatures blob, empty without keypoints
  double read_decode_seconds = 0;
  double read_seconds = 0;    // part of read_decode_seconds
  double resize_seconds = 0;  // part of read_decode_seconds
  double colour_seconds = 0;  // part of read_decode_seconds (colour histogram)
  double extract_seconds = 0;
};

// `hash_kind` is the database's (Store::hash_kind()): content hashes are
// compared with, and stored beside, hashes of that kind only.
Processed ProcessFile(const Task& task, size_t index, int max_side,
                      const ImageFileLimits& limits, HashKind hash_kind,
                      DescriptorExtractor* extractor) {
  Processed p;
  p.task_index = index;
  p.path = task.path;
  p.existing = task.existing;
  const auto t0 = Clock::now();
  ReadResult read = ReadImageBytes(task.path, limits);
  if (read.error) {
    p.error = std::move(read.error);
    return p;
  }
  p.record.path = task.path;
  p.record.size_bytes = read.stat.size_bytes;
  p.record.mtime_ns = read.stat.mtime_ns;
  p.record.content_hash = Hash64(hash_kind, read.bytes.data(), read.bytes.size());
  const auto t_read = Clock::now();
  if (task.existing && task.existing->content_hash == p.record.content_hash &&
      task.existing->size_bytes == p.record.size_bytes) {
    p.touched_only = true;
    return p;
  }
  LoadResult loaded = DecodeImageBytes(task.path, read.bytes, max_side, limits);
  read.bytes = std::string();
  const auto t1 = Clock::now();
  p.read_decode_seconds = Seconds(t0, t1);
  p.read_seconds = Seconds(t0, t_read);
  if (loaded.image) {
    p.resize_seconds = loaded.image->resize_seconds;
    p.colour_seconds = loaded.image->colour_seconds;
  }
  if (loaded.error) {
    p.error = std::move(loaded.error);
    return p;
  }
  p.record.width = loaded.image->original_width;
  p.record.height = loaded.image->original_height;
  p.record.colour = std::move(loaded.image->colour);
  p.descriptors = extractor->Extract(loaded.image->gray);
  p.record.num_descriptors = static_cast<uint32_t>(p.descriptors.num);
  if (p.descriptors.num > 0)
    p.features = EncodeLocalFeatures(p.descriptors,
                                     static_cast<uint32_t>(loaded.image->gray.width),
                                     static_cast<uint32_t>(loaded.image->gray.height));
  const auto t2 = Clock::now();
  p.extract_seconds = Seconds(t1, t2);
  if (Seconds(t0, t2) > limits.max_seconds) {
    p.error = FileError{FileErrorCode::kTimeout, task.path,
                        "reading, decoding and extraction took " +
                            std::to_string(Seconds(t0, t2)) + " s, more than the budget of " +
                            std::to_string(limits.max_seconds) + " s"};
    p.descriptors = Descriptors();
    p.features.clear();
  }
  return p;
}

// Runs ProcessFile over tasks on `threads` workers and hands results to
// `consume` on the calling thread, in completion order. At most `capacity`
// results wait in memory, so descriptors of a whole collection are never
// held at once.
void RunWorkers(const std::vector<Task>& tasks, int threads, int max_side,
                const ExtractorOptions& extractor_options, const ImageFileLimits& limits,
                HashKind hash_kind, const std::atomic<bool>* cancel,
                const std::function<void(Processed&&)>& consume) {
  if (tasks.empty()) return;
  const size_t capacity = static_cast<size_t>(threads) * 4;
  std::mutex mu;
  std::condition_variable not_full, not_empty;
  std::deque<Processed> queue;
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  int running = threads;
  std::exception_ptr worker_error;

  auto worker = [&]() {
    try {
      auto extractor = CreateExtractor(extractor_options);
      for (;;) {
        if (stop.load() || (cancel && cancel->load())) break;
        const size_t i = next.fetch_add(1);
        if (i >= tasks.size()) break;
        Processed p = ProcessFile(tasks[i], i, max_side, limits, hash_kind, extractor.get());
        std::unique_lock<std::mutex> lock(mu);
        not_full.wait(lock, [&] { return queue.size() < capacity || stop.load(); });
        if (stop.load()) break;
        queue.push_back(std::move(p));
        not_empty.notify_one();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!worker_error) worker_error = std::current_exception();
      stop = true;
    }
    std::lock_guard<std::mutex> lock(mu);
    --running;
    not_empty.notify_all();
    not_full.notify_all();
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  std::exception_ptr consumer_error;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu);
    not_empty.wait(lock, [&] { return !queue.empty() || running == 0; });
    if (queue.empty()) break;
    Processed p = std::move(queue.front());
    queue.pop_front();
    not_full.notify_one();
    lock.unlock();
    try {
      consume(std::move(p));
    } catch (...) {
      consumer_error = std::current_exception();
      stop = true;
      std::lock_guard<std::mutex> relock(mu);
      not_full.notify_all();
      break;
    }
  }
  for (auto& t : pool) t.join();
  if (consumer_error) std::rethrow_exception(consumer_error);
  if (worker_error) std::rethrow_exception(worker_error);
}

// Encodes batches of processed images and commits each image atomically.
class BatchCommitter {
 public:
  BatchCommitter(Store* store, VladEncoder* encoder, int batch_images,
                 IndexSummary* summary, IndexObserver* observer, int64_t total)
      : store_(store), encoder_(encoder), batch_images_(batch_images),
        summary_(summary), observer_(observer), total_(total) {}

  void Add(Processed&& p) {
    summary_->stages.read_decode += p.read_decode_seconds - p.colour_seconds;
    summary_->stages.read += p.read_seconds;
    summary_->stages.resize += p.resize_seconds;
    // The colour histogram is computed inside the decode call but is a
    // descriptor: it counts as extraction.
    summary_->stages.decode +=
        p.read_decode_seconds - p.read_seconds - p.resize_seconds - p.colour_seconds;
    summary_->stages.extract += p.extract_seconds + p.colour_seconds;
    if (p.error) {
      Report(*p.error);
      if (p.existing && p.error->code == FileErrorCode::kVanished) {
        store_->RemoveImage(*p.existing);
        ++summary_->removed;
      }
      Progress();
      return;
    }
    if (p.touched_only) {
      ImageRecord updated = *p.existing;
      updated.mtime_ns = p.record.mtime_ns;
      store_->UpdateRecord(updated);
      ++summary_->touched;
      Progress();
      return;
    }
    batch_descriptors_ += p.descriptors.num;
    batch_.push_back(std::move(p));
    // Cap by descriptors as well as images so device/host buffers stay bounded.
    if (static_cast<int>(batch_.size()) >= batch_images_ || batch_descriptors_ >= (1 << 19))
      Flush();
  }

  void Flush() {
    if (batch_.empty()) return;
    const auto t0 = Clock::now();
    const int dim = encoder_->dim();
    offsets_.assign(1, 0);
    descriptors_.clear();
    descriptors_.reserve(static_cast<size_t>(batch_descriptors_) * dim);
    for (const Processed& p : batch_) {
      descriptors_.insert(descriptors_.end(), p.descriptors.values.begin(),
                          p.descriptors.values.end());
      offsets_.push_back(offsets_.back() + p.descriptors.num);
    }
    vlad_.assign(batch_.size() * static_cast<size_t>(encoder_->vlad_dim()), 0.0f);
    const double assign_before = encoder_->assign_seconds();
    encoder_->Encode(descriptors_.data(), offsets_.data(),
                     static_cast<int64_t>(batch_.size()), vlad_.data());
    const auto t1 = Clock::now();
    summary_->stages.encode += Seconds(t0, t1);
    const double assign = encoder_->assign_seconds() - assign_before;
    summary_->stages.assign += assign;
    summary_->stages.aggregate += Seconds(t0, t1) - assign;
    for (size_t i = 0; i < batch_.size(); ++i) {
      Processed& p = batch_[i];
      ImageRecord record = p.record;
      record.id = p.existing ? p.existing->id : 0;
      record.status = p.descriptors.num == 0 ? ImageStatus::kNoFeatures : ImageStatus::kOk;
      store_->PutImage(&record, vlad_.data() + i * encoder_->vlad_dim(), p.features);
      ++summary_->indexed;
      if (observer_) observer_->OnCommitted(record);
      if (p.descriptors.num == 0) {
        ++summary_->no_features;
        Report(FileError{FileErrorCode::kNoFeatures, p.path,
                         "no keypoints found (flat or tiny image); stored as a zero vector "
                         "that matches nothing"},
               /*count_as_skipped=*/false);
      }
      Progress();
    }
    summary_->stages.store += Seconds(t1, Clock::now());
    batch_.clear();
    batch_descriptors_ = 0;
  }

 private:
  void Report(const FileError& e, bool count_as_skipped = true) {
    if (count_as_skipped) ++summary_->skipped[FileErrorCodeName(e.code)];
    if (observer_) observer_->OnFileError(e);
  }
  void Progress() {
    ++done_;
    if (observer_) observer_->OnProgress(done_, total_);
  }

  Store* store_;
  VladEncoder* encoder_;
  int batch_images_;
  IndexSummary* summary_;
  IndexObserver* observer_;
  int64_t total_;
  int64_t done_ = 0;
  std::vector<Processed> batch_;
  int64_t batch_descriptors_ = 0;
  std::vector<float> descriptors_;
  std::vector<int64_t> offsets_;
  std::vector<float> vlad_;
};

// Seeded subset of an image's descriptors for codebook training.
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

}  // namespace

IndexSummary BuildIndex(const IndexOptions& options, IndexObserver* observer,
                        const std::atomic<bool>* cancel) {
  options.Validate();
  const auto start = Clock::now();
  IndexSummary summary;
  const int threads = options.threads > 0 ? options.threads : DefaultThreads();
  summary.threads = threads;
  const std::string root = AbsolutePath(options.image_dir);
  const std::string db_path = AbsolutePath(options.db_path);
  // Our threads parallelise across images; OpenCV's own pool would multiply.
  cv::setNumThreads(1);
  const Backend backend = ResolveBackend(options.backend);
  summary.backend = BackendName(backend);

  auto report = [&](const FileError& e) {
    ++summary.skipped[FileErrorCodeName(e.code)];
    if (observer) observer->OnFileError(e);
  };

  if (observer) observer->OnPhase("listing " + root);
  WalkResult walk = ListImageFiles(root, {db_path});
  summary.listed = static_cast<int64_t>(walk.files.size());
  summary.ignored = walk.ignored;
  for (const FileError& e : walk.errors) report(e);

  std::unique_ptr<Store> store;
  std::unordered_map<std::string, Processed> cached;  // training images, reused
  std::unique_ptr<CreationLock> creation_lock;
  // Content hashes of the training images (reused for encoding) are taken
  // before the database exists, with the hash of the schema it is created in.
  const uint32_t new_schema = kSchemaVersion;
  const HashKind new_hash_kind = HashKindForSchema(new_schema);
  bool exists = Store::IsDatabase(db_path);
  if (!exists) {
    Store::CheckCanCreate(db_path);
    creation_lock = std::make_unique<CreationLock>(db_path);
    exists = Store::IsDatabase(db_path);  // another process may just have created it
  }
  if (exists) {
    store = Store::Open(db_path, Store::Mode::kReadWrite);
    creation_lock.reset();
  } else {
    summary.created = true;
    // Learn the codebook on a seeded sample of the folder.
    std::vector<Task> sample;
    {
      std::vector<size_t> order(walk.files.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::mt19937_64 rng(options.codebook.seed);
      std::shuffle(order.begin(), order.end(), rng);
      order.resize(std::min(order.size(), static_cast<size_t>(options.train_images)));
      std::sort(order.begin(), order.end());
      for (size_t i : order) sample.push_back(Task{walk.files[i], std::nullopt});
    }
    if (observer) {
      observer->OnPhase("sampling " + std::to_string(sample.size()) +
                        " images to learn the codebook");
      observer->OnStart(static_cast<int64_t>(sample.size()));
    }
    int64_t sampled = 0;
    int64_t sample_with_features = 0;
    const int64_t target = int64_t{options.codebook.num_clusters} *
                           options.codebook.max_points_per_cluster;
    const int64_t quota = std::max<int64_t>(
        64, (4 * target + static_cast<int64_t>(sample.size()) - 1) /
                std::max<int64_t>(1, static_cast<int64_t>(sample.size())));
    std::vector<std::vector<float>> per_image(sample.size());
    size_t cached_bytes = 0;
    std::vector<FileError> training_errors;
    RunWorkers(sample, threads, options.encoding.max_side, options.encoding.extractor,
               options.limits, new_hash_kind, cancel, [&](Processed&& p) {
                 if (observer) observer->OnProgress(++sampled, static_cast<int64_t>(sample.size()));
                 if (p.error) {  // reported in the encoding pass
                   training_errors.push_back(*p.error);
                   return;
                 }
                 sample_with_features += p.descriptors.num > 0;
                 SampleDescriptors(p.descriptors, quota,
                                   options.codebook.seed ^ encoding::Fnv1a64(p.path.data(), p.path.size()),
                                   &per_image[p.task_index]);
                 const size_t bytes = p.descriptors.values.size() * sizeof(float) +
                                      p.descriptors.keypoints.size() * sizeof(Keypoint) +
                                      p.features.size();
                 if (cached_bytes + bytes <= options.training_cache_bytes) {
                   cached_bytes += bytes;
                   std::string path = p.path;
                   cached.emplace(std::move(path), std::move(p));
                 }
               });
    if (cancel && cancel->load()) {
      summary.cancelled = true;
      summary.seconds = Seconds(start, Clock::now());
      return summary;
    }
    std::vector<float> training;
    for (auto& v : per_image) {
      training.insert(training.end(), v.begin(), v.end());
      std::vector<float>().swap(v);
    }
    const int dim = 128;
    const int64_t num_training = static_cast<int64_t>(training.size()) / dim;
    if (num_training < options.codebook.num_clusters) {
      for (const FileError& e : training_errors) report(e);
      throw std::runtime_error(
          "cannot learn a codebook of " + std::to_string(options.codebook.num_clusters) +
          " clusters from " + std::to_string(num_training) + " descriptors found in " +
          std::to_string(sample.size()) + " sampled images of " + root +
          (training_errors.empty() ? std::string()
                                   : " (" + std::to_string(training_errors.size()) +
                                         " of them could not be used, see above)") +
          "; add images or lower --clusters");
    }
    if (observer)
      observer->OnPhase("k-means: " + std::to_string(options.codebook.num_clusters) +
                        " clusters from " + std::to_string(num_training) + " descriptors");
    const auto t_train = Clock::now();
    SetLibraryThreads(threads);
    const Codebook codebook =
        Codebook::Train(training.data(), num_training, dim, options.codebook);
    summary.stages.train = Seconds(t_train, Clock::now());
    std::optional<ProjectionRecord> projection;
    if (options.projection.out_dim > 0 &&
        !ShouldLearnProjection(options.projection, sample_with_features) && observer)
      observer->OnPhase("no PCA: " + std::to_string(sample_with_features) +
                        " training images with features, fewer than --pca-min-images " +
                        std::to_string(options.projection.min_images) +
                        "; search uses the full VLAD vectors");
    if (ShouldLearnProjection(options.projection, sample_with_features)) {
      // PCA from the VLAD vectors of the training images: those whose
      // descriptors are still held (the cache above), then, if they are fewer
      // than max(--pca-min-images, 2 x --pca-dim), others extracted again.
      const auto t_pca = Clock::now();
      auto sample_encoder = CreateVladEncoder(Backend::kCpu, codebook, options.encoding.vlad);
      const int64_t vlad_dim = sample_encoder->vlad_dim();
      const int64_t want = std::min<int64_t>(
          sample_with_features,
          std::max<int64_t>(options.projection.min_images, 2 * int64_t{options.projection.out_dim}));
      std::vector<const Processed*> held;
      for (const auto& entry : cached)
        if (entry.second.descriptors.num > 0) held.push_back(&entry.second);
      std::sort(held.begin(), held.end(),
                [](const Processed* a, const Processed* b) { return a->path < b->path; });
      std::vector<Task> again;
      {
        std::set<std::string> failed;
        for (const FileError& e : training_errors) failed.insert(e.path);
        for (const Task& t : sample)
          if (static_cast<int64_t>(held.size() + again.size()) < want && !cached.count(t.path) &&
              !failed.count(t.path))
            again.push_back(t);
      }
      if (observer)
        observer->OnPhase("PCA: " + std::to_string(options.projection.out_dim) +
                          " components from the VLAD vectors of " +
                          std::to_string(held.size() + again.size()) + " training images" +
                          (again.empty() ? std::string()
                                         : " (" + std::to_string(again.size()) +
                                               " extracted again)"));
      std::vector<float> sample_vlad;
      sample_vlad.reserve((held.size() + again.size()) * static_cast<size_t>(vlad_dim));
      int64_t num_vlad = 0;
      auto add = [&](const Descriptors& d) {
        if (d.num == 0) return;
        sample_vlad.resize(static_cast<size_t>((num_vlad + 1) * vlad_dim));
        const int64_t offsets[2] = {0, d.num};
        sample_encoder->Encode(d.values.data(), offsets, 1,
                               sample_vlad.data() + num_vlad * vlad_dim);
        ++num_vlad;
      };
      for (const Processed* p : held) add(p->descriptors);
      RunWorkers(again, threads, options.encoding.max_side, options.encoding.extractor,
                 options.limits, new_hash_kind, cancel, [&](Processed&& p) {
                   if (!p.error) add(p.descriptors);
                 });
      if (cancel && cancel->load()) {
        summary.cancelled = true;
        summary.seconds = Seconds(start, Clock::now());
        return summary;
      }
      if (ShouldLearnProjection(options.projection, num_vlad))
        projection = LearnProjection(sample_vlad.data(), num_vlad, vlad_dim, options.projection);
      summary.stages.pca = Seconds(t_pca, Clock::now());
    }
    store = Store::Create(db_path,
                          MakeModelRecord(options.encoding, codebook, options.codebook.seed),
                          projection ? &*projection : nullptr, new_schema);
    creation_lock.reset();  // the store's own lock protects it from here on
  }
  SetLibraryThreads(1);

  const EncodingSettings settings = SettingsFromModel(store->model());
  auto encoder = CreateVladEncoder(backend, CodebookFromModel(store->model()), settings.vlad);

  // Decide per file: unchanged (same size and mtime), or to (re)process.
  std::vector<Task> tasks;
  std::vector<Processed> ready;  // cached training results to commit first
  std::set<std::string> listed(walk.files.begin(), walk.files.end());
  for (const std::string& path : walk.files) {
    std::optional<ImageRecord> existing = store->FindByPath(path);
    if (existing) {
      const auto st = StatFile(path);
      if (st && st->size_bytes == existing->size_bytes && st->mtime_ns == existing->mtime_ns) {
        ++summary.unchanged;
        continue;
      }
    }
    auto it = cached.find(path);
    if (it != cached.end()) {
      it->second.existing = existing;
      ready.push_back(std::move(it->second));
      cached.erase(it);
    } else {
      tasks.push_back(Task{path, std::move(existing)});
    }
  }
  cached.clear();

  // Records under this folder whose file is gone. Folders that could not be
  // listed keep their records: absence there is not evidence of deletion.
  std::vector<ImageRecord> gone;
  store->ForEachImage([&](const ImageRecord& r) {
    if (!IsUnder(r.path, root) || listed.count(r.path)) return;
    for (const FileError& e : walk.errors)
      if (IsUnder(r.path, e.path)) return;
    gone.push_back(r);
  });
  for (const ImageRecord& r : gone) {
    store->RemoveImage(r);
    ++summary.removed;
  }

  const int64_t total = static_cast<int64_t>(tasks.size() + ready.size());
  if (observer) {
    observer->OnPhase("encoding " + std::to_string(total) + " images");
    observer->OnStart(total);
  }
  BatchCommitter committer(store.get(), encoder.get(), options.batch_images, &summary,
                           observer, total);
  for (Processed& p : ready) committer.Add(std::move(p));
  ready.clear();
  RunWorkers(tasks, threads, settings.max_side, settings.extractor, options.limits,
             store->hash_kind(), cancel, [&](Processed&& p) { committer.Add(std::move(p)); });
  committer.Flush();
  summary.cancelled = cancel && cancel->load();
  summary.seconds = Seconds(start, Clock::now());
  return summary;
}

}  // namespace lookalike
