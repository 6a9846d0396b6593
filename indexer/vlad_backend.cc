// Backend selection: CPU or CUDA behind the VladEncoder interface.
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/cuda_vlad.h"
#include "indexer/vlad.h"
#include "indexer/vlad_internal.h"

namespace lookalike {

Backend ParseBackend(const std::string& name) {
  if (name == "auto") return Backend::kAuto;
  if (name == "cpu") return Backend::kCpu;
  if (name == "cuda") return Backend::kCuda;
  throw std::invalid_argument("backend must be auto, cpu or cuda, got '" + name + "'");
}

const char* BackendName(Backend backend) {
  switch (backend) {
    case Backend::kAuto:
      return "auto";
    case Backend::kCpu:
      return "cpu";
    case Backend::kCuda:
      return "cuda";
  }
  return "?";
}

BackendReport ProbeBackends() {
  const cuda::DeviceProbe probe = cuda::ProbeDevice();
  BackendReport report;
  report.cuda_compiled = probe.compiled;
  report.cuda_usable = probe.usable;
  report.detail = probe.detail;
  return report;
}

Backend ResolveBackend(Backend requested) {
  if (requested == Backend::kCpu) return Backend::kCpu;
  const cuda::DeviceProbe probe = cuda::ProbeDevice();
  if (requested == Backend::kCuda && !probe.usable)
    throw std::runtime_error("--backend cuda requested but " + probe.detail +
                             "; use --backend cpu or auto");
  return probe.usable ? Backend::kCuda : Backend::kCpu;
}

namespace {

class CudaVladEncoderAdapter final : public VladEncoder {
 public:
  CudaVladEncoderAdapter(const Codebook& codebook, const VladOptions& options)
      : VladEncoder(codebook.num_clusters(), codebook.dim()),
        codebook_(codebook),
        options_(options),
        config_(MakeConfig(codebook_, options)),
        impl_(config_) {}

  void Encode(const float* descriptors, const int64_t* image_offsets, int64_t num_images,
              float* vlad) override {
    // Device buffers are sized once for max_batch_descriptors rows; a single
    // image with more descriptors (a huge photo indexed with --max-side 0)
    // cannot go to the device, so it is encoded by the CPU oracle, which the
    // device path matches. Runs of ordinary images still go to the GPU.
    const int64_t max_rows = config_.max_batch_descriptors;
    int64_t start = 0;
    for (int64_t i = 0; i <= num_images; ++i) {
      const bool oversize = i < num_images && image_offsets[i + 1] - image_offsets[i] > max_rows;
      if (i < num_images && !oversize) continue;
      if (i > start) EncodeRun(descriptors, image_offsets, start, i, vlad, /*on_cpu=*/false);
      if (oversize) EncodeRun(descriptors, image_offsets, i, i + 1, vlad, /*on_cpu=*/true);
      start = i + 1;
    }
  }
  Backend backend() const override { return Backend::kCuda; }

 private:
  void EncodeRun(const float* descriptors, const int64_t* image_offsets, int64_t first,
                 int64_t last, float* vlad, bool on_cpu) {
    std::vector<int64_t> offsets(image_offsets + first, image_offsets + last + 1);
    for (int64_t& o : offsets) o -= image_offsets[first];
    const float* x = descriptors + image_offsets[first] * dim();
    float* out = vlad + first * vlad_dim();
    if (!on_cpu) {
      impl_.Encode(x, offsets.data(), last - first, out);
      return;
    }
    if (!cpu_) cpu_ = CreateCpuVladEncoder(codebook_, options_);
    cpu_->Encode(x, offsets.data(), last - first, out);
    num_cpu_fallback_images_ += last - first;
  }

  static cuda::CudaVladConfig MakeConfig(const Codebook& codebook, const VladOptions& options) {
    cuda::CudaVladConfig config;
    config.num_clusters = codebook.num_clusters();
    config.dim = codebook.dim();
    config.centroids = codebook.centroids().data();
    config.power_alpha = options.power_alpha;
    config.intra_normalize = options.intra_normalize;
    config.residual_normalize = options.residual_normalize;
    return config;
  }
  Codebook codebook_;
  VladOptions options_;
  cuda::CudaVladConfig config_;  // its centroids pointer refers to codebook_
  cuda::CudaVladEncoder impl_;
  std::unique_ptr<VladEncoder> cpu_;  // for images too large for the device buffers
};

}  // namespace

std::unique_ptr<VladEncoder> CreateCudaVladEncoder(const Codebook& codebook,
                                                   const VladOptions& options) {
  return std::make_unique<CudaVladEncoderAdapter>(codebook, options);
}

std::unique_ptr<VladEncoder> CreateVladEncoder(Backend backend, const Codebook& codebook,
                                               const VladOptions& options) {
  return ResolveBackend(backend) == Backend::kCuda ? CreateCudaVladEncoder(codebook, options)
                                                   : CreateCpuVladEncoder(codebook, options);
}

}  // namespace lookalike
