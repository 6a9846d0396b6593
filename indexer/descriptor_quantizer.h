// Product quantisation of local descriptors (Jégou, Douze & Schmid, PAMI
// 2011) after an optimised rotation (OPQ, Ge et al., CVPR 2013), through
// FAISS's OPQMatrix and ProductQuantizer: each rotated descriptor is cut into
// `bytes` sub-vectors and each sub-vector stored as the index of its nearest
// of 256 centroids learned for that slice. What a database keeps of every
// keypoint's descriptor: 16 bytes instead of 128, and the reconstruction is
// what the database side of matching and of VLAD encoding sees (the query
// side keeps its exact descriptors: asymmetric distances, as in IVFADC).
// Why 16 bytes and what it costs: indexer/README.md, "Compact features".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace faiss {
struct LinearTransform;
struct ProductQuantizer;
}  // namespace faiss

namespace lookalike {

class SliceCoder;

// Where reconstructed descriptors are expressed. The rotation is
// orthonormal, so dot products (and the distances matching compares) are the
// same in both frames: matching in the quantizer's frame rotates the query
// once instead of un-rotating every stored descriptor it is compared with.
enum class DescriptorFrame {
  kOriginal,   // the extractor's: what VLAD encoding and the codebook see
  kQuantizer,  // after the quantizer's rotation, before its slices
};

struct QuantizerOptions {
  // Bytes per descriptor (= sub-quantizers, 8 bits each); must divide the
  // descriptor dimension. 0 = keep 1 byte per component (the older format).
  int bytes = 16;
  uint64_t seed = 1234;
  // Throws std::invalid_argument naming the offending field.
  void Validate(int descriptor_dim) const;
};

// Fewest descriptors a quantizer learns from: one per centroid of a slice.
inline constexpr int64_t kQuantizerMinDescriptors = 256;

class DescriptorQuantizer {
 public:
  // Learns the sub-quantizers from n x dim descriptors (row-major); needs at
  // least kQuantizerMinDescriptors rows (std::invalid_argument otherwise).
  // Deterministic for a seed and a sample, whatever `threads` (>= 1), the
  // threads the slices are learned on.
  static DescriptorQuantizer Train(const float* descriptors, int64_t n, int dim,
                                   const QuantizerOptions& options, int threads = 1);
  // Reads what Serialize wrote; throws encoding::CorruptValue.
  static DescriptorQuantizer Deserialize(const std::string& blob);

  DescriptorQuantizer(DescriptorQuantizer&&) noexcept;
  DescriptorQuantizer& operator=(DescriptorQuantizer&&) noexcept;
  ~DescriptorQuantizer();

  int dim() const;
  int code_bytes() const;  // bytes of one descriptor's code
  // n descriptors -> n x code_bytes() codes.
  void Encode(const float* descriptors, int64_t n, uint8_t* codes) const;
  // n codes -> n x dim() reconstructed descriptors, in `frame`.
  void Decode(const uint8_t* codes, int64_t n, float* descriptors,
              DescriptorFrame frame = DescriptorFrame::kOriginal) const;
  // n x dim() descriptors of the original frame -> the quantizer's.
  void Rotate(const float* descriptors, int64_t n, float* rotated) const;
  // u32 format (2), u32 dim, u32 bytes, u32 bits (8), dim x dim f32
  // rotation (row-major, orthonormal), then bytes x 256 x (dim / bytes) f32
  // centroids, little-endian. The store adds its checksum.
  std::string Serialize() const;

 private:
  DescriptorQuantizer(std::unique_ptr<faiss::LinearTransform> rotation,
                      std::unique_ptr<faiss::ProductQuantizer> pq);
  std::unique_ptr<faiss::LinearTransform> rotation_;  // OPQ: applied before the slices
  std::unique_ptr<faiss::ProductQuantizer> pq_;
  // The codes of Encode, as pq_ computes them but faster (slice_codes.h);
  // null for slices of 16 dimensions or more, which pq_ codes.
  std::unique_ptr<SliceCoder> coder_;
};

}  // namespace lookalike
