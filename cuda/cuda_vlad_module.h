// Internal to cuda/: the interface between the loader in the lookalike
// binary (cuda_vlad_loader.cc) and the CUDA encoder module
// liblookalike_cuda_vlad.so (cuda_vlad.cc and the kernels), which alone
// links the CUDA runtime and cuBLAS. Both sides are compiled from this header
// by the same build; kCudaVladAbi changes whenever it does, so a module left
// from another build is refused. Plain C++: no CUDA types.
#pragma once

#include <cstdint>
#include <memory>

#include "cuda/cuda_vlad.h"

namespace lookalike {
namespace cuda {

constexpr int kCudaVladAbi = 1;
constexpr const char* kCudaVladModuleFile = "liblookalike_cuda_vlad.so";
constexpr const char* kCudaVladModuleEntry = "lookalike_cuda_vlad";

// The device encoder inside the module; CudaVladEncoder forwards to it.
class ModuleEncoder {
 public:
  virtual ~ModuleEncoder() = default;
  // As CudaVladEncoder::Encode.
  virtual void Encode(const float* descriptors, const int64_t* image_offsets, int64_t num_images,
                      float* vlad) = 0;
};

// The module's functions.
struct CudaVladModuleApi {
  // The CUDA runtime's view of device 0 (cudaGetDeviceCount, its properties,
  // a context created on it). Never throws.
  DeviceProbe (*probe_runtime)();
  // A device encoder for a configuration the loader has validated. Throws
  // std::runtime_error when no device is usable or an allocation fails.
  std::unique_ptr<ModuleEncoder> (*create)(const CudaVladConfig& config);
};

}  // namespace cuda
}  // namespace lookalike
