// Bodies of the VLAD kernels, written once and run two ways:
//   * on the GPU by the thin __global__ wrappers in cuda_vlad_kernels.cu,
//     with a Ctx that maps to threadIdx/__syncthreads/__shfl_*_sync;
//   * on the CPU by the SIMT emulator of tests/cuda/, with one std::thread
//     per CUDA thread, so the tests (plain, ThreadSanitizer, AddressSanitizer)
//     check the same code the device runs.
//
// A Ctx provides:
//   int thread_idx(), block_idx(), block_dim(), grid_dim()   (x dimension only)
//   void sync()                                  block barrier (__syncthreads)
//   T shfl_down(T v, int delta), T shfl(T v, int src_lane)   full-warp shuffles
// Shared memory is passed in as a pointer, sized by the *SharedBytes helpers.
//
// Contract shared by all bodies: block_dim() is a multiple of 32 (every warp
// is full, so full-mask shuffles are defined), and every thread of a block
// reaches every sync() (control flow around barriers is block-uniform).
//
// The per-element arithmetic comes from vlad_math.h, shared with the CPU
// oracle (indexer/vlad_cpu.cc). Only plain C++ here: no CUDA types.
#pragma once

#include <cstdint>

#include "cuda/vlad_math.h"

#if defined(__CUDACC__)
#define LOOKALIKE_BODY __device__ __forceinline__
#else
#define LOOKALIKE_BODY inline
#endif

namespace lookalike {
namespace kernels {

constexpr int kWarpSize = 32;

// ---- launch configuration, shared by the .cu and the emulator tests -------

// Threads per block of AssignKeys: one warp per descriptor.
constexpr int kAssignBlock = 128;
constexpr int kAssignRowsPerBlock = kAssignBlock / kWarpSize;
// Threads per block of SegmentOffsets (one thread per sorted position).
constexpr int kOffsetsBlock = 256;
// Threads per block of NormalizeImage (one block per image).
constexpr int kNormalizeBlock = 256;
// Largest grid of the grid-strided kernels (segment sums, normalisation).
constexpr int64_t kMaxGrid = int64_t{1} << 20;

// Blocks of AssignKeys for `num_rows` descriptors.
inline constexpr int64_t AssignGrid(int64_t num_rows) {
  return (num_rows + kAssignRowsPerBlock - 1) / kAssignRowsPerBlock;
}
// Blocks of SegmentOffsets for `num_items` sorted keys (num_items + 1 threads).
inline constexpr int64_t OffsetsGrid(int64_t num_items) {
  return (num_items + 1 + kOffsetsBlock - 1) / kOffsetsBlock;
}
// Blocks of a grid-strided kernel over `num_work` items (segments, images):
// one per item up to `max_grid`, at least one. The emulator tests pass a
// small max_grid so the stride loop runs.
inline constexpr int64_t StridedGrid(int64_t num_work, int64_t max_grid = kMaxGrid) {
  return num_work < 1 ? 1 : (num_work < max_grid ? num_work : max_grid);
}

inline constexpr int RoundUpToWarp(int n) { return (n + kWarpSize - 1) / kWarpSize * kWarpSize; }
// Threads per block of the segment reductions: one thread per dimension, at
// least one warp, at most 256 (larger dimensions are strided).
inline constexpr int SegmentBlock(int dim) {
  return RoundUpToWarp(dim) < 256 ? RoundUpToWarp(dim < 1 ? 1 : dim) : 256;
}
// Shared memory of BlockReduceSum<double>: one slot per warp plus the result.
constexpr int kReduceSharedDoubles = kWarpSize + 1;
constexpr int kReduceSharedBytes = kReduceSharedDoubles * sizeof(double);

// ---- warp and block reductions --------------------------------------------

// Sum over the 32 lanes of a warp; every lane gets the total (butterfly via
// shfl_down then a broadcast from lane 0).
template <class Ctx, class T>
LOOKALIKE_BODY T WarpSum(const Ctx& ctx, T v) {
  for (int delta = kWarpSize / 2; delta > 0; delta /= 2) v += ctx.shfl_down(v, delta);
  return ctx.shfl(v, 0);
}

// Sum over the whole block; every thread gets the total. smem holds
// kReduceSharedDoubles values of T. Contains barriers: call from all threads.
template <class Ctx, class T>
LOOKALIKE_BODY T BlockSum(const Ctx& ctx, T v, T* smem) {
  const int lane = ctx.thread_idx() % kWarpSize;
  const int warp = ctx.thread_idx() / kWarpSize;
  const int num_warps = ctx.block_dim() / kWarpSize;
  v = WarpSum(ctx, v);
  if (lane == 0) smem[warp] = v;
  ctx.sync();
  if (warp == 0) {
    T s = lane < num_warps ? smem[lane] : T(0);
    s = WarpSum(ctx, s);
    if (lane == 0) smem[kWarpSize] = s;
  }
  ctx.sync();
  const T total = smem[kWarpSize];
  ctx.sync();  // everyone has read the result before smem is reused
  return total;
}

// ---- 2. assignment: argmax of the score over SGEMM dot products -------------

// Index of the image owning local row `row`: the last i with
// image_offsets[i] <= row (empty images, whose offsets repeat, are skipped).
LOOKALIKE_BODY int ImageOfRow(const int64_t* image_offsets, int num_images, int64_t row) {
  int lo = 0, hi = num_images;  // answer in [lo, hi)
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    if (image_offsets[mid] <= row)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// What AssignKeys needs to decide a near-tie as Codebook::Assign does
// (vlad_math.h, "Assignment"): the batch's descriptors and the centroids,
// and the bound of AssignmentSlack.
struct NearTieInputs {
  const float* descriptors = nullptr;  // the batch's rows, dim floats each
  const float* centroids = nullptr;    // K x dim, row-major
  int dim = 0;
  float max_half_norm2 = 0;  // max ||c||^2 / 2
};

// One warp per descriptor row of a chunk: dots holds, for each of num_rows
// rows, num_clusters dot products x.c (column-major K x rows, as cuBLAS
// writes SGEMM(T, N)). The label is the argmax of vlad_math::AssignmentScore
// (the CPU's formula) over them when one centroid is clearly best; when
// others are within AssignmentSlack of it, the argmax of the scores
// rescored with AssignmentDot, as Codebook::Assign decides. Ties go to the
// lower cluster index. Writes for global row r = row_begin + chunk row:
// keys[r] = SegmentKey(image of r, label), values[r] = r. image_offsets are
// relative to the batch (image_offsets[0] == 0), and so is
// near_tie.descriptors.
template <class Ctx>
LOOKALIKE_BODY void AssignKeys(const Ctx& ctx, const float* dots, const float* neg_half_norms2,
                               const NearTieInputs& near_tie, int num_clusters, int64_t row_begin,
                               int num_rows, const int64_t* image_offsets, int num_images,
                               uint32_t* keys, int32_t* values) {
  const int lane = ctx.thread_idx() % kWarpSize;
  const int row = ctx.block_idx() * (ctx.block_dim() / kWarpSize) + ctx.thread_idx() / kWarpSize;
  if (row >= num_rows) return;  // warp-uniform: no shuffle below is split
  const int64_t r = row_begin + row;
  const float* d = dots + static_cast<int64_t>(row) * num_clusters;
  // The warp's largest (best, best_index) pair, ties to the lower index:
  // every lane gets the index, and the value in *best_out.
  auto warp_argmax = [&](float best, int best_index, float* best_out) {
    for (int delta = kWarpSize / 2; delta > 0; delta /= 2) {
      const float other = ctx.shfl_down(best, delta);
      const int other_index = ctx.shfl_down(best_index, delta);
      const bool take = other_index >= 0 && (best_index < 0 || other > best ||
                                             (other == best && other_index < best_index));
      if (take) {
        best = other;
        best_index = other_index;
      }
    }
    *best_out = ctx.shfl(best, 0);
    return ctx.shfl(best_index, 0);
  };
  float best = 0.0f;
  int best_index = -1;  // -1: this lane has seen no cluster yet
  for (int c = lane; c < num_clusters; c += kWarpSize) {
    const float v = vlad_math::AssignmentScore(d[c], neg_half_norms2[c]);
    if (best_index < 0 || v > best) {
      best = v;
      best_index = c;
    }
  }
  float best_value = 0.0f;
  best_index = warp_argmax(best, best_index, &best_value);
  // The shortlist: centroids within the slack of the best score.
  const float* x = near_tie.descriptors + r * near_tie.dim;
  double norm2 = 0;
  for (int e = lane; e < near_tie.dim; e += kWarpSize) norm2 += static_cast<double>(x[e]) * x[e];
  norm2 = WarpSum(ctx, norm2);
  const float floor =
      best_value - vlad_math::AssignmentSlack(norm2, near_tie.max_half_norm2, near_tie.dim);
  int in_reach = 0;
  for (int c = lane; c < num_clusters; c += kWarpSize)
    in_reach += vlad_math::AssignmentScore(d[c], neg_half_norms2[c]) >= floor;
  in_reach = WarpSum(ctx, in_reach);
  if (in_reach > 1) {  // warp-uniform (a warp sum)
    best_index = -1;
    for (int c = lane; c < num_clusters; c += kWarpSize) {
      if (!(vlad_math::AssignmentScore(d[c], neg_half_norms2[c]) >= floor)) continue;
      const float v = vlad_math::AssignmentScore(
          vlad_math::AssignmentDot(x, near_tie.centroids + static_cast<int64_t>(c) * near_tie.dim,
                                   near_tie.dim),
          neg_half_norms2[c]);
      if (best_index < 0 || v > best) {
        best = v;
        best_index = c;
      }
    }
    best_index = warp_argmax(best, best_index, &best_value);
  }
  if (lane == 0) {
    const int image = ImageOfRow(image_offsets, num_images, r);
    keys[r] = vlad_math::SegmentKey(static_cast<uint32_t>(image), static_cast<uint32_t>(best_index),
                                    static_cast<uint32_t>(num_clusters));
    values[r] = static_cast<int32_t>(r);
  }
}

// ---- 4. segment offsets -----------------------------------------------------

// sorted_keys: num_items keys in non-decreasing order, each < num_segments.
// Writes offsets[s] = first position whose key >= s, for s in
// [0, num_segments] (so segment s spans [offsets[s], offsets[s+1]); empty
// segments get equal offsets). Thread i (0 <= i <= num_items) writes the
// segments in (key[i-1], key[i]], so every entry is written exactly once and
// no memset is needed.
template <class Ctx>
LOOKALIKE_BODY void SegmentOffsets(const Ctx& ctx, const uint32_t* sorted_keys, int64_t num_items,
                                   int64_t num_segments, int32_t* offsets) {
  const int64_t i = static_cast<int64_t>(ctx.block_idx()) * ctx.block_dim() + ctx.thread_idx();
  if (i > num_items) return;
  const int64_t first = i == 0 ? 0 : int64_t{sorted_keys[i - 1]} + 1;
  const int64_t last = i == num_items ? num_segments : int64_t{sorted_keys[i]};
  for (int64_t s = first; s <= last; ++s) offsets[s] = static_cast<int32_t>(i);
}

// ---- 5. scatter-reduce --------------------------------------------------------

// One block per (image, cluster) segment, grid-strided; threads across the
// dimension so each descriptor row is read with coalesced loads. Sums the
// segment's descriptors in double (same order as the sort: stable), then
// subtracts count * c once, exactly like ReduceSegments on the CPU.
// vlad: num_segments x dim, segment s = image * K + cluster.
template <class Ctx>
LOOKALIKE_BODY void SegmentResidualSum(const Ctx& ctx, const float* __restrict__ descriptors,
                                       int dim, const int32_t* __restrict__ order,
                                       const int32_t* __restrict__ offsets, int64_t num_segments,
                                       const float* __restrict__ centroids, int num_clusters,
                                       float* __restrict__ vlad) {
  for (int64_t s = ctx.block_idx(); s < num_segments; s += ctx.grid_dim()) {
    const int cluster = static_cast<int>(s % num_clusters);
    const int32_t begin = offsets[s];
    const int32_t end = offsets[s + 1];
    for (int j = ctx.thread_idx(); j < dim; j += ctx.block_dim()) {
      double sum = 0.0;
      for (int32_t p = begin; p < end; ++p)
        sum += descriptors[static_cast<int64_t>(order[p]) * dim + j];
      vlad[s * dim + j] = vlad_math::ResidualFromSum(
          sum, end - begin, centroids[static_cast<int64_t>(cluster) * dim + j]);
    }
  }
}

// The residual-normalised variant: each residual x - c is L2-normalised
// before it is summed, which needs the norm of a whole row (a block
// reduction) per descriptor. Dimensions beyond block_dim() are handled in
// chunks, each recomputing the row norms (no per-thread arrays, so no local
// memory). smem: kReduceSharedDoubles doubles. Contains barriers.
template <class Ctx>
LOOKALIKE_BODY void SegmentNormalizedResidualSum(
    const Ctx& ctx, const float* __restrict__ descriptors, int dim,
    const int32_t* __restrict__ order, const int32_t* __restrict__ offsets, int64_t num_segments,
    const float* __restrict__ centroids, int num_clusters, float* __restrict__ vlad, double* smem) {
  for (int64_t s = ctx.block_idx(); s < num_segments; s += ctx.grid_dim()) {
    const int cluster = static_cast<int>(s % num_clusters);
    const float* c = centroids + static_cast<int64_t>(cluster) * dim;
    const int32_t begin = offsets[s];
    const int32_t end = offsets[s + 1];
    for (int j0 = 0; j0 < dim; j0 += ctx.block_dim()) {
      const int j = j0 + ctx.thread_idx();
      double sum = 0.0;
      for (int32_t p = begin; p < end; ++p) {
        const float* x = descriptors + static_cast<int64_t>(order[p]) * dim;
        double norm2 = 0.0;
        for (int k = ctx.thread_idx(); k < dim; k += ctx.block_dim()) {
          const float r = x[k] - c[k];
          norm2 += static_cast<double>(r) * r;
        }
        norm2 = BlockSum(ctx, norm2, smem);
        const float inv = vlad_math::InverseNorm(static_cast<float>(norm2));
        if (j < dim) sum += (x[j] - c[j]) * inv;
      }
      if (j < dim) vlad[s * dim + j] = static_cast<float>(sum);
    }
  }
}

// ---- 6. normalisation -----------------------------------------------------------

// One block per image (grid-strided): power normalisation of every
// component, optional intra-normalisation (one warp per cluster block), then
// global L2 (block reduction). Sums of squares in double, as NormalizeVlad.
// All-zero blocks and images stay zero. smem: kReduceSharedDoubles doubles.
template <class Ctx>
LOOKALIKE_BODY void NormalizeImage(const Ctx& ctx, float* vlad, int64_t num_images,
                                   int num_clusters, int dim, float power_alpha,
                                   bool intra_normalize, double* smem) {
  const int64_t vlad_dim = vlad_math::VladDim(num_clusters, dim);
  const int lane = ctx.thread_idx() % kWarpSize;
  const int warp = ctx.thread_idx() / kWarpSize;
  const int num_warps = ctx.block_dim() / kWarpSize;
  for (int64_t image = ctx.block_idx(); image < num_images; image += ctx.grid_dim()) {
    float* v = vlad + image * vlad_dim;
    for (int64_t e = ctx.thread_idx(); e < vlad_dim; e += ctx.block_dim())
      v[e] = vlad_math::PowerNormalize(v[e], power_alpha);
    ctx.sync();
    if (intra_normalize) {
      for (int cluster = warp; cluster < num_clusters; cluster += num_warps) {
        float* b = v + int64_t{cluster} * dim;
        double s = 0.0;
        for (int j = lane; j < dim; j += kWarpSize) s += static_cast<double>(b[j]) * b[j];
        s = WarpSum(ctx, s);
        const float inv = static_cast<float>(vlad_math::InverseNormD(s));
        for (int j = lane; j < dim; j += kWarpSize) b[j] *= inv;
      }
      ctx.sync();
    }
    double s = 0.0;
    for (int64_t e = ctx.thread_idx(); e < vlad_dim; e += ctx.block_dim())
      s += static_cast<double>(v[e]) * v[e];
    s = BlockSum(ctx, s, smem);
    const float inv = static_cast<float>(vlad_math::InverseNormD(s));
    for (int64_t e = ctx.thread_idx(); e < vlad_dim; e += ctx.block_dim()) v[e] *= inv;
    ctx.sync();  // the next image's reads of smem/v follow every write here
  }
}

}  // namespace kernels
}  // namespace lookalike
