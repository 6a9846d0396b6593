// The nearest-neighbour shortlists of verification's approximate matching:
// for every query descriptor, the few candidate descriptors most similar to
// it in the query's principal subspace (search/verifier.h, PreparedQuery),
// which are then re-scored exactly.
//
// Most of a query's verification time is here: 2,000 query rows against
// about 1,000 candidate rows per candidate image, in 32 dimensions. Two
// implementations give the same shortlists (up to float rounding at
// near-ties): a BLAS product of the similarity matrix, scanned row by row,
// and on CPUs with AVX2 and FMA a fused kernel that keeps each block of
// similarities in registers and only compares it with the shortlists'
// weakest, instead of writing, zeroing and re-reading a matrix of about a
// megabyte per 256 query rows (search/README.md, "Verification").
#pragma once

namespace lookalike {

// For each of the `nq` rows of `query` (nq x dim, row-major), the
// `shortlist` rows of `candidate` (nc x dim) with the largest dot products,
// largest first; equal products keep the lower candidate row first. Rows
// beyond nc are -1 (when nc < shortlist). `top` holds nq x shortlist;
// shortlist is 1..64 (std::invalid_argument otherwise). Chooses the fused
// kernel where the CPU has it.
void SubspaceShortlists(const float* query, int nq, const float* candidate, int nc, int dim,
                        int shortlist, int* top);

// The two implementations, for tests and benchmarks: the BLAS product and
// scan, and the fused kernel (false without running it when this CPU or
// build has no AVX2 and FMA).
void SubspaceShortlistsBlas(const float* query, int nq, const float* candidate, int nc, int dim,
                            int shortlist, int* top);
bool SubspaceShortlistsFused(const float* query, int nq, const float* candidate, int nc, int dim,
                             int shortlist, int* top);

// The similarity product both the BLAS shortlists and exact matching
// (search/verifier.cc) scan: sims (nc x rows, column-major: one query row's
// products contiguous) = candidate (nc x dim, row-major) x query rows^T,
// one SGEMM. Query rows go kSimilarityBlockRows at a time, so a block
// (kSimilarityBlockRows x nc floats) stays within cache-friendly bounds.
inline constexpr int kSimilarityBlockRows = 256;
void SimilarityBlock(const float* candidate, int nc, const float* query_rows, int rows, int dim,
                     float* sims);

}  // namespace lookalike
