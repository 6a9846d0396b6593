#include "indexer/word_signatures.h"

#include <faiss/Clustering.h>
#include <faiss/IndexFlat.h>
#include <faiss/VectorTransform.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <numeric>
#include <stdexcept>

#include "indexer/model.h"
#include "storage/encoding.h"

namespace lookalike {
namespace {
// Vocabulary formats: 1 (fine centroids as float32), 2 (as float16: 2 MiB
// instead of 4 at 512 x 16 x 128; the centroids are rounded when learned, so
// the vocabulary in memory is the stored one).
constexpr uint32_t kFormatF32 = 1;
constexpr uint32_t kFormatF16 = 2;
}  // namespace

void WordVocabularyOptions::Validate() const {
  if (fine_per_word < 1 || fine_per_word > 256)
    throw std::invalid_argument("fine words per codebook word must be in 1..256, got " +
                                std::to_string(fine_per_word));
}

WordVocabulary::WordVocabulary(const Codebook& codebook, int fine_per_word, std::vector<float> fine,
                               std::vector<float> rotation, bool half)
    : half_(half),
      codebook_(codebook),
      num_coarse_(codebook.num_clusters()),
      fine_per_word_(fine_per_word),
      dim_(codebook.dim()),
      fine_(std::move(fine)),
      rotation_(std::move(rotation)),
      fine_by_dim_(fine_.size()),
      rotation_by_dim_(rotation_.size()) {
  const int f = fine_per_word_, d = dim_;
  for (int w = 0; w < num_coarse_; ++w)
    for (int s = 0; s < f; ++s)
      for (int j = 0; j < d; ++j)
        fine_by_dim_[(static_cast<size_t>(w) * d + j) * f + s] =
            fine_[(static_cast<size_t>(w) * f + s) * d + j];
  for (int b = 0; b < kSignatureBits; ++b)
    for (int j = 0; j < d; ++j)
      rotation_by_dim_[static_cast<size_t>(j) * kSignatureBits + b] =
          rotation_[static_cast<size_t>(b) * d + j];
}

WordVocabulary WordVocabulary::Train(const Codebook& codebook, const float* descriptors, int64_t n,
                                     const WordVocabularyOptions& options) {
  const int k = codebook.num_clusters(), d = codebook.dim(), f = options.fine_per_word;
  std::vector<int32_t> labels(static_cast<size_t>(n));
  codebook.Assign(descriptors, n, labels.data());
  std::vector<std::vector<int64_t>> members(k);
  for (int64_t i = 0; i < n; ++i) members[labels[i]].push_back(i);

  std::vector<float> fine(static_cast<size_t>(k) * f * d);
  const float* coarse = codebook.centroids().data();
  // Words in parallel on the caller's threads, each word's k-means on one
  // (hundreds of runs over a few hundred points each are too small for
  // FAISS's own threads to pay): every word is learned alone, from its own
  // seed, so the vocabulary does not depend on the thread count.
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 4)
  for (int w = 0; w < k; ++w) {
    try {
      omp_set_num_threads(1);  // FAISS's regions inside this thread's word
      float* out = fine.data() + static_cast<size_t>(w) * f * d;
      const float* c = coarse + static_cast<size_t>(w) * d;
      const auto& m = members[w];
      if (static_cast<int64_t>(m.size()) < f) {
        // Too few points to split: every sub-word is the word itself.
        for (int s = 0; s < f; ++s) std::copy_n(c, d, out + static_cast<size_t>(s) * d);
        continue;
      }
      std::vector<float> residuals(m.size() * d);
      for (size_t i = 0; i < m.size(); ++i)
        for (int j = 0; j < d; ++j) residuals[i * d + j] = descriptors[m[i] * d + j] - c[j];
      faiss::ClusteringParameters cp;
      cp.niter = 20;
      cp.seed = static_cast<int>((options.seed + static_cast<uint64_t>(w)) & 0x7fffffff);
      cp.min_points_per_centroid = 1;  // small words: no FAISS warning on stderr
      cp.max_points_per_centroid = 256;
      faiss::Clustering clustering(d, f, cp);
      faiss::IndexFlatL2 assigner(d);
      clustering.train(static_cast<faiss::Index::idx_t>(m.size()), residuals.data(), assigner);
      for (int s = 0; s < f; ++s)
        for (int j = 0; j < d; ++j)
          out[static_cast<size_t>(s) * d + j] = c[j] + clustering.centroids[s * d + j];
    } catch (...) {
#pragma omp critical(lookalike_vocabulary_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  for (float& v : fine) v = encoding::HalfToFloat(encoding::FloatToHalf(v));
  faiss::RandomRotationMatrix rotation(d, kSignatureBits);
  rotation.init(static_cast<int>(options.seed & 0x7fffffff));
  return WordVocabulary(codebook, f, std::move(fine), rotation.A, /*half=*/true);
}

std::string WordVocabulary::Serialize() const {
  std::string out;
  encoding::PutFixed32(&out, half_ ? kFormatF16 : kFormatF32);
  encoding::PutFixed32(&out, static_cast<uint32_t>(num_coarse_));
  encoding::PutFixed32(&out, static_cast<uint32_t>(fine_per_word_));
  encoding::PutFixed32(&out, static_cast<uint32_t>(dim_));
  encoding::PutFixed32(&out, kSignatureBits);
  if (half_)
    encoding::PutHalves(&out, fine_.data(), fine_.size());
  else
    encoding::PutFloats(&out, fine_.data(), fine_.size());
  encoding::PutFloats(&out, rotation_.data(), rotation_.size());
  return out;
}

WordVocabulary WordVocabulary::Deserialize(const std::string& blob, const Codebook& codebook) {
  encoding::Reader r(blob, "word vocabulary");
  const uint32_t format = r.Fixed32();
  if (format != kFormatF32 && format != kFormatF16)
    throw encoding::CorruptValue("word vocabulary: unknown format " + std::to_string(format));
  const uint32_t k = r.Fixed32(), f = r.Fixed32(), d = r.Fixed32(), bits = r.Fixed32();
  if (k != static_cast<uint32_t>(codebook.num_clusters()) ||
      d != static_cast<uint32_t>(codebook.dim()) || f < 1 || f > 256 || bits != kSignatureBits)
    throw encoding::CorruptValue("word vocabulary does not fit the codebook");
  std::vector<float> fine(static_cast<size_t>(k) * f * d), rotation(size_t{bits} * d);
  if (format == kFormatF16)
    encoding::GetHalves(r.Raw(fine.size() * 2), fine.size(), fine.data());
  else
    encoding::GetFloats(r.Raw(fine.size() * 4), fine.size(), fine.data());
  encoding::GetFloats(r.Raw(rotation.size() * 4), rotation.size(), rotation.data());
  r.ExpectEnd();
  return WordVocabulary(codebook, static_cast<int>(f), std::move(fine), std::move(rotation),
                        format == kFormatF16);
}

void WordVocabulary::SubWordDistances(const float* x, int32_t coarse, float* d2) const {
  // The distances to all sub-words are summed at once, dimension by
  // dimension (the sub-words dimension-major), which vectorises; each sum
  // still runs over the dimensions in order, so every distance, and so every
  // word, is bit for bit what one sub-word at a time gives (the database's
  // words must not move).
  const int d = dim_, f = fine_per_word_;
  const float* sub = fine_by_dim_.data() + static_cast<size_t>(coarse) * d * f;
  std::fill(d2, d2 + f, 0.0f);
  for (int j = 0; j < d; ++j) {
    const float xj = x[j];
    const float* c = sub + static_cast<size_t>(j) * f;
    for (int s = 0; s < f; ++s) {
      const float diff = xj - c[s];
      d2[s] += diff * diff;
    }
  }
}

std::vector<WordSignature> WordVocabulary::Encode(const float* descriptors, int64_t n) const {
  std::vector<WordSignature> out;
  if (n <= 0) return out;
  const int d = dim_, f = fine_per_word_;
  std::vector<int32_t> coarse(static_cast<size_t>(n));
  codebook_.Assign(descriptors, n, coarse.data());
  // Fine word: the nearest of the coarse word's sub-words.
  std::vector<uint32_t> words(static_cast<size_t>(n));
  std::vector<float> d2(static_cast<size_t>(f));
  for (int64_t i = 0; i < n; ++i) {
    const float* x = descriptors + i * d;
    SubWordDistances(x, coarse[i], d2.data());
    // The first of equal distances, as a scan of the sub-words in order.
    const int best = static_cast<int>(std::min_element(d2.begin(), d2.end()) - d2.begin());
    words[i] = static_cast<uint32_t>(coarse[i]) * f + static_cast<uint32_t>(best);
  }
  AppendSignatures(descriptors, words, &out);
  return out;
}

void WordVocabulary::AppendSignatures(const float* descriptors, const std::vector<uint32_t>& words,
                                      std::vector<WordSignature>* out,
                                      const std::vector<int64_t>* rows) const {
  const int d = dim_;
  const auto n = static_cast<int64_t>(words.size());
  // Label i belongs to descriptor rows[i] (i itself without `rows`).
  auto row = [&](int64_t i) { return rows ? (*rows)[static_cast<size_t>(i)] : i; };
  // Sort by word, then sum the residuals of each run of equal labels (the
  // scatter-reduce of VLAD encoding, on fine labels).
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return words[a] < words[b]; });
  std::vector<float> sum(d), rotated(kSignatureBits);
  for (int64_t begin = 0; begin < n;) {
    const uint32_t w = words[order[begin]];
    int64_t end = begin;
    std::fill(sum.begin(), sum.end(), 0.0f);
    const float* c = fine_.data() + static_cast<size_t>(w) * d;
    for (; end < n && words[order[end]] == w; ++end) {
      const float* x = descriptors + row(order[end]) * d;
      for (int j = 0; j < d; ++j) sum[j] += x[j] - c[j];
    }
    // The rotation is orthonormal, so normalising is not needed for the
    // signs; the signature is the sign of each rotated component. All 64
    // components at once, each summed over the dimensions in order (bit for
    // bit the row-by-row dot products).
    std::fill(rotated.begin(), rotated.end(), 0.0f);
    for (int j = 0; j < d; ++j) {
      const float sj = sum[j];
      const float* r = rotation_by_dim_.data() + static_cast<size_t>(j) * kSignatureBits;
      for (int b = 0; b < kSignatureBits; ++b) rotated[b] += r[b] * sj;
    }
    uint64_t bits = 0;
    for (int b = 0; b < kSignatureBits; ++b)
      if (rotated[b] > 0) bits |= uint64_t{1} << b;
    out->push_back(WordSignature{w, bits});
    begin = end;
  }
}

std::vector<WordSignature> WordVocabulary::EncodeMultiple(const float* descriptors, int64_t n,
                                                          int assignments) const {
  if (assignments <= 1) return Encode(descriptors, n);
  std::vector<WordSignature> out;
  if (n <= 0) return out;
  const int d = dim_, f = fine_per_word_;
  const int k = std::min(assignments, f);
  std::vector<int32_t> coarse(static_cast<size_t>(n));
  codebook_.Assign(descriptors, n, coarse.data());
  std::vector<uint32_t> words;
  std::vector<int64_t> rows;
  words.reserve(static_cast<size_t>(n * k));
  rows.reserve(static_cast<size_t>(n * k));
  std::vector<float> d2(static_cast<size_t>(f));
  std::vector<int> by_distance(static_cast<size_t>(f));
  for (int64_t i = 0; i < n; ++i) {
    const float* x = descriptors + i * d;
    SubWordDistances(x, coarse[i], d2.data());
    // The nearest first (the first of equal distances, as Encode), then the
    // next ones close enough to it.
    std::iota(by_distance.begin(), by_distance.end(), 0);
    std::stable_sort(by_distance.begin(), by_distance.end(),
                     [&](int a, int b) { return d2[a] < d2[b]; });
    const float bound = kMultipleAssignmentRatio * kMultipleAssignmentRatio * d2[by_distance[0]];
    for (int r = 0; r < k; ++r) {
      const int s = by_distance[static_cast<size_t>(r)];
      if (r > 0 && d2[s] > bound) break;
      words.push_back(static_cast<uint32_t>(coarse[i]) * f + static_cast<uint32_t>(s));
      rows.push_back(i);
    }
  }
  AppendSignatures(descriptors, words, &out, &rows);
  return out;
}

std::optional<WordVocabulary> ModelWordVocabulary(const Store& store) {
  const std::optional<std::string> blob = store.GetModelWordVocabulary();
  if (!blob) return std::nullopt;
  try {
    return WordVocabulary::Deserialize(*blob, CodebookFromModel(store.model()));
  } catch (const encoding::CorruptValue& e) {
    throw StoreError(StoreError::Kind::kCorrupt,
                     "database " + store.path() + " is corrupt: model word vocabulary (m:wv): " +
                         e.what() + "; run 'lookalike index' into a new --db");
  }
}

}  // namespace lookalike
