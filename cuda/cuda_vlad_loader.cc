// The CUDA backend as the lookalike binary sees it: the device probe asks the
// NVIDIA driver (libcuda.so.1) directly, and the encoder module
// liblookalike_cuda_vlad.so, which links the CUDA runtime and cuBLAS, is
// loaded only when an encoder is constructed. So a command that does not
// encode on the GPU never maps those libraries (about 200 MB of RSS and half
// a second of start-up when they were linked in), and on a machine without a
// driver nothing of CUDA is loaded at all. cuda.h is included for the driver
// API's types and version only; nothing links the driver.
#include <cuda.h>
#include <dlfcn.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "cuda/cuda_vlad.h"
#include "cuda/cuda_vlad_module.h"
#include "util/module.h"

namespace lookalike {
namespace cuda {
namespace {

// The driver API functions the probe calls, looked up in libcuda.so.1.
struct Driver {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDriverGetVersion) driver_version = nullptr;
  decltype(&::cuDeviceGetCount) device_count = nullptr;
  decltype(&::cuDeviceGet) device = nullptr;
  decltype(&::cuDeviceGetName) name = nullptr;
  decltype(&::cuDeviceGetAttribute) attribute = nullptr;
  decltype(&::cuDeviceTotalMem) total_memory = nullptr;
  decltype(&::cuGetErrorString) error_string = nullptr;

  std::string Error(CUresult status) const {
    const char* text = nullptr;
    if (error_string) error_string(status, &text);
    return text ? text : "CUDA driver error " + std::to_string(static_cast<int>(status));
  }
};

template <class F>
bool Find(void* library, const char* symbol, F* function) {
  *function = reinterpret_cast<F>(dlsym(library, symbol));
  return *function != nullptr;
}

std::string VersionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// What the driver says about device 0, and whether the module is installed.
DeviceProbe AskDriver() {
  DeviceProbe probe;
  probe.compiled = true;
  // Kept open: the module's runtime needs the driver loaded anyway.
  void* library = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!library) {
    const char* why = dlerror();
    probe.detail = std::string("no CUDA driver: ") + (why ? why : "libcuda.so.1 not loadable");
    return probe;
  }
  Driver d;
  if (!Find(library, "cuInit", &d.init) ||
      !Find(library, "cuDriverGetVersion", &d.driver_version) ||
      !Find(library, "cuDeviceGetCount", &d.device_count) ||
      !Find(library, "cuDeviceGet", &d.device) || !Find(library, "cuDeviceGetName", &d.name) ||
      !Find(library, "cuDeviceGetAttribute", &d.attribute) ||
      !Find(library, "cuDeviceTotalMem_v2", &d.total_memory) ||
      !Find(library, "cuGetErrorString", &d.error_string)) {
    probe.detail = "the CUDA driver (libcuda.so.1) lacks a function this build calls";
    return probe;
  }
  CUresult status = d.init(0);
  if (status == CUDA_ERROR_NO_DEVICE) {
    probe.detail = "no CUDA device found";
    return probe;
  }
  if (status != CUDA_SUCCESS) {
    probe.detail = "no usable CUDA device: cuInit: " + d.Error(status);
    return probe;
  }
  int version = 0;
  if (d.driver_version(&version) == CUDA_SUCCESS && version / 1000 < CUDA_VERSION / 1000) {
    probe.detail = "the NVIDIA driver supports CUDA " + VersionText(version) +
                   ", this build's CUDA backend needs " + std::to_string(CUDA_VERSION / 1000) +
                   ".x: update the driver";
    return probe;
  }
  int count = 0;
  status = d.device_count(&count);
  if (status != CUDA_SUCCESS || count == 0) {
    probe.detail = status != CUDA_SUCCESS
                       ? "no usable CUDA device: cuDeviceGetCount: " + d.Error(status)
                       : "no CUDA device found";
    return probe;
  }
  CUdevice device = 0;
  char name[256] = {};
  int major = 0, minor = 0;
  size_t bytes = 0;
  status = d.device(&device, 0);
  if (status == CUDA_SUCCESS) status = d.name(name, sizeof(name) - 1, device);
  if (status == CUDA_SUCCESS)
    status = d.attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  if (status == CUDA_SUCCESS)
    status = d.attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  if (status == CUDA_SUCCESS) status = d.total_memory(&bytes, device);
  if (status != CUDA_SUCCESS) {
    probe.detail = "CUDA device 0 not usable: " + d.Error(status);
    return probe;
  }
  const std::string device_text = std::string(name) + " (compute capability " +
                                  std::to_string(major) + "." + std::to_string(minor) + ", " +
                                  std::to_string(bytes >> 20) + " MiB)";
  if (FindModule(kCudaVladModuleFile).empty()) {
    probe.detail = device_text + ", but the CUDA encoder module " + kCudaVladModuleFile +
                   " is not installed (looked in " + ModuleSearchPath(kCudaVladModuleFile) +
                   "); build it with tools/build.sh";
    return probe;
  }
  probe.usable = true;
  probe.detail = device_text;
  return probe;
}

const CudaVladModuleApi& ModuleApi() {
  static const LoadedModule module =
      LoadModule(kCudaVladModuleFile, kCudaVladModuleEntry, kCudaVladAbi);
  if (!module.api) throw std::runtime_error("CUDA VLAD: " + module.error);
  return *static_cast<const CudaVladModuleApi*>(module.api);
}

void Validate(const CudaVladConfig& c) {
  if (c.num_clusters < 1 || c.dim < 1 || !c.centroids)
    throw std::invalid_argument("CUDA VLAD: a codebook of at least one centroid is needed");
  if (c.max_batch_descriptors < 1 || c.max_batch_descriptors > INT32_MAX)
    throw std::invalid_argument("CUDA VLAD: max_batch_descriptors must be in 1..2^31-1, got " +
                                std::to_string(c.max_batch_descriptors));
  if (c.max_batch_images < 1 ||
      static_cast<uint64_t>(c.max_batch_images) * c.num_clusters >= (1ull << 31))
    throw std::invalid_argument(
        "CUDA VLAD: max_batch_images * K must be in 1..2^31-1, got max_batch_images=" +
        std::to_string(c.max_batch_images));
  if (c.gemm_chunk_rows < 1 || c.gemm_chunk_rows > INT32_MAX)
    throw std::invalid_argument("CUDA VLAD: gemm_chunk_rows must be in 1..2^31-1, got " +
                                std::to_string(c.gemm_chunk_rows));
}

}  // namespace

DeviceProbe ProbeDevice() {
  static const DeviceProbe probe = AskDriver();
  return probe;
}

struct CudaVladEncoder::Impl {
  std::unique_ptr<ModuleEncoder> encoder;
};

CudaVladEncoder::CudaVladEncoder(const CudaVladConfig& config) {
  Validate(config);
  const DeviceProbe probe = ProbeDevice();
  if (!probe.usable) throw std::runtime_error("CUDA VLAD: " + probe.detail);
  impl_ = std::make_unique<Impl>();
  impl_->encoder = ModuleApi().create(config);
}

CudaVladEncoder::~CudaVladEncoder() = default;

void CudaVladEncoder::Encode(const float* descriptors, const int64_t* image_offsets,
                             int64_t num_images, float* vlad) {
  impl_->encoder->Encode(descriptors, image_offsets, num_images, vlad);
}

}  // namespace cuda
}  // namespace lookalike
