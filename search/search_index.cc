#include "search/search_index.h"

#include <algorithm>
#include <stdexcept>

#include "storage/encoding.h"

namespace lookalike {
namespace {

constexpr char kMagic[4] = {'L', 'K', 'S', 'X'};
constexpr uint32_t kFormat = 1;
constexpr int64_t kChunk = 256;  // stored vectors projected per call

struct Decoded {
  uint64_t fingerprint = 0;
  uint64_t dim = 0;
  std::vector<IndexedImage> manifest;
  std::unique_ptr<VectorIndex> index;
};

Decoded Decode(const std::string& blob) {
  if (blob.size() < 4 || blob.compare(0, 4, kMagic, 4) != 0)
    throw std::runtime_error("not a lookalike search index");
  encoding::Reader r(blob.data() + 4, blob.size() - 4, "search index");
  Decoded d;
  try {
    const uint32_t format = r.Fixed32();
    if (format != kFormat)
      throw std::runtime_error("format " + std::to_string(format) + ", this build reads " +
                               std::to_string(kFormat));
    d.fingerprint = r.Fixed64();
    d.dim = r.Fixed64();
    const uint64_t n = r.Fixed64();
    if (n > r.remaining() / 16) throw encoding::CorruptValue("manifest truncated");
    d.manifest.resize(n);
    for (IndexedImage& m : d.manifest) {
      m.id = r.Fixed64();
      m.content_hash = r.Fixed64();
    }
    const uint64_t size = r.Fixed64();
    if (size != r.remaining()) throw encoding::CorruptValue("index size mismatch");
    d.index = VectorIndex::Deserialize(std::string(r.Raw(size), size));
  } catch (const encoding::CorruptValue& e) {
    throw std::runtime_error(e.what());
  }
  for (size_t i = 1; i < d.manifest.size(); ++i)
    if (d.manifest[i].id <= d.manifest[i - 1].id)
      throw std::runtime_error("manifest not in id order");
  if (static_cast<int64_t>(d.manifest.size()) != d.index->ntotal())
    throw std::runtime_error("manifest lists " + std::to_string(d.manifest.size()) +
                             " images, the index holds " + std::to_string(d.index->ntotal()));
  if (static_cast<uint64_t>(d.index->dim()) != d.dim)
    throw std::runtime_error("dimension mismatch");
  return d;
}

// Search vectors of the listed images, read from the store and mapped.
void ReadVectors(const Store& store, const SearchProjection& projection,
                 const std::vector<uint64_t>& ids, std::vector<float>* out) {
  const int64_t in_dim = static_cast<int64_t>(store.model().vlad_dim());
  out->resize(ids.size() * static_cast<size_t>(projection.out_dim()));
  std::vector<float> chunk;
  for (size_t i = 0; i < ids.size(); i += kChunk) {
    const size_t n = std::min<size_t>(kChunk, ids.size() - i);
    chunk.resize(n * in_dim);
    for (size_t j = 0; j < n; ++j) {
      const auto v = store.GetVector(ids[i + j]);
      if (!v)
        throw StoreError(StoreError::Kind::kCorrupt, "database " + store.path() + ": image id " +
                                                         std::to_string(ids[i + j]) +
                                                         " has a record but no vector; run "
                                                         "`lookalike verify`");
      std::copy(v->begin(), v->end(), chunk.begin() + j * in_dim);
    }
    projection.Apply(chunk.data(), static_cast<int64_t>(n), out->data() + i * projection.out_dim());
  }
}

// Every stored image with features, mapped, in id order.
void ReadAllVectors(const Store& store, const SearchProjection& projection,
                    std::vector<IndexedImage>* manifest, std::vector<float>* vectors,
                    int64_t* num_zero) {
  const int64_t in_dim = static_cast<int64_t>(store.model().vlad_dim());
  manifest->clear();
  vectors->clear();
  *num_zero = 0;
  std::vector<float> chunk;
  auto flush = [&] {
    if (chunk.empty()) return;
    const int64_t n = static_cast<int64_t>(chunk.size()) / in_dim;
    const size_t at = vectors->size();
    vectors->resize(at + n * projection.out_dim());
    projection.Apply(chunk.data(), n, vectors->data() + at);
    chunk.clear();
  };
  store.ForEachVector([&](const ImageRecord& rec, const float* v) {
    if (rec.status == ImageStatus::kNoFeatures) {
      ++*num_zero;  // the zero vector matches nothing
      return;
    }
    manifest->push_back(IndexedImage{rec.id, rec.content_hash});
    chunk.insert(chunk.end(), v, v + in_dim);
    if (static_cast<int64_t>(chunk.size()) >= kChunk * in_dim) flush();
  });
  flush();
}

std::vector<int64_t> Ids(const std::vector<IndexedImage>& manifest) {
  std::vector<int64_t> ids(manifest.size());
  for (size_t i = 0; i < manifest.size(); ++i) ids[i] = static_cast<int64_t>(manifest[i].id);
  return ids;
}

// The kind `options` want for n vectors; an empty collection is always flat
// (an approximate kind needs vectors to train on).
VectorIndexKind WantedKind(const VectorIndexOptions& options, int64_t n, int64_t dim) {
  return n == 0 ? VectorIndexKind::kFlat : VectorIndex::ResolveKind(options, n, dim);
}

std::unique_ptr<VectorIndex> BuildFrom(int64_t dim, const VectorIndexOptions& options,
                                       const std::vector<int64_t>& ids,
                                       const std::vector<float>& vectors) {
  VectorIndexOptions o = options;
  o.kind = WantedKind(options, static_cast<int64_t>(ids.size()), dim);
  return VectorIndex::Build(dim, o, ids.data(), vectors.data(), static_cast<int64_t>(ids.size()));
}

SearchIndexSync Sync(const Store& store, const SearchProjection& projection,
                     const VectorIndexOptions& options, bool build_transient) {
  const uint64_t fingerprint = store.model().codebook_hash;
  SearchIndexSync sync;
  if (projection.out_dim() > kMaxPersistedFlatDim &&
      WantedKind(options, static_cast<int64_t>(store.num_images()), projection.out_dim()) ==
          VectorIndexKind::kFlat) {
    sync.transient = true;
    sync.reason = "full VLAD vectors: the exact index is built from the stored vectors";
    if (build_transient) {
      std::vector<float> vectors;
      ReadAllVectors(store, projection, &sync.manifest, &vectors, &sync.num_zero);
      VectorIndexOptions o = options;
      o.kind = VectorIndexKind::kFlat;
      sync.index = BuildFrom(projection.out_dim(), o, Ids(sync.manifest), vectors);
    }
    return sync;
  }

  // 1. The persisted index, if usable.
  try {
    const auto blob = store.GetSearchIndex();
    if (!blob) {
      sync.reason = "no persisted search index";
    } else {
      Decoded d = Decode(*blob);
      if (d.fingerprint != fingerprint || d.dim != static_cast<uint64_t>(projection.out_dim())) {
        sync.reason = "persisted search index was built for another model or dimension";
      } else {
        sync.index = std::move(d.index);
        sync.manifest = std::move(d.manifest);
        sync.loaded = true;
      }
    }
  } catch (const StoreError& e) {
    if (e.kind() != StoreError::Kind::kCorrupt) throw;
    sync.reason = e.what();
  } catch (const std::runtime_error& e) {
    sync.reason = std::string("persisted search index unusable: ") + e.what();
  }

  auto rebuild = [&] {
    std::vector<float> vectors;
    ReadAllVectors(store, projection, &sync.manifest, &vectors, &sync.num_zero);
    sync.index = BuildFrom(projection.out_dim(), options, Ids(sync.manifest), vectors);
    sync.rebuilt = true;
    sync.added = sync.removed = 0;
    return std::move(sync);
  };
  if (!sync.loaded) return rebuild();

  // 2. Reconcile with the records: both lists are in id order.
  std::vector<int64_t> to_remove;
  std::vector<uint64_t> to_add;
  std::vector<IndexedImage> wanted;
  size_t m = 0;
  const std::vector<IndexedImage>& held = sync.manifest;
  store.ForEachImage([&](const ImageRecord& rec) {
    while (m < held.size() && held[m].id < rec.id) to_remove.push_back(held[m++].id);
    const bool in_index = m < held.size() && held[m].id == rec.id;
    if (rec.status == ImageStatus::kNoFeatures) {
      ++sync.num_zero;
      if (in_index) to_remove.push_back(held[m].id);
    } else if (in_index && held[m].content_hash == rec.content_hash) {
      wanted.push_back(held[m]);
    } else {
      if (in_index) to_remove.push_back(held[m].id);
      to_add.push_back(rec.id);
      wanted.push_back(IndexedImage{rec.id, rec.content_hash});
    }
    if (in_index) ++m;
  });
  while (m < held.size()) to_remove.push_back(held[m++].id);
  if (!to_remove.empty()) sync.removed = sync.index->Remove(to_remove);
  if (sync.removed != static_cast<int64_t>(to_remove.size())) {
    // The manifest and the index disagree: trust neither.
    sync.reason = "persisted search index held " + std::to_string(sync.removed) + " of the " +
                  std::to_string(to_remove.size()) + " vectors its manifest lists for removal";
    sync.loaded = false;
    sync.num_zero = 0;
    return rebuild();
  }
  sync.manifest = std::move(wanted);
  const int64_t n = static_cast<int64_t>(sync.manifest.size());

  // 3. The kind: convert or re-learn when the collection crossed a size.
  const VectorIndexKind want = WantedKind(options, n, projection.out_dim());
  const VectorIndexKind have = sync.index->kind();
  const bool grown = have == VectorIndexKind::kIvfSq && options.nlist == 0 &&
                     want == VectorIndexKind::kIvfSq && sync.index->nlist() * 4 <= AutoNlist(n);
  // An auto index turns exact again only well below the threshold, so a
  // collection hovering around it does not flip back and forth.
  const bool shrunk = options.kind == VectorIndexKind::kAuto && have == VectorIndexKind::kIvfSq &&
                      n < options.auto_threshold / 2;
  const bool explicit_change = options.kind != VectorIndexKind::kAuto && want != have;
  const bool auto_grow =
      options.kind == VectorIndexKind::kAuto && have == VectorIndexKind::kFlat && want != have;
  if (grown || shrunk || explicit_change || auto_grow) {
    std::vector<int64_t> ids;
    std::vector<float> vectors;
    if (have == VectorIndexKind::kFlat || grown) {
      // The flat index holds the exact vectors; 8-bit residual codes are
      // close enough to re-learn lists from.
      sync.index->Export(&ids, &vectors);
      std::vector<float> fresh;
      std::vector<uint64_t> fresh_ids(to_add.begin(), to_add.end());
      ReadVectors(store, projection, fresh_ids, &fresh);
      ids.insert(ids.end(), to_add.begin(), to_add.end());
      vectors.insert(vectors.end(), fresh.begin(), fresh.end());
    } else {
      // Leaving an approximate kind: read the exact vectors again.
      std::vector<IndexedImage> all;
      int64_t zero = 0;
      ReadAllVectors(store, projection, &all, &vectors, &zero);
      ids = Ids(all);
    }
    sync.added = static_cast<int64_t>(to_add.size());
    VectorIndexOptions o = options;
    o.kind = want;
    sync.index = BuildFrom(projection.out_dim(), o, ids, vectors);
    sync.retrained = true;
    return sync;
  }

  // 4. Add what is new or changed (the default nprobe follows the size).
  std::vector<float> fresh;
  for (size_t i = 0; i < to_add.size(); i += 4096) {
    const std::vector<uint64_t> part(to_add.begin() + i,
                                     to_add.begin() + std::min(to_add.size(), i + 4096));
    ReadVectors(store, projection, part, &fresh);
    std::vector<int64_t> ids(part.begin(), part.end());
    sync.index->Add(ids.data(), fresh.data(), static_cast<int64_t>(ids.size()));
  }
  sync.added = static_cast<int64_t>(to_add.size());
  if (options.nprobe == 0 && sync.index->nlist() > 0) {
    const int64_t nprobe = AutoNprobe(sync.index->ntotal(), sync.index->nlist());
    if (nprobe != sync.index->nprobe()) {
      sync.index->set_nprobe(nprobe);
      sync.retuned = true;
    }
  }
  return sync;
}

}  // namespace

SearchIndexSync SyncSearchIndex(const Store& store, const SearchProjection& projection,
                                const VectorIndexOptions& options) {
  return Sync(store, projection, options, /*build_transient=*/true);
}

void SaveSearchIndex(Store* store, const SearchIndexSync& sync) {
  if (!sync.index) throw std::logic_error("SaveSearchIndex: no index");
  std::string blob(kMagic, 4);
  encoding::PutFixed32(&blob, kFormat);
  encoding::PutFixed64(&blob, store->model().codebook_hash);
  encoding::PutFixed64(&blob, static_cast<uint64_t>(sync.index->dim()));
  encoding::PutFixed64(&blob, sync.manifest.size());
  for (const IndexedImage& m : sync.manifest) {
    encoding::PutFixed64(&blob, m.id);
    encoding::PutFixed64(&blob, m.content_hash);
  }
  const std::string index = sync.index->Serialize();
  encoding::PutFixed64(&blob, index.size());
  blob += index;
  store->PutSearchIndex(blob);
}

SearchIndexSync UpdateSearchIndex(Store* store, const SearchProjection& projection,
                                  const VectorIndexOptions& options) {
  SearchIndexSync sync = Sync(*store, projection, options, /*build_transient=*/false);
  if (sync.changed()) SaveSearchIndex(store, sync);
  return sync;
}

}  // namespace lookalike
