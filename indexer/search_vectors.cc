#include "indexer/search_vectors.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "indexer/local_features.h"
#include "indexer/model.h"
#include "storage/encoding.h"
#include "util/rows.h"

namespace lookalike {

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
  encoder_ = CreateVladEncoder(Backend::kCpu, CodebookFromModel(store_.model()),
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

void SearchVectors::Derive(const std::vector<ImageRecord>& records, float* vlad) const {
  const int64_t vlad_dim = encoder_->vlad_dim();
  std::vector<float> descriptors;
  std::vector<int64_t> offsets(1, 0);
  for (const ImageRecord& rec : records) {
    int64_t num = 0;
    if (rec.status != ImageStatus::kNoFeatures) {
      const auto blob = store_.GetFeatures(rec.id);
      if (!blob)
        throw StoreError(StoreError::Kind::kCorrupt,
                         "database " + store_.path() + ": " + rec.path +
                             " has no stored features to derive its vector from; run "
                             "`lookalike verify`");
      LocalFeatures f;
      try {
        f = DecodeLocalFeatures(*blob, &*quantizer_);
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
  encoder_->Encode(descriptors.data(), offsets.data(), static_cast<int64_t>(records.size()), vlad);
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
    std::vector<float> vlad(records.size() * encoder_->vlad_dim());
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
  const int64_t in_dim = source_ == Source::kDerived ? encoder_->vlad_dim()
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
