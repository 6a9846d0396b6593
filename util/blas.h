// The Fortran BLAS/LAPACK routines we call directly, declared once. They come
// with the BLAS that FAISS links (OpenBLAS on Debian); column-major, as
// Fortran sees arrays.
#pragma once

extern "C" {
// C = alpha op(A) op(B) + beta C.
int sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
           const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
           const float* beta, float* c, const int* ldc);
// Eigenvalues (and vectors, jobz = "V") of a symmetric matrix.
void dsyev_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
            double* work, const int* lwork, int* info);
}
