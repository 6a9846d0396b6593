// Internal to cuda/: launchers of the VLAD kernels and of the CUB radix sort,
// called by the host orchestration in cuda_vlad.cc. Each launcher enqueues
// work on `stream` and returns the launch error (cudaSuccess when queued).
// Device pointers only; shapes as in kernel_bodies.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cuda/kernel_bodies.h"

namespace lookalike {
namespace cuda {
namespace detail {

// Keys and values of rows [row_begin, row_begin + num_rows) from a chunk of
// SGEMM dot products (K x num_rows, column-major); near-ties decided with
// near_tie's device descriptors and centroids.
cudaError_t LaunchAssignKeys(const float* d_dots, const float* d_neg_half_norms2,
                             const kernels::NearTieInputs& near_tie, int num_clusters,
                             int64_t row_begin, int num_rows, const int64_t* d_image_offsets,
                             int num_images, uint32_t* d_keys, int32_t* d_values,
                             cudaStream_t stream);

// offsets[0..num_segments] from num_items sorted keys.
cudaError_t LaunchSegmentOffsets(const uint32_t* d_sorted_keys, int64_t num_items,
                                 int64_t num_segments, int32_t* d_offsets, cudaStream_t stream);

// Per-segment residual sums (optionally of L2-normalised residuals).
cudaError_t LaunchSegmentResidualSum(const float* d_descriptors, int dim, const int32_t* d_order,
                                     const int32_t* d_offsets, int64_t num_segments,
                                     const float* d_centroids, int num_clusters,
                                     bool residual_normalize, float* d_vlad, cudaStream_t stream);

// Power / intra / L2 normalisation of num_images VLAD vectors in place.
cudaError_t LaunchNormalize(float* d_vlad, int64_t num_images, int num_clusters, int dim,
                            float power_alpha, bool intra_normalize, cudaStream_t stream);

// cub::DeviceRadixSort::SortPairs on key bits [0, end_bit). With
// d_temp == nullptr only sets *temp_bytes (the required size).
cudaError_t SortPairs(void* d_temp, size_t* temp_bytes, const uint32_t* d_keys_in,
                      uint32_t* d_keys_out, const int32_t* d_values_in, int32_t* d_values_out,
                      int num_items, int end_bit, cudaStream_t stream);

}  // namespace detail
}  // namespace cuda
}  // namespace lookalike
