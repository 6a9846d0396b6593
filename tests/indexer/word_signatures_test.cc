#include "indexer/word_signatures.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "storage/encoding.h"
#include "util/threads.h"

namespace lookalike {
namespace {

constexpr int kDim = 128;

// Unit rows drawn around `centres` (num x kDim, unit) with noise `sigma`.
std::vector<float> Around(const std::vector<float>& centres, int64_t n, float sigma,
                          uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0.0f, sigma);
  const int64_t k = static_cast<int64_t>(centres.size()) / kDim;
  std::vector<float> x(static_cast<size_t>(n) * kDim);
  for (int64_t i = 0; i < n; ++i) {
    const float* c = centres.data() + (i % k) * kDim;
    float* row = x.data() + i * kDim;
    double norm = 0;
    for (int j = 0; j < kDim; ++j) {
      row[j] = c[j] + noise(rng);  // written, then read: one statement would be unsequenced
      norm += double{row[j]} * row[j];
    }
    for (int j = 0; j < kDim; ++j) row[j] = static_cast<float>(row[j] / std::sqrt(norm));
  }
  return x;
}

std::vector<float> RandomUnit(int64_t n, uint64_t seed) {
  return Around(std::vector<float>(kDim, 0.0f), n, 1.0f, seed);
}

void ExpectSameSignatures(const std::vector<WordSignature>& a,
                          const std::vector<WordSignature>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].word, b[i].word) << i;
    EXPECT_EQ(a[i].bits, b[i].bits) << i;
  }
}

struct Fixture {
  Codebook codebook;
  std::vector<float> sample;
  WordVocabulary vocabulary;
};

Fixture Make(int fine_per_word) {
  std::vector<float> centres = RandomUnit(8, 1);
  std::vector<float> sample = Around(centres, 4000, 0.05f, 2);
  Codebook codebook(8, kDim, centres);
  WordVocabularyOptions o;
  o.fine_per_word = fine_per_word;
  WordVocabulary v = WordVocabulary::Train(codebook, sample.data(), 4000, o);
  return Fixture{codebook, std::move(sample), std::move(v)};
}

TEST(WordSignaturesTest, ValidatesOptions) {
  WordVocabularyOptions o;
  EXPECT_NO_THROW(o.Validate());
  o.fine_per_word = 0;
  EXPECT_THROW(o.Validate(), std::invalid_argument);
  o.fine_per_word = 257;
  EXPECT_THROW(o.Validate(), std::invalid_argument);
}

TEST(WordSignaturesTest, OneSignaturePerDistinctWordInWordOrder) {
  const Fixture f = Make(4);
  EXPECT_EQ(f.vocabulary.num_words(), 32);
  const std::vector<float> image = Around(RandomUnit(8, 1), 300, 0.05f, 3);
  const std::vector<WordSignature> s = f.vocabulary.Encode(image.data(), 300);
  ASSERT_FALSE(s.empty());
  EXPECT_LE(s.size(), 32u);
  for (size_t i = 1; i < s.size(); ++i) EXPECT_LT(s[i - 1].word, s[i].word);
  for (const WordSignature& w : s) EXPECT_LT(w.word, 32u);
  // Every codebook word receives descriptors, so more than 8 words appear:
  // the sub-words split them.
  EXPECT_GT(s.size(), 8u);
  EXPECT_TRUE(f.vocabulary.Encode(image.data(), 0).empty());
}

// Words are learned side by side on the caller's threads: the vocabulary is
// the same byte for byte on one thread and on several.
TEST(WordSignaturesTest, TheSameOnAnyNumberOfThreads) {
  std::vector<float> centres = RandomUnit(8, 1);
  const std::vector<float> sample = Around(centres, 4000, 0.05f, 2);
  const Codebook codebook(8, kDim, centres);
  WordVocabularyOptions o;
  o.fine_per_word = 4;
  std::string one, several;
  {
    const ScopedOmpThreads threads(1);
    one = WordVocabulary::Train(codebook, sample.data(), 4000, o).Serialize();
  }
  {
    const ScopedOmpThreads threads(3);
    several = WordVocabulary::Train(codebook, sample.data(), 4000, o).Serialize();
  }
  EXPECT_TRUE(one == several);
}

TEST(WordSignaturesTest, DeterministicAndOrderIndependent) {
  const Fixture a = Make(4), b = Make(4);
  std::vector<float> image = Around(RandomUnit(8, 1), 200, 0.05f, 4);
  const auto sa = a.vocabulary.Encode(image.data(), 200);
  const auto sb = b.vocabulary.Encode(image.data(), 200);
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].word, sb[i].word);
    EXPECT_EQ(sa[i].bits, sb[i].bits);
  }
  // The descriptors of an image in another order: the same sums.
  std::vector<float> reversed(image.size());
  for (int64_t i = 0; i < 200; ++i)
    std::copy_n(image.data() + i * kDim, kDim, reversed.data() + (199 - i) * kDim);
  const auto sr = a.vocabulary.Encode(reversed.data(), 200);
  ASSERT_EQ(sr.size(), sa.size());
  int differing_bits = 0;
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sr[i].word, sa[i].word);
    differing_bits += __builtin_popcountll(sr[i].bits ^ sa[i].bits);
  }
  EXPECT_LE(differing_bits, 2);  // float summation order only
}

// Multiple assignment (the query side): one assignment is Encode; more add
// words, each descriptor's nearest always among them, at most as many per
// descriptor as asked; a vocabulary of one sub-word per word has no other.
TEST(WordSignaturesTest, MultipleAssignmentAddsTheNextNearestSubWords) {
  const Fixture f = Make(4);
  const std::vector<float> image = Around(RandomUnit(8, 1), 300, 0.05f, 3);
  ExpectSameSignatures(f.vocabulary.EncodeMultiple(image.data(), 300, 1),
                       f.vocabulary.Encode(image.data(), 300));
  const auto one = f.vocabulary.Encode(image.data(), 300);
  const auto three = f.vocabulary.EncodeMultiple(image.data(), 300, 3);
  EXPECT_GT(three.size(), one.size());
  for (size_t i = 1; i < three.size(); ++i) EXPECT_LT(three[i - 1].word, three[i].word);
  for (const WordSignature& w : one)
    EXPECT_TRUE(std::any_of(three.begin(), three.end(),
                            [&](const WordSignature& m) { return m.word == w.word; }))
        << "word " << w.word << " lost";
  EXPECT_TRUE(f.vocabulary.EncodeMultiple(image.data(), 0, 3).empty());
  // Single descriptors: each joins at most `assignments` words, and some
  // (near a boundary between sub-words) more than one.
  int joined = 0;
  for (int64_t i = 0; i < 300; ++i) {
    const auto m = f.vocabulary.EncodeMultiple(image.data() + i * kDim, 1, 2);
    ASSERT_GE(m.size(), 1u);
    ASSERT_LE(m.size(), 2u);
    joined += m.size() == 2 ? 1 : 0;
  }
  EXPECT_GT(joined, 0);
  // One sub-word per word: nothing else to join.
  const Fixture single = Make(1);
  ExpectSameSignatures(single.vocabulary.EncodeMultiple(image.data(), 300, 3),
                       single.vocabulary.Encode(image.data(), 300));
}

TEST(WordSignaturesTest, NearbyResidualsAgreeUnrelatedOnesDoNot) {
  const Fixture f = Make(1);
  // One descriptor, a slightly perturbed copy of it, and an unrelated one of
  // the same word: the copy's signature is much closer.
  const std::vector<float> centres = RandomUnit(8, 1);
  const std::vector<float> one = Around(centres, 1, 0.05f, 10);
  const std::vector<float> near = Around(one, 1, 0.003f, 11);
  const std::vector<float> far = Around(centres, 1, 0.05f, 12);
  const auto s1 = f.vocabulary.Encode(one.data(), 1);
  const auto s2 = f.vocabulary.Encode(near.data(), 1);
  const auto s3 = f.vocabulary.Encode(far.data(), 1);
  ASSERT_EQ(s1.size(), 1u);
  ASSERT_EQ(s1[0].word, s2[0].word);
  ASSERT_EQ(s1[0].word, s3[0].word);
  const int h_near = __builtin_popcountll(s1[0].bits ^ s2[0].bits);
  const int h_far = __builtin_popcountll(s1[0].bits ^ s3[0].bits);
  EXPECT_LT(h_near, 12);
  EXPECT_GT(h_far, h_near + 8);
}

TEST(WordSignaturesTest, SerializeRoundTrip) {
  const Fixture f = Make(4);
  const WordVocabulary back = WordVocabulary::Deserialize(f.vocabulary.Serialize(), f.codebook);
  const std::vector<float> image = Around(RandomUnit(8, 1), 150, 0.05f, 5);
  const auto a = f.vocabulary.Encode(image.data(), 150);
  const auto b = back.Encode(image.data(), 150);
  ExpectSameSignatures(a, b);
}

// A vocabulary learned now is stored in format 2 (float16 centroids); one
// read in format 1 (float32, older databases) encodes the same and is written
// back in format 1, byte for byte, so its stored postings stay valid.
TEST(WordSignaturesTest, HalfPrecisionFormatAndFormatOneKept) {
  const Fixture f = Make(4);
  const std::string v2 = f.vocabulary.Serialize();
  ASSERT_EQ(static_cast<unsigned char>(v2[0]), 2u);
  // The same vocabulary in format 1: the header, then every f16 centroid
  // widened to f32, then the rotation as it is.
  const size_t header = 20;
  const size_t centroids = size_t{8} * 4 * kDim;  // 8 words x 4 fine x kDim
  ASSERT_EQ(v2.size(), header + 2 * centroids + size_t{64} * kDim * 4);
  std::string v1 = v2.substr(0, header);
  v1[0] = 1;
  for (size_t i = 0; i < centroids; ++i) {
    const auto* p = reinterpret_cast<const unsigned char*>(v2.data() + header + 2 * i);
    const float x = encoding::HalfToFloat(static_cast<uint16_t>(p[0] | (p[1] << 8)));
    encoding::PutFloats(&v1, &x, 1);
  }
  v1 += v2.substr(header + 2 * centroids);
  const WordVocabulary old = WordVocabulary::Deserialize(v1, f.codebook);
  EXPECT_EQ(old.Serialize(), v1);
  EXPECT_EQ(WordVocabulary::Deserialize(v2, f.codebook).Serialize(), v2);
  const std::vector<float> image = Around(RandomUnit(8, 1), 150, 0.05f, 5);
  const auto a = f.vocabulary.Encode(image.data(), 150);
  const auto b = old.Encode(image.data(), 150);
  ExpectSameSignatures(a, b);
}

TEST(WordSignaturesTest, CorruptOrForeignBlobsAreRejected) {
  const Fixture f = Make(4);
  const std::string blob = f.vocabulary.Serialize();
  EXPECT_THROW(WordVocabulary::Deserialize(blob.substr(0, blob.size() - 1), f.codebook),
               encoding::CorruptValue);
  EXPECT_THROW(WordVocabulary::Deserialize(blob + "x", f.codebook), encoding::CorruptValue);
  std::string bad_format = blob;
  bad_format[0] = 9;
  EXPECT_THROW(WordVocabulary::Deserialize(bad_format, f.codebook), encoding::CorruptValue);
  // Another codebook shape.
  const Codebook other(4, kDim, RandomUnit(4, 7));
  EXPECT_THROW(WordVocabulary::Deserialize(blob, other), encoding::CorruptValue);
}

TEST(WordSignaturesTest, WordsWithTooFewPointsKeepTheirCentroid) {
  // 8 codebook words, 20 sample points: most words get fewer points than 16
  // sub-words; training still succeeds and encodes.
  std::vector<float> centres = RandomUnit(8, 1);
  std::vector<float> sample = Around(centres, 20, 0.05f, 2);
  Codebook codebook(8, kDim, centres);
  const WordVocabulary v = WordVocabulary::Train(codebook, sample.data(), 20, {});
  EXPECT_EQ(v.num_words(), 8 * 16);
  EXPECT_FALSE(v.Encode(sample.data(), 20).empty());
}

// What Encode computes, one sub-word and one signature bit at a time, from
// the vocabulary's stored centroids and rotation (format 2).
std::vector<WordSignature> EncodeOneAtATime(const WordVocabulary& v, const Codebook& codebook,
                                            const float* x, int64_t n) {
  const std::string blob = v.Serialize();
  const int k = codebook.num_clusters(), d = kDim, f = v.num_words() / k;
  std::vector<float> fine(static_cast<size_t>(k) * f * d), rotation(size_t{64} * d);
  encoding::GetHalves(blob.data() + 20, fine.size(), fine.data());
  encoding::GetFloats(blob.data() + 20 + 2 * fine.size(), rotation.size(), rotation.data());
  std::vector<int32_t> coarse(static_cast<size_t>(n));
  codebook.Assign(x, n, coarse.data());
  std::vector<uint32_t> words(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int best = 0;
    float best_d2 = INFINITY;
    for (int s = 0; s < f; ++s) {
      const float* c = fine.data() + (static_cast<size_t>(coarse[i]) * f + s) * d;
      float d2 = 0;
      for (int j = 0; j < d; ++j) {
        const float diff = x[i * d + j] - c[j];
        d2 += diff * diff;
      }
      if (d2 < best_d2) best_d2 = d2, best = s;
    }
    words[i] = static_cast<uint32_t>(coarse[i] * f + best);
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return words[a] < words[b]; });
  std::vector<WordSignature> out;
  for (int64_t begin = 0, end = 0; begin < n; begin = end) {
    const uint32_t w = words[order[begin]];
    std::vector<float> sum(d, 0.0f);
    for (end = begin; end < n && words[order[end]] == w; ++end)
      for (int j = 0; j < d; ++j) sum[j] += x[order[end] * d + j] - fine[size_t{w} * d + j];
    uint64_t bits = 0;
    for (int b = 0; b < 64; ++b) {
      float dot = 0;
      for (int j = 0; j < d; ++j) dot += rotation[static_cast<size_t>(b) * d + j] * sum[j];
      if (dot > 0) bits |= uint64_t{1} << b;
    }
    out.push_back(WordSignature{w, bits});
  }
  return out;
}

// Encode sums all sub-words' distances and all bits at once (vectorised);
// every word and bit must still be exactly what the loop one at a time
// gives, or a database's stored postings would stop matching its queries.
// The second vocabulary's words have too few points: their sub-words are
// equal, and the first must win every tie.
TEST(WordSignaturesTest, EncodesAsOneSubWordAndOneBitAtATime) {
  const Fixture f = Make(16);
  std::vector<float> image = Around(RandomUnit(8, 1), 3000, 0.05f, 20);
  const std::vector<float> unrelated = RandomUnit(1000, 21);
  image.insert(image.end(), unrelated.begin(), unrelated.end());
  const auto encoded = f.vocabulary.Encode(image.data(), 4000);
  EXPECT_GT(encoded.size(), 100u);
  ExpectSameSignatures(encoded, EncodeOneAtATime(f.vocabulary, f.codebook, image.data(), 4000));

  const std::vector<float> centres = RandomUnit(8, 1);
  const Codebook codebook(8, kDim, centres);
  const std::vector<float> few = Around(centres, 20, 0.05f, 2);
  const WordVocabulary ties = WordVocabulary::Train(codebook, few.data(), 20, {});
  ExpectSameSignatures(ties.Encode(image.data(), 4000),
                       EncodeOneAtATime(ties, codebook, image.data(), 4000));
}

}  // namespace
}  // namespace lookalike
