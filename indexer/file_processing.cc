#include "indexer/file_processing.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "indexer/grey_thumbnail.h"
#include "indexer/local_features.h"
#include "util/timing.h"

namespace lookalike {
namespace {

using Clock = SteadyClock;

// The stored thumbnail of a decoded image, when the database keeps them.
std::string ThumbnailOf(const GrayImage& gray, const FileProcessing& how) {
  return how.thumbnails ? EncodeGreyThumbnail(MakeGreyThumbnail(gray, kThumbnailSide))
                        : std::string();
}

// Decoding and extraction of a file whose bytes are read and hashed.
void DecodeAndExtract(const FileTask& task, std::string* bytes, const FileProcessing& how,
                      DescriptorExtractor* extractor, Clock::time_point t0, ProcessedFile* p) {
  LoadResult loaded = DecodeImageBytes(task.path, *bytes, how.max_side, how.limits);
  *bytes = std::string();
  const auto t1 = Clock::now();
  p->read_decode_seconds = SecondsBetween(t0, t1);
  if (loaded.image) {
    p->resize_seconds = loaded.image->resize_seconds;
    p->colour_seconds = loaded.image->colour_seconds;
  }
  if (loaded.error) {
    p->error = std::move(loaded.error);
    return;
  }
  p->record.width = loaded.image->original_width;
  p->record.height = loaded.image->original_height;
  p->record.colour = std::move(loaded.image->colour);
  p->thumbnail = ThumbnailOf(loaded.image->gray, how);
  p->descriptors = extractor->Extract(loaded.image->gray);
  p->record.num_descriptors = static_cast<uint32_t>(p->descriptors.num);
  p->frame_width = static_cast<uint32_t>(loaded.image->gray.width);
  p->frame_height = static_cast<uint32_t>(loaded.image->gray.height);
  if (p->descriptors.num > 0 && !how.quantizer)
    p->features =
        EncodeLocalFeatures(p->descriptors, static_cast<uint32_t>(loaded.image->gray.width),
                            static_cast<uint32_t>(loaded.image->gray.height));
  const auto t2 = Clock::now();
  p->extract_seconds = SecondsBetween(t1, t2);
  if (how.quantizer) CompactFeatures(*how.quantizer, how.derivable, p);
  if (SecondsBetween(t0, t2) > how.limits.max_seconds) {
    p->error = FileError{
        FileErrorCode::kTimeout, task.path,
        "reading, decoding and extraction took " + std::to_string(SecondsBetween(t0, t2)) +
            " s, more than the budget of " + std::to_string(how.limits.max_seconds) + " s"};
    p->descriptors = Descriptors();
    p->features.clear();
  }
}

}  // namespace

void CompactFeatures(const DescriptorQuantizer& quantizer, bool derivable, ProcessedFile* p) {
  if (p->compacted) return;
  p->compacted = true;
  if (p->descriptors.num == 0) return;
  const auto t0 = Clock::now();
  std::vector<float> reconstructed;
  p->features = EncodeCompactFeatures(p->descriptors, p->frame_width, p->frame_height, quantizer,
                                      derivable ? &reconstructed : nullptr);
  if (derivable) p->descriptors.values = std::move(reconstructed);
  p->compact_seconds += SecondsBetween(t0, Clock::now());
}

void CompactAll(const DescriptorQuantizer& quantizer, bool derivable, int threads,
                std::vector<ProcessedFile>* files) {
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(static_cast<size_t>(std::max(1, threads)));
  auto work = [&](size_t t) {
    try {
      for (size_t i = next++; i < files->size(); i = next++)
        if (!(*files)[i].error && !(*files)[i].touched_only)
          CompactFeatures(quantizer, derivable, &(*files)[i]);
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < errors.size(); ++t) pool.emplace_back(work, t);
  work(0);
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

ProcessedFile ProcessFile(const FileTask& task, size_t index, const FileProcessing& how,
                          DescriptorExtractor* extractor) {
  ProcessedFile p;
  p.task_index = index;
  p.path = task.path;
  p.existing = task.existing;
  const auto t0 = Clock::now();
  ReadResult read = ReadImageBytes(task.path, how.limits);
  if (read.error) {
    p.error = std::move(read.error);
    return p;
  }
  p.record.path = task.path;
  p.record.size_bytes = read.stat.size_bytes;
  p.record.mtime_ns = read.stat.mtime_ns;
  p.record.content_hash = Hash64(how.hash_kind, read.bytes.data(), read.bytes.size());
  const auto t_read = Clock::now();
  if (task.existing && task.existing->content_hash == p.record.content_hash &&
      task.existing->size_bytes == p.record.size_bytes) {
    p.touched_only = true;  // stage times count only files that are decoded
    if (task.needs_thumbnail) {
      // Decoded for its thumbnail only; a file that no longer decodes keeps
      // its record and goes without (its next change re-indexes it).
      LoadResult loaded = DecodeImageBytes(task.path, read.bytes, how.max_side, how.limits);
      if (loaded.image) p.thumbnail = ThumbnailOf(loaded.image->gray, how);
    }
    return p;
  }
  p.read_seconds = SecondsBetween(t0, t_read);
  DecodeAndExtract(task, &read.bytes, how, extractor, t0, &p);
  return p;
}

namespace {

// The bounded queue between the workers and the consuming thread.
class ResultQueue {
 public:
  ResultQueue(size_t capacity, int producers) : capacity_(capacity), running_(producers) {}

  // False when the consumer stopped: the worker should end.
  bool Push(ProcessedFile&& p) {
    std::unique_lock<std::mutex> lock(mu_);
    not_full_.wait(lock, [&] { return queue_.size() < capacity_ || stop_; });
    if (stop_) return false;
    queue_.push_back(std::move(p));
    not_empty_.notify_one();
    return true;
  }
  // False when every worker is done and nothing is left.
  bool Pop(ProcessedFile* p) {
    std::unique_lock<std::mutex> lock(mu_);
    not_empty_.wait(lock, [&] { return !queue_.empty() || running_ == 0; });
    if (queue_.empty()) return false;
    *p = std::move(queue_.front());
    queue_.pop_front();
    not_full_.notify_one();
    return true;
  }
  void WorkerDone(std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(mu_);
    if (error && !worker_error_) {
      worker_error_ = error;
      stop_ = true;
    }
    --running_;
    not_empty_.notify_all();
    not_full_.notify_all();
  }
  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    not_full_.notify_all();
  }
  bool stopped() {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  }
  std::exception_ptr worker_error() {
    std::lock_guard<std::mutex> lock(mu_);
    return worker_error_;
  }

 private:
  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<ProcessedFile> queue_;
  int running_;
  bool stop_ = false;
  std::exception_ptr worker_error_;
};

}  // namespace

void ProcessFiles(const std::vector<FileTask>& tasks, int threads, const FileProcessing& how,
                  const std::atomic<bool>* cancel,
                  const std::function<void(ProcessedFile&&)>& consume) {
  if (tasks.empty()) return;
  ResultQueue queue(static_cast<size_t>(threads) * 4, threads);
  std::atomic<size_t> next{0};
  auto worker = [&]() {
    std::exception_ptr error;
    try {
      auto extractor = CreateExtractor(how.extractor);
      for (;;) {
        if (queue.stopped() || (cancel && cancel->load())) break;
        const size_t i = next.fetch_add(1);
        if (i >= tasks.size()) break;
        if (!queue.Push(ProcessFile(tasks[i], i, how, extractor.get()))) break;
      }
    } catch (...) {
      error = std::current_exception();
    }
    queue.WorkerDone(error);
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  std::exception_ptr consumer_error;
  ProcessedFile p;
  while (queue.Pop(&p)) {
    try {
      consume(std::move(p));
    } catch (...) {
      consumer_error = std::current_exception();
      queue.Stop();
      break;
    }
  }
  for (auto& t : pool) t.join();
  if (consumer_error) std::rethrow_exception(consumer_error);
  if (const std::exception_ptr e = queue.worker_error()) std::rethrow_exception(e);
}

void ReportSkipped(const FileError& e, IndexSummary* summary, IndexObserver* observer) {
  ++summary->skipped[FileErrorCodeName(e.code)];
  if (observer) observer->OnFileError(e);
}

}  // namespace lookalike
