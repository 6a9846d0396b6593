// VLAD encoding: one fixed-length vector per image from its local descriptors.
//
// Pipeline per batch of images (the same on every backend):
//   1. assign each descriptor to its nearest centroid (Codebook::Assign),
//   2. sort descriptor indices by the key (image, cluster), producing the
//      offsets of every (image, cluster) segment, empty ones included,
//   3. scatter-reduce: sum the residuals x - c of each segment contiguously
//      (accumulated in double; never a float32 prefix-sum-then-difference,
//      which loses most of the precision on long arrays),
//   4. normalise each image: power (signed square root), optional
//      intra-normalisation (per cluster L2), then global L2.
// An image without descriptors gets the all-zero vector (never NaN).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuda/vlad_math.h"
#include "indexer/codebook.h"

namespace lookalike {

// Normalisation of VLAD vectors. Stored with the model: queries are always
// encoded with the database's settings.
struct VladOptions {
  // Power normalisation exponent, (0, 1]; 0.5 = signed square root, 1 = off.
  // Off by default: with intra-normalisation on, any power lowered mAP on the
  // development set (indexer/README.md, "The encoding").
  float power_alpha = 1.0f;
  bool intra_normalize = true;      // L2-normalise each cluster's block, then the whole
  bool residual_normalize = false;  // L2-normalise each residual before summing

  // Throws std::invalid_argument naming the offending field.
  void Validate() const;
};

// Where the encoder runs. kAuto = CUDA when compiled in and a device is
// usable, otherwise the CPU.
enum class Backend { kAuto, kCpu, kCuda };

// Parses "auto" | "cpu" | "cuda"; throws std::invalid_argument otherwise.
Backend ParseBackend(const std::string& name);
const char* BackendName(Backend backend);

// Encodes batches of images. Implementations must agree with the CPU encoder
// (the oracle) within a tolerance that grows with the dimension. An encoder
// instance is not thread-safe; create one per thread.
class VladEncoder {
 public:
  virtual ~VladEncoder() = default;

  // descriptors: row-major, image_offsets[num_images] rows of dim() floats;
  // image i owns rows [image_offsets[i], image_offsets[i+1]).
  // image_offsets: num_images + 1 non-decreasing values starting at 0.
  // vlad: output, num_images x vlad_dim() floats, row-major.
  virtual void Encode(const float* descriptors, const int64_t* image_offsets, int64_t num_images,
                      float* vlad) = 0;

  // The backend actually in use (never kAuto).
  virtual Backend backend() const = 0;

  int num_clusters() const { return num_clusters_; }
  int dim() const { return dim_; }
  int64_t vlad_dim() const { return vlad_math::VladDim(num_clusters_, dim_); }

  // Images this encoder encoded on the CPU although its backend is CUDA:
  // those with more descriptors than the device buffers hold
  // (CudaVladConfig::max_batch_descriptors). 0 for the CPU backend. The
  // index pipeline reports them in -v output.
  int64_t num_cpu_fallback_images() const { return num_cpu_fallback_images_; }

  // Seconds spent in assignment (nearest centroid) over all Encode calls so
  // far, so the indexer can report assignment and aggregation as separate
  // stages. Backends that do not separate it (CUDA) leave it at 0 and the
  // caller counts their whole Encode time as aggregation.
  double assign_seconds() const { return assign_seconds_; }

 protected:
  VladEncoder(int num_clusters, int dim) : num_clusters_(num_clusters), dim_(dim) {}
  double assign_seconds_ = 0;
  int64_t num_cpu_fallback_images_ = 0;

 private:
  int num_clusters_;
  int dim_;
};

// Describes whether a CUDA device is usable, for `info` and --verbose.
struct BackendReport {
  bool cuda_compiled = false;
  bool cuda_usable = false;
  std::string detail;  // e.g. "no CUDA device: cudaGetDeviceCount: ..."
};
BackendReport ProbeBackends();

// Resolves kAuto to the backend that would be used. An explicit kCuda that
// cannot be honoured throws std::runtime_error with the reason (the CLI maps
// it to exit code 2); it never falls back silently.
Backend ResolveBackend(Backend requested);

// Creates an encoder on `backend` (resolved as above) for this codebook.
std::unique_ptr<VladEncoder> CreateVladEncoder(Backend backend, const Codebook& codebook,
                                               const VladOptions& options);

// ---- CPU stages, exposed for tests and benchmarks -------------------------

// Counting sort of descriptor indices by key image * K + label. Writes
// order (num_descriptors indices, stable within a key) and segment_offsets
// (num_images * K + 1 values; segment s spans order[offsets[s]..offsets[s+1])).
// labels are per descriptor; descriptors of image i are the rows
// [image_offsets[i], image_offsets[i+1]).
void SortBySegment(const int32_t* labels, const int64_t* image_offsets, int64_t num_images,
                   int num_clusters, std::vector<int64_t>* order,
                   std::vector<int64_t>* segment_offsets);

// Scatter-reduce: for every (image, cluster) segment writes
// sum over the segment of (x - c_cluster) into vlad[image][cluster * dim ..].
// With residual_normalize each residual is L2-normalised before the sum.
void ReduceSegments(const float* descriptors, int dim, const int64_t* order,
                    const std::vector<int64_t>& segment_offsets, int64_t num_images,
                    const Codebook& codebook, bool residual_normalize, float* vlad);

// Power, optional intra- and L2 normalisation of num_images VLAD vectors in
// place. All-zero vectors stay zero.
void NormalizeVlad(float* vlad, int64_t num_images, int num_clusters, int dim,
                   const VladOptions& options);

}  // namespace lookalike
