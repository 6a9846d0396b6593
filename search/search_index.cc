#include "search/search_index.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <optional>
#include <stdexcept>

#include "indexer/local_features.h"
#include "indexer/model.h"
#include "search/model_quantizer.h"
#include "storage/encoding.h"
#include "util/test_hooks.h"

namespace lookalike {
namespace {

constexpr char kMagic[4] = {'L', 'K', 'S', 'X'};
// The one format this build reads and writes; any other is rebuilt from the
// stored vectors and features (the layout and its history: search_index.h).
constexpr uint32_t kFormat = 6;
constexpr int64_t kChunk = 256;  // stored vectors projected per call

struct Decoded {
  uint64_t fingerprint = 0;
  uint64_t dim = 0;
  uint64_t generation = 0;  // 0 = unknown (a database without one)
  std::vector<IndexedImage> manifest;
  std::unique_ptr<VectorIndex> index;
  uint64_t word_table = 0;  // the word index table's hash; 0 = none
  ColourIndex colours;      // no rows = none
  TinyIndex tiny;           // no rows = none
  // The blob holds the tables but Decode was asked not to keep them.
  bool tables_left = false;
};

// A blob of another format than kFormat: derived data, rebuilt.
class OtherFormat : public std::runtime_error {
 public:
  explicit OtherFormat(uint32_t format)
      : std::runtime_error("persisted search index is format " + std::to_string(format) +
                           ", this build's is " + std::to_string(kFormat) +
                           "; rebuilt from the stored vectors") {}
};

// Reads past n bytes (their checksum still counts).
void Skip(SearchIndexReader* in, uint64_t n) {
  std::vector<char> scratch(std::min<uint64_t>(n, uint64_t{1} << 20));
  while (n > 0) {
    const uint64_t take = std::min<uint64_t>(n, scratch.size());
    in->Read(scratch.data(), take);
    n -= take;
  }
}

uint64_t ReadFixed64(SearchIndexReader* in) {
  char b[8];
  in->Read(b, sizeof b);
  return encoding::Reader(b, sizeof b, "search index").Fixed64();
}

// The u64 row size before a table of n rows (colour, tiny images): true when
// a table of `row_bytes` rows follows, false when the size is 0 (no table).
// Throws std::runtime_error for another row size or too few bytes.
bool TableFollows(SearchIndexReader* in, uint64_t n, uint64_t row_bytes, const std::string& what) {
  const uint64_t stored = ReadFixed64(in);
  if (stored == 0) return false;
  if (stored != row_bytes)
    throw std::runtime_error(what + " rows of " + std::to_string(stored) + " bytes");
  if (in->remaining() / row_bytes < n) throw std::runtime_error(what + " table size mismatch");
  return true;
}

// A table of n rows after its row size (TableFollows), read into `rows`;
// false (nothing read) when there is none. With `rows` null the table's
// bytes are read past (hashed, not kept).
template <typename T>
bool ReadRows(SearchIndexReader* in, uint64_t n, uint64_t row_bytes, const std::string& what,
              std::vector<T>* rows) {
  if (!TableFollows(in, n, row_bytes, what)) return false;
  if (rows) {
    rows->resize(n * row_bytes);
    in->Read(rows->data(), rows->size());
  } else {
    Skip(in, n * row_bytes);
  }
  return true;
}

// The colour and tiny-image tables from the reader's position (each after
// its u64 row size) scanned for `query` a block of rows at a time, the best
// kept as they pass (row i is image ids[i]): what ColourIndex::Search and
// TinyIndex::Search give over the same rows. *any: a table was there.
// Throws std::runtime_error for a row size or length that does not fit.
StoredCandidates ScanTables(SearchIndexReader* in, const std::vector<uint64_t>& ids,
                            const TableQuery& query, bool* any) {
  const uint64_t n = ids.size();
  constexpr uint64_t kBlockRows = 8192;
  const auto scan = [&](uint64_t row_bytes, const char* what, auto&& block) {
    if (!TableFollows(in, n, row_bytes, what)) return;
    *any = true;
    std::vector<char> rows(kBlockRows * row_bytes);
    for (uint64_t i = 0; i < n; i += kBlockRows) {
      const uint64_t m = std::min(kBlockRows, n - i);
      in->Read(rows.data(), m * row_bytes);
      block(i, m, rows.data());
    }
  };
  ColourIndex::Scored by_colour;
  scan(ColourIndex::kRowBytes, "colour", [&](uint64_t i, uint64_t m, const char* rows) {
    ColourIndex::Scan(query.colour, ids.data() + i, reinterpret_cast<const uint8_t*>(rows),
                      static_cast<int64_t>(m), query.colour_n, &by_colour);
  });
  TinyIndex::Scored by_tiny;
  scan(TinyIndex::kRowBytes, "tiny image", [&](uint64_t i, uint64_t m, const char* rows) {
    TinyIndex::Scan(query.tiny, ids.data() + i, reinterpret_cast<const int8_t*>(rows),
                    static_cast<int64_t>(m), query.tiny_n, &by_tiny);
  });
  StoredCandidates out;
  out.by_colour = ColourIndex::Best(std::move(by_colour), query.colour_n);
  out.by_thumbnail = TinyIndex::Best(std::move(by_tiny), query.tiny_n);
  return out;
}

// The blob's magic and format (kFormat is the one this build reads). Throws
// std::runtime_error for a blob that is not a search index.
uint32_t ReadMagicAndFormat(SearchIndexReader* in) {
  char head[4 + 4];
  if (in->size() < sizeof head) throw std::runtime_error("not a lookalike search index");
  in->Read(head, sizeof head);
  if (std::memcmp(head, kMagic, 4) != 0) throw std::runtime_error("not a lookalike search index");
  return encoding::Reader(head + 4, 4, "search index").Fixed32();
}

// Reads the blob front to back, building each table as its bytes pass: no
// copy of the blob is held (at 1,000,000 images the blob is 345 MB). The
// reader checks the blob's checksum as its last chunk is read. Without
// `keep_tables` the colour and tiny-image rows are read past (tables_left),
// scanned for `first` (the query about to be searched) into *found if given.
Decoded Decode(SearchIndexReader* in, bool keep_tables = true, const TableQuery* first = nullptr,
               std::optional<StoredCandidates>* found = nullptr) {
  const uint32_t format = ReadMagicAndFormat(in);
  if (format != kFormat) throw OtherFormat(format);
  Decoded d;
  d.fingerprint = ReadFixed64(in);
  d.dim = ReadFixed64(in);
  d.generation = ReadFixed64(in);
  const uint64_t n = ReadFixed64(in);
  if (n > in->remaining() / 16) throw std::runtime_error("manifest truncated");
  d.manifest.resize(n);
  {
    constexpr uint64_t kBlock = 4096;  // manifest entries decoded per read
    std::string bytes(kBlock * 16, '\0');
    for (uint64_t i = 0; i < n; i += kBlock) {
      const uint64_t m = std::min(kBlock, n - i);
      in->Read(bytes.data(), m * 16);
      encoding::Reader r(bytes.data(), m * 16, "search index manifest");
      for (uint64_t j = 0; j < m; ++j) {
        d.manifest[i + j].id = r.Fixed64();
        d.manifest[i + j].content_hash = r.Fixed64();
      }
    }
  }
  for (size_t i = 1; i < d.manifest.size(); ++i)
    if (d.manifest[i].id <= d.manifest[i - 1].id)
      throw std::runtime_error("manifest not in id order");
  const uint64_t size = ReadFixed64(in);
  if (size > in->remaining()) throw std::runtime_error("index size mismatch");
  d.index = VectorIndex::DeserializeFrom([in](void* out, size_t k) { in->Read(out, k); }, size);
  d.word_table = ReadFixed64(in);
  std::vector<uint64_t> ids(n);
  for (uint64_t i = 0; i < n; ++i) ids[i] = d.manifest[i].id;
  if (!keep_tables && first && found) {
    // The rows pass here anyway (for the checksum): the query's first look
    // in them costs no second pass.
    *found = ScanTables(in, ids, *first, &d.tables_left);
  } else {
    std::vector<uint8_t> colour_rows;
    if (ReadRows(in, n, ColourIndex::kRowBytes, "colour", keep_tables ? &colour_rows : nullptr)) {
      if (keep_tables) d.colours.Assign(ids, std::move(colour_rows));
      d.tables_left = !keep_tables;
    }
    std::vector<int8_t> tiny_rows;
    if (ReadRows(in, n, TinyIndex::kRowBytes, "tiny image", keep_tables ? &tiny_rows : nullptr)) {
      if (keep_tables) d.tiny.Assign(std::move(ids), std::move(tiny_rows));
      d.tables_left = !keep_tables;
    }
  }
  if (in->remaining() != 0)
    throw std::runtime_error(std::to_string(in->remaining()) + " bytes past its last table");
  if (static_cast<int64_t>(d.manifest.size()) != d.index->ntotal())
    throw std::runtime_error("manifest lists " + std::to_string(d.manifest.size()) +
                             " images, the index holds " + std::to_string(d.index->ntotal()));
  if (static_cast<uint64_t>(d.index->dim()) != d.dim)
    throw std::runtime_error("dimension mismatch");
  return d;
}

// Search vectors of the listed images.
void ReadVectors(const SearchVectors& vectors, const std::vector<uint64_t>& ids,
                 std::vector<float>* out) {
  out->resize(ids.size() * static_cast<size_t>(vectors.dim()));
  for (size_t i = 0; i < ids.size(); i += kChunk) {
    const size_t n = std::min<size_t>(kChunk, ids.size() - i);
    const std::vector<uint64_t> part(ids.begin() + i, ids.begin() + i + n);
    vectors.Read(part, out->data() + i * vectors.dim());
  }
}

// Every stored image with features, in id order; their colours into
// `colours` unless it is null.
void ReadAllVectors(const SearchVectors& vectors, std::vector<IndexedImage>* manifest,
                    std::vector<float>* out, int64_t* num_zero, ColourIndex* colours) {
  const int64_t dim = vectors.dim();
  manifest->clear();
  out->clear();
  *num_zero = 0;
  vectors.ForEach(
      [&](const std::vector<ImageRecord>& records, const float* v) {
        for (size_t i = 0; i < records.size(); ++i) {
          const ImageRecord& rec = records[i];
          if (rec.status == ImageStatus::kNoFeatures) {
            ++*num_zero;  // the zero vector matches nothing
            continue;
          }
          manifest->push_back(IndexedImage{rec.id, rec.content_hash});
          if (colours) colours->Append(rec.id, rec.colour);
          out->insert(out->end(), v + i * dim, v + (i + 1) * dim);
        }
      },
      kChunk);
}

std::vector<int64_t> Ids(const std::vector<IndexedImage>& manifest) {
  std::vector<int64_t> ids(manifest.size());
  for (size_t i = 0; i < manifest.size(); ++i) ids[i] = static_cast<int64_t>(manifest[i].id);
  return ids;
}

// The same, as the word index takes them.
std::vector<uint64_t> WordIds(const std::vector<IndexedImage>& manifest) {
  std::vector<uint64_t> ids(manifest.size());
  for (size_t i = 0; i < manifest.size(); ++i) ids[i] = manifest[i].id;
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

// Step 1: the persisted index into `sync` (loaded = true) if it is usable,
// else the reason it is not.
// Its word index is decoded only when `words` (options.words) asks for it.
void LoadPersisted(const Store& store, int64_t dim, bool words, bool keep_tables,
                   SearchIndexSync* sync, const TableQuery* first = nullptr) {
  try {
    const std::unique_ptr<SearchIndexReader> blob = store.ReadSearchIndex();
    if (!blob) {
      sync->reason = "no persisted search index";
      return;
    }
    std::optional<StoredCandidates> found;
    Decoded d = Decode(blob.get(), keep_tables, first, &found);
    if (d.fingerprint != store.model().codebook_hash || d.dim != static_cast<uint64_t>(dim)) {
      sync->reason = "persisted search index was built for another model or dimension";
      return;
    }
    sync->index = std::move(d.index);
    sync->manifest = std::move(d.manifest);
    sync->colours = std::move(d.colours);
    sync->tiny = std::move(d.tiny);
    sync->generation = d.generation;
    sync->old_header = blob->old_checksum();
    sync->tables_stored = d.tables_left;
    if (d.tables_left) sync->first_candidates = std::move(found);
    sync->loaded = true;
    // Not wanted: left unread, and dropped at the next save.
    const bool has_words = d.word_table != 0;
    if (!words && has_words) sync->words_dropped = true;
    if (!words || !has_words) return;
    try {
      sync->words = StoredWordIndex::Load(store, CodebookFromModel(store.model()), d.word_table);
    } catch (const encoding::CorruptValue&) {
      // Derived data: a damaged word index is rebuilt from the features.
      sync->words.reset();
    } catch (const StoreError& e) {
      if (e.kind() != StoreError::Kind::kCorrupt) throw;
      sync->words.reset();
    }
  } catch (const StoreError& e) {
    if (e.kind() != StoreError::Kind::kCorrupt) throw;
    sync->reason = e.what();
  } catch (const OtherFormat& e) {
    sync->reason = e.what();
    // Its word index (w:t names one since format 4) is rebuilt too, even
    // below options.min_word_images: as one a database has is kept.
    try {
      sync->had_words = store.GetWordTable().has_value();
    } catch (const StoreError&) {
      sync->had_words = true;  // a damaged one
    }
  } catch (const std::runtime_error& e) {
    sync->reason = std::string("persisted search index unusable: ") + e.what();
  }
}

// An index of every stored vector, with its manifest and num_zero.
void BuildFromStore(const Store& store, const SearchVectors& vectors,
                    const VectorIndexOptions& options, SearchIndexSync* sync) {
  std::vector<float> all;
  sync->colours = ColourIndex();
  ReadAllVectors(vectors, &sync->manifest, &all, &sync->num_zero,
                 store.stores_colour() ? &sync->colours : nullptr);
  sync->index = BuildFrom(vectors.dim(), options, Ids(sync->manifest), all);
}

// Replaces what was loaded by an index of every stored vector.
void Rebuild(const Store& store, const SearchVectors& vectors, const VectorIndexOptions& options,
             SearchIndexSync* sync) {
  BuildFromStore(store, vectors, options, sync);
  sync->rebuilt = true;
  sync->added = sync->removed = 0;
}

// Step 2: how the held manifest differs from the records (both in id order).
struct Difference {
  std::vector<int64_t> to_remove;    // held, but removed, changed or featureless
  std::vector<uint64_t> to_add;      // new or changed, with features
  std::vector<IndexedImage> wanted;  // the manifest once applied
  ColourIndex colours;               // wanted's colours (none without colour)
  int64_t num_zero = 0;              // images without features
};

Difference Compare(const Store& store, const std::vector<IndexedImage>& held) {
  Difference diff;
  const bool colour = store.stores_colour();
  size_t m = 0;
  store.ForEachImage([&](const ImageRecord& rec) {
    while (m < held.size() && held[m].id < rec.id) diff.to_remove.push_back(held[m++].id);
    const bool in_index = m < held.size() && held[m].id == rec.id;
    if (rec.status == ImageStatus::kNoFeatures) {
      ++diff.num_zero;
      if (in_index) diff.to_remove.push_back(held[m].id);
    } else if (in_index && held[m].content_hash == rec.content_hash) {
      diff.wanted.push_back(held[m]);
    } else {
      if (in_index) diff.to_remove.push_back(held[m].id);
      diff.to_add.push_back(rec.id);
      diff.wanted.push_back(IndexedImage{rec.id, rec.content_hash});
    }
    // Read anyway: the table is rebuilt whole, a held row is never trusted.
    if (colour && rec.status != ImageStatus::kNoFeatures) diff.colours.Append(rec.id, rec.colour);
    if (in_index) ++m;
  });
  while (m < held.size()) diff.to_remove.push_back(held[m++].id);
  return diff;
}

// Step 3: whether an index of kind `have` over n vectors must become `want`
// or re-learn its lists: when the collection crossed a size.
bool NeedsRetraining(const VectorIndexOptions& options, const VectorIndex& index,
                     VectorIndexKind want, int64_t n) {
  const VectorIndexKind have = index.kind();
  const bool grown = have == VectorIndexKind::kIvfSq && options.nlist == 0 &&
                     want == VectorIndexKind::kIvfSq && index.nlist() * 4 <= AutoNlist(n);
  // An auto index turns exact again only well below the threshold, so a
  // collection hovering around it does not flip back and forth.
  const bool shrunk = options.kind == VectorIndexKind::kAuto && have == VectorIndexKind::kIvfSq &&
                      n < options.auto_threshold / 2;
  const bool explicit_change = options.kind != VectorIndexKind::kAuto && want != have;
  const bool auto_grow =
      options.kind == VectorIndexKind::kAuto && have == VectorIndexKind::kFlat && want != have;
  return grown || shrunk || explicit_change || auto_grow;
}

// Step 3, done: a new index of kind `want` from the held index's own vectors
// plus `to_add` (retrained = true).
void Retrain(const SearchVectors& vectors, const VectorIndexOptions& options, VectorIndexKind want,
             const std::vector<uint64_t>& to_add, SearchIndexSync* sync) {
  std::vector<int64_t> ids;
  std::vector<float> held;
  const VectorIndexKind have = sync->index->kind();
  if (have == VectorIndexKind::kFlat || want == have) {
    // The flat index holds the exact vectors; an ivfsq index re-learning its
    // lists as it grew keeps its kind, and its 8-bit residual codes are close
    // enough to re-learn them from.
    sync->index->Export(&ids, &held);
    std::vector<float> fresh;
    ReadVectors(vectors, to_add, &fresh);
    ids.insert(ids.end(), to_add.begin(), to_add.end());
    held.insert(held.end(), fresh.begin(), fresh.end());
  } else {
    // Leaving an approximate kind: read the exact vectors again.
    std::vector<IndexedImage> all;
    int64_t zero = 0;
    ReadAllVectors(vectors, &all, &held, &zero, nullptr);
    ids = Ids(all);
  }
  sync->added = static_cast<int64_t>(to_add.size());
  VectorIndexOptions o = options;
  o.kind = want;
  sync->index = BuildFrom(vectors.dim(), o, ids, held);
  sync->retrained = true;
}

// Step 4: adds what is new or changed; the default nprobe follows the size.
void AddFresh(const SearchVectors& vectors, const VectorIndexOptions& options,
              const std::vector<uint64_t>& to_add, SearchIndexSync* sync) {
  std::vector<float> fresh;
  for (size_t i = 0; i < to_add.size(); i += 4096) {
    const std::vector<uint64_t> part(to_add.begin() + i,
                                     to_add.begin() + std::min(to_add.size(), i + 4096));
    ReadVectors(vectors, part, &fresh);
    std::vector<int64_t> ids(part.begin(), part.end());
    sync->index->Add(ids.data(), fresh.data(), static_cast<int64_t>(ids.size()));
  }
  sync->added = static_cast<int64_t>(to_add.size());
  if (options.nprobe == 0 && sync->index->nlist() > 0) {
    const int64_t nprobe = AutoNprobe(sync->index->ntotal(), sync->index->nlist());
    if (nprobe != sync->index->nprobe()) {
      sync->index->set_nprobe(nprobe);
      sync->retuned = true;
    }
  }
}

// The word index: signatures of images from their stored local features.
class WordSource {
 public:
  explicit WordSource(const Store& store)
      : store_(store), quantizer_(LoadDescriptorQuantizer(store)) {}
  // Image `id`'s stored descriptors (unit rows); empty without features.
  std::vector<float> Descriptors(uint64_t id) const {
    const auto blob = store_.GetFeatures(id);
    if (!blob) return {};
    return DecodeLocalFeatures(*blob, quantizer_ ? &*quantizer_ : nullptr).descriptors;
  }
  // Adds the images of `ids` to `words`, encoding them on all OpenMP threads.
  void Add(const std::vector<uint64_t>& ids, StoredWordIndex* words) const {
    constexpr size_t kBatch = 256;
    std::vector<std::vector<WordSignature>> signatures(kBatch);
    for (size_t start = 0; start < ids.size(); start += kBatch) {
      const size_t end = std::min(ids.size(), start + kBatch);
      std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 4)
      for (size_t i = start; i < end; ++i) {
        try {
          const std::vector<float> d = Descriptors(ids[i]);
          signatures[i - start] = words->vocabulary().Encode(
              d.data(), static_cast<int64_t>(d.size()) / words->vocabulary().dim());
        } catch (...) {
#pragma omp critical(lookalike_word_failure)
          if (!failure) failure = std::current_exception();
        }
      }
      if (failure) std::rethrow_exception(failure);
      for (size_t i = start; i < end; ++i)
        if (!signatures[i - start].empty()) words->Add(ids[i], signatures[i - start]);
    }
  }
  // A vocabulary learned from a sample of the images of `manifest` (their
  // features spread over the collection), as a database whose model has
  // none learns it; nullopt when none has stored features.
  std::optional<WordVocabulary> Learn(const std::vector<IndexedImage>& manifest,
                                      uint64_t seed) const {
    const Codebook codebook = CodebookFromModel(store_.model());
    // About 500 descriptors per codebook word from up to 400 images spread
    // over the collection: enough for 16 sub-words each.
    constexpr int64_t kSampleImages = 400;
    const int64_t max_sample = int64_t{codebook.num_clusters()} * 512;
    // Chosen in content-hash order, not id order, so that the same images
    // give the same vocabulary whatever ids they got (a merged database and
    // one run over the same files).
    std::vector<IndexedImage> by_content = manifest;
    std::sort(
        by_content.begin(), by_content.end(), [](const IndexedImage& a, const IndexedImage& b) {
          return a.content_hash != b.content_hash ? a.content_hash < b.content_hash : a.id < b.id;
        });
    const size_t step = std::max<size_t>(1, by_content.size() / kSampleImages);
    std::vector<float> sample;
    for (size_t i = 0; i < by_content.size(); i += step) {
      if (static_cast<int64_t>(sample.size()) >= max_sample * codebook.dim()) break;
      const std::vector<float> d = Descriptors(by_content[i].id);
      sample.insert(sample.end(), d.begin(), d.end());
    }
    const int64_t n =
        std::min<int64_t>(static_cast<int64_t>(sample.size()) / codebook.dim(), max_sample);
    if (n == 0) return std::nullopt;
    WordVocabularyOptions o;
    o.seed = seed;
    return WordVocabulary::Train(codebook, sample.data(), n, o);
  }
  // A word index over the model's vocabulary (`model`), or else one learned
  // (Learn), filled with all the images of `manifest`, its lists written to
  // `writer` as they fill when there is one; null when there is no
  // vocabulary (no image has stored features).
  std::unique_ptr<StoredWordIndex> Build(const std::vector<IndexedImage>& manifest, uint64_t seed,
                                         const std::optional<WordVocabulary>& model,
                                         Store* writer) const {
    if (manifest.empty()) return nullptr;
    std::unique_ptr<StoredWordIndex> words;
    if (model) {
      words = std::make_unique<StoredWordIndex>(store_, *model, /*stored_with_model=*/true);
    } else {
      std::optional<WordVocabulary> learned = Learn(manifest, seed);
      if (!learned) return nullptr;
      words = std::make_unique<StoredWordIndex>(store_, std::move(*learned));
    }
    if (writer) words->SetWriter(writer);
    Add(WordIds(manifest), words.get());
    return words;
  }

 private:
  const Store& store_;
  std::optional<DescriptorQuantizer> quantizer_;
};

// The persisted index of a merged shard when it matches its records (the
// same generation) and its model: what `merge` may join from it. Nullopt
// otherwise, with *why (derived data: a damaged or older one is not joined).
std::optional<Decoded> CurrentShardIndex(const Store& shard, std::string* why) {
  const std::string name = shard.path();
  try {
    const std::optional<ImageTotals> totals = shard.totals();
    const std::unique_ptr<SearchIndexReader> blob = shard.ReadSearchIndex();
    if (!totals || totals->generation == 0 || !blob) {
      *why = name + " has no persisted search index";
      return std::nullopt;
    }
    Decoded d = Decode(blob.get());
    if (d.fingerprint != shard.model().codebook_hash || d.generation != totals->generation) {
      *why = name + "'s search index does not match its images (run 'lookalike index' on it)";
      return std::nullopt;
    }
    return d;
  } catch (const std::exception& e) {
    *why = name + "'s search index is unusable: " + e.what();
    return std::nullopt;
  }
}

// The persisted word index of `shard` when it can be joined: its search
// index matches its records (same generation) and its words were encoded
// with `model` (the model's vocabulary, which the merged database shares).
// Null otherwise: its images are then encoded from their features.
std::unique_ptr<StoredWordIndex> CurrentShardWords(const Store& shard, const std::string& model) {
  try {
    const std::optional<std::string> vocabulary = shard.GetModelWordVocabulary();
    if (!vocabulary || *vocabulary != model) return nullptr;
    std::string why;
    const std::optional<Decoded> d = CurrentShardIndex(shard, &why);
    if (!d || d->word_table == 0) return nullptr;
    auto words = StoredWordIndex::Load(shard, CodebookFromModel(shard.model()), d->word_table);
    if (!words || !words->vocabulary_from_model()) return nullptr;
    return words;
  } catch (const std::exception&) {
    return nullptr;  // derived data: a damaged or older one is not joined
  }
}

// merge: the vector index, manifest, colour and tiny tables of the merged
// shards, joined from their persisted indexes (inverted lists appended list
// by list, ids re-keyed by each shard's offset: VectorIndex::MergeFrom),
// when `options` build ivfsq from the model's quantizer (ApplyModelQuantizer),
// the database holds only the shards' images and every shard's persisted
// index matches its records (same generation) and was filled from that
// quantizer. Marked loaded at generation 0, so Sync then reconciles it with
// the records like any persisted index. Nullopt otherwise, with *why.
std::optional<SearchIndexSync> JoinShardLists(const Store& store,
                                              const std::vector<MergedShard>& merged,
                                              const VectorIndexOptions& options, std::string* why) {
  if (!options.model_quantizer || options.kind != VectorIndexKind::kIvfSq) return std::nullopt;
  if (!options.join_lists) {
    *why = "not asked to (--join-lists off)";
    return std::nullopt;
  }
  uint64_t shard_images = 0;
  for (const MergedShard& m : merged) shard_images += m.store->num_images();
  if (store.num_images() != shard_images) {
    *why = "the database held images before the merge";
    return std::nullopt;
  }
  SearchIndexSync sync;
  sync.index = VectorIndex::Deserialize(*options.model_quantizer);
  std::vector<uint64_t> ids;
  std::vector<uint8_t> colours;
  std::vector<int8_t> tiny;
  bool whole_colours = true, whole_tiny = true;
  for (const MergedShard& m : merged) {
    const std::string name = m.store->path();
    std::optional<Decoded> current = CurrentShardIndex(*m.store, why);
    if (!current) return std::nullopt;
    Decoded& d = *current;
    if (d.manifest.empty()) continue;  // an empty shard's index is flat: nothing to join
    try {
      sync.index->MergeFrom({d.index.get()}, {static_cast<int64_t>(m.id_offset)});
    } catch (const std::invalid_argument& e) {
      *why = name + "'s lists are not the model's (" + e.what() + ")";
      return std::nullopt;
    }
    for (const IndexedImage& image : d.manifest) {
      sync.manifest.push_back(IndexedImage{image.id + m.id_offset, image.content_hash});
      ids.push_back(image.id + m.id_offset);
    }
    whole_colours = whole_colours && d.colours.rows() == static_cast<int64_t>(d.manifest.size());
    whole_tiny = whole_tiny && d.tiny.rows() == static_cast<int64_t>(d.manifest.size());
    if (whole_colours)
      colours.insert(colours.end(), d.colours.table().begin(), d.colours.table().end());
    if (whole_tiny) tiny.insert(tiny.end(), d.tiny.table().begin(), d.tiny.table().end());
    TestStopPoint("merge-lists-joined");
  }
  if (!std::is_sorted(ids.begin(), ids.end())) {
    *why = "the shards' ids are not in merge order";
    return std::nullopt;
  }
  // Tables a shard lacked are read from the records and thumbnails by Sync.
  if (whole_colours && !ids.empty()) sync.colours.Assign(ids, std::move(colours));
  if (whole_tiny && !ids.empty()) sync.tiny.Assign(std::move(ids), std::move(tiny));
  sync.lists_joined = static_cast<int64_t>(merged.size());
  sync.loaded = true;
  sync.generation = 0;
  return sync;
}

// Adds the images of `ids` to sync->words: those of a merged shard whose
// word index can be joined (CurrentShardWords) by copying its postings with
// their ids re-keyed (StoredWordIndex::AddFrom), the others encoded from
// their stored features.
void AddWords(const Store& store, const WordSource& source, const std::vector<uint64_t>& ids,
              const std::vector<MergedShard>& merged, Store* writer, SearchIndexSync* sync) {
  std::vector<uint64_t> rest = ids;
  const std::optional<std::string> model =
      merged.empty() ? std::nullopt : store.GetModelWordVocabulary();
  if (writer && model && sync->words->vocabulary_from_model()) {
    std::sort(rest.begin(), rest.end());
    for (const MergedShard& m : merged) {
      const std::unique_ptr<StoredWordIndex> shard = CurrentShardWords(*m.store, *model);
      if (!shard) continue;
      // Every image it holds is one this sync adds (re-keyed).
      const std::vector<uint64_t> held = shard->ImageIds();
      if (!std::all_of(held.begin(), held.end(), [&](uint64_t id) {
            return std::binary_search(rest.begin(), rest.end(), id + m.id_offset);
          }))
        continue;
      sync->words_joined += sync->words->AddFrom(*shard, m.id_offset);
      TestStopPoint("merge-word-lists-joined");  // a segment the table does not list yet
      // The shard's whole id range: its images without words have none to add.
      const uint64_t first = m.id_offset + 1, end = m.id_offset + m.store->next_id();
      rest.erase(std::remove_if(rest.begin(), rest.end(),
                                [&](uint64_t id) { return id >= first && id < end; }),
                 rest.end());
    }
  }
  source.Add(rest, sync->words.get());
}

// The word index brought in line with the manifest: kept when current,
// updated by `diff` (removed, then added), or built from every image.
// With a `writer` (the `index` run), what it adds is written as segments.
void SyncWords(const Store& store, Store* writer, const VectorIndexOptions& options,
               const std::vector<int64_t>* to_remove, const std::vector<uint64_t>* to_add,
               const std::vector<MergedShard>& merged, SearchIndexSync* sync) {
  const int64_t images = static_cast<int64_t>(sync->manifest.size());
  if (!options.words) {
    sync->words_dropped = sync->words_dropped || sync->words != nullptr;
    sync->words.reset();
    return;
  }
  const WordSource source(store);
  // The model's vocabulary, when it has one, is never learned again: every
  // image of the database, and of every shard of its model, is encoded with it.
  if (sync->words && options.relearn_words && !store.GetModelWordVocabulary()) sync->words.reset();
  if (sync->words && writer) {
    sync->words->SetWriter(writer);
    sync->words_upgraded = sync->words->needs_rewrite();
  }
  if (sync->words && to_remove) {
    sync->words->Remove(*to_remove);
    // An image the index somehow still holds is re-encoded, not doubled.
    sync->words->Remove(std::vector<int64_t>(to_add->begin(), to_add->end()));
    AddWords(store, source, *to_add, merged, writer, sync);
    return;
  }
  if (sync->words) return;
  // None is built for a small collection; one it has (built with a lower
  // minimum, or before it shrank) is kept and used, and rebuilt with an
  // index of another format.
  if (images < options.min_word_images && !sync->had_words) return;
  const std::optional<WordVocabulary> model = ModelWordVocabulary(store);
  if (model && writer) {
    sync->words = std::make_unique<StoredWordIndex>(store, *model, /*stored_with_model=*/true);
    sync->words->SetWriter(writer);
    AddWords(store, source, WordIds(sync->manifest), merged, writer, sync);
  } else {
    sync->words = source.Build(sync->manifest, options.seed, model, writer);
  }
  sync->words_built = sync->words != nullptr;
}

// The tiny images of the manifest's images, row i for manifest[i]: a row the
// held table has is kept, unless its image is in `fresh` (added or changed)
// or the row is zero and the image has a thumbnail now (one added by a later
// run); the writer (`read`) computes the others from the stored thumbnails,
// a reader leaves them zero (no thumbnail candidates until the next `index`).
// The thumbnails are listed (a key scan) only when some row may need one.
// sync->tiny_read counts the rows that differ from what the held table had.
void SyncTiny(const Store& store, bool read, const std::vector<uint64_t>& fresh,
              SearchIndexSync* sync) {
  sync->tiny_read = 0;
  if (!read) {
    // A reader keeps the table as loaded when it covers the manifest, and
    // offers none when there was none (no all-zero table to scan per query).
    const std::vector<uint64_t>& ids = sync->tiny.ids();
    if (ids.empty()) return;
    if (fresh.empty() && ids.size() == sync->manifest.size() &&
        std::equal(ids.begin(), ids.end(), sync->manifest.begin(),
                   [](uint64_t id, const IndexedImage& m) { return id == m.id; }))
      return;
  }
  const TinyIndex held = std::move(sync->tiny);
  sync->tiny = TinyIndex();
  std::vector<uint64_t> sorted_fresh = fresh;
  std::sort(sorted_fresh.begin(), sorted_fresh.end());
  const std::vector<uint64_t>& held_ids = held.ids();
  std::vector<TinyIndex::Row> rows(sync->manifest.size());
  std::vector<bool> was_held(rows.size(), false);
  std::vector<size_t> open;  // rows a thumbnail may fill
  size_t h = 0;
  for (size_t i = 0; i < sync->manifest.size(); ++i) {
    const uint64_t id = sync->manifest[i].id;
    while (h < held_ids.size() && held_ids[h] < id) ++h;
    if (h < held_ids.size() && held_ids[h] == id &&
        !std::binary_search(sorted_fresh.begin(), sorted_fresh.end(), id)) {
      rows[i] = held.RowAt(static_cast<int64_t>(h));
      was_held[i] = true;
      if (!TinyIndex::IsZero(rows[i])) continue;
    }
    open.push_back(i);
  }
  std::vector<uint64_t> to_read;
  std::vector<size_t> read_into;
  if (read && !open.empty()) {
    const std::vector<uint64_t> with_thumbnail = store.IdsWithThumbnails();  // ascending
    for (size_t i : open) {
      const uint64_t id = sync->manifest[i].id;
      if (std::binary_search(with_thumbnail.begin(), with_thumbnail.end(), id)) {
        to_read.push_back(id);
        read_into.push_back(i);
      }
    }
  }
  int64_t changed = 0;
  constexpr size_t kReadChunk = 1024;
  for (size_t start = 0; start < to_read.size(); start += kReadChunk) {
    const size_t end = std::min(to_read.size(), start + kReadChunk);
    const std::vector<uint64_t> ids(to_read.begin() + start, to_read.begin() + end);
    const std::vector<std::optional<std::string>> values = store.GetThumbnails(ids);
    for (size_t j = 0; j < ids.size(); ++j) {
      if (!values[j]) continue;
      TinyIndex::Row row{};
      try {
        row = TinyIndex::RowOf(DecodeGreyThumbnail(*values[j]));
      } catch (const encoding::CorruptValue&) {
        // Derived data: a damaged thumbnail (which `verify` reports) gives a
        // zero row, never a candidate.
      }
      const size_t i = read_into[start + j];
      // A flat thumbnail's row stays zero: read again, changed nothing.
      changed += !was_held[i] || row != rows[i];
      rows[i] = row;
    }
  }
  for (size_t i = 0; i < rows.size(); ++i) sync->tiny.Append(sync->manifest[i].id, rows[i]);
  sync->tiny_read = changed;
}

SearchIndexSync Sync(const Store& store, Store* writer, const SearchVectors& vectors,
                     const VectorIndexOptions& options, bool build_transient,
                     const std::vector<MergedShard>& merged = {}, bool hold_tables = true,
                     const TableQuery* first = nullptr) {
  const int64_t dim = vectors.dim();
  SearchIndexSync sync;
  if (dim > kMaxPersistedFlatDim && WantedKind(options, static_cast<int64_t>(store.num_images()),
                                               dim) == VectorIndexKind::kFlat) {
    sync.transient = true;
    sync.reason = "full VLAD vectors: the exact index is built from the stored vectors";
    if (build_transient) {
      VectorIndexOptions o = options;
      o.kind = VectorIndexKind::kFlat;
      BuildFromStore(store, vectors, o, &sync);
      // Its word index too, in memory with the model's vocabulary (never
      // learned per search: a database whose model has none gets one from
      // `migrate`): a collection this small encodes in a fraction of what
      // its VLAD vectors took to read.
      const std::optional<WordVocabulary> model = ModelWordVocabulary(store);
      if (options.words && model &&
          static_cast<int64_t>(store.num_images()) >= options.min_word_images) {
        sync.words = WordSource(store).Build(sync.manifest, options.seed, model, nullptr);
        sync.words_built = sync.words != nullptr;
      }
    }
    return sync;
  }
  // Read before any record: records read later may only be newer, so a
  // saved generation never claims more than the manifest holds.
  const std::optional<ImageTotals> totals = store.totals();
  const uint64_t generation = totals ? totals->generation : 0;
  // merge: the shards' lists joined, when they can be (else the reason).
  std::string not_joined;
  std::optional<SearchIndexSync> joined =
      merged.empty() ? std::nullopt : JoinShardLists(store, merged, options, &not_joined);
  const bool keep_tables = hold_tables || writer;
  LoadPersisted(store, dim, options.words, keep_tables, &sync, first);
  if (sync.tables_stored && !(generation != 0 && sync.generation == generation)) {
    // Stale: reconciling rebuilds the tables from the ones held, so they are
    // read after all (a second pass over the blob; `index` saves a current one).
    sync = SearchIndexSync();
    LoadPersisted(store, dim, options.words, /*keep_tables=*/true, &sync);
  }
  // In place of the new database's persisted index (none, or an empty one).
  if (joined) sync = std::move(*joined);
  sync.lists_not_joined = std::move(not_joined);
  // A persisted index whose colour table does not cover its manifest: the
  // writer reads the records for one below (and saves it); a reader
  // searches without colour candidates.
  const bool colours_missing = sync.loaded && store.stores_colour() && !sync.tables_stored &&
                               sync.colours.rows() != static_cast<int64_t>(sync.manifest.size());
  if (sync.loaded && generation != 0 && sync.generation == generation &&
      !(writer && colours_missing)) {
    // Nothing added, removed or changed since the manifest was reconciled:
    // no record needs reading (a 100,000-image database opens in the time
    // its index takes to load).
    sync.num_zero = static_cast<int64_t>(totals->without_features);
    if (options.nprobe == 0 && sync.index->nlist() > 0) {
      const int64_t nprobe = AutoNprobe(sync.index->ntotal(), sync.index->nlist());
      if (nprobe != sync.index->nprobe()) {
        sync.index->set_nprobe(nprobe);
        sync.retuned = true;
      }
    }
    SyncWords(store, writer, options, nullptr, nullptr, merged, &sync);
    SyncTiny(store, writer != nullptr, {}, &sync);
    return sync;
  }
  // Saving records the generation even when nothing else changed.
  sync.restamped = sync.loaded && sync.generation != generation;
  sync.generation = generation;
  if (!sync.loaded) {
    Rebuild(store, vectors, options, &sync);
    sync.words.reset();
    SyncWords(store, writer, options, nullptr, nullptr, merged, &sync);
    sync.tiny = TinyIndex();
    SyncTiny(store, writer != nullptr, {}, &sync);
    return sync;
  }
  Difference diff = Compare(store, sync.manifest);
  sync.num_zero = diff.num_zero;
  if (!diff.to_remove.empty()) sync.removed = sync.index->Remove(diff.to_remove);
  if (sync.removed != static_cast<int64_t>(diff.to_remove.size())) {
    // The manifest and the index disagree: trust neither.
    sync.reason = "persisted search index held " + std::to_string(sync.removed) + " of the " +
                  std::to_string(diff.to_remove.size()) + " vectors its manifest lists for removal";
    sync.loaded = false;
    sync.num_zero = 0;
    Rebuild(store, vectors, options, &sync);
    sync.words.reset();
    SyncWords(store, writer, options, nullptr, nullptr, merged, &sync);
    sync.tiny = TinyIndex();
    SyncTiny(store, writer != nullptr, {}, &sync);
    return sync;
  }
  sync.manifest = std::move(diff.wanted);
  sync.colours = std::move(diff.colours);
  sync.colours_added = colours_missing;
  const int64_t n = static_cast<int64_t>(sync.manifest.size());
  const VectorIndexKind want = WantedKind(options, n, dim);
  if (NeedsRetraining(options, *sync.index, want, n))
    Retrain(vectors, options, want, diff.to_add, &sync);
  else
    AddFresh(vectors, options, diff.to_add, &sync);
  SyncWords(store, writer, options, &diff.to_remove, &diff.to_add, merged, &sync);
  SyncTiny(store, writer != nullptr, diff.to_add, &sync);
  return sync;
}

}  // namespace

std::string SearchIndexSync::Summary() const {
  if (transient) return "not persisted (" + reason + ")";
  return index->Describe() + ", " + std::to_string(index->ntotal()) + " vectors" +
         (rebuilt     ? " (built: " + reason + ")"
          : retrained ? " (re-built from its vectors: kind or lists follow the size)"
                      : " (+" + std::to_string(added) + " -" + std::to_string(removed) + ")") +
         (lists_joined > 0
              ? "; inverted lists of " + std::to_string(lists_joined) + " merged shards joined"
          : !lists_not_joined.empty() ? "; shards' lists not joined: " + lists_not_joined
                                      : "") +
         (words ? "; word index, " + std::to_string(words->num_postings()) + " postings" +
                      (words_joined > 0 ? " (" + std::to_string(words_joined) +
                                              " images' postings joined from merged shards)"
                       : words_built    ? " (built from the stored features)"
                       : words_upgraded ? " (lists recounted: table of an older format)"
                                        : "")
                : "") +
         (colours_added ? "; colour table added (colour candidates)" : "") +
         (old_header ? "; header rewritten (XXH3-64 checksum)" : "") +
         (tiny_read ? "; " + std::to_string(tiny_read) + " tiny images read (thumbnail candidates)"
                    : "");
}

SearchIndexSync SyncSearchIndex(const Store& store, const SearchVectors& vectors,
                                const VectorIndexOptions& options, bool hold_tables,
                                const TableQuery* first) {
  return Sync(store, nullptr, vectors, options, /*build_transient=*/true, {}, hold_tables, first);
}

StoredCandidates SearchStoredTables(const Store& store, const std::vector<uint64_t>& ids,
                                    uint64_t generation, const TableQuery& query) {
  const std::unique_ptr<SearchIndexReader> in = store.ReadSearchIndex();
  if (!in) throw std::runtime_error("the persisted search index is gone");
  if (ReadMagicAndFormat(in.get()) != kFormat)
    throw std::runtime_error("the persisted search index changed since it was loaded");
  Skip(in.get(), 16);  // fingerprint, dim
  const uint64_t stored_generation = ReadFixed64(in.get());
  const uint64_t n = ReadFixed64(in.get());
  if (stored_generation != generation || n != ids.size())
    throw std::runtime_error("the persisted search index changed since it was loaded");
  // Searched once it was loaded whole and checked, in this store's fixed
  // read-only view: the manifest and vector index are passed unread.
  if (n > in->remaining() / 16) throw std::runtime_error("manifest truncated");
  in->SkipTo(in->size() - in->remaining() + n * 16);
  const uint64_t size = ReadFixed64(in.get());
  if (size > in->remaining()) throw std::runtime_error("index size mismatch");
  in->SkipTo(in->size() - in->remaining() + size);
  ReadFixed64(in.get());  // the word table's hash
  bool any = false;
  StoredCandidates out = ScanTables(in.get(), ids, query, &any);
  if (in->remaining() != 0) throw std::runtime_error("bytes past the search index's last table");
  return out;
}

namespace {

// The blob up to and including the vector index.
std::string BlobHead(const Store& store, const SearchIndexSync& sync) {
  if (!sync.index) throw std::logic_error("SaveSearchIndex: no index");
  std::string blob(kMagic, 4);
  encoding::PutFixed32(&blob, kFormat);
  encoding::PutFixed64(&blob, store.model().codebook_hash);
  encoding::PutFixed64(&blob, static_cast<uint64_t>(sync.index->dim()));
  encoding::PutFixed64(&blob, sync.generation);
  encoding::PutFixed64(&blob, sync.manifest.size());
  for (const IndexedImage& m : sync.manifest) {
    encoding::PutFixed64(&blob, m.id);
    encoding::PutFixed64(&blob, m.content_hash);
  }
  const std::string index = sync.index->Serialize();
  encoding::PutFixed64(&blob, index.size());
  blob += index;
  return blob;
}

// The colour table, or row bytes 0 when there is none
// (or it does not cover the manifest: the next `index` run reads it again).
void PutColours(std::string* blob, const SearchIndexSync& sync) {
  const bool whole =
      sync.colours.rows() > 0 && sync.colours.rows() == static_cast<int64_t>(sync.manifest.size());
  encoding::PutFixed64(blob, whole ? ColourIndex::kRowBytes : 0);
  if (whole)
    blob->append(reinterpret_cast<const char*>(sync.colours.table().data()),
                 sync.colours.table().size());
}

// The tiny images, or row bytes 0 when there are none (or
// they do not cover the manifest).
void PutTiny(std::string* blob, const SearchIndexSync& sync) {
  const bool whole =
      sync.tiny.rows() > 0 && sync.tiny.rows() == static_cast<int64_t>(sync.manifest.size());
  encoding::PutFixed64(blob, whole ? TinyIndex::kRowBytes : 0);
  if (whole)
    blob->append(reinterpret_cast<const char*>(sync.tiny.table().data()), sync.tiny.table().size());
}

}  // namespace

void SaveSearchIndex(Store* store, const SearchIndexSync& sync) {
  std::string blob = BlobHead(*store, sync);
  if (!sync.words) {
    encoding::PutFixed64(&blob, 0);
    PutColours(&blob, sync);
    PutTiny(&blob, sync);
    store->PutSearchIndex(blob);
    return;
  }
  sync.words->SetWriter(store);
  const WordIndexCommit commit = sync.words->Commit();
  // Its lists are written, under segments no committed table lists: a crash
  // here leaves the index as it was (the next save deletes those segments).
  TestStopPoint("search-index-lists-written");
  encoding::PutFixed64(&blob, Hash64(HashKind::kXxh3_64, commit.table.data(), commit.table.size()));
  PutColours(&blob, sync);
  PutTiny(&blob, sync);
  store->PutSearchIndex(blob, &commit);
  TestStopPoint("search-index-saved");
}

std::vector<std::string> VerifyWordIndex(const Store& store) {
  std::vector<std::string> problems;
  // The model's vocabulary fits its codebook (its checksum: Store::Verify).
  std::optional<std::string> vocabulary;
  try {
    vocabulary = store.GetModelWordVocabulary();
  } catch (const StoreError&) {
  }
  if (vocabulary) {
    try {
      WordVocabulary::Deserialize(*vocabulary, CodebookFromModel(store.model()));
    } catch (const encoding::CorruptValue& e) {
      problems.push_back(std::string("model word vocabulary (m:wv): ") + e.what());
    }
  }
  std::unique_ptr<SearchIndexReader> blob;
  try {
    blob = store.ReadSearchIndex();
  } catch (const StoreError&) {
    return problems;  // Store::Verify reports it
  }
  const bool has_keys = store.GetWordTable().has_value();
  if (!blob) {
    if (has_keys) problems.push_back("word index table (w:t) without a persisted search index");
    return problems;
  }
  Decoded d;
  try {
    d = Decode(blob.get());
  } catch (const StoreError&) {
    return problems;  // Store::Verify reports it
  } catch (const OtherFormat&) {
    return problems;  // not read, rebuilt: nothing of it is used
  } catch (const std::exception& e) {
    problems.push_back(std::string("persisted search index unusable: ") + e.what());
    return problems;
  }
  if (d.word_table == 0) {
    if (has_keys)
      problems.push_back("word index table (w:t) that the persisted search index does not name");
    return problems;
  }
  std::unique_ptr<StoredWordIndex> words;
  try {
    words = StoredWordIndex::Load(store, CodebookFromModel(store.model()), d.word_table);
  } catch (const std::exception& e) {
    problems.push_back(std::string("word index: ") + e.what());
    return problems;
  }
  if (!words) {
    problems.push_back("word index table (w:t) missing; the persisted search index names one");
    return problems;
  }
  std::vector<int64_t> ids;
  for (const IndexedImage& m : d.manifest) ids.push_back(static_cast<int64_t>(m.id));
  // What is left after removing the manifest's images is not in it.
  const int64_t held = words->ntotal();
  const int64_t in_manifest = words->Remove(ids);
  if (in_manifest != held)
    problems.push_back("word index holds " + std::to_string(held - in_manifest) +
                       " images the search index manifest does not list");
  words = StoredWordIndex::Load(store, CodebookFromModel(store.model()), d.word_table);
  for (std::string& p : words->Check()) problems.push_back(std::move(p));
  return problems;
}

std::vector<std::string> VerifyColourTable(const Store& store) {
  std::vector<std::string> problems;
  Decoded d;
  try {
    const std::unique_ptr<SearchIndexReader> blob = store.ReadSearchIndex();
    if (!blob) return problems;
    d = Decode(blob.get());
  } catch (const std::exception&) {
    return problems;  // Store::Verify and VerifyWordIndex report it
  }
  const std::optional<ImageTotals> totals = store.totals();
  if (d.colours.rows() == 0 || !totals || totals->generation == 0 ||
      d.generation != totals->generation)
    return problems;  // none, or reconciled with the records at every open
  const std::vector<uint8_t>& table = d.colours.table();
  int64_t differ = 0, missing = 0;
  std::string first;
  constexpr size_t kBatch = 1024;
  for (size_t i = 0; i < d.manifest.size(); i += kBatch) {
    std::vector<uint64_t> ids;
    for (size_t j = i; j < std::min(d.manifest.size(), i + kBatch); ++j)
      ids.push_back(d.manifest[j].id);
    const std::vector<std::optional<ImageRecord>> records = store.FindByIds(ids);
    for (size_t k = 0; k < ids.size(); ++k) {
      if (!records[k]) {
        ++missing;
        continue;
      }
      const std::vector<uint8_t> row = ColourIndex::Row(records[k]->colour);
      if (!std::equal(row.begin(), row.end(), table.begin() + (i + k) * ColourIndex::kRowBytes)) {
        if (differ++ == 0) first = records[k]->path;
      }
    }
  }
  if (missing > 0)
    problems.push_back("search index lists " + std::to_string(missing) +
                       " images without a record at the generation it claims");
  if (differ > 0)
    problems.push_back("colour table: " + std::to_string(differ) +
                       " rows differ from their image's record (first: " + first +
                       "); colour candidates and fusion use these rows until an `index` "
                       "run that adds, changes or removes an image rewrites them");
  return problems;
}

SearchIndexSync UpdateSearchIndex(Store* store, const SearchVectors& vectors,
                                  const VectorIndexOptions& options,
                                  const std::vector<MergedShard>& merged) {
  const VectorIndexOptions o = ApplyModelQuantizer(*store, vectors.dim(), options);
  SearchIndexSync sync = Sync(*store, store, vectors, o, /*build_transient=*/false, merged);
  if (sync.changed())
    SaveSearchIndex(store, sync);  // compacts it out of level 0
  else
    store->CompactSearchIndexOutOfLevelZero();  // saved by an older build
  return sync;
}

ModelVocabularyStep AddWordVocabularyToModel(Store* store) {
  if (store->GetModelWordVocabulary()) return ModelVocabularyStep::kPresent;
  std::string blob;
  ModelVocabularyStep step = ModelVocabularyStep::kAdopted;
  if (const std::optional<std::string> held = store->GetWordVocabulary()) {
    WordVocabulary::Deserialize(*held, CodebookFromModel(store->model()));  // fits the codebook
    blob = *held;
  } else {
    std::vector<IndexedImage> manifest;
    store->ForEachImage([&manifest](const ImageRecord& rec) {
      manifest.push_back(IndexedImage{rec.id, rec.content_hash});
    });
    const std::optional<WordVocabulary> learned =
        WordSource(*store).Learn(manifest, VectorIndexOptions().seed);
    if (!learned) return ModelVocabularyStep::kNone;
    blob = learned->Serialize();
    step = ModelVocabularyStep::kLearned;
  }
  TestStopPoint("word-vocabulary-ready");
  store->AddModelWordVocabulary(blob);
  TestStopPoint("word-vocabulary-stored");
  return step;
}

}  // namespace lookalike
