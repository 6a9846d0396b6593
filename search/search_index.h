// The search index persisted beside the database (Store::PutSearchIndex), kept
// in step with the stored images incrementally.
//
// The persisted blob records which (image id, content hash) pairs the index
// holds. Loading it always reconciles that list with the image records, so an
// index written before a crash, by an interrupted run, or before images were
// added, changed or removed is brought up to date (missing ids added from the
// stored vectors, removed or changed ids removed and re-added) and never
// returns a stale or missing result. The word index of the selective first
// stage (search/word_index.h), derived from the stored local features, is
// reconciled with the same difference and kept under its own keys
// (search/stored_word_index.h), written in the same WriteBatch as the blob.
// Blob layout (all little-endian), format 6, the only one this build reads:
//   "LKSX", u32 format, u64 model fingerprint (codebook hash), u64 search
//   dimension, u64 store generation (the manifest matches the records at
//   that generation, so an unchanged database is not compared record by
//   record), u64 n, n x (u64 id, u64 content hash) in id order, u64 size +
//   VectorIndex::Serialize() bytes, u64 XXH3-64 of the word index table
//   (w:t) written with it (0 = no word index), then u64 row bytes
//   (ColourIndex::kRowBytes, or 0 = no colour table: a schema-1 database)
//   and n rows, the colour histogram of each manifest image at 4 bits a bin
//   (search/colour_index.h), and u64 row bytes (TinyIndex::kRowBytes, or 0 =
//   none) and n rows, the tiny image of each manifest image's thumbnail
//   (search/tiny_index.h).
// The index is derived from the stored vectors, records, features and
// thumbnails, so a blob of any other format (those of older builds) is not
// read but rebuilt: in memory by a search, and saved by the next `index`
// (one atomic WriteBatch, as every save). The formats' history:
// storage/README.md, "On-disk format".
// The store adds chunking and its own checksum (m:xindex, x:<chunk>).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "indexer/search_vectors.h"
#include "search/colour_index.h"
#include "search/stored_word_index.h"
#include "search/tiny_index.h"
#include "search/vector_index.h"
#include "search/word_index.h"
#include "storage/store.h"

namespace lookalike {

// One image the index holds: its id and the content hash its vector was
// encoded from.
struct IndexedImage {
  uint64_t id = 0;
  uint64_t content_hash = 0;
};

// Exact indexes of vectors with more dimensions than this are not persisted:
// without a PCA projection the search vectors are the full VLAD vectors
// (256 KiB each at K = 512), so a copy would make the database 8x larger.
// Search builds that index from the stored (or derived) vectors; such a
// database is small (under --pca-min-images training images).
inline constexpr int64_t kMaxPersistedFlatDim = 4096;

// A shard `merge` has just added to the database: its image x is image
// id_offset + x (ShardMerge::id_offset).
struct MergedShard {
  const Store* store = nullptr;
  uint64_t id_offset = 0;
};

// A query's look-up in the colour and tiny-image tables: its colour
// (ColourIndex::Prepare) for colour_n candidates, its tiny image for tiny_n
// (0: none wanted).
struct TableQuery {
  ColourIndex::Query colour;
  int colour_n = 0;
  TinyIndex::Row tiny{};
  int tiny_n = 0;
};
// The candidates a TableQuery found, best first.
struct StoredCandidates {
  std::vector<uint64_t> by_colour, by_thumbnail;
};

// What SyncSearchIndex found and did.
struct SearchIndexSync {
  std::unique_ptr<VectorIndex> index;
  // The word index over the same images; null when options.words is off, no
  // image has stored local features, or the index is transient and the
  // model has no word vocabulary. Its lists are read from `store` (which
  // must outlive it) at each search; a transient index's are held in memory.
  std::unique_ptr<StoredWordIndex> words;
  bool words_built = false;  // built (vocabulary learned when the model has none) and filled
  int64_t words_joined = 0;  // images whose postings were copied from merged shards' word indexes
  // `merge`: shards whose inverted lists were joined into the vector index
  // (0: it was built or updated from the stored vectors, for the reason in
  // lists_not_joined when the model has a search quantizer).
  int64_t lists_joined = 0;
  std::string lists_not_joined;
  // The persisted index, of another format, had a word index: it is rebuilt
  // whatever options.min_word_images says (one a database has is kept).
  bool had_words = false;
  std::vector<IndexedImage> manifest;  // what `index` holds, in id order
  // The manifest images' colour histograms, row i for manifest[i]; no rows
  // when the store keeps no colour (schema 1), or when the persisted index
  // held no whole table and nothing made this sync read the records
  // (UpdateSearchIndex always reads them then, and saves the table).
  ColourIndex colours;
  bool colours_added = false;  // a table the persisted index lacked was read from the records
  // The manifest images' tiny images (search/tiny_index.h), row i for
  // manifest[i]; a zero row for an image without a thumbnail, and for one a
  // reader's sync added (the writer reads them from the thumbnails).
  TinyIndex tiny;
  int64_t tiny_read = 0;  // rows this sync computed from stored thumbnails that changed
  int64_t num_zero = 0;   // images without features (never in the index)
  // The store generation (ImageTotals::generation) the manifest matches;
  // 0 = unknown. Equal to the store's at the next load: nothing to reconcile.
  uint64_t generation = 0;
  bool restamped = false;  // the persisted index was reconciled at another generation
  // The persisted index's colour and tiny-image rows were left in the store
  // (SyncSearchIndex without hold_tables): `colours` and `tiny` are empty.
  bool tables_stored = false;
  // With tables_stored, what the `first` query given to SyncSearchIndex
  // found in them (scanned as they were read past).
  std::optional<StoredCandidates> first_candidates;
  // The persisted index's header is of the older format (FNV-1a checksum):
  // rewritten by the next save.
  bool old_header = false;
  bool loaded = false;     // the persisted index was used
  bool rebuilt = false;    // built from every stored vector (see `reason`)
  bool retrained = false;  // kind changed or lists re-learned as the collection grew
  bool retuned = false;    // default nprobe re-chosen for the new size (AutoNprobe)
  int64_t added = 0;       // vectors added while reconciling
  int64_t removed = 0;     // vectors removed while reconciling
  std::string reason;      // why it was rebuilt or not persisted, empty otherwise
  // Not persisted (flat over more than kMaxPersistedFlatDim dimensions);
  // `index` is then built from the stored vectors by SyncSearchIndex and
  // null after UpdateSearchIndex.
  bool transient = false;
  // True when the index differs from what is persisted (it should be saved).
  // One line for progress output: "not persisted (reason)", or the index,
  // its size and what happened ("built: reason", "re-built ...", "+a -r").
  std::string Summary() const;
  bool changed() const {
    return !transient && (!loaded || rebuilt || retrained || retuned || restamped || old_header ||
                          added || removed || words_built || words_dropped || words_upgraded ||
                          colours_added || tiny_read > 0);
  }
  // The word index's table was of an older format (rewritten at the save).
  bool words_upgraded = false;
  bool words_dropped = false;  // a persisted word index is no longer wanted
};

// Loads the persisted index of `store` (or builds one from every stored
// vector if there is none, it is of another format, unreadable or corrupt,
// or it was built for another model or dimension) and reconciles it with the image records, as
// described above. `options` decide the kind of a new index and when an
// `auto` index turns approximate (VectorIndex::ResolveKind): a flat index
// whose collection passes auto_threshold is converted to ivfsq from its own
// exact vectors, and an ivfsq index re-learns its lists from its own vectors
// when the collection has grown 16-fold since it was trained. `vectors`
// gives each image's search vector, whatever the schema stores.
// `options` must have passed VectorIndexOptions::Validate (the callers'
// option structs validate them at their boundary: SearchOptions in
// Searcher::Open, IndexOptions in the indexer). Writes nothing. Throws
// StoreError (a corrupt stored vector) or std::runtime_error.
// Without `hold_tables`, a current persisted index's colour and tiny-image
// tables are left in the store (tables_stored): each query then reads them
// (SearchStoredTables), for a search of one image that needs them once.
// Their rows pass by as the index is loaded: with `first` (the query about
// to be searched) they are scanned for it then (first_candidates).
SearchIndexSync SyncSearchIndex(const Store& store, const SearchVectors& vectors,
                                const VectorIndexOptions& options, bool hold_tables = true,
                                const TableQuery* first = nullptr);

// What ColourIndex::Search and TinyIndex::Search would give over the tables
// a SyncSearchIndex without hold_tables left in the store (its manifest's
// `ids` and `generation`): the colour candidates (colour_n, for `colour`)
// and thumbnail candidates (tiny_n, for `tiny`), the tables' rows read a
// block at a time (at 1,000,000 images 208 MB, none of it held). The
// manifest and vector index are passed unread (SearchIndexReader::SkipTo):
// the blob was checked whole when it was loaded from the same read-only
// store. Throws StoreError, or std::runtime_error if the persisted index is
// no longer the one loaded.
StoredCandidates SearchStoredTables(const Store& store, const std::vector<uint64_t>& ids,
                                    uint64_t generation, const TableQuery& query);

// Writes `sync`'s index and manifest with Store::PutSearchIndex (one atomic
// WriteBatch), with the word index's table (its lists held in memory are
// first written as a new segment: StoredWordIndex::Commit). `sync.words`
// must read `store`. Throws StoreError.
void SaveSearchIndex(Store* store, const SearchIndexSync& sync);

// `lookalike verify`'s check of the word index: the model's vocabulary
// (m:wv) fits the codebook; the table is the one the search index blob
// names, its images are in the blob's manifest, and every list decodes
// (StoredWordIndex::Check). One line per problem.
std::vector<std::string> VerifyWordIndex(const Store& store);

// `lookalike verify`'s check of the colour table: when the persisted index
// claims to match the records (its generation is the store's, so search
// trusts it without reading a record), each row is its image's record
// colour. One line per problem (mismatches counted in one).
std::vector<std::string> VerifyColourTable(const Store& store);

// SyncSearchIndex, then SaveSearchIndex if anything changed: what
// `lookalike index` runs at the end of every run. Builds nothing for an index
// that is not persisted (`transient`; `index` is null then).
// With `merged` (`merge`: the shards it has just added), the word index of
// a shard whose search index matches its records and whose words use the
// model's vocabulary is joined (its postings copied, ids re-keyed) instead
// of its images being encoded again from their features; and when the
// model has a search quantizer (search/model_quantizer.h), the database
// held no other image and every shard's persisted vector index matches its
// records and was filled from that quantizer, their inverted lists are
// joined (VectorIndex::MergeFrom, ids re-keyed) instead of the index being
// filled from every stored vector. Whatever the database's model, its
// ivfsq index is a copy of the model's quantizer when it has one
// (ApplyModelQuantizer).
SearchIndexSync UpdateSearchIndex(Store* store, const SearchVectors& vectors,
                                  const VectorIndexOptions& options,
                                  const std::vector<MergedShard>& merged = {});

// What AddWordVocabularyToModel did.
enum class ModelVocabularyStep {
  kPresent,  // the model had one: nothing written
  kAdopted,  // the vocabulary of the persisted word index (w:v): its postings stay valid
  kLearned,  // learned from a sample of the stored features, as `index` learned one
  kNone,     // no image has stored features: nothing to learn from, nothing written
};

// Gives the model of `store` (open read-write, its writer lock held) the
// word index's vocabulary (Store::AddModelWordVocabulary, one write: a kill
// leaves the database without it or with it), for a database created before
// the model carried one: `migrate`. Throws StoreError, or
// encoding::CorruptValue for a w:v that does not fit the codebook.
ModelVocabularyStep AddWordVocabularyToModel(Store* store);

}  // namespace lookalike
