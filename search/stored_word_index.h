// The word index of the selective first stage (search/word_index.h) kept in
// the database key by key, so that a query reads the posting lists of its
// own words only and no process holds the whole index:
//
//   w:t  the table: u32 format (2), u32 segments s, s x u32 segment,
//        u32 words w, w x u32 postings stored per word (live or not, over
//        the listed segments), u64 postings stored, u64 images n, n x u64
//        id (ascending), n x u32 words of the image, n x u32 the segment
//        holding its postings. About 16 bytes per image plus 4 per word.
//        Format 1 had no per-word counts: read, then rewritten by the next
//        writer's Commit (a compaction, which counts them).
//   w:v  the vocabulary (WordVocabulary::Serialize) of a database whose
//        model has none; a model's vocabulary (m:wv) is the model's, read
//        from there and never written here.
//   w:s<segment BE32><word BE32>  the postings of one word among the images
//        one segment added: u32 p, p x varint id delta (ids ascending, the
//        first from 0), p x u64 signature.
//
// (the store adds an XXH3-64 to each value.) An image's postings are live in
// the segment its table row names only: a changed image re-added in a later
// segment leaves dead postings behind, which scoring skips and compaction
// drops. `index` writes new segments (one per 8,192 images added) before
// its commit, then the table with the search index blob in one WriteBatch
// (Store::PutSearchIndex), which also deletes every segment the table does
// not list: a killed run leaves uncommitted segments nobody reads. When the
// table lists more than kMaxSegments segments or dead postings pass a
// quarter of the live ones, the lists are rewritten into one segment, word
// range by word range (about 2 million postings per step, whatever the
// collection's size).
//
// Scoring accumulates each image's kernel sum over the query's words in
// query order, as WordIndex::Search does, so both give the same floats.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "indexer/codebook.h"
#include "indexer/word_signatures.h"
#include "search/word_index.h"
#include "storage/store.h"

namespace lookalike {

// Thread-compatible: const methods may run concurrently, the others may not.
// Reads through `store`, which must outlive it.
class StoredWordIndex {
 public:
  // Segments a table may list before `Commit` compacts them into one.
  static constexpr size_t kMaxSegments = 8;
  // Images an `index` run holds in memory before writing them as a segment.
  static constexpr int64_t kSegmentImages = 8192;

  // An empty index over `vocabulary`: the model's (stored_with_model: the
  // store holds it as m:wv), or one learned for this database, written as
  // w:v at the next Commit.
  StoredWordIndex(const Store& store, WordVocabulary vocabulary, bool stored_with_model = false);
  // The persisted one (w:t, and the model's vocabulary, else w:v), or null
  // if the database has none; its
  // table must hash (XXH3-64) to `table_hash` (what the search index blob
  // recorded). Throws encoding::CorruptValue or StoreError(kCorrupt).
  static std::unique_ptr<StoredWordIndex> Load(const Store& store, const Codebook& codebook,
                                               uint64_t table_hash);

  const WordVocabulary& vocabulary() const { return vocabulary_; }
  // True when its vocabulary is the model's (m:wv), not learned for it.
  bool vocabulary_from_model() const { return from_model_; }
  int64_t ntotal() const;
  // The ids of the images written as segments (not those held in memory),
  // ascending.
  std::vector<uint64_t> ImageIds() const;
  int64_t num_postings() const;  // of held images
  // Postings in the written segments, live and dead (of images removed or
  // changed since); Commit compacts them away when they are too many.
  int64_t stored_postings() const { return static_cast<int64_t>(stored_postings_); }
  // True if the table was read in an older format, which Commit rewrites.
  bool needs_rewrite() const { return !word_postings_known_; }
  // True if images are held in memory only (not yet written as a segment).
  bool has_unwritten() const { return memory_->ntotal() > 0; }

  // Removes the images of `ids` it holds (in memory: their postings on disk
  // become dead); returns how many it held.
  int64_t Remove(const std::vector<int64_t>& ids);
  // Adds image `id` (not held) with its signatures, in memory; with a writer
  // (SetWriter), every kSegmentImages images are written as a segment.
  void Add(uint64_t id, const std::vector<WordSignature>& signatures);

  // Adds every image `other` (a persisted index of another database: a
  // merged shard) holds, image x as image id_offset + x, by copying its live
  // postings into one new segment, word by word, with the ids re-keyed:
  // what encoding those images again would give, when both indexes use the
  // same vocabulary (the model's; the caller checks). Needs a writer;
  // none of the re-keyed ids may be held. Returns the images added. Throws
  // std::logic_error on misuse, StoreError or encoding::CorruptValue on a
  // damaged list of `other`.
  int64_t AddFrom(const StoredWordIndex& other, uint64_t id_offset);

  // The `m` images most similar to `query`, exactly as WordIndex::Search
  // ranks and scores them over the same images. Reads the lists of the
  // query's words (one MultiGet per 64 words). Throws StoreError(kCorrupt)
  // or encoding::CorruptValue on a damaged list.
  //
  // `max_postings` > 0 bounds what a query reads: its words are taken from
  // the most selective (fewest stored postings) up while their lists hold
  // at most that many postings in all, and the rest are skipped (the
  // commonest words, which say least about an image; Sivic & Zisserman's
  // stop list, chosen per query). Below the bound the result is the one
  // above; above it, a query's cost stops growing with the collection
  // (search/search_index.md, "The word index"). 0 = every word.
  std::vector<std::pair<uint64_t, float>> Search(const std::vector<WordSignature>& query, int64_t m,
                                                 int64_t max_postings = 0) const;
  // The words of `query` (indices into it, ascending) Search reads under
  // `max_postings`, and the postings their stored lists hold.
  std::vector<size_t> WordsRead(const std::vector<WordSignature>& query, int64_t max_postings,
                                uint64_t* postings = nullptr) const;

  // Images per segment instead of kSegmentImages (tests: many segments
  // from few images). >= 1.
  void set_segment_images(int64_t n) { segment_images_ = n; }

  // From now on Add and Commit write segments into `store` (the store this
  // index reads, open read-write).
  void SetWriter(Store* store);
  // Writes what memory holds as a segment, compacts if due, and returns the
  // table (and the vocabulary if it is new) for Store::PutSearchIndex.
  // Needs a writer. Throws StoreError.
  WordIndexCommit Commit();

  // Problems of the persisted index: each listed segment's lists decode,
  // ids ascending, every table image has exactly its word count of live
  // postings. One line per problem.
  std::vector<std::string> Check() const;

 private:
  struct Row {
    uint64_t id = 0;
    uint32_t words = 0;
    uint32_t segment = 0;
  };
  std::string EncodeTable() const;
  void Reindex();
  // Row of image `id`, or -1.
  int64_t RowOf(uint64_t id) const;
  // Words whose lists a compaction or check step reads together.
  uint32_t WordsPerRange() const;
  uint32_t NewSegment();
  void WriteMemory();
  void Compact();
  // Per word of a range: its postings whose image's row lists that segment
  // (the live ones), as (row, signature bits).
  using LiveLists = std::vector<std::vector<std::pair<uint64_t, uint64_t>>>;
  // Calls fn(words, live) for every range of WordsPerRange() words in word
  // order, live[i] holding the live postings of words[i].
  void ForEachLiveRange(
      const std::function<void(const std::vector<uint32_t>& words, LiveLists* live)>& fn) const;
  // Calls fn(word, segment, postings) for each (listed segment, word) of
  // `words`, reading them in groups; postings are raw list values.
  void ReadLists(
      const std::vector<uint32_t>& words,
      const std::function<void(size_t index, uint32_t segment, std::string_view)>& fn) const;

  const Store& store_;
  Store* writer_ = nullptr;
  WordVocabulary vocabulary_;
  bool vocabulary_new_ = false;
  bool from_model_ = false;
  std::vector<Row> rows_;            // ascending id
  std::vector<uint32_t> row_of_id_;  // dense id -> row + 1 (0 = none), when ids are dense
  // Dense id -> 1 + the index in segments_ of the segment its postings are
  // live in (0 = none), when ids are dense and there are under 255
  // segments: a search's check of each posting then touches one byte per
  // image instead of its 16-byte row, a cache miss per posting.
  std::vector<uint8_t> live_segment_of_id_;
  std::vector<uint32_t> segments_;  // committed or written by this run, ascending
  uint32_t next_segment_ = 0;       // the writer's next new segment; 0 = ask the store
  int64_t segment_images_ = kSegmentImages;
  uint64_t stored_postings_ = 0;
  int64_t live_postings_ = 0;
  // Postings stored per word over the listed segments (what a query reading
  // that word's lists decodes); unknown for a format-1 table until Commit.
  std::vector<uint32_t> word_postings_;
  bool word_postings_known_ = true;
  std::unique_ptr<WordIndex> memory_;
};

}  // namespace lookalike
