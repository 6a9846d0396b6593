// Built instead of the CUDA sources when WITH_CUDA is OFF.
#include <stdexcept>

#include "cuda/cuda_vlad.h"

namespace lookalike {
namespace cuda {

DeviceProbe ProbeDevice() {
  DeviceProbe probe;
  probe.detail = "this build has no CUDA backend (configured with WITH_CUDA=OFF)";
  return probe;
}

struct CudaVladEncoder::Impl {};

CudaVladEncoder::CudaVladEncoder(const CudaVladConfig&) {
  throw std::runtime_error(
      "the CUDA backend is not compiled into this build; rebuild with "
      "-DWITH_CUDA=ON on a machine with the CUDA toolkit, or use --backend cpu");
}
CudaVladEncoder::~CudaVladEncoder() = default;
void CudaVladEncoder::Encode(const float*, const int64_t*, int64_t, float*) {}

}  // namespace cuda
}  // namespace lookalike
