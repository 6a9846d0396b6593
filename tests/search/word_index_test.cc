#include "search/word_index.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "storage/encoding.h"

namespace lookalike {
namespace {

constexpr int kDim = 128;

std::vector<float> RandomUnit(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> x(static_cast<size_t>(n) * kDim);
  for (int64_t i = 0; i < n; ++i) {
    double norm = 0;
    for (int j = 0; j < kDim; ++j) norm += double{x[i * kDim + j] = g(rng)} * x[i * kDim + j];
    for (int j = 0; j < kDim; ++j) x[i * kDim + j] /= static_cast<float>(std::sqrt(norm));
  }
  return x;
}

struct Fixture {
  Codebook codebook{16, kDim, RandomUnit(16, 1)};
  WordVocabulary vocabulary = Train();
  WordVocabulary Train() const {
    const std::vector<float> sample = RandomUnit(3000, 2);
    WordVocabularyOptions o;
    o.fine_per_word = 4;
    return WordVocabulary::Train(codebook, sample.data(), 3000, o);
  }
  // An "image": 200 random descriptors of its own.
  std::vector<WordSignature> Image(uint64_t seed) const {
    const auto x = RandomUnit(200, seed);
    return vocabulary.Encode(x.data(), 200);
  }
};

TEST(WordIndexTest, TheImageItselfRanksFirstWithSimilarityOne) {
  const Fixture f;
  WordIndex index(f.vocabulary);
  for (uint64_t id = 1; id <= 50; ++id) index.Add(id * 10, f.Image(100 + id));
  EXPECT_EQ(index.ntotal(), 50);
  const auto hits = index.Search(f.Image(100 + 17), 5);
  ASSERT_FALSE(hits.empty());
  EXPECT_EQ(hits[0].first, 170u);
  EXPECT_NEAR(hits[0].second, 1.0f, 1e-5f);
  for (size_t i = 1; i < hits.size(); ++i) EXPECT_LT(hits[i].second, 0.5f * hits[0].second);
  EXPECT_LE(hits.size(), 5u);
}

TEST(WordIndexTest, PartOfAnImageStillFindsIt) {
  // A "crop": half of an image's descriptors among unrelated ones.
  const Fixture f;
  WordIndex index(f.vocabulary);
  for (uint64_t id = 1; id <= 50; ++id) {
    const auto x = RandomUnit(200, 100 + id);
    index.Add(id, f.vocabulary.Encode(x.data(), 200));
  }
  std::vector<float> query = RandomUnit(200, 100 + 33);
  const std::vector<float> other = RandomUnit(100, 999);
  std::copy(other.begin(), other.end(), query.begin() + 100 * kDim);
  const auto hits = index.Search(f.vocabulary.Encode(query.data(), 200), 3);
  ASSERT_FALSE(hits.empty());
  EXPECT_EQ(hits[0].first, 33u);
}

TEST(WordIndexTest, RemovedImagesAreNotReturned) {
  const Fixture f;
  WordIndex index(f.vocabulary);
  for (uint64_t id = 1; id <= 10; ++id) index.Add(id, f.Image(id));
  const int64_t postings = index.num_postings();
  EXPECT_EQ(index.Remove({3, 4, 99}), 2);
  EXPECT_EQ(index.ntotal(), 8);
  EXPECT_LT(index.num_postings(), postings);
  for (const auto& [id, s] : index.Search(f.Image(3), 10)) EXPECT_NE(id, 3u);
  // Added again (a changed image): found again.
  index.Add(3, f.Image(3));
  EXPECT_EQ(index.Search(f.Image(3), 1).at(0).first, 3u);
  EXPECT_THROW(index.Add(3, f.Image(3)), std::logic_error);
}

TEST(WordIndexTest, EmptyQueriesAndIndexesReturnNothing) {
  const Fixture f;
  WordIndex index(f.vocabulary);
  EXPECT_TRUE(index.Search(f.Image(1), 5).empty());
  index.Add(1, f.Image(1));
  EXPECT_TRUE(index.Search({}, 5).empty());
  EXPECT_TRUE(index.Search(f.Image(1), 0).empty());
}

}  // namespace
}  // namespace lookalike
