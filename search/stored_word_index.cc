#include "search/stored_word_index.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <future>
#include <optional>
#include <stdexcept>

#include "storage/encoding.h"
#include "util/cpu_features.h"

namespace lookalike {
namespace {

constexpr uint32_t kTableFormat = 2;
constexpr uint32_t kTableFormatWithoutCounts = 1;
constexpr size_t kWordsPerRead = 64;  // query words per MultiGet
// Postings a step of a compaction or a check reads at most (about 20 MiB of
// lists), so its memory does not grow with the collection.
constexpr uint64_t kPostingsPerRange = uint64_t{1} << 21;
constexpr size_t kBatchBytes = size_t{32} << 20;  // word lists per WriteBatch

// Adds n to a per-word count, saturating (a word's lists never hold 2^32
// postings below billions of images; a saturated count still sorts last).
void AddCount(uint32_t* count, uint64_t n) {
  *count = static_cast<uint32_t>(std::min<uint64_t>(UINT32_MAX, uint64_t{*count} + n));
}

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Bits set in x, branch-free and inline (__builtin_popcountll becomes a
// library call on x86-64 builds without -mpopcnt: 3x slower in scoring).
inline int PopCount(uint64_t x) {
  x -= (x >> 1) & 0x5555555555555555ULL;
  x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
  return static_cast<int>((x * 0x0101010101010101ULL) >> 56);
}

uint64_t LoadLe64(const unsigned char* p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
#else
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
#endif
}

// One word list value: u32 p, p x varint id delta, p x u64 signature.
std::string EncodeList(std::vector<std::pair<uint64_t, uint64_t>>* postings) {
  std::sort(postings->begin(), postings->end());
  std::string out;
  out.reserve(4 + postings->size() * 11);
  encoding::PutFixed32(&out, static_cast<uint32_t>(postings->size()));
  uint64_t previous = 0;
  for (const auto& p : *postings) {
    PutVarint(&out, p.first - previous);
    previous = p.first;
  }
  for (const auto& p : *postings) encoding::PutFixed64(&out, p.second);
  return out;
}

// The lists of one new segment on their way to the store: each encoded
// and counted in `counts` (a word's stored postings) as it is added, and
// written in batches of about kBatchBytes. Flush writes what is pending.
class SegmentLists {
 public:
  SegmentLists(Store* writer, uint32_t segment, std::vector<uint32_t>* counts)
      : writer_(writer), segment_(segment), counts_(counts) {}
  // Encodes `postings` (sorted here) as the list of `word`.
  void Add(uint32_t word, std::vector<std::pair<uint64_t, uint64_t>>* postings) {
    lists_.emplace_back(word, EncodeList(postings));
    AddCount(&(*counts_)[word], postings->size());
    bytes_ += lists_.back().second.size();
    if (bytes_ >= kBatchBytes) Flush();
  }
  void Flush() {
    if (!lists_.empty()) writer_->PutWordLists(segment_, lists_);
    lists_.clear();
    bytes_ = 0;
  }

 private:
  Store* writer_;
  uint32_t segment_;
  std::vector<uint32_t>* counts_;
  std::vector<std::pair<uint32_t, std::string>> lists_;
  size_t bytes_ = 0;
};

// Calls fn(id, bits) for every posting of a list value, ids ascending.
// Throws encoding::CorruptValue.
template <typename Fn>
void DecodeList(std::string_view value, Fn&& fn) {
  const auto* p = reinterpret_cast<const unsigned char*>(value.data());
  if (value.size() < 4) throw encoding::CorruptValue("word list: too short");
  const uint32_t count = static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
  if (count == 0 || (value.size() - 4) / 9 < count)
    throw encoding::CorruptValue("word list: count does not fit its size");
  const unsigned char* bits = p + value.size() - size_t{count} * 8;
  const unsigned char* v = p + 4;
  uint64_t id = 0;
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t delta = 0;
    for (int shift = 0;; shift += 7) {
      if (v >= bits || shift > 63) throw encoding::CorruptValue("word list: bad id delta");
      const unsigned char b = *v++;
      delta |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    if (i > 0 && delta == 0) throw encoding::CorruptValue("word list: ids not ascending");
    id += delta;
    fn(id, LoadLe64(bits + size_t{i} * 8));
  }
  if (v != bits) throw encoding::CorruptValue("word list: size mismatch");
}

// Adds kernel[Hamming distance to q] to score[id] for each posting of a list
// value whose image is live in it (live_of[id] == live): a query's scoring
// loop, over megabytes of postings at 100,000 images.
template <int (*kPopCount)(uint64_t)>
inline void ScoreLiveById(std::string_view value, uint64_t q, uint8_t live,
                          const std::vector<uint8_t>& live_of, const float* kernel, float* score) {
  DecodeList(value, [&](uint64_t id, uint64_t b) {
    if (id < live_of.size() && live_of[id] == live) score[id] += kernel[kPopCount(q ^ b)];
  });
}

using ScoreFn = void (*)(std::string_view, uint64_t, uint8_t, const std::vector<uint8_t>&,
                         const float*, float*);

#ifdef LOOKALIKE_X86_DISPATCH
// The CPU's POPCNT instruction (x86-64 CPUs since 2008; the portable build's
// baseline lacks it), for the loop chosen at run time: the bit count was a
// third of it. Written as assembly, it inlines into the loop, where a
// target("popcnt") builtin stays a call from the list's callback.
inline int HardwarePopCount(uint64_t x) {
  uint64_t bits;
  asm("popcntq %1, %0" : "=r"(bits) : "r"(x) : "cc");
  return static_cast<int>(bits);
}
#endif

// The scoring loop this CPU runs best; every one gives the same floats.
ScoreFn LiveByIdScorer() {
#ifdef LOOKALIKE_X86_DISPATCH
  if (CpuHasPopcnt()) return &ScoreLiveById<HardwarePopCount>;
#endif
  return &ScoreLiveById<PopCount>;
}

}  // namespace

StoredWordIndex::StoredWordIndex(const Store& store, WordVocabulary vocabulary,
                                 bool stored_with_model)
    : store_(store),
      vocabulary_(std::move(vocabulary)),
      vocabulary_new_(!stored_with_model),
      from_model_(stored_with_model),
      memory_(std::make_unique<WordIndex>(vocabulary_)) {
  word_postings_.assign(static_cast<size_t>(vocabulary_.num_words()), 0);
}

std::unique_ptr<StoredWordIndex> StoredWordIndex::Load(const Store& store, const Codebook& codebook,
                                                       uint64_t table_hash) {
  const std::optional<std::string> table = store.GetWordTable();
  if (!table) return nullptr;
  if (Hash64(HashKind::kXxh3_64, table->data(), table->size()) != table_hash)
    throw encoding::CorruptValue("word index table is not the one the search index names");
  // The model's vocabulary when it has one: `migrate` gave a database its
  // word index's own (w:v), and every other word index was built with it.
  std::optional<std::string> vocabulary = store.GetModelWordVocabulary();
  const bool from_model = vocabulary.has_value();
  if (!vocabulary) vocabulary = store.GetWordVocabulary();
  if (!vocabulary) throw encoding::CorruptValue("word index vocabulary missing");
  auto out = std::make_unique<StoredWordIndex>(
      store, WordVocabulary::Deserialize(*vocabulary, codebook), from_model);
  out->vocabulary_new_ = false;
  encoding::Reader r(*table, "word index table");
  const uint32_t format = r.Fixed32();
  if (format != kTableFormat && format != kTableFormatWithoutCounts)
    throw encoding::CorruptValue("word index table: unknown format");
  const uint32_t num_segments = r.Fixed32();
  if (num_segments > r.remaining() / 4) throw encoding::CorruptValue("word index table truncated");
  out->segments_.resize(num_segments);
  for (uint32_t& s : out->segments_) s = r.Fixed32();
  out->word_postings_known_ = format == kTableFormat;
  if (out->word_postings_known_) {
    const uint32_t num_words = r.Fixed32();
    if (num_words != out->word_postings_.size())
      throw encoding::CorruptValue("word index table: word counts do not fit the vocabulary");
    if (num_words > r.remaining() / 4) throw encoding::CorruptValue("word index table truncated");
    for (uint32_t& c : out->word_postings_) c = r.Fixed32();
  }
  for (size_t i = 1; i < out->segments_.size(); ++i)
    if (out->segments_[i] <= out->segments_[i - 1])
      throw encoding::CorruptValue("word index table: segments not ascending");
  out->stored_postings_ = r.Fixed64();
  const uint64_t n = r.Fixed64();
  if (n > r.remaining() / 16) throw encoding::CorruptValue("word index table truncated");
  out->rows_.resize(n);
  for (Row& row : out->rows_) row.id = r.Fixed64();
  for (Row& row : out->rows_) {
    row.words = r.Fixed32();
    if (row.words == 0) throw encoding::CorruptValue("word index table: an image without words");
    out->live_postings_ += row.words;
  }
  for (Row& row : out->rows_) {
    row.segment = r.Fixed32();
    if (!std::binary_search(out->segments_.begin(), out->segments_.end(), row.segment))
      throw encoding::CorruptValue("word index table: an image in an unlisted segment");
  }
  r.ExpectEnd();
  for (size_t i = 1; i < out->rows_.size(); ++i)
    if (out->rows_[i].id <= out->rows_[i - 1].id)
      throw encoding::CorruptValue("word index table: ids not ascending");
  if (static_cast<uint64_t>(out->live_postings_) > out->stored_postings_)
    throw encoding::CorruptValue("word index table: postings do not add up");
  out->Reindex();
  return out;
}

std::string StoredWordIndex::EncodeTable() const {
  std::string out;
  out.reserve(32 + segments_.size() * 4 + word_postings_.size() * 4 + rows_.size() * 16);
  encoding::PutFixed32(&out, kTableFormat);
  encoding::PutFixed32(&out, static_cast<uint32_t>(segments_.size()));
  for (uint32_t s : segments_) encoding::PutFixed32(&out, s);
  encoding::PutFixed32(&out, static_cast<uint32_t>(word_postings_.size()));
  for (uint32_t c : word_postings_) encoding::PutFixed32(&out, c);
  encoding::PutFixed64(&out, stored_postings_);
  encoding::PutFixed64(&out, rows_.size());
  for (const Row& row : rows_) encoding::PutFixed64(&out, row.id);
  for (const Row& row : rows_) encoding::PutFixed32(&out, row.words);
  for (const Row& row : rows_) encoding::PutFixed32(&out, row.segment);
  return out;
}

int64_t StoredWordIndex::ntotal() const {
  return static_cast<int64_t>(rows_.size()) + memory_->ntotal();
}

std::vector<uint64_t> StoredWordIndex::ImageIds() const {
  std::vector<uint64_t> ids;
  ids.reserve(rows_.size());
  for (const Row& row : rows_) ids.push_back(row.id);
  return ids;
}

int64_t StoredWordIndex::num_postings() const { return live_postings_ + memory_->num_postings(); }

void StoredWordIndex::Reindex() {
  row_of_id_.clear();
  live_segment_of_id_.clear();
  if (rows_.empty()) return;
  const uint64_t max_id = rows_.back().id;
  // A dense map while ids are (ids are allocated in order; gaps are removed
  // images and merged shards' unused ranges), else binary search.
  if (max_id > 16 * rows_.size() + (uint64_t{1} << 20)) return;
  row_of_id_.assign(max_id + 1, 0);
  for (size_t r = 0; r < rows_.size(); ++r) row_of_id_[rows_[r].id] = static_cast<uint32_t>(r + 1);
  if (segments_.size() >= 255) return;
  live_segment_of_id_.assign(max_id + 1, 0);
  for (const Row& row : rows_) {
    const auto at = std::lower_bound(segments_.begin(), segments_.end(), row.segment);
    if (at != segments_.end() && *at == row.segment)
      live_segment_of_id_[row.id] = static_cast<uint8_t>(at - segments_.begin() + 1);
  }
}

int64_t StoredWordIndex::RowOf(uint64_t id) const {
  if (!row_of_id_.empty()) return id < row_of_id_.size() ? int64_t{row_of_id_[id]} - 1 : -1;
  const auto it = std::lower_bound(rows_.begin(), rows_.end(), id,
                                   [](const Row& row, uint64_t v) { return row.id < v; });
  return it != rows_.end() && it->id == id ? it - rows_.begin() : -1;
}

int64_t StoredWordIndex::Remove(const std::vector<int64_t>& ids) {
  int64_t removed = memory_->Remove(ids);
  if (ids.empty() || rows_.empty()) return removed;
  std::vector<uint64_t> sorted(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<Row> kept;
  kept.reserve(rows_.size());
  for (const Row& row : rows_) {
    if (std::binary_search(sorted.begin(), sorted.end(), row.id)) {
      live_postings_ -= row.words;
      ++removed;
    } else {
      kept.push_back(row);
    }
  }
  if (kept.size() != rows_.size()) {
    rows_ = std::move(kept);
    Reindex();
  }
  return removed;
}

void StoredWordIndex::Add(uint64_t id, const std::vector<WordSignature>& signatures) {
  if (RowOf(id) >= 0)
    throw std::logic_error("word index: image " + std::to_string(id) + " added twice");
  memory_->Add(id, signatures);
  if (writer_ && memory_->ntotal() >= segment_images_) WriteMemory();
}

void StoredWordIndex::ReadLists(
    const std::vector<uint32_t>& words,
    const std::function<void(size_t, uint32_t, std::string_view)>& fn) const {
  struct Group {
    std::vector<std::pair<uint32_t, uint32_t>> keys;  // (segment, word)
    Store::PinnedValues read;
  };
  auto read = [&](size_t start) {
    Group g;
    const size_t end = std::min(words.size(), start + kWordsPerRead);
    for (size_t i = start; i < end; ++i)
      for (uint32_t s : segments_) g.keys.emplace_back(s, words[i]);
    g.read = store_.GetWordLists(g.keys);
    return g;
  };
  // While `fn` consumes one group on another thread, this one reads the next
  // (MultiGet, checksums): a query's lists are megabytes at 100,000 images,
  // and reading them costs about what scoring them does. `fn` still sees the
  // lists one at a time, in order. The values are allocated and freed on this
  // thread: a reading thread would give each query a malloc arena of its own
  // (measured: +28 MiB peak RSS at 100,000 images).
  if (words.empty()) return;
  Group current = read(0);
  for (size_t start = 0; start < words.size(); start += kWordsPerRead) {
    std::future<void> consumed = std::async(std::launch::async, [&, start] {
      for (size_t k = 0; k < current.keys.size(); ++k)
        if (const auto& value = current.read.values[k])
          fn(start + k / segments_.size(), current.keys[k].first, *value);
    });
    // (If reading throws, the future's destructor waits for `fn` first.)
    Group next;
    if (start + kWordsPerRead < words.size()) next = read(start + kWordsPerRead);
    consumed.get();
    current = std::move(next);
  }
}

std::vector<size_t> StoredWordIndex::WordsRead(const std::vector<WordSignature>& query,
                                               int64_t max_postings, uint64_t* postings) const {
  std::vector<size_t> read;
  for (size_t i = 0; i < query.size(); ++i)
    if (query[i].word < static_cast<uint32_t>(vocabulary_.num_words())) read.push_back(i);
  auto count = [&](size_t i) -> uint64_t {
    return word_postings_known_ ? word_postings_[query[i].word] : 0;
  };
  uint64_t total = 0;
  for (size_t i : read) total += count(i);
  if (max_postings > 0 && word_postings_known_ && total > static_cast<uint64_t>(max_postings)) {
    // The most selective words first (ties in query order), while they fit.
    std::vector<size_t> by_count = read;
    std::stable_sort(by_count.begin(), by_count.end(),
                     [&](size_t a, size_t b) { return count(a) < count(b); });
    total = 0;
    size_t kept = 0;
    while (kept < by_count.size() &&
           total + count(by_count[kept]) <= static_cast<uint64_t>(max_postings))
      total += count(by_count[kept++]);
    by_count.resize(kept);
    std::sort(by_count.begin(), by_count.end());
    read = std::move(by_count);
  }
  if (postings) *postings = total;
  return read;
}

std::vector<std::pair<uint64_t, float>> StoredWordIndex::Search(
    const std::vector<WordSignature>& query, int64_t m, int64_t max_postings) const {
  std::vector<std::pair<uint64_t, float>> out;
  if (query.empty() || m <= 0 || ntotal() == 0) return out;
  if (!rows_.empty() && !segments_.empty()) {
    const float* kernel = WordKernelTable();
    std::vector<uint32_t> words;
    std::vector<uint64_t> bits;
    for (size_t i : WordsRead(query, max_postings)) {
      words.push_back(query[i].word);
      bits.push_back(query[i].bits);
    }
    // Each image's sum runs over the query's words in query order (an image
    // has one live posting per word), as in WordIndex::Search. It is kept
    // in the image's slot: its id while whether a posting is live is one
    // byte per image (a 16-byte row's segment was a cache miss per posting
    // at 100,000 images, most of the scoring time), else its row.
    const bool by_id = !live_segment_of_id_.empty();
    std::vector<float> score(by_id ? live_segment_of_id_.size() : rows_.size(), 0.0f);
    static const ScoreFn score_live_by_id = LiveByIdScorer();
    ReadLists(words, [&](size_t i, uint32_t segment, std::string_view value) {
      const uint64_t q = bits[i];
      if (by_id) {
        const auto at = std::lower_bound(segments_.begin(), segments_.end(), segment);
        const auto live = static_cast<uint8_t>(at - segments_.begin() + 1);
        score_live_by_id(value, q, live, live_segment_of_id_, kernel, score.data());
      } else {
        DecodeList(value, [&](uint64_t id, uint64_t b) {
          const int64_t row = RowOf(id);
          if (row >= 0 && rows_[row].segment == segment) score[row] += kernel[PopCount(q ^ b)];
        });
      }
    });
    const float inv_q = 1.0f / std::sqrt(static_cast<float>(query.size()));
    // The best m are kept as the rows pass (a total order: the same m as
    // one selection at the end), not every image a word touched: at
    // 1,000,000 images that list was 16 MB and, growing, twice that.
    const size_t bound = 2 * static_cast<size_t>(m) + 65536;
    out.reserve(std::min(bound, rows_.size()));
    for (size_t r = 0; r < rows_.size(); ++r) {
      const float sum = score[by_id ? rows_[r].id : r];
      if (sum > 0)
        out.emplace_back(rows_[r].id, sum * inv_q / std::sqrt(static_cast<float>(rows_[r].words)));
      if (out.size() >= bound) KeepBestWordScores(&out, m);
    }
  }
  if (memory_->ntotal() > 0) {
    const auto held = memory_->Search(query, m);
    out.insert(out.end(), held.begin(), held.end());
  }
  KeepBestWordScores(&out, m);
  return out;
}

uint32_t StoredWordIndex::WordsPerRange() const {
  const auto num_words = static_cast<uint64_t>(vocabulary_.num_words());
  const uint64_t per_word = stored_postings_ / std::max<uint64_t>(1, num_words) + 1;
  return static_cast<uint32_t>(std::clamp<uint64_t>(kPostingsPerRange / per_word, 1, 256));
}

void StoredWordIndex::SetWriter(Store* store) {
  if (store != &store_) throw std::logic_error("StoredWordIndex: writer is another store");
  writer_ = store;
}

uint32_t StoredWordIndex::NewSegment() {
  // Above every list stored, committed or left by a killed run, so a new
  // segment never mixes with old lists.
  if (next_segment_ == 0) next_segment_ = writer_->NextWordSegment();
  if (!segments_.empty()) next_segment_ = std::max(next_segment_, segments_.back() + 1);
  if (next_segment_ == UINT32_MAX)
    throw std::runtime_error("word index: segment numbers exhausted");
  return next_segment_++;
}

void StoredWordIndex::WriteMemory() {
  if (memory_->ntotal() == 0) return;
  const uint32_t segment = NewSegment();
  SegmentLists lists(writer_, segment, &word_postings_);
  memory_->ForEachList([&](uint32_t word, const std::vector<std::pair<uint64_t, uint64_t>>& p) {
    std::vector<std::pair<uint64_t, uint64_t>> postings = p;
    lists.Add(word, &postings);
  });
  lists.Flush();
  memory_->ForEachImage([&](uint64_t id, uint32_t words) {
    rows_.push_back(Row{id, words, segment});
  });
  std::sort(rows_.begin(), rows_.end(), [](const Row& a, const Row& b) { return a.id < b.id; });
  stored_postings_ += static_cast<uint64_t>(memory_->num_postings());
  live_postings_ += memory_->num_postings();
  segments_.push_back(segment);
  memory_ = std::make_unique<WordIndex>(vocabulary_);
  Reindex();
}

int64_t StoredWordIndex::AddFrom(const StoredWordIndex& other, uint64_t id_offset) {
  if (!writer_) throw std::logic_error("StoredWordIndex::AddFrom: no writer");
  if (other.has_unwritten()) throw std::logic_error("StoredWordIndex::AddFrom: unwritten images");
  if (other.vocabulary_.num_words() != vocabulary_.num_words() ||
      other.vocabulary_.dim() != vocabulary_.dim())
    throw std::logic_error("StoredWordIndex::AddFrom: another vocabulary");
  if (other.rows_.empty()) return 0;
  for (const Row& row : other.rows_)
    if (RowOf(row.id + id_offset) >= 0)
      throw std::logic_error("word index: image " + std::to_string(row.id + id_offset) +
                             " added twice");
  const uint32_t segment = NewSegment();
  SegmentLists lists(writer_, segment, &word_postings_);
  other.ForEachLiveRange([&](const std::vector<uint32_t>& words, LiveLists* live) {
    for (size_t i = 0; i < words.size(); ++i) {
      if ((*live)[i].empty()) continue;
      for (auto& p : (*live)[i]) p.first = other.rows_[p.first].id + id_offset;
      lists.Add(words[i], &(*live)[i]);
    }
  });
  lists.Flush();
  for (const Row& row : other.rows_) rows_.push_back(Row{row.id + id_offset, row.words, segment});
  std::sort(rows_.begin(), rows_.end(), [](const Row& a, const Row& b) { return a.id < b.id; });
  stored_postings_ += static_cast<uint64_t>(other.live_postings_);
  live_postings_ += other.live_postings_;
  segments_.push_back(segment);
  Reindex();
  return static_cast<int64_t>(other.rows_.size());
}

void StoredWordIndex::ForEachLiveRange(
    const std::function<void(const std::vector<uint32_t>& words, LiveLists* live)>& fn) const {
  const auto num_words = static_cast<uint32_t>(vocabulary_.num_words());
  const uint32_t range = WordsPerRange();
  LiveLists live(range);
  for (uint32_t w0 = 0; w0 < num_words; w0 += range) {
    std::vector<uint32_t> words;
    for (uint32_t w = w0; w < std::min(num_words, w0 + range); ++w) words.push_back(w);
    for (auto& l : live) l.clear();
    ReadLists(words, [&](size_t i, uint32_t s, std::string_view value) {
      DecodeList(value, [&](uint64_t id, uint64_t b) {
        const int64_t row = RowOf(id);
        if (row >= 0 && rows_[row].segment == s)
          live[i].emplace_back(static_cast<uint64_t>(row), b);
      });
    });
    fn(words, &live);
  }
}

void StoredWordIndex::Compact() {
  const uint32_t segment = NewSegment();
  std::vector<uint32_t> counts(word_postings_.size(), 0);
  SegmentLists lists(writer_, segment, &counts);
  ForEachLiveRange([&](const std::vector<uint32_t>& words, LiveLists* live) {
    for (size_t i = 0; i < words.size(); ++i) {
      if ((*live)[i].empty()) continue;
      for (auto& p : (*live)[i]) p.first = rows_[p.first].id;  // stored lists hold ids
      lists.Add(words[i], &(*live)[i]);
    }
    lists.Flush();  // each range's lists before the next is read
  });
  for (Row& row : rows_) row.segment = segment;
  segments_ = {segment};
  word_postings_ = std::move(counts);
  word_postings_known_ = true;
  stored_postings_ = static_cast<uint64_t>(live_postings_);
  Reindex();  // the live segment of every image changed
}

WordIndexCommit StoredWordIndex::Commit() {
  if (!writer_) throw std::logic_error("StoredWordIndex::Commit: no writer");
  WriteMemory();
  const uint64_t dead = stored_postings_ - static_cast<uint64_t>(live_postings_);
  // A table read without per-word counts gets them from a compaction.
  if (segments_.size() > kMaxSegments || dead > static_cast<uint64_t>(live_postings_) / 4 ||
      !word_postings_known_)
    Compact();
  if (rows_.empty()) segments_.clear();
  WordIndexCommit commit;
  commit.table = EncodeTable();
  if (vocabulary_new_) commit.vocabulary = vocabulary_.Serialize();
  vocabulary_new_ = false;
  commit.segments = segments_;
  return commit;
}

std::vector<std::string> StoredWordIndex::Check() const {
  std::vector<std::string> problems;
  std::vector<uint32_t> seen(rows_.size(), 0);
  const auto num_words = static_cast<uint32_t>(vocabulary_.num_words());
  const uint32_t range = WordsPerRange();
  for (uint32_t w0 = 0; w0 < num_words; w0 += range) {
    std::vector<uint32_t> words;
    for (uint32_t w = w0; w < std::min(num_words, w0 + range); ++w) words.push_back(w);
    try {
      ReadLists(words, [&](size_t i, uint32_t s, std::string_view value) {
        try {
          DecodeList(value, [&](uint64_t id, uint64_t) {
            const int64_t row = RowOf(id);
            if (row >= 0 && rows_[row].segment == s) ++seen[row];
          });
        } catch (const encoding::CorruptValue& e) {
          if (problems.size() < 100)
            problems.push_back("word index list of word " + std::to_string(words[i]) +
                               " in segment " + std::to_string(s) + ": " + e.what());
        }
      });
    } catch (const StoreError& e) {
      problems.push_back(e.what());
      return problems;
    }
  }
  for (size_t r = 0; r < rows_.size() && problems.size() < 100; ++r)
    if (seen[r] != rows_[r].words)
      problems.push_back("word index: image " + std::to_string(rows_[r].id) + " has " +
                         std::to_string(seen[r]) + " live postings, its table entry says " +
                         std::to_string(rows_[r].words));
  return problems;
}

}  // namespace lookalike
