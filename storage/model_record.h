// The model a database is encoded with (settings and codebook) and its
// optional PCA projection, as stored: each struct lists its fields once, in
// their on-disk order (Fields), and storage/values.cc codes them from that
// list. The indexer builds its objects from these records (indexer/model.h,
// indexer/projection.h); storage never sees indexer types.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace lookalike {

// Everything needed to encode a query exactly as the database was encoded.
// Stored once per database; search never takes these from flags.
struct ModelRecord {
  std::string descriptor_type = "rootsift";  // "rootsift" | "sift"
  uint32_t dim = 128;                        // descriptor dimension
  uint32_t num_clusters = 0;                 // K
  uint32_t max_side = 0;                     // longest image side after downscaling, px
  float contrast_threshold = 0.04f;          // SIFT detector setting
  uint32_t max_features = 0;                 // SIFT keypoint cap, 0 = none
  // Re-detect below this many keypoints with lower thresholds; 0 = off
  // (databases written before this field existed decode as 0).
  uint32_t min_keypoints = 0;
  float power_alpha = 1.0f;  // VLAD power normalisation exponent (1 = off)
  bool intra_normalize = true;
  bool residual_normalize = false;
  uint64_t seed = 0;             // k-means seed the codebook came from
  std::vector<float> centroids;  // num_clusters x dim, row-major
  uint64_t codebook_hash = 0;    // FNV-1a 64 of centroids (checked on load)

  // Floats of one VLAD vector of this model (K x dim): the stored model's
  // definition, which every reader of a store uses.
  uint64_t vlad_dim() const { return uint64_t{num_clusters} * dim; }

  // The stored fields in their on-disk order: the one list a stored field is
  // added to (then mapped to its setting in indexer/model.cc). `Record` is
  // ModelRecord or const ModelRecord. `Coder` (storage/values.cc) has Text,
  // U32, F32, U64, Flags (bools as bits 1, 2, ... of one u32), Codebook (u64
  // count, then the centroids) and Appended: true when fields added after
  // schema 1 shipped follow (always when encoding; when decoding, unless the
  // value ends there, as models written before them do).
  template <class Record, class Coder>
  static void Fields(Record& m, Coder& c) {
    c.Text(m.descriptor_type);
    c.U32(m.dim);
    c.U32(m.num_clusters);
    c.U32(m.max_side);
    c.F32(m.contrast_threshold);
    c.U32(m.max_features);
    c.F32(m.power_alpha);
    c.Flags(m.intra_normalize, m.residual_normalize);
    c.U64(m.seed);
    c.U64(m.codebook_hash);
    c.Codebook(m);
    if (!c.Appended()) return;
    c.U32(m.min_keypoints);
  }
};

// PCA(-whitening) of the VLAD vectors, learned when the database was created
// (indexer/projection.h learns and applies it). Optional: a database without
// one searches its full VLAD vectors, as every database did before.
struct ProjectionRecord {
  uint32_t in_dim = 0;       // VLAD dimension it reads (model vlad_dim)
  uint32_t out_dim = 0;      // components kept, >= 1
  uint32_t num_samples = 0;  // vectors it was learned from
  bool whiten = true;        // scale component i by (eigenvalue_i + reg x mean)^-1/2
  // Bits per stored component value: 32 (float32), 16 (float16), or 4, 2 or
  // 1 (a code c in 0..2^bits-1 standing for scale_row x (c - (2^bits-1)/2);
  // m:pca format 2 for 4 bits, 3 for 2 and 1).
  uint32_t component_bits = 16;
  float eigen_regularization = 0;  // relative eigenvalue floor for whitening, >= 0
  float power_alpha = 1.0f;        // signed power after projection (1 = off)
  // The mean the components are centred on: in_dim floats (formats 1-3), or
  // (format 4) only its projection, out_dim floats: each stored (unwhitened)
  // component row dotted with the mean, all that applying it needs; 256 KiB
  // less at K = 512, where a small collection's 1- or 2-bit matrix is 0.9 or
  // 1.75 MiB. Exactly one of the two is set.
  std::vector<float> mean;
  std::vector<float> projected_mean;
  std::vector<float> eigenvalues;  // out_dim, descending
  std::vector<float> components;   // out_dim x in_dim, orthonormal rows, row-major
  // One step per row when the components are on a grid (Gridded: their
  // values are then exactly GridValue(c, step, bits)); empty otherwise.
  std::vector<float> component_scales;

  // The m:pca format it is stored in: 4 with a projected mean (1-, 2- or
  // 4-bit components), else 2 for 4-bit components, 3 for 2- and 1-bit ones,
  // 1 for float (the bytes every earlier build wrote and reads).
  uint32_t format() const {
    if (!projected_mean.empty()) return 4;
    return component_bits == 4 ? 2 : Gridded(component_bits) ? 3 : 1;
  }

  // Whether values of this many bits are codes on a per-row grid.
  static bool Gridded(uint32_t bits) { return bits == 1 || bits == 2 || bits == 4; }
  // The grid of `bits` (1, 2 or 4) bits, defined once for the learner (which
  // puts values on it) and the codec: code c in 0..2^bits-1 stands for
  // step x (c - (2^bits - 1) / 2); a value maps to the code whose cell holds
  // it (the end cells take what lies beyond), so a value on the grid maps
  // back to its own code. At 4 bits: step x (c - 7.5), codes 0..15.
  static uint8_t GridCode(float value, float step, uint32_t bits) {
    const float levels = static_cast<float>(1u << bits);
    return static_cast<uint8_t>(
        std::clamp(std::floor(value / step + levels / 2.0f), 0.0f, levels - 1.0f));
  }
  static float GridValue(uint8_t code, float step, uint32_t bits) {
    return step * (static_cast<float>(code) - (static_cast<float>(1u << bits) - 1.0f) / 2.0f);
  }

  // Whether it maps vectors of a model with this vlad_dim: in_dim equals it
  // and 1 <= out_dim <= in_dim. The one shape rule, for the decoder and for
  // SearchProjection.
  bool Maps(uint64_t vlad_dim) const {
    return in_dim == vlad_dim && out_dim >= 1 && out_dim <= in_dim;
  }
  // Whether the bits are known and mean (or projected mean, on a grid only),
  // eigenvalues, components and scales have the sizes in_dim, out_dim and
  // component_bits say.
  bool SizesConsistent() const {
    const bool centred =
        projected_mean.empty()
            ? mean.size() == in_dim
            : mean.empty() && projected_mean.size() == out_dim && Gridded(component_bits);
    return (Gridded(component_bits) || component_bits == 16 || component_bits == 32) && centred &&
           eigenvalues.size() == out_dim && components.size() == uint64_t{out_dim} * in_dim &&
           component_scales.size() == (Gridded(component_bits) ? out_dim : 0u);
  }

  // The stored fields after the format number, in their on-disk order, as
  // ModelRecord::Fields. `Coder` also has FlagsAndBits (u32 flags: whiten 1,
  // float16 2; from format 2 on a u32 of component bits follows), Dimensions
  // (checks in_dim and out_dim before the arrays they size), Floats (f32
  // each, as many as the vector holds or the count given) and Components
  // (f32 or f16 values; or, on a grid, out_dim f32 steps then each row's
  // codes, 8 / bits per byte, the first in the lowest bits, rows padded to
  // whole bytes).
  template <class Record, class Coder>
  static void Fields(Record& p, Coder& c) {
    c.U32(p.in_dim);
    c.U32(p.out_dim);
    c.U32(p.num_samples);
    c.FlagsAndBits(p);
    c.F32(p.eigen_regularization);
    c.F32(p.power_alpha);
    c.Dimensions(p);
    c.Mean(p);  // in_dim floats, or (format 4) out_dim: the projected mean
    c.Floats(p.eigenvalues, p.out_dim);
    c.Components(p);
  }
};

}  // namespace lookalike
