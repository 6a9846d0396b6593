#include "search/word_index.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace lookalike {
namespace {

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

}  // namespace lookalike
