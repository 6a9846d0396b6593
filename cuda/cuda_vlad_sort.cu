// The CUB radix sort of (key, descriptor index) pairs, in its own translation
// unit: it is the expensive one to compile, and keeping it apart lets the
// static check compile the hand-written kernels alone.
#include <cub/device/device_radix_sort.cuh>

#include "cuda/launch.cuh"

namespace lookalike {
namespace cuda {
namespace detail {

cudaError_t SortPairs(void* d_temp, size_t* temp_bytes, const uint32_t* d_keys_in,
                      uint32_t* d_keys_out, const int32_t* d_values_in, int32_t* d_values_out,
                      int num_items, int end_bit, cudaStream_t stream) {
  // Only the low end_bit bits can be set (keys < num_images * K), so the
  // sort makes ceil(end_bit / radix bits) passes instead of four. Radix sort
  // is stable: equal keys keep descriptor order, so sums are deterministic
  // and in the same order as the CPU counting sort.
  return cub::DeviceRadixSort::SortPairs(d_temp, *temp_bytes, d_keys_in, d_keys_out, d_values_in,
                                         d_values_out, num_items, 0, end_bit, stream);
}

}  // namespace detail
}  // namespace cuda
}  // namespace lookalike
