// Host side of the CUDA VLAD backend, the module liblookalike_cuda_vlad.so
// (loaded by cuda_vlad_loader.cc): runtime probe, resident codebook, buffers
// allocated once, and a two-slot pipeline so that the staging copy and upload
// of one sub-batch overlap the kernels and download of the previous one.
// Device code is in cuda_vlad_kernels.cu / cuda_vlad_sort.cu.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/cuda_vlad_module.h"
#include "cuda/launch.cuh"
#include "cuda/vlad_math.h"

namespace lookalike {
namespace cuda {
namespace {

[[noreturn]] void Fail(const char* what, const std::string& error, const char* file, int line) {
  throw std::runtime_error(std::string("CUDA VLAD: ") + what + " failed: " + error + " (" + file +
                           ":" + std::to_string(line) + ")");
}

void Check(cudaError_t status, const char* what, const char* file, int line) {
  if (status != cudaSuccess)
    Fail(what, std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status), file,
         line);
}

void Check(cublasStatus_t status, const char* what, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    Fail(what, std::string("cuBLAS status ") + std::to_string(status), file, line);
}

#define LOOKALIKE_CUDA_CHECK(call) Check((call), #call, __FILE__, __LINE__)

template <class T>
void DeviceAlloc(T** ptr, int64_t count) {
  LOOKALIKE_CUDA_CHECK(
      cudaMalloc(reinterpret_cast<void**>(ptr), std::max<int64_t>(1, count) * sizeof(T)));
}

template <class T>
void HostAlloc(T** ptr, int64_t count) {
  LOOKALIKE_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(ptr),
                                     std::max<int64_t>(1, count) * sizeof(T),
                                     cudaHostAllocDefault));
}

DeviceProbe ProbeRuntime() {
  DeviceProbe probe;
  probe.compiled = true;
  try {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      probe.detail =
          std::string("no usable CUDA device: cudaGetDeviceCount: ") + cudaGetErrorString(status);
      return probe;
    }
    if (count == 0) {
      probe.detail = "no CUDA device found";
      return probe;
    }
    cudaDeviceProp prop{};
    cudaError_t s = cudaGetDeviceProperties(&prop, 0);
    if (s == cudaSuccess) s = cudaSetDevice(0);
    if (s == cudaSuccess) s = cudaFree(nullptr);  // creates the context
    if (s != cudaSuccess) {
      probe.detail = std::string("CUDA device 0 not usable: ") + cudaGetErrorString(s);
      return probe;
    }
    probe.usable = true;
    probe.detail = std::string(prop.name) + " (compute capability " + std::to_string(prop.major) +
                   "." + std::to_string(prop.minor) + ", " +
                   std::to_string(prop.totalGlobalMem >> 20) + " MiB)";
  } catch (const std::exception& e) {
    probe.usable = false;
    probe.detail = std::string("CUDA probe failed: ") + e.what();
  }
  return probe;
}

// One in-flight sub-batch: its stream, pinned staging and device buffers.
struct Slot {
  cudaStream_t stream = nullptr;
  // The slot's own cuBLAS handle, bound to `stream` once: a handle shared by
  // the two slots would be re-bound between their SGEMMs, and cuBLAS handles
  // are not meant to be used from two streams in flight.
  cublasHandle_t cublas = nullptr;
  cudaEvent_t done = nullptr;
  float* h_descriptors = nullptr;      // max_n x dim, pinned
  int64_t* h_image_offsets = nullptr;  // max_images + 1, pinned
  float* h_vlad = nullptr;             // max_images x K x dim, pinned
  float* d_descriptors = nullptr;
  int64_t* d_image_offsets = nullptr;
  float* d_dots = nullptr;  // chunk_rows x K
  uint32_t* d_keys = nullptr;
  uint32_t* d_sorted_keys = nullptr;
  int32_t* d_values = nullptr;
  int32_t* d_order = nullptr;
  int32_t* d_segment_offsets = nullptr;  // max_images x K + 1
  float* d_vlad = nullptr;
  void* d_temp = nullptr;  // CUB temporary storage
  size_t temp_bytes = 0;
  // Output still in h_vlad, to be copied to the caller once `done` fires.
  float* pending_dest = nullptr;
  int64_t pending_floats = 0;
};

class DeviceVladEncoder final : public ModuleEncoder {
 public:
  explicit DeviceVladEncoder(const CudaVladConfig& config);
  ~DeviceVladEncoder() override;
  void Encode(const float* descriptors, const int64_t* image_offsets, int64_t num_images,
              float* vlad) override;

 private:
  CudaVladConfig config;
  int64_t vlad_dim = 0;
  float* d_centroids = nullptr;
  float* d_neg_half_norms2 = nullptr;
  // max ||c||^2 / 2, the bound of vlad_math::AssignmentSlack, as Codebook
  // derives it.
  float max_half_norm2 = 0;
  Slot slots[2];
  void Allocate(Slot& s);
  void Drain(Slot& s);
  void Enqueue(Slot& s, const float* descriptors, const int64_t* image_offsets, int64_t first_image,
               int64_t end_image, float* vlad);
};

DeviceVladEncoder::~DeviceVladEncoder() {
  // Best effort: destructors must not throw.
  for (Slot& s : slots) {
    if (s.stream) cudaStreamSynchronize(s.stream);
    cudaFreeHost(s.h_descriptors);
    cudaFreeHost(s.h_image_offsets);
    cudaFreeHost(s.h_vlad);
    cudaFree(s.d_descriptors);
    cudaFree(s.d_image_offsets);
    cudaFree(s.d_dots);
    cudaFree(s.d_keys);
    cudaFree(s.d_sorted_keys);
    cudaFree(s.d_values);
    cudaFree(s.d_order);
    cudaFree(s.d_segment_offsets);
    cudaFree(s.d_vlad);
    cudaFree(s.d_temp);
    if (s.cublas) cublasDestroy(s.cublas);
    if (s.done) cudaEventDestroy(s.done);
    if (s.stream) cudaStreamDestroy(s.stream);
  }
  cudaFree(d_centroids);
  cudaFree(d_neg_half_norms2);
}

void DeviceVladEncoder::Allocate(Slot& s) {
  const CudaVladConfig& c = config;
  const int64_t max_n = c.max_batch_descriptors;
  const int64_t max_t = c.max_batch_images;
  LOOKALIKE_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  LOOKALIKE_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
  LOOKALIKE_CUDA_CHECK(cublasCreate(&s.cublas));
  LOOKALIKE_CUDA_CHECK(cublasSetStream(s.cublas, s.stream));
  // Plain FP32: TF32 tensor cores would flip near-tie assignments.
  LOOKALIKE_CUDA_CHECK(cublasSetMathMode(s.cublas, CUBLAS_DEFAULT_MATH));
  HostAlloc(&s.h_descriptors, max_n * c.dim);
  HostAlloc(&s.h_image_offsets, max_t + 1);
  HostAlloc(&s.h_vlad, max_t * vlad_dim);
  DeviceAlloc(&s.d_descriptors, max_n * c.dim);
  DeviceAlloc(&s.d_image_offsets, max_t + 1);
  DeviceAlloc(&s.d_dots, std::min(max_n, c.gemm_chunk_rows) * c.num_clusters);
  DeviceAlloc(&s.d_keys, max_n);
  DeviceAlloc(&s.d_sorted_keys, max_n);
  DeviceAlloc(&s.d_values, max_n);
  DeviceAlloc(&s.d_order, max_n);
  DeviceAlloc(&s.d_segment_offsets, max_t * c.num_clusters + 1);
  DeviceAlloc(&s.d_vlad, max_t * vlad_dim);
  // The largest temporary storage any batch can need: every key width up
  // to the one of a full batch, at the full batch size.
  const int max_bits =
      vlad_math::KeyBits(static_cast<uint64_t>(max_t) * static_cast<uint64_t>(c.num_clusters));
  for (int bits = 1; bits <= max_bits; ++bits) {
    size_t bytes = 0;
    LOOKALIKE_CUDA_CHECK(detail::SortPairs(nullptr, &bytes, nullptr, nullptr, nullptr, nullptr,
                                           static_cast<int>(max_n), bits, s.stream));
    s.temp_bytes = std::max(s.temp_bytes, bytes);
  }
  LOOKALIKE_CUDA_CHECK(cudaMalloc(&s.d_temp, std::max<size_t>(1, s.temp_bytes)));
}

// Waits for the slot's previous sub-batch and hands its VLADs to the caller.
void DeviceVladEncoder::Drain(Slot& s) {
  if (!s.pending_dest) return;
  LOOKALIKE_CUDA_CHECK(cudaEventSynchronize(s.done));
  std::memcpy(s.pending_dest, s.h_vlad, s.pending_floats * sizeof(float));
  s.pending_dest = nullptr;
  s.pending_floats = 0;
}

// Stages and enqueues images [first_image, end_image) on slot s.
void DeviceVladEncoder::Enqueue(Slot& s, const float* descriptors, const int64_t* image_offsets,
                                int64_t first_image, int64_t end_image, float* vlad) {
  const CudaVladConfig& c = config;
  const int num_images = static_cast<int>(end_image - first_image);
  const int64_t row0 = image_offsets[first_image];
  const int64_t n = image_offsets[end_image] - row0;
  const int64_t num_segments = int64_t{num_images} * c.num_clusters;
  // CPU staging copy: overlaps the other slot's GPU work.
  std::memcpy(s.h_descriptors, descriptors + row0 * c.dim, n * c.dim * sizeof(float));
  for (int i = 0; i <= num_images; ++i)
    s.h_image_offsets[i] = image_offsets[first_image + i] - row0;
  LOOKALIKE_CUDA_CHECK(cudaMemcpyAsync(s.d_descriptors, s.h_descriptors, n * c.dim * sizeof(float),
                                       cudaMemcpyHostToDevice, s.stream));
  LOOKALIKE_CUDA_CHECK(cudaMemcpyAsync(s.d_image_offsets, s.h_image_offsets,
                                       (num_images + 1) * sizeof(int64_t), cudaMemcpyHostToDevice,
                                       s.stream));
  if (n > 0) {
    const float one = 1.0f, zero = 0.0f;
    for (int64_t start = 0; start < n; start += c.gemm_chunk_rows) {
      const int rows = static_cast<int>(std::min(c.gemm_chunk_rows, n - start));
      // dots (K x rows, column-major) = C^T (K x d) * X (d x rows): the
      // same product Codebook::Assign asks OpenBLAS for.
      LOOKALIKE_CUDA_CHECK(cublasSgemm(
          s.cublas, CUBLAS_OP_T, CUBLAS_OP_N, c.num_clusters, rows, c.dim, &one, d_centroids, c.dim,
          s.d_descriptors + start * c.dim, c.dim, &zero, s.d_dots, c.num_clusters));
      LOOKALIKE_CUDA_CHECK(detail::LaunchAssignKeys(
          s.d_dots, d_neg_half_norms2,
          kernels::NearTieInputs{s.d_descriptors, d_centroids, c.dim, max_half_norm2},
          c.num_clusters, start, rows, s.d_image_offsets, num_images, s.d_keys, s.d_values,
          s.stream));
    }
    const int bits = vlad_math::KeyBits(static_cast<uint64_t>(num_segments));
    size_t bytes = 0;
    LOOKALIKE_CUDA_CHECK(detail::SortPairs(nullptr, &bytes, nullptr, nullptr, nullptr, nullptr,
                                           static_cast<int>(n), bits, s.stream));
    if (bytes > s.temp_bytes)
      throw std::logic_error("CUDA VLAD: CUB needs " + std::to_string(bytes) +
                             " temporary bytes, allocated " + std::to_string(s.temp_bytes));
    size_t temp_bytes = s.temp_bytes;
    LOOKALIKE_CUDA_CHECK(detail::SortPairs(s.d_temp, &temp_bytes, s.d_keys, s.d_sorted_keys,
                                           s.d_values, s.d_order, static_cast<int>(n), bits,
                                           s.stream));
  }
  LOOKALIKE_CUDA_CHECK(detail::LaunchSegmentOffsets(s.d_sorted_keys, n, num_segments,
                                                    s.d_segment_offsets, s.stream));
  LOOKALIKE_CUDA_CHECK(detail::LaunchSegmentResidualSum(
      s.d_descriptors, c.dim, s.d_order, s.d_segment_offsets, num_segments, d_centroids,
      c.num_clusters, c.residual_normalize, s.d_vlad, s.stream));
  LOOKALIKE_CUDA_CHECK(detail::LaunchNormalize(s.d_vlad, num_images, c.num_clusters, c.dim,
                                               c.power_alpha, c.intra_normalize, s.stream));
  LOOKALIKE_CUDA_CHECK(cudaMemcpyAsync(s.h_vlad, s.d_vlad, num_segments * c.dim * sizeof(float),
                                       cudaMemcpyDeviceToHost, s.stream));
  LOOKALIKE_CUDA_CHECK(cudaEventRecord(s.done, s.stream));
  s.pending_dest = vlad + first_image * vlad_dim;
  s.pending_floats = num_segments * c.dim;
}

DeviceVladEncoder::DeviceVladEncoder(const CudaVladConfig& c) {
  // The loader validated c (cuda_vlad_loader.cc); the codebook behind it was
  // checked where it was made (CodebookOptions::Validate, or the model read
  // from a database).
  assert(c.num_clusters >= 1 && c.dim >= 1 && c.centroids);
  const DeviceProbe probe = ProbeRuntime();
  if (!probe.usable) throw std::runtime_error("CUDA VLAD: " + probe.detail);

  config = c;
  config.centroids = nullptr;  // only read here
  vlad_dim = vlad_math::VladDim(c.num_clusters, c.dim);
  // The assignment score's constant, computed as the CPU's (vlad_math.h).
  std::vector<float> neg_half_norms2(c.num_clusters);
  for (int k = 0; k < c.num_clusters; ++k) {
    neg_half_norms2[k] = vlad_math::NegHalfSquaredNorm(c.centroids + int64_t{k} * c.dim, c.dim);
    max_half_norm2 = std::max(max_half_norm2, -neg_half_norms2[k]);
  }
  DeviceAlloc(&d_centroids, vlad_dim);
  DeviceAlloc(&d_neg_half_norms2, c.num_clusters);
  LOOKALIKE_CUDA_CHECK(
      cudaMemcpy(d_centroids, c.centroids, vlad_dim * sizeof(float), cudaMemcpyHostToDevice));
  LOOKALIKE_CUDA_CHECK(cudaMemcpy(d_neg_half_norms2, neg_half_norms2.data(),
                                  c.num_clusters * sizeof(float), cudaMemcpyHostToDevice));
  for (Slot& s : slots) Allocate(s);
}

void DeviceVladEncoder::Encode(const float* descriptors, const int64_t* image_offsets,
                               int64_t num_images, float* vlad) {
  const CudaVladConfig& c = config;
  if (num_images <= 0) return;
  if (image_offsets[0] != 0)
    throw std::invalid_argument("CUDA VLAD: image_offsets[0] must be 0, got " +
                                std::to_string(image_offsets[0]));
  for (int64_t i = 0; i < num_images; ++i) {
    const int64_t count = image_offsets[i + 1] - image_offsets[i];
    if (count < 0)
      throw std::invalid_argument("CUDA VLAD: image_offsets decrease at image " +
                                  std::to_string(i));
    if (count > c.max_batch_descriptors)
      throw std::invalid_argument("CUDA VLAD: image " + std::to_string(i) + " has " +
                                  std::to_string(count) +
                                  " descriptors, more than max_batch_"
                                  "descriptors (" +
                                  std::to_string(c.max_batch_descriptors) + ")");
  }
  // Sub-batches of whole images alternate between the two slots: while the
  // GPU works on one, the CPU drains and stages the other.
  int next_slot = 0;
  try {
    for (int64_t first = 0; first < num_images;) {
      int64_t end = first + 1;
      while (end < num_images && end - first < c.max_batch_images &&
             image_offsets[end + 1] - image_offsets[first] <= c.max_batch_descriptors)
        ++end;
      Slot& s = slots[next_slot];
      Drain(s);
      Enqueue(s, descriptors, image_offsets, first, end, vlad);
      next_slot ^= 1;
      first = end;
    }
    Drain(slots[next_slot]);
    Drain(slots[next_slot ^ 1]);
  } catch (...) {
    for (Slot& s : slots) {
      cudaStreamSynchronize(s.stream);
      s.pending_dest = nullptr;
    }
    throw;
  }
}

std::unique_ptr<ModuleEncoder> Create(const CudaVladConfig& config) {
  return std::make_unique<DeviceVladEncoder>(config);
}

constexpr CudaVladModuleApi kApi{ProbeRuntime, Create};

}  // namespace
}  // namespace cuda
}  // namespace lookalike

// The module's one exported symbol (the library is built with hidden
// visibility): its functions, when the loader speaks its interface version.
extern "C" __attribute__((visibility("default"))) const void* lookalike_cuda_vlad(int abi) {
  return abi == lookalike::cuda::kCudaVladAbi ? &lookalike::cuda::kApi : nullptr;
}
