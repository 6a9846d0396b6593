// The only door into the CUDA backend: a plain C++ header (no CUDA types), so
// the rest of lookalike builds and runs identically with or without CUDA.
// With WITH_CUDA it is implemented in the binary by a loader that asks the
// driver and loads the encoder module (the CUDA runtime and cuBLAS) only when
// an encoder is constructed (cuda_vlad_loader.cc); without it by a stub whose
// probe reports "not compiled" and whose encoder constructor throws.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace lookalike {
namespace cuda {

// Whether the CUDA backend was compiled in and a device is usable.
struct DeviceProbe {
  bool compiled = false;  // built WITH_CUDA
  bool usable = false;    // the driver lists a device this build runs on, module installed
  std::string detail;     // human-readable: device name or the reason it is not usable
};

// Asks the NVIDIA driver (libcuda.so.1) about device 0 and checks that the
// encoder module is installed, without loading it: cheap, and maps nothing
// of CUDA on a machine without a driver. Never throws. Cached per process.
DeviceProbe ProbeDevice();

// Settings of a device encoder. Pointers are only read during construction.
struct CudaVladConfig {
  int num_clusters = 0;              // K
  int dim = 0;                       // descriptor dimension
  const float* centroids = nullptr;  // K x dim, row-major (host memory)
  float power_alpha = 1.0f;          // see VladOptions
  bool intra_normalize = true;
  bool residual_normalize = false;
  // Device buffers, CUB temporary storage and pinned host staging are sized
  // once for these; Encode splits larger batches (by whole images) and
  // pipelines the pieces over two streams. Two slots of pinned memory of
  // about max_batch_descriptors * dim * 4 + max_batch_images * K * dim * 4
  // bytes each. A single image may not exceed max_batch_descriptors.
  int64_t max_batch_descriptors = 1 << 18;  // 1 .. 2^31 - 1
  int64_t max_batch_images = 256;           // max_batch_images * K < 2^31
  int64_t gemm_chunk_rows = 1 << 15;        // rows per SGEMM + argmin chunk
};

// VLAD encoder on the GPU: SGEMM assignment, CUB radix sort by (image,
// cluster), segment offsets, per-segment residual sums, normalisation. Same
// contract as lookalike::VladEncoder::Encode. Not thread-safe.
class CudaVladEncoder {
 public:
  // Loads the encoder module on first use. Throws std::invalid_argument for
  // a configuration out of range, std::runtime_error if no device is usable,
  // the module is missing or cannot be loaded (the reason names the file), or
  // an allocation fails.
  explicit CudaVladEncoder(const CudaVladConfig& config);
  ~CudaVladEncoder();
  CudaVladEncoder(const CudaVladEncoder&) = delete;
  CudaVladEncoder& operator=(const CudaVladEncoder&) = delete;

  // descriptors: image_offsets[num_images] x dim floats; vlad: num_images x
  // (K * dim) floats. Batches larger than the configured maxima are split.
  void Encode(const float* descriptors, const int64_t* image_offsets, int64_t num_images,
              float* vlad);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cuda
}  // namespace lookalike
