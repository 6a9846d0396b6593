#include "indexer/encode_commit.h"

#include <chrono>

#include "util/timing.h"

namespace lookalike {
namespace {

using Clock = SteadyClock;

// A batch is also closed at this many descriptors, so the encoder's host and
// device buffers stay bounded whatever the images hold.
constexpr int64_t kMaxBatchDescriptors = int64_t{1} << 19;

}  // namespace

BatchCommitter::BatchCommitter(Store* store, VladEncoder* encoder,
                               const DescriptorQuantizer* quantizer,
                               const SearchProjection* projection, int batch_images,
                               IndexSummary* summary, IndexObserver* observer, int64_t total)
    : store_(store),
      encoder_(encoder),
      quantizer_(quantizer),
      projection_(projection),
      batch_images_(batch_images),
      summary_(summary),
      observer_(observer),
      total_(total) {}

void BatchCommitter::AddStageTimes(const ProcessedFile& p) {
  StageTimes& t = summary_->stages;
  t.read_decode += p.read_decode_seconds - p.colour_seconds;
  t.read += p.read_seconds;
  t.resize += p.resize_seconds;
  // The colour histogram is computed inside the decode call but is a
  // descriptor: it counts as extraction.
  t.decode += p.read_decode_seconds - p.read_seconds - p.resize_seconds - p.colour_seconds;
  t.extract += p.extract_seconds + p.colour_seconds;
}

void BatchCommitter::Add(ProcessedFile&& p) {
  AddStageTimes(p);
  if (p.error) {
    ReportSkipped(*p.error, summary_, observer_);
    if (p.existing && p.error->code == FileErrorCode::kVanished) {
      store_->RemoveImage(*p.existing);
      ++summary_->removed;
    }
    Progress();
    return;
  }
  if (p.touched_only) {
    if (p.record.mtime_ns != p.existing->mtime_ns) {
      ImageRecord updated = *p.existing;
      updated.mtime_ns = p.record.mtime_ns;
      store_->UpdateRecord(updated);
      ++summary_->touched;
    } else {
      ++summary_->unchanged;  // listed for its thumbnail only
    }
    if (!p.thumbnail.empty()) {
      store_->PutThumbnail(p.existing->id, p.thumbnail);
      ++summary_->thumbnails_added;
    }
    Progress();
    return;
  }
  // Stored vectors are encoded from the exact descriptors; where none is
  // stored, from the quantised ones search will derive it from.
  // (Workers compact the files they extract, and the training sample's are
  // compacted before they are added: this is for any other caller.)
  if (quantizer_) CompactFeatures(*quantizer_, store_->vector_dim() == 0, &p);
  summary_->stages.compact += p.compact_seconds;
  batch_descriptors_ += p.descriptors.num;
  batch_.push_back(std::move(p));
  if (static_cast<int>(batch_.size()) >= batch_images_ ||
      batch_descriptors_ >= kMaxBatchDescriptors)
    Flush();
}

void BatchCommitter::Flush() {
  if (batch_.empty()) return;
  const auto t0 = Clock::now();
  const int dim = encoder_->dim();
  offsets_.assign(1, 0);
  descriptors_.clear();
  descriptors_.reserve(static_cast<size_t>(batch_descriptors_) * dim);
  for (const ProcessedFile& p : batch_) {
    descriptors_.insert(descriptors_.end(), p.descriptors.values.begin(),
                        p.descriptors.values.end());
    offsets_.push_back(offsets_.back() + p.descriptors.num);
  }
  vlad_.assign(batch_.size() * static_cast<size_t>(encoder_->vlad_dim()), 0.0f);
  const double assign_before = encoder_->assign_seconds();
  encoder_->Encode(descriptors_.data(), offsets_.data(), static_cast<int64_t>(batch_.size()),
                   vlad_.data());
  const auto t1 = Clock::now();
  summary_->stages.encode += SecondsBetween(t0, t1);
  const double assign = encoder_->assign_seconds() - assign_before;
  summary_->stages.assign += assign;
  summary_->stages.aggregate += SecondsBetween(t0, t1) - assign;
  const int64_t n = static_cast<int64_t>(batch_.size());
  const float* stored = vlad_.data();
  int64_t stored_dim = encoder_->vlad_dim();
  if (store_->vector_dim() != static_cast<uint64_t>(stored_dim) && store_->vector_dim() > 0) {
    stored_dim = projection_->out_dim();
    stored_.resize(static_cast<size_t>(n * stored_dim));
    projection_->Apply(vlad_.data(), n, stored_.data());
    stored = stored_.data();
  }
  const auto t2 = Clock::now();
  summary_->stages.project += SecondsBetween(t1, t2);
  for (int64_t i = 0; i < n; ++i) Commit(batch_[i], stored + i * stored_dim);
  summary_->stages.store += SecondsBetween(t2, Clock::now());
  batch_.clear();
  batch_descriptors_ = 0;
}

void BatchCommitter::Commit(const ProcessedFile& p, const float* vlad) {
  ImageRecord record = p.record;
  record.id = p.existing ? p.existing->id : 0;
  record.status = p.descriptors.num == 0 ? ImageStatus::kNoFeatures : ImageStatus::kOk;
  store_->PutImage(&record, vlad, p.features, p.thumbnail);
  ++summary_->indexed;
  if (observer_) observer_->OnCommitted(record);
  if (p.descriptors.num == 0) {
    ++summary_->no_features;
    // A warning, not a skipped file: the image is stored.
    if (observer_)
      observer_->OnFileError(FileError{FileErrorCode::kNoFeatures, p.path,
                                       "no keypoints found (flat or tiny image); stored as a "
                                       "zero vector that matches nothing"});
  }
  Progress();
}

void BatchCommitter::Progress() {
  ++done_;
  if (observer_) observer_->OnProgress(done_, total_);
}

}  // namespace lookalike
