// The Fortran BLAS/LAPACK routines we call directly, declared once. They come
// with the BLAS that FAISS links (OpenBLAS on Debian); column-major, as
// Fortran sees arrays.
#pragma once

#include <algorithm>
#include <vector>

extern "C" {
// C = alpha op(A) op(B) + beta C.
int sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
           const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
           const float* beta, float* c, const int* ldc);
// Eigenvalues (and vectors, jobz = "V") of a symmetric matrix.
void dsyev_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
            double* work, const int* lwork, int* info);
}

namespace lookalike {

// Eigenvalues (ascending, into w[0..n)) and eigenvectors (eigenvector k in
// column k of `a`, contiguous since `a` is column-major) of the symmetric
// n x n matrix `a` (its upper triangle is read), overwritten: LAPACK dsyev
// with its workspace sized by a first query call. Returns dsyev's info: 0
// on success.
inline int SymmetricEigen(int n, double* a, double* w) {
  int info = 0, lwork = -1;
  double size = 0;
  dsyev_("V", "U", &n, a, &n, w, &size, &lwork, &info);
  lwork = std::max(1, static_cast<int>(size));
  std::vector<double> work(static_cast<size_t>(lwork));
  dsyev_("V", "U", &n, a, &n, w, work.data(), &lwork, &info);
  return info;
}

}  // namespace lookalike
