#include "search/word_index.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "storage/encoding.h"

namespace lookalike {
namespace {
constexpr uint32_t kFormat = 1;

// sigma(u) of the kernel for every Hamming distance: u^3 above 0, else 0.
struct Selectivity {
  float weight[kSignatureBits + 1];
  Selectivity() {
    for (int h = 0; h <= kSignatureBits; ++h) {
      const float u = 1.0f - 2.0f * static_cast<float>(h) / kSignatureBits;
      weight[h] = u > 0 ? u * u * u : 0.0f;
    }
  }
};
const Selectivity kSelectivity;

void PutVarint(std::string* out, uint32_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

uint32_t GetVarint(encoding::Reader* r) {
  uint32_t v = 0;
  for (int shift = 0; shift < 35; shift += 7) {
    const auto b = static_cast<unsigned char>(*r->Raw(1));
    v |= static_cast<uint32_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  throw encoding::CorruptValue("word index: varint too long");
}
}  // namespace

const float* WordKernelTable() { return kSelectivity.weight; }

WordIndex::WordIndex(WordVocabulary vocabulary)
    : vocabulary_(std::move(vocabulary)), lists_(static_cast<size_t>(vocabulary_.num_words())) {}

void WordIndex::Add(uint64_t id, const std::vector<WordSignature>& signatures) {
  const auto row = static_cast<uint32_t>(id_of_row_.size());
  if (!row_of_id_.emplace(id, row).second)
    throw std::logic_error("word index: image " + std::to_string(id) + " added twice");
  id_of_row_.push_back(id);
  words_of_row_.push_back(static_cast<uint32_t>(signatures.size()));
  for (const WordSignature& s : signatures) {
    if (s.word >= lists_.size()) throw std::out_of_range("word index: word out of range");
    lists_[s.word].rows.push_back(row);
    lists_[s.word].bits.push_back(s.bits);
  }
  num_postings_ += static_cast<int64_t>(signatures.size());
}

void KeepBestWordScores(std::vector<std::pair<uint64_t, float>>* out, int64_t m) {
  auto better = [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  };
  if (static_cast<int64_t>(out->size()) > m) {
    std::nth_element(out->begin(), out->begin() + m, out->end(), better);
    out->resize(static_cast<size_t>(m));
  }
  std::sort(out->begin(), out->end(), better);
}

int64_t WordIndex::Remove(const std::vector<int64_t>& ids) {
  int64_t removed = 0;
  for (int64_t id : ids) {
    const auto it = row_of_id_.find(static_cast<uint64_t>(id));
    if (it == row_of_id_.end()) continue;
    // The postings stay until Serialize leaves them out; Search skips them.
    num_postings_ -= words_of_row_[it->second];
    words_of_row_[it->second] = 0;
    row_of_id_.erase(it);
    ++removed;
  }
  return removed;
}

std::vector<std::pair<uint64_t, float>> WordIndex::Search(const std::vector<WordSignature>& query,
                                                          int64_t m) const {
  std::vector<std::pair<uint64_t, float>> out;
  if (query.empty() || m <= 0 || row_of_id_.empty()) return out;
  std::vector<float> score(id_of_row_.size(), 0.0f);
  for (const WordSignature& q : query) {
    if (q.word >= lists_.size()) continue;
    const List& list = lists_[q.word];
    const size_t n = list.rows.size();
    for (size_t i = 0; i < n; ++i)
      score[list.rows[i]] += kSelectivity.weight[__builtin_popcountll(q.bits ^ list.bits[i])];
  }
  const float inv_q = 1.0f / std::sqrt(static_cast<float>(query.size()));
  for (size_t r = 0; r < score.size(); ++r)
    if (score[r] > 0 && words_of_row_[r] > 0)
      out.emplace_back(id_of_row_[r],
                       score[r] * inv_q / std::sqrt(static_cast<float>(words_of_row_[r])));
  KeepBestWordScores(&out, m);
  return out;
}

void WordIndex::ForEachImage(const std::function<void(uint64_t, uint32_t)>& fn) const {
  for (size_t r = 0; r < id_of_row_.size(); ++r)
    if (words_of_row_[r] > 0) fn(id_of_row_[r], words_of_row_[r]);
}

void WordIndex::ForEachList(
    const std::function<void(uint32_t, const std::vector<std::pair<uint64_t, uint64_t>>&)>& fn)
    const {
  std::vector<std::pair<uint64_t, uint64_t>> postings;
  for (size_t w = 0; w < lists_.size(); ++w) {
    postings.clear();
    const List& l = lists_[w];
    for (size_t i = 0; i < l.rows.size(); ++i)
      if (words_of_row_[l.rows[i]] > 0) postings.emplace_back(id_of_row_[l.rows[i]], l.bits[i]);
    if (!postings.empty()) fn(static_cast<uint32_t>(w), postings);
  }
}

int64_t WordIndex::bytes() const {
  int64_t b = static_cast<int64_t>(id_of_row_.capacity() * 8 + words_of_row_.capacity() * 4 +
                                   row_of_id_.size() * 32);
  for (const List& l : lists_)
    b += static_cast<int64_t>(l.rows.capacity() * 4 + l.bits.capacity() * 8);
  return b;
}

std::string WordIndex::Serialize() const {
  // Live rows, renumbered in their order.
  std::vector<uint32_t> new_row(id_of_row_.size(), UINT32_MAX);
  uint32_t live = 0;
  for (size_t r = 0; r < id_of_row_.size(); ++r)
    if (words_of_row_[r] > 0) new_row[r] = live++;
  std::string out;
  encoding::PutFixed32(&out, kFormat);
  const std::string vocabulary = vocabulary_.Serialize();
  encoding::PutFixed64(&out, vocabulary.size());
  out += vocabulary;
  encoding::PutFixed64(&out, live);
  for (size_t r = 0; r < id_of_row_.size(); ++r)
    if (new_row[r] != UINT32_MAX) encoding::PutFixed64(&out, id_of_row_[r]);
  for (size_t r = 0; r < id_of_row_.size(); ++r)
    if (new_row[r] != UINT32_MAX) encoding::PutFixed32(&out, words_of_row_[r]);
  for (const List& l : lists_) {
    uint32_t count = 0;
    for (uint32_t row : l.rows) count += new_row[row] != UINT32_MAX;
    encoding::PutFixed32(&out, count);
    uint32_t previous = 0;
    for (uint32_t row : l.rows)
      if (new_row[row] != UINT32_MAX) {
        PutVarint(&out, new_row[row] - previous);
        previous = new_row[row];
      }
    for (size_t i = 0; i < l.rows.size(); ++i)
      if (new_row[l.rows[i]] != UINT32_MAX) encoding::PutFixed64(&out, l.bits[i]);
  }
  return out;
}

std::unique_ptr<WordIndex> WordIndex::Deserialize(const std::string& blob,
                                                  const Codebook& codebook) {
  encoding::Reader r(blob, "word index");
  if (r.Fixed32() != kFormat) throw encoding::CorruptValue("word index: unknown format");
  const uint64_t vocabulary_size = r.Fixed64();
  if (vocabulary_size > r.remaining()) throw encoding::CorruptValue("word index truncated");
  auto index = std::make_unique<WordIndex>(
      WordVocabulary::Deserialize(std::string(r.Raw(vocabulary_size), vocabulary_size), codebook));
  const uint64_t n = r.Fixed64();
  if (n > r.remaining() / 12 || n > UINT32_MAX)
    throw encoding::CorruptValue("word index truncated");
  index->id_of_row_.resize(n);
  index->words_of_row_.resize(n);
  for (uint64_t& id : index->id_of_row_) id = r.Fixed64();
  uint64_t words = 0;
  for (uint32_t& w : index->words_of_row_) {
    w = r.Fixed32();
    if (w == 0) throw encoding::CorruptValue("word index: an image without words");
    words += w;
  }
  for (uint32_t row = 0; row < n; ++row)
    if (!index->row_of_id_.emplace(index->id_of_row_[row], row).second)
      throw encoding::CorruptValue("word index: an image listed twice");
  std::vector<uint32_t> seen(n, 0);
  for (List& l : index->lists_) {
    const uint32_t count = r.Fixed32();
    if (count > n) throw encoding::CorruptValue("word index: a list longer than the images");
    l.rows.resize(count);
    uint32_t row = 0;
    for (uint32_t i = 0; i < count; ++i) {
      const uint32_t delta = GetVarint(&r);
      if ((i > 0 && delta == 0) || uint64_t{row} + delta >= n)
        throw encoding::CorruptValue("word index: rows out of order or range");
      row += delta;
      l.rows[i] = row;
      ++seen[row];
    }
    l.bits.resize(count);
    for (uint64_t& b : l.bits) b = r.Fixed64();
    index->num_postings_ += count;
  }
  r.ExpectEnd();
  if (static_cast<uint64_t>(index->num_postings_) != words)
    throw encoding::CorruptValue("word index: postings do not add up");
  for (uint32_t row = 0; row < n; ++row)
    if (seen[row] != index->words_of_row_[row])
      throw encoding::CorruptValue("word index: an image's postings do not add up");
  return index;
}

}  // namespace lookalike
