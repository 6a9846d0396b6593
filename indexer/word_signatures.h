// Per-word binary signatures of an image's local descriptors: the
// representation of the selective first stage (aggregated selective match
// kernel, ASMK*, Tolias, Avrithis & Jégou, ICCV 2013). The database's
// codebook (the VLAD words) is refined into `fine_per_word` sub-words per
// word, each descriptor is assigned to its fine word, and the residuals of
// each fine word are summed -- the same sorted-label scatter-reduce VLAD
// does, on finer labels -- L2-normalised, rotated and binarised to 64 bits.
// Two images then compare word by word: only words both contain, each
// weighed by how close its two signatures are (search/word_index.h). Unlike
// one global vector, a crop or a small copy keeps the signatures of the
// words it shares with its original, and thousands of unrelated images do
// not share them (search/search_index.md, "The word index").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "indexer/codebook.h"
#include "storage/store.h"

namespace lookalike {

// One fine word an image contains and the signature of its residuals.
struct WordSignature {
  uint32_t word = 0;  // coarse word x fine_per_word + fine index
  uint64_t bits = 0;  // sign of the rotated, aggregated residual, bit j = component j
};

inline constexpr int kSignatureBits = 64;

// WordVocabulary::EncodeMultiple's bound: a further sub-word is joined when
// its distance is at most this many times the nearest's (Jégou et al.'s
// multiple assignment, ECCV 2008 / IJCV 2010, use 1.2).
inline constexpr float kMultipleAssignmentRatio = 1.2f;

// Part of the model (ModelOptions::words): learned with the codebook, from
// the same sample, and stored with it (Store m:wv); the serialized
// vocabulary carries fine_per_word, so a database keeps the size it was
// created with whatever the default becomes.
struct WordVocabularyOptions {
  // Sub-words per codebook word: 16 x 512 = 8,192 words by default, so a
  // photo's ~1,000 descriptors fall in ~600 distinct words and each word's
  // residuals stay local (a larger vocabulary is more selective; ASMK uses
  // 65k words). A word whose share of the training sample has fewer
  // descriptors than this keeps copies of its centroid (Train): the
  // vocabulary is then as fine as the sample allows, never an error.
  int fine_per_word = 16;
  uint64_t seed = 1234;
  // Throws std::invalid_argument naming the offending field.
  void Validate() const;
};

// Immutable after construction; const methods are thread-safe.
class WordVocabulary {
 public:
  // Learns the sub-words of every codebook word from `n` unit descriptors
  // (row-major, codebook.dim() each) with FAISS k-means on the residuals
  // each word receives, and a seeded random rotation for the signatures.
  // Deterministic for a seed and a sample. A word that received fewer
  // descriptors than sub-words keeps copies of its own centroid (they are
  // never chosen over the first). Needs n >= 1. `options` are trusted: a
  // caller taking them from a user (the model flags) runs Validate first.
  // Runs on the caller's OpenMP threads (the assignment to codebook words,
  // then the words side by side, each word's k-means on one); the result
  // does not depend on their number.
  static WordVocabulary Train(const Codebook& codebook, const float* descriptors, int64_t n,
                              const WordVocabularyOptions& options);
  // Reads what Serialize wrote for `codebook`; throws encoding::CorruptValue
  // when the blob does not fit it.
  static WordVocabulary Deserialize(const std::string& blob, const Codebook& codebook);
  // u32 format (2; 1 for a vocabulary read in format 1, which keeps it), u32
  // coarse words, u32 fine per word, u32 dim, u32 bits (64), words x fine x
  // dim fine centroids (format 2: f16; 1: f32), bits x dim f32 rotation,
  // little-endian. The store adds its checksum.
  std::string Serialize() const;

  int num_words() const { return num_coarse_ * fine_per_word_; }
  int dim() const { return dim_; }

  // The signatures of an image's `n` unit descriptors: one per distinct fine
  // word, in word order. Empty for n = 0.
  std::vector<WordSignature> Encode(const float* descriptors, int64_t n) const;
  // A query's signatures with multiple assignment: each descriptor joins its
  // nearest sub-word and up to `assignments` - 1 more of its coarse word's,
  // those within kMultipleAssignmentRatio of the nearest's distance (a
  // descriptor near a sub-word boundary falls on the other side of it in
  // another view of the scene). The database keeps one word per descriptor
  // (Encode); only the query side is widened. assignments <= 1 = Encode.
  std::vector<WordSignature> EncodeMultiple(const float* descriptors, int64_t n,
                                            int assignments) const;

 private:
  WordVocabulary(const Codebook& codebook, int fine_per_word, std::vector<float> fine,
                 std::vector<float> rotation, bool half);
  // Fine centroids stored as float16 (format 2, every vocabulary learned
  // now) or float32 (format 1, read from an older database and written back
  // as it was, so its postings stay valid).
  bool half_ = true;
  // The squared distances of descriptor `x` to the fine_per_word_ sub-words
  // of coarse word `coarse`, into d2.
  void SubWordDistances(const float* x, int32_t coarse, float* d2) const;
  // Appends to `out` the signature of each distinct word of `words` (label
  // i of descriptor rows[i], or of descriptor i without `rows`): the sum of
  // its descriptors' residuals, rotated and binarised, in word order.
  void AppendSignatures(const float* descriptors, const std::vector<uint32_t>& words,
                        std::vector<WordSignature>* out,
                        const std::vector<int64_t>* rows = nullptr) const;
  Codebook codebook_;
  int num_coarse_ = 0;
  int fine_per_word_ = 0;
  int dim_ = 0;
  std::vector<float> fine_;      // num_words() x dim, absolute positions
  std::vector<float> rotation_;  // kSignatureBits x dim, orthonormal rows
  // The same values dimension-major, for Encode: each coarse word's
  // sub-words as dim x fine_per_word, and the rotation as dim x bits.
  std::vector<float> fine_by_dim_;
  std::vector<float> rotation_by_dim_;
};

// The vocabulary stored with `store`'s model (m:wv), or nullopt for a
// database created before the model carried one. Throws StoreError(kCorrupt)
// when it fails its checksum or does not fit the model's codebook.
std::optional<WordVocabulary> ModelWordVocabulary(const Store& store);

}  // namespace lookalike
