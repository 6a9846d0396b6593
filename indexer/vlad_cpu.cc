// CPU VLAD encoder: the oracle every other backend is compared with.
#if defined(__SSE2__)
#include <immintrin.h>

#include <cassert>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/vlad_math.h"
#include "indexer/vlad.h"
#include "indexer/vlad_internal.h"

namespace lookalike {

void VladOptions::Validate() const {
  if (!(power_alpha > 0.0f && power_alpha <= 1.0f))
    throw std::invalid_argument("power exponent must be in (0, 1], got " +
                                std::to_string(power_alpha));
}

namespace {

// sum[j] = sum over the rows order[0..count) of descriptors[row][j], in
// double, adding the rows in the given order (so the result is the same as
// the plain loop, bit for bit). Dimensions are taken in blocks of kBlock
// whose accumulators stay in registers while the segment's rows (hot in L1)
// are streamed, instead of loading and storing sum[] once per row.
// Cloned for AVX2 (4 doubles per add) with a baseline fallback chosen at
// load time; both add the same values in the same order.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void SumRowsDouble(const float* descriptors, int dim, const int64_t* order,
                   int64_t count, double* sum) {
  constexpr int kBlock = 16;
  int j0 = 0;
  for (; j0 + kBlock <= dim; j0 += kBlock) {
    double acc[kBlock] = {};
    for (int64_t p = 0; p < count; ++p) {
      const float* x = descriptors + order[p] * dim + j0;
      for (int j = 0; j < kBlock; ++j) acc[j] += x[j];
    }
    for (int j = 0; j < kBlock; ++j) sum[j0 + j] = acc[j];
  }
  for (int j = j0; j < dim; ++j) {
    double acc = 0.0;
    for (int64_t p = 0; p < count; ++p) acc += descriptors[order[p] * dim + j];
    sum[j] = acc;
  }
}

// Sum of squares in double with independent partial sums (the order of a
// double sum of n float squares changes it by ~n ulp of double: far below
// the float result).
double SumSquares(const float* v, int64_t n) {
  double a[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) a[k] += static_cast<double>(v[i + k]) * v[i + k];
  for (; i < n; ++i) a[0] += static_cast<double>(v[i]) * v[i];
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

void PowerNormalizeBlock(float* v, int64_t n, float alpha) {
  if (alpha == 1.0f) return;
  if (alpha == 0.5f) {
    // The common case: branch-free (the sign of a residual is a coin flip,
    // a branch on it mispredicts half the time) and four at a time. Same
    // values as vlad_math::PowerNormalize except that -0 stays -0.
    int64_t i = 0;
#if defined(__SSE2__)
    const __m128 sign = _mm_set1_ps(-0.0f);
    for (; i + 4 <= n; i += 4) {
      const __m128 x = _mm_loadu_ps(v + i);
      const __m128 root = _mm_sqrt_ps(_mm_andnot_ps(sign, x));
      _mm_storeu_ps(v + i, _mm_or_ps(root, _mm_and_ps(sign, x)));
    }
#endif
    for (; i < n; ++i) v[i] = std::copysign(std::sqrt(std::fabs(v[i])), v[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) v[i] = vlad_math::PowerNormalize(v[i], alpha);
}

void Scale(float* v, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i) v[i] *= factor;
}

}  // namespace

void SortBySegment(const int32_t* labels, const int64_t* image_offsets, int64_t num_images,
                   int num_clusters, std::vector<int64_t>* order,
                   std::vector<int64_t>* segment_offsets) {
  const int64_t num_segments = num_images * num_clusters;
  const int64_t num_descriptors = image_offsets[num_images];
  // Counting sort: the key space (images x clusters) is small and dense, so a
  // histogram + exclusive scan gives the segment offsets (empty segments
  // included) and a stable scatter gives the order in O(n + T*K).
  segment_offsets->assign(num_segments + 1, 0);
  int64_t* counts = segment_offsets->data() + 1;
  for (int64_t image = 0; image < num_images; ++image) {
    int64_t* image_counts = counts + image * num_clusters;
    for (int64_t i = image_offsets[image]; i < image_offsets[image + 1]; ++i) {
      const int32_t label = labels[i];
      if (label < 0 || label >= num_clusters)
        throw std::out_of_range("VLAD: label " + std::to_string(label) + " outside 0.." +
                                std::to_string(num_clusters - 1));
      ++image_counts[label];
    }
  }
  int64_t* offsets = segment_offsets->data();
  for (int64_t s = 0; s < num_segments; ++s) offsets[s + 1] += offsets[s];
  order->resize(num_descriptors);
  std::vector<int64_t> cursor(offsets, offsets + num_segments);
  for (int64_t image = 0; image < num_images; ++image) {
    int64_t* image_cursor = cursor.data() + image * num_clusters;
    for (int64_t i = image_offsets[image]; i < image_offsets[image + 1]; ++i)
      (*order)[image_cursor[labels[i]]++] = i;
  }
}

void ReduceSegments(const float* descriptors, int dim, const int64_t* order,
                    const std::vector<int64_t>& segment_offsets, int64_t num_images,
                    const Codebook& codebook, bool residual_normalize, float* vlad) {
  const int num_clusters = codebook.num_clusters();
  const float* centroids = codebook.centroids().data();
  std::vector<double> sum(dim);
  std::vector<float> residual(dim);
  for (int64_t image = 0; image < num_images; ++image) {
    for (int cluster = 0; cluster < num_clusters; ++cluster) {
      const int64_t segment = image * num_clusters + cluster;
      const int64_t begin = segment_offsets[segment];
      const int64_t end = segment_offsets[segment + 1];
      const float* c = centroids + static_cast<int64_t>(cluster) * dim;
      float* out = vlad + segment * dim;
      std::fill(sum.begin(), sum.end(), 0.0);
      if (!residual_normalize) {
        // Sum the descriptors in double, subtract count * c once: exact up to
        // one rounding per component, whatever the segment length.
        SumRowsDouble(descriptors, dim, order + begin, end - begin, sum.data());
        for (int j = 0; j < dim; ++j)
          out[j] = vlad_math::ResidualFromSum(sum[j], end - begin, c[j]);
      } else {
        for (int64_t p = begin; p < end; ++p) {
          const float* x = descriptors + order[p] * dim;
          float norm2 = 0.0f;
          for (int j = 0; j < dim; ++j) {
            residual[j] = x[j] - c[j];
            norm2 += residual[j] * residual[j];
          }
          const float inv = vlad_math::InverseNorm(norm2);
          for (int j = 0; j < dim; ++j) sum[j] += residual[j] * inv;
        }
        for (int j = 0; j < dim; ++j) out[j] = static_cast<float>(sum[j]);
      }
    }
  }
}

void NormalizeVlad(float* vlad, int64_t num_images, int num_clusters, int dim,
                   const VladOptions& options) {
  const int64_t vlad_dim = vlad_math::VladDim(num_clusters, dim);
  for (int64_t image = 0; image < num_images; ++image) {
    float* v = vlad + image * vlad_dim;
    double s = 0;
    if (options.intra_normalize) {
      // Power, intra-normalisation and the squares for the global norm, one
      // cluster block at a time while the block is in L1.
      for (int cluster = 0; cluster < num_clusters; ++cluster) {
        float* block = v + int64_t{cluster} * dim;
        PowerNormalizeBlock(block, dim, options.power_alpha);
        const float inv = static_cast<float>(vlad_math::InverseNormD(SumSquares(block, dim)));
        Scale(block, dim, inv);
        s += SumSquares(block, dim);
      }
    } else {
      PowerNormalizeBlock(v, vlad_dim, options.power_alpha);
      s = SumSquares(v, vlad_dim);
    }
    Scale(v, vlad_dim, static_cast<float>(vlad_math::InverseNormD(s)));
  }
}

namespace {

class CpuVladEncoder final : public VladEncoder {
 public:
  CpuVladEncoder(const Codebook& codebook, const VladOptions& options)
      : VladEncoder(codebook.num_clusters(), codebook.dim()),
        codebook_(codebook),
        options_(options) {}

  void Encode(const float* descriptors, const int64_t* image_offsets, int64_t num_images,
              float* vlad) override {
    const int64_t num_descriptors = image_offsets[num_images];
    labels_.resize(num_descriptors);
    const auto t0 = std::chrono::steady_clock::now();
    codebook_.Assign(descriptors, num_descriptors, labels_.data());
    assign_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    SortBySegment(labels_.data(), image_offsets, num_images, num_clusters(), &order_,
                  &segment_offsets_);
    ReduceSegments(descriptors, dim(), order_.data(), segment_offsets_, num_images, codebook_,
                   options_.residual_normalize, vlad);
    NormalizeVlad(vlad, num_images, num_clusters(), dim(), options_);
  }

  Backend backend() const override { return Backend::kCpu; }

 private:
  Codebook codebook_;
  VladOptions options_;
  // Reused across batches to avoid reallocation.
  std::vector<int32_t> labels_;
  std::vector<int64_t> order_;
  std::vector<int64_t> segment_offsets_;
};

}  // namespace

std::unique_ptr<VladEncoder> CreateCpuVladEncoder(const Codebook& codebook,
                                                  const VladOptions& options) {
  // Options were validated with the settings they came from
  // (EncodingSettings::Validate, at BuildIndex or when the model is read).
  assert(options.power_alpha > 0 && options.power_alpha <= 1);
  return std::make_unique<CpuVladEncoder>(codebook, options);
}

}  // namespace lookalike
