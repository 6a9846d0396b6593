// The k-means assignment step (the codebook's and the descriptor
// quantizer's slices): faiss::IndexFlatL2 whose nearest-centroid search
// (k = 1) gives FAISS 1.7.3's results bit for bit in about half the time.
// FAISS computes each block of 4,096 queries x 1,024 centroids with one
// SGEMM, writes every distance (||x||^2 + ||c||^2 - 2 x.c, clamped at 0)
// back over the 8 MiB block, then reads it all again to keep each query's
// first smallest. This runs the very same SGEMMs (same blocks, same
// arguments, so the same dot products) and the same float expression, but
// keeps the smallest in the pass that computes the distances (with AVX2,
// eight centroids at a time), with the norms summed as FAISS's baseline
// fvec_norm_L2sqr (in double) sums them (NearestFlatL2Test compares every
// label and distance with FAISS's). Other searches (k > 1, fewer than
// FAISS's BLAS threshold of queries, a selector) are IndexFlatL2's own.
#pragma once

#include <faiss/IndexFlat.h>

namespace lookalike {

class NearestFlatL2 : public faiss::IndexFlatL2 {
 public:
  using faiss::IndexFlatL2::IndexFlatL2;
  void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
              const faiss::SearchParameters* params = nullptr) const override;
  // Tests: the portable pass even where the CPU has AVX2.
  void set_portable(bool portable) { portable_ = portable; }

 private:
  bool portable_ = false;
};

}  // namespace lookalike
