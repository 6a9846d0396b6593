// The selective first stage: an inverted file over fine visual words whose
// postings carry each image's binary word signature (indexer/word_signatures.h),
// scored with the aggregated selective match kernel (ASMK*, Tolias, Avrithis &
// Jégou, ICCV 2013):
//
//   K(q, x) = sum over words w in both q and x of  sigma(u_w),
//   u_w = 1 - 2 h_w / 64  (h_w: Hamming distance of the two signatures),
//   sigma(u) = u^3 for u > 0, else 0,
//
// normalised by sqrt(|q| |x|) (|.| = words an image contains; K(x, x) = |x|).
// Only words both images contain cost anything, and a word counts only when
// its residuals agree, so a copy's shared words stand out from thousands of
// unrelated images whose global statistics look alike (search/search_index.md,
// "The word index").
//
// It lives beside the vector index in the persisted search index
// (search/search_index.h), derived from the stored local features and
// reconciled with the records the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "indexer/word_signatures.h"

namespace lookalike {

// sigma(u_w) of the kernel for each Hamming distance 0..kSignatureBits: the
// one table every scorer of the word index uses, so they agree to the bit.
const float* WordKernelTable();

// Keeps the `m` best of (id, similarity) pairs, best first, ties by lower id:
// the order every word index search returns.
void KeepBestWordScores(std::vector<std::pair<uint64_t, float>>* out, int64_t m);

// Thread-compatible: const methods may run concurrently, Add and Remove may not.
class WordIndex {
 public:
  explicit WordIndex(WordVocabulary vocabulary);

  const WordVocabulary& vocabulary() const { return vocabulary_; }

  // Adds image `id` (not already held) with its signatures (one per word at
  // most, as WordVocabulary::Encode gives them).
  void Add(uint64_t id, const std::vector<WordSignature>& signatures);
  // Removes the images of `ids` it holds; returns how many it held.
  int64_t Remove(const std::vector<int64_t>& ids);

  // The `m` images most similar to `query` by K (normalised to [0, 1]),
  // best first (ties: lower id); images sharing no agreeing word are not
  // returned.
  std::vector<std::pair<uint64_t, float>> Search(const std::vector<WordSignature>& query,
                                                 int64_t m) const;

  // Calls fn(id, words) for every held image, in the order they were added.
  void ForEachImage(const std::function<void(uint64_t id, uint32_t words)>& fn) const;
  // Calls fn(word, postings) for every word with held postings, in word
  // order; postings are (image id, signature bits) in the order added.
  void ForEachList(
      const std::function<void(uint32_t word, const std::vector<std::pair<uint64_t, uint64_t>>&)>&
          fn) const;

  int64_t ntotal() const { return static_cast<int64_t>(row_of_id_.size()); }
  int64_t num_postings() const { return num_postings_; }  // of held images
  // Memory held by the postings and the per-image tables, bytes.
  int64_t bytes() const;

 private:
  struct List {
    std::vector<uint32_t> rows;
    std::vector<uint64_t> bits;
  };
  WordVocabulary vocabulary_;
  std::vector<List> lists_;
  std::vector<uint64_t> id_of_row_;
  std::vector<uint32_t> words_of_row_;  // |x|; 0 for a removed image
  std::unordered_map<uint64_t, uint32_t> row_of_id_;
  int64_t num_postings_ = 0;
};

}  // namespace lookalike
