// VectorIndex: the in-memory nearest-neighbour index over search vectors
// (L2-normalised, any dimension), keyed by image id. One class for every kind
// lookalike offers, so the searcher, the indexer and the benchmarks never see
// FAISS types:
//   flat   exact inner product (FAISS IndexFlatIP), 4·d + 8 bytes per image;
//   ivfsq  inverted file (k-means coarse quantizer; Sivic & Zisserman, ICCV
//          2003) whose lists hold residuals to the list centre scalar-quantised
//          to 8 bits per dimension (6 or 4 when 8 would exceed the byte
//          budget), plus the 8-byte id: d + 8 bytes per image (+ ~2 for the
//          lists and centroids).
// `auto` picks flat below VectorIndexOptions::auto_threshold vectors (and for
// full VLAD without a PCA projection) and ivfsq from there on (search/search_index.md, "The vector
// index"; IVF-PQ was measured too and dropped: lower recall at the same budget and a training
// time FAISS 1.7.3 makes impractical here).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace lookalike {

enum class VectorIndexKind { kAuto, kFlat, kIvfSq };

// "auto", "flat", "ivfsq".
const char* VectorIndexKindName(VectorIndexKind kind);
// Inverse of VectorIndexKindName; throws std::invalid_argument listing the names.
VectorIndexKind ParseVectorIndexKind(const std::string& name);

struct VectorIndexOptions {
  VectorIndexKind kind = VectorIndexKind::kAuto;
  // `auto`: exact search below this many vectors, ivfsq from here on. At
  // 20,000 × 256-d the default ivfsq costs about what exact search does
  // (3.0 vs 3.6 ms of CPU per query here) at recall@10 0.99 and a quarter of
  // the memory; beyond it exact search grows linearly, ivfsq does not.
  // >= 1.
  int64_t auto_threshold = 20000;
  // Inverted lists; 0 = AutoNlist(number of vectors at training).
  // 1..65536 otherwise.
  int64_t nlist = 0;
  // Lists visited per query; 0 = AutoNprobe(vectors, nlist), re-chosen as
  // the collection changes. Larger is slower and more exact. Stored with the
  // index; the searcher can override it. 1..nlist.
  int64_t nprobe = 0;
  // Bytes per image ivfsq aims at for its code plus the 8-byte id (lists and
  // coarse centroids add ~2 more): it uses the most bits per dimension in
  // {8, 6, 4} that fit, and 4 when none does. The default keeps 8 bits up to
  // 264 dimensions (the PCA default is 256): at 1M × 256-d, 4-bit codes
  // (138 B/image) measured recall@10 0.72 against 0.98 for 8-bit (266 B).
  // 128 B/image with 8-bit codes needs d <= 120. 16..4096.
  int64_t max_bytes_per_vector = 272;
  // Vectors k-means sees when training an approximate kind (a seeded sample
  // when there are more); 0 = 64 per list. >= 0.
  int64_t max_train_vectors = 0;
  uint64_t seed = 1234;  // training sample and k-means seed
  // Keep the word index (search/word_index.h) beside the vectors in the
  // persisted search index: the selective first stage. Off: no word stage
  // (and an existing word index is dropped at the next save).
  bool words = true;
  // It has no size cap: its lists are read per query from disk (25 bytes
  // per image stay in RAM), and a query reads at most
  // SearchOptions' rerank.word_postings of them (the most selective words),
  // so its cost stops growing with the collection (search/README.md, "The
  // word index").
  // It is built from this many images on (one that exists is kept and
  // used below it): from the first image by default. Below
  // SearchOptions' fusion.word_min_images its list's head is verified but its
  // similarity is not fused (search/search_index.md, "The word index"). A
  // collection without a PCA has no persisted index: search builds its word
  // index in memory from the stored features. >= 0.
  int64_t min_word_images = 0;
  // For a database whose model has no word vocabulary (created before the
  // model carried one): learn the word index's vocabulary again from the
  // whole collection even when a persisted word index is usable (merge: a
  // database grown shard by shard then holds the word index one run over
  // all of it would have built). Ignored when the model has one: it is
  // never learned again.
  bool relearn_words = false;
  // The model's search quantizer (m:ivq, search/model_quantizer.h: a
  // trained, empty ivfsq index, VectorIndex::Serialize bytes), or null.
  // When set, an ivfsq index is built as a copy of it, filled and never
  // trained on the collection, so every database of the model holds lists
  // `merge` can join. Set by ApplyModelQuantizer, not by flags.
  std::shared_ptr<const std::string> model_quantizer;
  // `merge`: join the shards' inverted lists when every shard holds a
  // current index filled from the model's quantizer (the default), rather
  // than building the merged index from every stored vector.
  bool join_lists = true;

  // Throws std::invalid_argument naming the offending field.
  void Validate() const;
};

// Lists an ivfsq index over n vectors gets by default: the power of two
// nearest to 2·sqrt(n), at most 4096 (about 500 vectors per list at 1M) and
// at most n / 8 (at least 1), so small collections still train.
int64_t AutoNlist(int64_t n);

// Lists an ivfsq index of n vectors in nlist lists visits by default: 30 % of
// the lists, or enough for about 8,000 vectors if that is more (small
// collections), at least 16 and at most nlist: 615 of 2048 lists at 1M. On
// vectors with real images' spectrum recall@10 depends on the share of the
// collection scanned, not on nlist, and reaches 0.95 at 25-30 % (0.957 at
// 1M, 28 ms of CPU, against 35 ms exact); the earlier ~8,000 vectors gave
// 0.71 at 100k and 0.34 at 1M (search/search_index.md, "The vector index").
int64_t AutoNprobe(int64_t n, int64_t nlist);

// One result of a range search: an image id and its similarity.
struct Neighbor {
  int64_t id = 0;
  float score = 0;
};

// Thread-compatible: const methods (searches, sizes, Serialize) may run
// concurrently; Add and Remove need exclusive access.
class VectorIndex {
 public:
  // An empty index of `dim`-dimensional vectors. `options` must have passed
  // Validate (asserted; their owner validates them at its boundary) and
  // `kind` must be concrete (kAuto resolved with ResolveKind): an approximate
  // kind is untrained and must be built with Build, not filled with Add.
  // Throws std::invalid_argument for kAuto or a dimension outside 1..2^20.
  static std::unique_ptr<VectorIndex> Create(int64_t dim, const VectorIndexOptions& options);

  // Builds an index over `n` vectors (row-major n × dim, L2-normalised) with
  // image ids `ids`: resolves kAuto by n, trains an approximate kind on a
  // seeded sample (or, for ivfsq with options.model_quantizer, starts from a
  // copy of that trained index), then adds everything. `options` must have passed Validate
  // (asserted). Throws std::invalid_argument (dimension, fewer vectors than
  // lists, a model_quantizer of another kind, dimension or not empty).
  static std::unique_ptr<VectorIndex> Build(int64_t dim, const VectorIndexOptions& options,
                                            const int64_t* ids, const float* vectors, int64_t n);

  // An empty ivfsq index trained on n vectors (row-major n × dim,
  // L2-normalised), as Build trains it: the coarse quantizer's lists and the
  // scalar quantizer's ranges, learned from a seeded sample (max_train_vectors,
  // 64 per list by default). nlist = options.nlist, or AutoNlist(n) when 0:
  // give AutoNlist(expected size) when training on a sample of a larger
  // collection. nprobe = options.nprobe, or AutoNprobe(n, nlist). For a
  // sharded build: copies of it (Serialize, Deserialize) are filled with Add
  // and joined with MergeFrom. options.kind must be kAuto or kIvfSq, and
  // `options` must have passed Validate(). Throws std::invalid_argument (flat
  // kind, n < nlist).
  static std::unique_ptr<VectorIndex> Train(int64_t dim, const VectorIndexOptions& options,
                                            const float* vectors, int64_t n);

  // The concrete kind `options` asks for when the index holds n vectors of
  // `dim` dimensions: `auto` is flat below auto_threshold vectors, and also
  // above kMaxAutoApproximateDim dimensions (full VLAD without a PCA
  // projection, where 4-bit codes would still cost d / 2 bytes), else ivfsq.
  static VectorIndexKind ResolveKind(const VectorIndexOptions& options, int64_t n, int64_t dim);
  static constexpr int64_t kMaxAutoApproximateDim = 1024;

  // Reads an index written by Serialize. Throws std::runtime_error naming
  // what is wrong if the blob is truncated, fails its checksum or is not a
  // lookalike vector index.
  static std::unique_ptr<VectorIndex> Deserialize(const std::string& blob);
  // The same, read front to back through `read` (which copies the next n
  // bytes to `out` or throws) from a blob of `size` bytes, FAISS's lists
  // filled straight from it: no copy of the blob is held. For a blob inside
  // a larger one whose own checksum covers it (the persisted search index):
  // the trailing FNV-1a is read but not recomputed. Throws as Deserialize,
  // or what `read` throws.
  static std::unique_ptr<VectorIndex> DeserializeFrom(
      const std::function<void(void* out, size_t n)>& read, uint64_t size);

  ~VectorIndex();
  VectorIndex(const VectorIndex&) = delete;
  VectorIndex& operator=(const VectorIndex&) = delete;

  // A self-contained byte string (header, FAISS index, FNV-1a checksum).
  std::string Serialize() const;

  // Adds n vectors under `ids`. The ids must not be in the index already
  // (Remove them first to replace a vector): FAISS does not check, and a
  // duplicate would be returned twice. Throws std::logic_error on an
  // untrained approximate index.
  void Add(const int64_t* ids, const float* vectors, int64_t n);

  // Moves every vector of `others` into this index by appending their
  // inverted lists to this one's, list by list (FAISS IndexIVF::merge_from):
  // nothing is re-assigned or re-encoded, so it costs a copy of the codes and
  // gives the index that Add-ing all the vectors to this one would. ivfsq
  // only; every index must be a copy of one trained index (Train): same
  // dimension, lists, coarse centroids and quantizer ranges. The others are
  // left empty, their lists' memory released; this index's lists are grown
  // once to their final size. nprobe is kept: set_nprobe(AutoNprobe(ntotal(),
  // nlist())) re-chooses it for the merged size. id_offsets, if not empty,
  // holds one offset >= 0 per index, added to its ids as they move (merge
  // gives shard s's images the ids offset[s] + id). Ids are not checked for
  // duplicates (as for Add). Throws std::invalid_argument, changing nothing,
  // when an index is flat, null, listed twice or trained separately, or the
  // offsets do not fit.
  void MergeFrom(const std::vector<VectorIndex*>& others,
                 const std::vector<int64_t>& id_offsets = {});

  // Flat kind: room for n vectors in total, so Adds up to n (chunks of a
  // stream) never reallocate and the vectors are held once; the room is kept
  // until it is filled. No-op for approximate kinds or n <= ntotal().
  void Reserve(int64_t n);

  // Removes every vector whose id is listed (absent ids are ignored);
  // returns how many were removed. O(size of the index) per call: batch ids.
  int64_t Remove(const std::vector<int64_t>& ids);

  // For each of n queries (row-major n × dim), the k most similar vectors:
  // similarities (inner products; for approximate kinds estimated from the
  // codes) in scores[q·k ..], best first, and image ids in ids[q·k ..];
  // id -1 and score -inf pad when fewer than k are found.
  void Search(const float* queries, int64_t n, int64_t k, float* scores, int64_t* ids) const;

  // The same as Search, shaped like faiss::Index::search so code written
  // against FAISS keeps working: distances are similarities, labels image ids.
  void search(int64_t n, const float* x, int64_t k, float* distances, int64_t* labels) const {
    Search(x, n, k, distances, labels);
  }

  // For each of n queries, up to max_results vectors with similarity >=
  // min_score, best first, equal scores by id (for near-duplicate detection;
  // a flat index gives the exact inner products Search gives).
  std::vector<std::vector<Neighbor>> RangeSearch(const float* queries, int64_t n, float min_score,
                                                 int64_t max_results) const;

  // Every vector with its id, in no particular order: exact for flat,
  // decoded from the codes for ivfsq. For converting or re-training an index
  // without reading the stored vectors again.
  void Export(std::vector<int64_t>* ids, std::vector<float>* vectors) const;

  VectorIndexKind kind() const;
  int64_t dim() const;
  int64_t ntotal() const;              // vectors held
  int64_t d() const { return dim(); }  // FAISS spelling of dim()
  // Lists visited per query (approximate kinds; 0 for flat). Settable after
  // loading: it is a search-time knob, not part of the trained model.
  int64_t nprobe() const;
  void set_nprobe(int64_t nprobe);
  // How a Search spreads over the OpenMP threads. FAISS splits the queries
  // among them, so one query scans all its lists on one thread; with `on`,
  // an IVF index splits each query's lists among the threads instead (a
  // flat one is unaffected). For callers that search one query at a time.
  // The same results either way. Not thread-safe: set it before searching.
  void set_parallel_over_lists(bool on);
  int64_t nlist() const;       // inverted lists (0 for flat)
  int64_t code_bytes() const;  // bytes of one vector's code (4·d for flat)
  // Heap bytes the index holds: codes, ids, list headers, unused capacity
  // and the trained quantisers.
  int64_t MemoryBytes() const;
  // Human-readable description, e.g. "ivfsq (nlist 2048, nprobe 64, 6-bit)".
  std::string Describe() const;

 private:
  struct Impl;
  explicit VectorIndex(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace lookalike
