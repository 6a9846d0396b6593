// Backend selection: CPU or CUDA behind the VladEncoder interface.
#include <stdexcept>
#include <string>

#include "cuda/cuda_vlad.h"
#include "indexer/vlad.h"
#include "indexer/vlad_internal.h"

namespace lookalike {

Backend ParseBackend(const std::string& name) {
  if (name == "auto") return Backend::kAuto;
  if (name == "cpu") return Backend::kCpu;
  if (name == "cuda") return Backend::kCuda;
  throw std::invalid_argument("backend must be auto, cpu or cuda, got '" +
                              name + "'");
}

const char* BackendName(Backend backend) {
  switch (backend) {
    case Backend::kAuto: return "auto";
    case Backend::kCpu: return "cpu";
    case Backend::kCuda: return "cuda";
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
        impl_(MakeConfig(codebook, options)) {}

  void Encode(const float* descriptors, const int64_t* image_offsets,
              int64_t num_images, float* vlad) override {
    impl_.Encode(descriptors, image_offsets, num_images, vlad);
  }
  Backend backend() const override { return Backend::kCuda; }

 private:
  static cuda::CudaVladConfig MakeConfig(const Codebook& codebook,
                                         const VladOptions& options) {
    cuda::CudaVladConfig config;
    config.num_clusters = codebook.num_clusters();
    config.dim = codebook.dim();
    config.centroids = codebook.centroids().data();
    config.power_alpha = options.power_alpha;
    config.intra_normalize = options.intra_normalize;
    config.residual_normalize = options.residual_normalize;
    return config;
  }
  cuda::CudaVladEncoder impl_;
};

}  // namespace

std::unique_ptr<VladEncoder> CreateCudaVladEncoder(const Codebook& codebook,
                                                   const VladOptions& options) {
  options.Validate();
  return std::make_unique<CudaVladEncoderAdapter>(codebook, options);
}

std::unique_ptr<VladEncoder> CreateVladEncoder(Backend backend,
                                               const Codebook& codebook,
                                               const VladOptions& options) {
  return ResolveBackend(backend) == Backend::kCuda
             ? CreateCudaVladEncoder(codebook, options)
             : CreateCpuVladEncoder(codebook, options);
}

}  // namespace lookalike
