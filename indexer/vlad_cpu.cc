// CPU VLAD encoder: the oracle every other backend is compared with.
#include <algorithm>
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

void SortBySegment(const int32_t* labels, const int64_t* image_offsets,
                   int64_t num_images, int num_clusters,
                   std::vector<int64_t>* order,
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
        throw std::out_of_range("VLAD: label " + std::to_string(label) +
                                " outside 0.." +
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
                    const std::vector<int64_t>& segment_offsets,
                    int64_t num_images, const Codebook& codebook,
                    bool residual_normalize, float* vlad) {
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
        for (int64_t p = begin; p < end; ++p) {
          const float* x = descriptors + order[p] * dim;
          double* s = sum.data();
          for (int j = 0; j < dim; ++j) s[j] += x[j];
        }
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
  const int64_t vlad_dim = int64_t{num_clusters} * dim;
  for (int64_t image = 0; image < num_images; ++image) {
    float* v = vlad + image * vlad_dim;
    for (int64_t j = 0; j < vlad_dim; ++j)
      v[j] = vlad_math::PowerNormalize(v[j], options.power_alpha);
    if (options.intra_normalize) {
      for (int cluster = 0; cluster < num_clusters; ++cluster) {
        float* block = v + int64_t{cluster} * dim;
        double s = 0;
        for (int j = 0; j < dim; ++j) s += double{block[j]} * block[j];
        const float inv = static_cast<float>(vlad_math::InverseNormD(s));
        for (int j = 0; j < dim; ++j) block[j] *= inv;
      }
    }
    double s = 0;
    for (int64_t j = 0; j < vlad_dim; ++j) s += double{v[j]} * v[j];
    const float inv = static_cast<float>(vlad_math::InverseNormD(s));
    for (int64_t j = 0; j < vlad_dim; ++j) v[j] *= inv;
  }
}

namespace {

class CpuVladEncoder final : public VladEncoder {
 public:
  CpuVladEncoder(const Codebook& codebook, const VladOptions& options)
      : VladEncoder(codebook.num_clusters(), codebook.dim()),
        codebook_(codebook),
        options_(options) {}

  void Encode(const float* descriptors, const int64_t* image_offsets,
              int64_t num_images, float* vlad) override {
    const int64_t num_descriptors = image_offsets[num_images];
    labels_.resize(num_descriptors);
    codebook_.Assign(descriptors, num_descriptors, labels_.data());
    SortBySegment(labels_.data(), image_offsets, num_images, num_clusters(),
                  &order_, &segment_offsets_);
    ReduceSegments(descriptors, dim(), order_.data(), segment_offsets_,
                   num_images, codebook_, options_.residual_normalize, vlad);
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
  options.Validate();
  return std::make_unique<CpuVladEncoder>(codebook, options);
}

}  // namespace lookalike
