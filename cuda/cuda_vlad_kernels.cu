// The only device code written by hand: a ~15-line Ctx over the CUDA
// built-ins and __global__ wrappers around the bodies in kernel_bodies.h
// (which the SIMT-emulator tests run on the CPU). Launch configuration comes
// from the same header so the emulator runs the same shapes.
#include <algorithm>

#include "cuda/kernel_bodies.h"
#include "cuda/launch.cuh"

namespace lookalike {
namespace cuda {
namespace detail {
namespace {

namespace k = ::lookalike::kernels;

// Maps the Ctx interface onto the CUDA built-ins (x dimension only).
struct CudaCtx {
  __device__ int thread_idx() const { return threadIdx.x; }
  __device__ int block_idx() const { return blockIdx.x; }
  __device__ int block_dim() const { return blockDim.x; }
  __device__ int grid_dim() const { return gridDim.x; }
  __device__ void sync() const { __syncthreads(); }
  template <class T>
  __device__ T shfl_down(T v, int delta) const {
    return __shfl_down_sync(0xffffffffu, v, delta);
  }
  template <class T>
  __device__ T shfl(T v, int src_lane) const {
    return __shfl_sync(0xffffffffu, v, src_lane);
  }
};

__global__ void __launch_bounds__(k::kAssignBlock)
    AssignKeysKernel(const float* dots, const float* neg_half_norms2, k::NearTieInputs near_tie,
                     int num_clusters, int64_t row_begin, int num_rows,
                     const int64_t* image_offsets, int num_images, uint32_t* keys,
                     int32_t* values) {
  k::AssignKeys(CudaCtx{}, dots, neg_half_norms2, near_tie, num_clusters, row_begin, num_rows,
                image_offsets, num_images, keys, values);
}

__global__ void __launch_bounds__(k::kOffsetsBlock)
    SegmentOffsetsKernel(const uint32_t* sorted_keys, int64_t num_items, int64_t num_segments,
                         int32_t* offsets) {
  k::SegmentOffsets(CudaCtx{}, sorted_keys, num_items, num_segments, offsets);
}

__global__ void __launch_bounds__(256)
    SegmentResidualSumKernel(const float* __restrict__ descriptors, int dim,
                             const int32_t* __restrict__ order, const int32_t* __restrict__ offsets,
                             int64_t num_segments, const float* __restrict__ centroids,
                             int num_clusters, float* __restrict__ vlad) {
  k::SegmentResidualSum(CudaCtx{}, descriptors, dim, order, offsets, num_segments, centroids,
                        num_clusters, vlad);
}

__global__ void __launch_bounds__(256)
    SegmentNormalizedResidualSumKernel(const float* __restrict__ descriptors, int dim,
                                       const int32_t* __restrict__ order,
                                       const int32_t* __restrict__ offsets, int64_t num_segments,
                                       const float* __restrict__ centroids, int num_clusters,
                                       float* __restrict__ vlad) {
  __shared__ double smem[k::kReduceSharedDoubles];
  k::SegmentNormalizedResidualSum(CudaCtx{}, descriptors, dim, order, offsets, num_segments,
                                  centroids, num_clusters, vlad, smem);
}

__global__ void __launch_bounds__(k::kNormalizeBlock)
    NormalizeKernel(float* vlad, int64_t num_images, int num_clusters, int dim, float power_alpha,
                    bool intra_normalize) {
  __shared__ double smem[k::kReduceSharedDoubles];
  k::NormalizeImage(CudaCtx{}, vlad, num_images, num_clusters, dim, power_alpha, intra_normalize,
                    smem);
}

}  // namespace

cudaError_t LaunchAssignKeys(const float* d_dots, const float* d_neg_half_norms2,
                             const kernels::NearTieInputs& near_tie, int num_clusters,
                             int64_t row_begin, int num_rows, const int64_t* d_image_offsets,
                             int num_images, uint32_t* d_keys, int32_t* d_values,
                             cudaStream_t stream) {
  if (num_rows <= 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(k::AssignGrid(num_rows));
  AssignKeysKernel<<<grid, k::kAssignBlock, 0, stream>>>(
      d_dots, d_neg_half_norms2, near_tie, num_clusters, row_begin, num_rows, d_image_offsets,
      num_images, d_keys, d_values);
  return cudaGetLastError();
}

cudaError_t LaunchSegmentOffsets(const uint32_t* d_sorted_keys, int64_t num_items,
                                 int64_t num_segments, int32_t* d_offsets, cudaStream_t stream) {
  // num_items + 1 threads, one per position including the end; not strided.
  const unsigned grid = static_cast<unsigned>(k::OffsetsGrid(num_items));
  SegmentOffsetsKernel<<<grid, k::kOffsetsBlock, 0, stream>>>(d_sorted_keys, num_items,
                                                              num_segments, d_offsets);
  return cudaGetLastError();
}

cudaError_t LaunchSegmentResidualSum(const float* d_descriptors, int dim, const int32_t* d_order,
                                     const int32_t* d_offsets, int64_t num_segments,
                                     const float* d_centroids, int num_clusters,
                                     bool residual_normalize, float* d_vlad, cudaStream_t stream) {
  if (num_segments <= 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(k::StridedGrid(num_segments));
  const int block = k::SegmentBlock(dim);
  if (residual_normalize)
    SegmentNormalizedResidualSumKernel<<<grid, block, 0, stream>>>(
        d_descriptors, dim, d_order, d_offsets, num_segments, d_centroids, num_clusters, d_vlad);
  else
    SegmentResidualSumKernel<<<grid, block, 0, stream>>>(
        d_descriptors, dim, d_order, d_offsets, num_segments, d_centroids, num_clusters, d_vlad);
  return cudaGetLastError();
}

cudaError_t LaunchNormalize(float* d_vlad, int64_t num_images, int num_clusters, int dim,
                            float power_alpha, bool intra_normalize, cudaStream_t stream) {
  if (num_images <= 0) return cudaSuccess;
  NormalizeKernel<<<static_cast<unsigned>(k::StridedGrid(num_images)), k::kNormalizeBlock, 0,
                    stream>>>(d_vlad, num_images, num_clusters, dim, power_alpha, intra_normalize);
  return cudaGetLastError();
}

}  // namespace detail
}  // namespace cuda
}  // namespace lookalike
