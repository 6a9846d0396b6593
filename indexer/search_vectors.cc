#include "indexer/search_vectors.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <stdexcept>

#include "indexer/local_features.h"
#include "indexer/mirror_features.h"
#include "indexer/model.h"
#include "storage/encoding.h"
#include "util/rows.h"

namespace lookalike {

class SearchVectors::EncoderPool {
 public:
  EncoderPool(Codebook codebook, const VladOptions& options)
      : codebook_(std::move(codebook)), options_(options) {
    idle_.push_back(CreateVladEncoder(Backend::kCpu, codebook_, options_));
    vlad_dim_ = idle_.back()->vlad_dim();
  }
  int64_t vlad_dim() const { return vlad_dim_; }
  // Encodes as VladEncoder::Encode does, on an encoder no other thread uses.
  void Encode(const float* descriptors, const int64_t* offsets, int64_t n, float* vlad) {
    std::unique_ptr<VladEncoder> encoder;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!idle_.empty()) {
        encoder = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    if (!encoder) encoder = CreateVladEncoder(Backend::kCpu, codebook_, options_);
    encoder->Encode(descriptors, offsets, n, vlad);
    std::lock_guard<std::mutex> lock(mutex_);
    idle_.push_back(std::move(encoder));
  }

 private:
  const Codebook codebook_;
  const VladOptions options_;
  int64_t vlad_dim_ = 0;
  std::mutex mutex_;
  std::vector<std::unique_ptr<VladEncoder>> idle_;
};

SearchVectors::SearchVectors(const Store& store)
    : store_(store), projection_(SearchProjection::FromStore(store)) {
  const uint64_t vlad_dim = store.model().vlad_dim();
  if (!store.half_vectors()) {
    source_ = Source::kStoredVlad;
  } else if (store.vector_dim() > 0) {
    if (store.vector_dim() != static_cast<uint64_t>(projection_.out_dim()) ||
        store.vector_dim() == vlad_dim)
      throw StoreError(StoreError::Kind::kCorrupt,
                       "database " + store.path() + ": stored vectors have " +
                           std::to_string(store.vector_dim()) + " dimensions, its projection " +
                           std::to_string(projection_.out_dim()) + "; run `lookalike verify`");
    source_ = Source::kStoredSearch;
  } else {
    source_ = Source::kDerived;
    PrepareDerivation();
  }
}

void SearchVectors::PrepareDerivation() {
  const auto blob = store_.GetDescriptorQuantizer();
  if (!blob)
    throw StoreError(StoreError::Kind::kCorrupt,
                     "database " + store_.path() +
                         " stores neither vectors nor its descriptor quantizer; run "
                         "`lookalike verify`");
  try {
    quantizer_ = DescriptorQuantizer::Deserialize(*blob);
  } catch (const encoding::CorruptValue& e) {
    throw StoreError(StoreError::Kind::kCorrupt, "database " + store_.path() + ": " + e.what());
  }
  encoders_ = std::make_unique<EncoderPool>(CodebookFromModel(store_.model()),
                                            SettingsFromModel(store_.model()).vlad);
}

SearchVectors::SearchVectors(const Store& store, SearchProjection projection, Source source)
    : store_(store), projection_(std::move(projection)), source_(source) {}

SearchVectors SearchVectors::FullVladFromFeatures(const Store& store) {
  if (!store.half_vectors())
    throw std::invalid_argument("database " + store.path() + " stores full VLAD vectors (schema " +
                                std::to_string(store.schema_version()) + ")");
  const int64_t vlad_dim = static_cast<int64_t>(store.model().vlad_dim());
  SearchVectors v(store, SearchProjection::FromRecord(nullptr, vlad_dim), Source::kDerived);
  v.PrepareDerivation();
  return v;
}

SearchVectors::SearchVectors(const Store& store, SearchProjection projection)
    : store_(store), projection_(std::move(projection)) {
  if (store.half_vectors() ||
      projection_.in_dim() != static_cast<int64_t>(store.model().vlad_dim()))
    throw std::invalid_argument("a search projection of " + std::to_string(projection_.in_dim()) +
                                "-d vectors cannot read database " + store.path());
}

SearchVectors::~SearchVectors() = default;
SearchVectors::SearchVectors(SearchVectors&&) noexcept = default;

void SearchVectors::Map(const float* stored, int64_t n, float* out) const {
  if (source_ == Source::kStoredSearch) {
    std::copy(stored, stored + n * dim(), out);
    NormaliseRows(out, n, dim());  // unit again after float16 rounding
  } else {
    projection_.Apply(stored, n, out);
  }
}

bool SearchVectors::PrepareMirrors() {
  const EncodingSettings settings = SettingsFromModel(store_.model());
  if (DescriptorDim(settings.extractor) != kSiftDim) return false;
  if (encoders_) return true;
  if (const auto blob = store_.GetDescriptorQuantizer()) {
    try {
      quantizer_ = DescriptorQuantizer::Deserialize(*blob);
    } catch (const encoding::CorruptValue& e) {
      throw StoreError(StoreError::Kind::kCorrupt, "database " + store_.path() + ": " + e.what());
    }
  }
  encoders_ = std::make_unique<EncoderPool>(CodebookFromModel(store_.model()), settings.vlad);
  return true;
}

void SearchVectors::ReadMirrored(const std::vector<ImageRecord>& records, float* out) const {
  if (!encoders_) throw std::logic_error("SearchVectors::ReadMirrored before PrepareMirrors");
  // A few images at a time: their decoded descriptors (about 0.75 MiB an
  // image) and full VLAD vectors (256 KiB at K = 512) are held at once.
  constexpr size_t kChunk = 16;
  std::vector<float> vlad;
  for (size_t begin = 0; begin < records.size(); begin += kChunk) {
    const size_t end = std::min(records.size(), begin + kChunk);
    const std::vector<ImageRecord> chunk(records.begin() + static_cast<std::ptrdiff_t>(begin),
                                         records.begin() + static_cast<std::ptrdiff_t>(end));
    vlad.resize(chunk.size() * static_cast<size_t>(encoders_->vlad_dim()));
    Derive(chunk, vlad.data(), true);
    projection_.Apply(vlad.data(), static_cast<int64_t>(chunk.size()),
                      out + static_cast<std::ptrdiff_t>(begin) * dim());
  }
}

void SearchVectors::Derive(const std::vector<ImageRecord>& records, float* vlad,
                           bool mirrored) const {
  const int64_t vlad_dim = encoders_->vlad_dim();
  std::vector<float> descriptors;
  std::vector<int64_t> offsets(1, 0);
  for (const ImageRecord& rec : records) {
    int64_t num = 0;
    if (rec.status != ImageStatus::kNoFeatures) {
      const auto blob = store_.GetFeatures(rec.id);
      // A mirror is made where features are kept: a database indexed before
      // they were has vectors but no features, and its images no mirrors.
      if (!blob && mirrored) {
        offsets.push_back(offsets.back());
        continue;
      }
      if (!blob)
        throw StoreError(StoreError::Kind::kCorrupt,
                         "database " + store_.path() + ": " + rec.path +
                             " has no stored features to derive its vector from; run "
                             "`lookalike verify`");
      LocalFeatures f;
      try {
        f = DecodeLocalFeatures(*blob, quantizer_ ? &*quantizer_ : nullptr);
        if (mirrored) f = MirrorFeatures(f);
      } catch (const encoding::CorruptValue& e) {
        throw StoreError(StoreError::Kind::kCorrupt,
                         "database " + store_.path() + ": " + rec.path + ": " + e.what());
      }
      descriptors.insert(descriptors.end(), f.descriptors.begin(), f.descriptors.end());
      num = f.num();
    }
    offsets.push_back(offsets.back() + num);
  }
  std::fill(vlad, vlad + static_cast<int64_t>(records.size()) * vlad_dim, 0.0f);
  encoders_->Encode(descriptors.data(), offsets.data(), static_cast<int64_t>(records.size()), vlad);
}

void SearchVectors::Read(const std::vector<uint64_t>& ids, float* out) const {
  if (source_ == Source::kDerived) {
    std::vector<ImageRecord> records;
    for (uint64_t id : ids) {
      auto rec = store_.FindById(id);
      if (!rec)
        throw StoreError(StoreError::Kind::kCorrupt, "database " + store_.path() + ": image id " +
                                                         std::to_string(id) +
                                                         " vanished; run `lookalike verify`");
      records.push_back(std::move(*rec));
    }
    std::vector<float> vlad(records.size() * encoders_->vlad_dim());
    Derive(records, vlad.data());
    projection_.Apply(vlad.data(), static_cast<int64_t>(records.size()), out);
    return;
  }
  const int64_t stored_dim = static_cast<int64_t>(store_.vector_dim());
  std::vector<float> chunk(ids.size() * stored_dim);
  for (size_t j = 0; j < ids.size(); ++j) {
    const auto v = store_.GetVector(ids[j]);
    if (!v)
      throw StoreError(StoreError::Kind::kCorrupt,
                       "database " + store_.path() + ": image id " + std::to_string(ids[j]) +
                           " has a record but no vector; run `lookalike verify`");
    std::copy(v->begin(), v->end(), chunk.begin() + j * stored_dim);
  }
  Map(chunk.data(), static_cast<int64_t>(ids.size()), out);
}

void SearchVectors::ForEach(
    const std::function<void(const std::vector<ImageRecord>&, const float*)>& fn,
    int64_t chunk) const {
  // A derived chunk holds full VLAD vectors (256 KiB each at K = 512).
  if (source_ == Source::kDerived) chunk = std::min<int64_t>(chunk, 64);
  std::vector<ImageRecord> records;
  std::vector<float> raw, mapped;
  const int64_t in_dim = source_ == Source::kDerived ? encoders_->vlad_dim()
                                                     : static_cast<int64_t>(store_.vector_dim());
  auto flush = [&] {
    if (records.empty()) return;
    const int64_t n = static_cast<int64_t>(records.size());
    if (source_ == Source::kDerived) {
      raw.resize(static_cast<size_t>(n * in_dim));
      Derive(records, raw.data());
    }
    mapped.resize(static_cast<size_t>(n * dim()));
    Map(raw.data(), n, mapped.data());
    fn(records, mapped.data());
    records.clear();
    raw.clear();
  };
  if (source_ == Source::kDerived) {
    store_.ForEachImage([&](const ImageRecord& rec) {
      records.push_back(rec);
      if (static_cast<int64_t>(records.size()) >= chunk) flush();
    });
  } else {
    store_.ForEachVector([&](const ImageRecord& rec, const float* v) {
      records.push_back(rec);
      raw.insert(raw.end(), v, v + in_dim);
      if (static_cast<int64_t>(records.size()) >= chunk) flush();
    });
  }
  flush();
}

}  // namespace lookalike
