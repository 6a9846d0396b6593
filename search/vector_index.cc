#include "search/vector_index.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexScalarQuantizer.h>
#include <faiss/impl/AuxIndexStructures.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>
#include <faiss/invlists/InvertedLists.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>

#include "storage/encoding.h"

namespace lookalike {
namespace {

constexpr char kMagic[4] = {'L', 'K', 'V', 'I'};
constexpr uint32_t kFormatVersion = 1;
using idx_t = faiss::Index::idx_t;

// Approximate kinds use the L2 metric on unit vectors, where
// |q - x|^2 = 2 - 2 q.x ranks exactly as the inner product does, and FAISS's
// residual coders are tuned for it. Scores are turned back into similarities.
float SimilarityFromL2(float d2) {
  return std::isfinite(d2) ? 1.0f - 0.5f * d2 : -std::numeric_limits<float>::infinity();
}

int64_t NearestPowerOfTwo(double x) {
  int64_t p = 1;
  while (p * 2 <= x) p *= 2;
  return (x - p < 2 * p - x) ? p : 2 * p;
}

}  // namespace

int64_t AutoNprobe(int64_t n, int64_t nlist) {
  if (nlist <= 0) return 0;
  const int64_t by_scan =
      static_cast<int64_t>(std::llround(8000.0 * nlist / std::max<int64_t>(n, 1)));
  const int64_t by_share = (3 * nlist + 9) / 10;  // 30 %, rounded up
  return std::min(nlist, std::max<int64_t>({by_scan, by_share, 16}));
}

int64_t AutoNlist(int64_t n) {
  const int64_t by_size = NearestPowerOfTwo(2.0 * std::sqrt(static_cast<double>(n)));
  return std::max<int64_t>(1, std::min<int64_t>({by_size, int64_t{4096}, n / 8}));
}

const char* VectorIndexKindName(VectorIndexKind kind) {
  switch (kind) {
    case VectorIndexKind::kAuto:
      return "auto";
    case VectorIndexKind::kFlat:
      return "flat";
    case VectorIndexKind::kIvfSq:
      return "ivfsq";
  }
  return "?";
}

VectorIndexKind ParseVectorIndexKind(const std::string& name) {
  for (VectorIndexKind k :
       {VectorIndexKind::kAuto, VectorIndexKind::kFlat, VectorIndexKind::kIvfSq})
    if (name == VectorIndexKindName(k)) return k;
  throw std::invalid_argument("unknown index kind '" + name + "'; use auto, flat or ivfsq");
}

void VectorIndexOptions::Validate() const {
  if (min_word_images < 0)
    throw std::invalid_argument("--word-index-min-images must be >= 0, got " +
                                std::to_string(min_word_images));
  if (auto_threshold < 1)
    throw std::invalid_argument("index auto_threshold must be >= 1, got " +
                                std::to_string(auto_threshold));
  if (nlist < 0 || nlist > 65536)
    throw std::invalid_argument("index nlist must be in 0..65536 (0 = auto), got " +
                                std::to_string(nlist));
  if (nprobe < 0 || (nlist > 0 && nprobe > nlist))
    throw std::invalid_argument("index nprobe must be in 0..nlist (0 = auto), got " +
                                std::to_string(nprobe));
  if (max_bytes_per_vector < 16 || max_bytes_per_vector > 4096)
    throw std::invalid_argument("index max_bytes_per_vector must be in 16..4096, got " +
                                std::to_string(max_bytes_per_vector));
  if (max_train_vectors < 0)
    throw std::invalid_argument("index max_train_vectors must be >= 0, got " +
                                std::to_string(max_train_vectors));
}

struct VectorIndex::Impl {
  VectorIndexKind kind = VectorIndexKind::kFlat;
  int64_t dim = 0;
  std::unique_ptr<faiss::Index> index;  // IndexIDMap<IndexFlatIP> or an IndexIVF
  faiss::IndexIVF* ivf = nullptr;       // borrowed view for the IVF kinds
  int64_t reserved = 0;                 // Reserve's total; 0 = none

  faiss::IndexIDMap* idmap() const { return static_cast<faiss::IndexIDMap*>(index.get()); }

  // Gives back the spare capacity std::vector growth leaves in the lists, so
  // the resident size is what the codes need; keeps a Reserve until it is
  // filled (shrinking it after every Add would copy the index each time).
  void Compact() {
    if (index->ntotal < reserved) return;
    if (ivf) {
      auto* lists = dynamic_cast<faiss::ArrayInvertedLists*>(ivf->invlists);
      if (!lists) return;
      for (size_t l = 0; l < lists->nlist; ++l) {
        lists->codes[l].shrink_to_fit();
        lists->ids[l].shrink_to_fit();
      }
    } else {
      auto* flat = static_cast<faiss::IndexFlat*>(idmap()->index);
      flat->codes.shrink_to_fit();
      idmap()->id_map.shrink_to_fit();
    }
  }
};

VectorIndex::VectorIndex(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VectorIndex::~VectorIndex() = default;

VectorIndexKind VectorIndex::ResolveKind(const VectorIndexOptions& options, int64_t n,
                                         int64_t dim) {
  if (options.kind != VectorIndexKind::kAuto) return options.kind;
  return n < options.auto_threshold || dim > kMaxAutoApproximateDim ? VectorIndexKind::kFlat
                                                                    : VectorIndexKind::kIvfSq;
}

namespace {

// For asserts: the options passed VectorIndexOptions::Validate, which their
// owner ran at its boundary (SearchOptions::Validate in Searcher::Open, the
// index, merge and migrate commands, DedupOptions' defaults).
[[maybe_unused]] bool Validated(const VectorIndexOptions& options) {
  try {
    options.Validate();
    return true;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

}  // namespace

std::unique_ptr<VectorIndex> VectorIndex::Create(int64_t dim, const VectorIndexOptions& options) {
  assert(Validated(options));
  if (options.kind == VectorIndexKind::kAuto)
    throw std::invalid_argument("VectorIndex::Create needs a concrete kind; resolve auto first");
  if (dim < 1 || dim > (int64_t{1} << 20))
    throw std::invalid_argument("vector index dimension must be in 1..2^20, got " +
                                std::to_string(dim));
  auto impl = std::make_unique<Impl>();
  impl->kind = options.kind;
  impl->dim = dim;
  if (options.kind == VectorIndexKind::kFlat) {
    auto idmap = std::make_unique<faiss::IndexIDMap>(new faiss::IndexFlatIP(dim));
    idmap->own_fields = true;
    impl->index = std::move(idmap);
    return std::unique_ptr<VectorIndex>(new VectorIndex(std::move(impl)));
  }
  // Approximate kinds need nlist before training; Build sets it from n.
  const int64_t nlist = options.nlist > 0 ? options.nlist : 64;
  const int64_t id_bytes = sizeof(idx_t);
  const int64_t budget = options.max_bytes_per_vector - id_bytes;
  auto* quantizer = new faiss::IndexFlatL2(dim);
  // The most bits per dimension that fit the budget; 4 when even that does
  // not (the budget is then exceeded: large d needs a PCA projection first).
  faiss::ScalarQuantizer::QuantizerType qt = faiss::ScalarQuantizer::QT_4bit;
  if (dim <= budget)
    qt = faiss::ScalarQuantizer::QT_8bit;
  else if ((dim * 6 + 7) / 8 <= budget)
    qt = faiss::ScalarQuantizer::QT_6bit;
  std::unique_ptr<faiss::IndexIVF> ivf = std::make_unique<faiss::IndexIVFScalarQuantizer>(
      quantizer, dim, nlist, qt, faiss::METRIC_L2, /*encode_residual=*/true);
  // Per-dimension ranges learned from the training sample, widened by 10 %
  // each side: vectors added later (incremental updates) fall outside the
  // sample's exact min..max and would otherwise be clipped.
  static_cast<faiss::IndexIVFScalarQuantizer*>(ivf.get())->sq.rangestat_arg = 0.1f;
  ivf->own_fields = true;
  ivf->cp.niter = 10;
  ivf->cp.min_points_per_centroid = 1;  // Build checks n >= nlist; no FAISS warnings
  ivf->cp.seed = static_cast<int>(options.seed & 0x7fffffff);
  ivf->nprobe = std::min<int64_t>(options.nprobe > 0 ? options.nprobe : 16, nlist);
  impl->ivf = ivf.get();
  impl->index = std::move(ivf);
  return std::unique_ptr<VectorIndex>(new VectorIndex(std::move(impl)));
}

namespace {

// Trains `ivf` (created by Create with its final nlist) on a seeded
// sample of the n vectors: max_train_vectors of them, 64 per list by default.
void TrainIvf(faiss::IndexIVF* ivf, const VectorIndexOptions& o, const float* vectors, int64_t n,
              int64_t dim) {
  const int64_t nlist = static_cast<int64_t>(ivf->nlist);
  const int64_t want = o.max_train_vectors > 0 ? o.max_train_vectors : 64 * nlist;
  if (n < nlist)
    throw std::invalid_argument("cannot train " + std::string(VectorIndexKindName(o.kind)) +
                                " with " + std::to_string(nlist) + " lists on " +
                                std::to_string(n) + " vectors; use flat or fewer lists");
  std::vector<float> sample;
  const float* train = vectors;
  int64_t num_train = n;
  if (n > want) {
    // A seeded sample without replacement, kept in id order.
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(o.seed);
    for (int64_t i = 0; i < want; ++i) {
      std::uniform_int_distribution<int64_t> pick(i, n - 1);
      std::swap(order[i], order[pick(rng)]);
    }
    std::sort(order.begin(), order.begin() + want);
    sample.resize(static_cast<size_t>(want * dim));
    for (int64_t i = 0; i < want; ++i)
      std::copy(vectors + order[i] * dim, vectors + (order[i] + 1) * dim, sample.begin() + i * dim);
    train = sample.data();
    num_train = want;
  }
  ivf->cp.max_points_per_centroid = static_cast<int>(std::max<int64_t>(64, num_train / nlist + 1));
  ivf->verbose = false;
  ivf->train(num_train, train);
}

}  // namespace

std::unique_ptr<VectorIndex> VectorIndex::Build(int64_t dim, const VectorIndexOptions& options,
                                                const int64_t* ids, const float* vectors,
                                                int64_t n) {
  assert(Validated(options));
  VectorIndexOptions o = options;
  o.kind = ResolveKind(options, n, dim);
  if (o.kind != VectorIndexKind::kFlat && o.nlist == 0) o.nlist = AutoNlist(n);
  if (o.nprobe > o.nlist && o.kind != VectorIndexKind::kFlat) o.nprobe = o.nlist;
  std::unique_ptr<VectorIndex> index;
  if (o.kind == VectorIndexKind::kIvfSq && o.model_quantizer) {
    // The model's lists: a copy of them, already trained.
    index = Deserialize(*o.model_quantizer);
    if (index->kind() != VectorIndexKind::kIvfSq || index->dim() != dim || index->ntotal() != 0)
      throw std::invalid_argument("the model's search quantizer (" + index->Describe() + ", " +
                                  std::to_string(index->ntotal()) + " vectors, " +
                                  std::to_string(index->dim()) + "-d) is not an empty ivfsq " +
                                  "index of " + std::to_string(dim) + "-d vectors");
    if (options.nprobe > 0) index->set_nprobe(std::min(options.nprobe, index->nlist()));
  } else {
    index = Create(dim, o);
    if (o.kind != VectorIndexKind::kFlat) TrainIvf(index->impl_->ivf, o, vectors, n, dim);
  }
  // Add in chunks so FAISS's temporary assignment buffers stay small.
  constexpr int64_t kChunk = 65536;
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t m = std::min(kChunk, n - i);
    index->impl_->index->add_with_ids(m, vectors + i * dim, ids + i);
  }
  index->impl_->Compact();
  if (index->impl_->ivf && options.nprobe == 0)
    index->impl_->ivf->nprobe = AutoNprobe(n, index->impl_->ivf->nlist);
  return index;
}

std::unique_ptr<VectorIndex> VectorIndex::Train(int64_t dim, const VectorIndexOptions& options,
                                                const float* vectors, int64_t n) {
  assert(Validated(options));
  if (options.kind == VectorIndexKind::kFlat)
    throw std::invalid_argument("VectorIndex::Train: flat has nothing to train; use Create");
  VectorIndexOptions o = options;
  o.kind = VectorIndexKind::kIvfSq;
  if (o.nlist == 0) o.nlist = AutoNlist(n);
  if (o.nprobe > o.nlist) o.nprobe = o.nlist;
  auto index = Create(dim, o);
  TrainIvf(index->impl_->ivf, o, vectors, n, dim);
  if (options.nprobe == 0) index->impl_->ivf->nprobe = AutoNprobe(n, o.nlist);
  return index;
}

void VectorIndex::MergeFrom(const std::vector<VectorIndex*>& others,
                            const std::vector<int64_t>& id_offsets) {
  auto fail = [](const std::string& why) {
    return std::invalid_argument("cannot merge vector indexes: " + why);
  };
  auto* sq = dynamic_cast<faiss::IndexIVFScalarQuantizer*>(impl_->ivf);
  if (!sq)
    throw fail("only ivfsq indexes merge, this one is " + std::string(VectorIndexKindName(kind())));
  const auto* centroids = dynamic_cast<const faiss::IndexFlat*>(sq->quantizer);
  // Every check before any change: a refused merge leaves all indexes as they were.
  if (!id_offsets.empty() && id_offsets.size() != others.size())
    throw fail(std::to_string(id_offsets.size()) + " id offsets for " +
               std::to_string(others.size()) + " indexes");
  for (int64_t offset : id_offsets)
    if (offset < 0) throw fail("id offset " + std::to_string(offset) + " is negative");
  for (size_t i = 0; i < others.size(); ++i) {
    const VectorIndex* other = others[i];
    if (!other || other == this ||
        std::find(others.begin(), others.begin() + i, other) != others.begin() + i)
      throw fail("index " + std::to_string(i) + " is null, this index or listed twice");
    const auto* osq = dynamic_cast<const faiss::IndexIVFScalarQuantizer*>(other->impl_->ivf);
    if (!osq)
      throw fail("index " + std::to_string(i) + " is " + VectorIndexKindName(other->kind()) +
                 ", not ivfsq");
    const auto* ocentroids = dynamic_cast<const faiss::IndexFlat*>(osq->quantizer);
    if (other->dim() != dim() || osq->nlist != sq->nlist || !centroids || !ocentroids ||
        ocentroids->codes != centroids->codes || osq->sq.qtype != sq->sq.qtype ||
        osq->sq.trained != sq->sq.trained || osq->by_residual != sq->by_residual)
      throw fail("index " + std::to_string(i) + " (" + other->Describe() +
                 ") was not trained with this one (" + Describe() +
                 "): fill copies of one trained index (VectorIndex::Train)");
  }
  // Each list reserved at its final size, so appending never reallocates
  // and the merged lists hold no spare capacity.
  auto* lists = dynamic_cast<faiss::ArrayInvertedLists*>(sq->invlists);
  if (lists) {
    for (size_t l = 0; l < lists->nlist; ++l) {
      size_t total = lists->list_size(l);
      for (const VectorIndex* other : others) total += other->impl_->ivf->invlists->list_size(l);
      lists->codes[l].reserve(total * lists->code_size);
      lists->ids[l].reserve(total);
    }
  }
  for (size_t i = 0; i < others.size(); ++i) {
    VectorIndex* other = others[i];
    sq->merge_from(*other->impl_->ivf, id_offsets.empty() ? 0 : id_offsets[i]);
    if (auto* emptied = dynamic_cast<faiss::ArrayInvertedLists*>(other->impl_->ivf->invlists))
      for (size_t l = 0; l < emptied->nlist; ++l) {
        std::vector<uint8_t>().swap(emptied->codes[l]);
        std::vector<idx_t>().swap(emptied->ids[l]);
      }
  }
}

void VectorIndex::Add(const int64_t* ids, const float* vectors, int64_t n) {
  if (n <= 0) return;
  if (!impl_->index->is_trained)
    throw std::logic_error("vector index of kind " + std::string(VectorIndexKindName(kind())) +
                           " is not trained; build it with VectorIndex::Build");
  impl_->index->add_with_ids(n, vectors, ids);
  impl_->Compact();
}

void VectorIndex::Reserve(int64_t n) {
  if (impl_->ivf || n <= impl_->index->ntotal) return;
  impl_->reserved = n;
  auto* flat = static_cast<faiss::IndexFlat*>(impl_->idmap()->index);
  flat->codes.reserve(static_cast<size_t>(n) * flat->code_size);
  impl_->idmap()->id_map.reserve(static_cast<size_t>(n));
}

int64_t VectorIndex::Remove(const std::vector<int64_t>& ids) {
  if (ids.empty() || impl_->index->ntotal == 0) return 0;
  const faiss::IDSelectorBatch sel(ids.size(), ids.data());
  const int64_t removed = static_cast<int64_t>(impl_->index->remove_ids(sel));
  if (removed) impl_->Compact();
  return removed;
}

void VectorIndex::Search(const float* queries, int64_t n, int64_t k, float* scores,
                         int64_t* ids) const {
  if (n <= 0 || k <= 0) return;
  if (impl_->index->ntotal == 0) {
    std::fill(scores, scores + n * k, -std::numeric_limits<float>::infinity());
    std::fill(ids, ids + n * k, -1);
    return;
  }
  static_assert(sizeof(idx_t) == sizeof(int64_t), "FAISS ids are 64-bit");
  impl_->index->search(n, queries, k, scores, reinterpret_cast<idx_t*>(ids));
  for (int64_t i = 0; i < n * k; ++i) {
    if (ids[i] < 0)
      scores[i] = -std::numeric_limits<float>::infinity();
    else if (impl_->ivf)
      scores[i] = SimilarityFromL2(scores[i]);
  }
}

std::vector<std::vector<Neighbor>> VectorIndex::RangeSearch(const float* queries, int64_t n,
                                                            float min_score,
                                                            int64_t max_results) const {
  std::vector<std::vector<Neighbor>> out(static_cast<size_t>(std::max<int64_t>(n, 0)));
  if (n <= 0 || max_results <= 0 || impl_->index->ntotal == 0) return out;
  faiss::RangeSearchResult result(n);
  // FAISS keeps IP results with score > radius and L2 results with distance <
  // radius; nudge the radius so results exactly at the threshold are kept.
  const float radius = impl_->ivf ? std::nextafter(2.0f - 2.0f * min_score, 1e30f)
                                  : std::nextafter(min_score, -1e30f);
  impl_->index->range_search(n, queries, radius, &result);
  for (int64_t q = 0; q < n; ++q) {
    std::vector<Neighbor>& list = out[q];
    for (size_t j = result.lims[q]; j < result.lims[q + 1]; ++j) {
      const float s = impl_->ivf ? SimilarityFromL2(result.distances[j]) : result.distances[j];
      if (s >= min_score) list.push_back(Neighbor{result.labels[j], s});
    }
    std::sort(list.begin(), list.end(), [](const Neighbor& a, const Neighbor& b) {
      return a.score != b.score ? a.score > b.score : a.id < b.id;
    });
    if (static_cast<int64_t>(list.size()) > max_results) list.resize(max_results);
  }
  return out;
}

std::string VectorIndex::Serialize() const {
  faiss::VectorIOWriter writer;
  faiss::write_index(impl_->index.get(), &writer);
  std::string s(kMagic, 4);
  encoding::PutFixed32(&s, kFormatVersion);
  encoding::PutFixed32(&s, static_cast<uint32_t>(impl_->kind));
  encoding::PutFixed64(&s, static_cast<uint64_t>(impl_->dim));
  encoding::PutFixed64(&s, static_cast<uint64_t>(writer.data.size()));
  s.append(reinterpret_cast<const char*>(writer.data.data()), writer.data.size());
  encoding::PutFixed64(&s, encoding::Fnv1a64(s.data(), s.size()));
  return s;
}

namespace {

// FAISS's reader over a caller's byte source, bounded to the FAISS payload:
// a list size that claims more bytes than are left fails the read (FAISS
// then throws) instead of reading past it.
class BoundedReader : public faiss::IOReader {
 public:
  BoundedReader(const std::function<void(void*, size_t)>& read, uint64_t size)
      : read_(read), left_(size) {}
  size_t operator()(void* ptr, size_t size, size_t nitems) override {
    if (size == 0 || nitems == 0) return 0;
    const size_t items = static_cast<size_t>(std::min<uint64_t>(nitems, left_ / size));
    read_(ptr, items * size);
    left_ -= items * size;
    return items;
  }
  uint64_t left() const { return left_; }

 private:
  const std::function<void(void*, size_t)>& read_;
  uint64_t left_;
};

std::runtime_error Unusable(const std::string& why) {
  return std::runtime_error("search index blob is unusable: " + why);
}

}  // namespace

std::unique_ptr<VectorIndex> VectorIndex::Deserialize(const std::string& blob) {
  if (blob.size() < 4 + 4 + 4 + 8 + 8 + 8 || blob.compare(0, 4, kMagic, 4) != 0)
    throw Unusable("not a lookalike vector index (bad magic or too short)");
  const size_t body = blob.size() - 8;
  if (encoding::Reader(blob.data() + body, 8, "search index").Fixed64() !=
      encoding::Fnv1a64(blob.data(), body))
    throw Unusable("checksum mismatch (corrupted)");
  size_t at = 0;
  return DeserializeFrom(
      [&blob, &at](void* out, size_t n) {
        std::memcpy(out, blob.data() + at, n);  // within the size checked above
        at += n;
      },
      blob.size());
}

std::unique_ptr<VectorIndex> VectorIndex::DeserializeFrom(
    const std::function<void(void* out, size_t n)>& read, uint64_t size) {
  constexpr uint64_t kHeader = 4 + 4 + 4 + 8 + 8;
  if (size < kHeader + 8) throw Unusable("not a lookalike vector index (too short)");
  char header[kHeader];
  read(header, kHeader);
  if (std::memcmp(header, kMagic, 4) != 0)
    throw Unusable("not a lookalike vector index (bad magic)");
  encoding::Reader r(header + 4, kHeader - 4, "search index");
  auto impl = std::make_unique<Impl>();
  try {
    const uint32_t version = r.Fixed32();
    if (version != kFormatVersion)
      throw Unusable("format version " + std::to_string(version) + ", this build reads " +
                     std::to_string(kFormatVersion));
    const uint32_t kind = r.Fixed32();
    if (kind < 1 || kind > 2) throw Unusable("unknown kind " + std::to_string(kind));
    impl->kind = static_cast<VectorIndexKind>(kind);
    impl->dim = static_cast<int64_t>(r.Fixed64());
    const uint64_t payload = r.Fixed64();
    if (payload != size - kHeader - 8) throw Unusable("FAISS payload size does not match the blob");
    BoundedReader reader(read, payload);
    impl->index.reset(faiss::read_index(&reader));
    if (reader.left() != 0) throw Unusable("FAISS payload longer than the index it holds");
    char checksum[8];
    read(checksum, 8);  // the caller's checksum covers it (Deserialize checked it)
  } catch (const encoding::CorruptValue& e) {
    throw Unusable(e.what());
  } catch (const faiss::FaissException& e) {
    throw Unusable(std::string("FAISS could not read it: ") + e.what());
  }
  if (impl->index->d != impl->dim) throw Unusable("dimension mismatch inside the blob");
  if (impl->kind == VectorIndexKind::kFlat) {
    auto* idmap = dynamic_cast<faiss::IndexIDMap*>(impl->index.get());
    if (!idmap || !dynamic_cast<faiss::IndexFlatIP*>(idmap->index))
      throw Unusable("kind flat but the FAISS index is not an IDMap over IndexFlatIP");
  } else {
    impl->ivf = dynamic_cast<faiss::IndexIVF*>(impl->index.get());
    if (!dynamic_cast<faiss::IndexIVFScalarQuantizer*>(impl->ivf))
      throw Unusable("kind and FAISS index type disagree");
  }
  return std::unique_ptr<VectorIndex>(new VectorIndex(std::move(impl)));
}

void VectorIndex::Export(std::vector<int64_t>* ids, std::vector<float>* vectors) const {
  const int64_t n = impl_->index->ntotal, d = impl_->dim;
  ids->clear();
  vectors->clear();
  ids->reserve(n);
  vectors->resize(static_cast<size_t>(n * d));
  if (!impl_->ivf) {
    const auto* idmap = impl_->idmap();
    const auto* flat = static_cast<const faiss::IndexFlat*>(idmap->index);
    ids->assign(idmap->id_map.begin(), idmap->id_map.end());
    std::copy(flat->get_xb(), flat->get_xb() + n * d, vectors->begin());
    return;
  }
  const faiss::InvertedLists* lists = impl_->ivf->invlists;
  for (size_t l = 0; l < lists->nlist; ++l) {
    const size_t size = lists->list_size(l);
    const idx_t* list_ids = lists->get_ids(l);
    for (size_t o = 0; o < size; ++o) {
      impl_->ivf->reconstruct_from_offset(l, o, vectors->data() + ids->size() * d);
      ids->push_back(list_ids[o]);
    }
    lists->release_ids(l, list_ids);
  }
}

VectorIndexKind VectorIndex::kind() const { return impl_->kind; }
int64_t VectorIndex::dim() const { return impl_->dim; }
int64_t VectorIndex::ntotal() const { return impl_->index->ntotal; }
int64_t VectorIndex::nprobe() const { return impl_->ivf ? impl_->ivf->nprobe : 0; }
void VectorIndex::set_parallel_over_lists(bool on) {
  // FAISS's parallel_mode: 0 over queries, 1 over inverted lists (each
  // thread keeps its own heap; they are merged once the lists are scanned).
  if (impl_->ivf) impl_->ivf->parallel_mode = on ? 1 : 0;
}
void VectorIndex::set_nprobe(int64_t nprobe) {
  if (!impl_->ivf) return;
  if (nprobe < 1 || nprobe > static_cast<int64_t>(impl_->ivf->nlist))
    throw std::invalid_argument("nprobe must be in 1.." + std::to_string(impl_->ivf->nlist) +
                                ", got " + std::to_string(nprobe));
  impl_->ivf->nprobe = nprobe;
}
int64_t VectorIndex::nlist() const { return impl_->ivf ? impl_->ivf->nlist : 0; }
int64_t VectorIndex::code_bytes() const {
  return impl_->ivf ? static_cast<int64_t>(impl_->ivf->code_size) : 4 * impl_->dim;
}

int64_t VectorIndex::MemoryBytes() const {
  if (!impl_->ivf) {
    const auto* idmap = impl_->idmap();
    const auto* flat = static_cast<const faiss::IndexFlat*>(idmap->index);
    return static_cast<int64_t>(flat->codes.capacity() + idmap->id_map.capacity() * sizeof(idx_t));
  }
  const faiss::IndexIVF* ivf = impl_->ivf;
  int64_t bytes = static_cast<int64_t>(ivf->quantizer->ntotal) * impl_->dim * 4;
  if (const auto* lists = dynamic_cast<const faiss::ArrayInvertedLists*>(ivf->invlists)) {
    bytes += static_cast<int64_t>(2 * lists->nlist * sizeof(std::vector<uint8_t>));
    for (size_t l = 0; l < lists->nlist; ++l)
      bytes += static_cast<int64_t>(lists->codes[l].capacity() +
                                    lists->ids[l].capacity() * sizeof(idx_t));
  }
  if (const auto* sq = dynamic_cast<const faiss::IndexIVFScalarQuantizer*>(ivf))
    bytes += static_cast<int64_t>(sq->sq.trained.size() * sizeof(float));
  return bytes;
}

std::string VectorIndex::Describe() const {
  std::string s = VectorIndexKindName(impl_->kind);
  if (!impl_->ivf) return s + " (exact inner product)";
  s += " (nlist " + std::to_string(impl_->ivf->nlist) + ", nprobe " +
       std::to_string(impl_->ivf->nprobe) + ", ";
  if (const auto* sq = dynamic_cast<const faiss::IndexIVFScalarQuantizer*>(impl_->ivf))
    s += std::to_string(sq->sq.code_size * 8 / impl_->dim) + "-bit residuals";
  return s + ", " + std::to_string(code_bytes()) + " B codes)";
}

}  // namespace lookalike
