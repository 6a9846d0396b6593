// Thread counts for our workers and for the libraries we call (OpenMP inside
// FAISS, OpenBLAS): the one place that decides how they share the cores.
#pragma once

namespace lookalike {

// Number of hardware threads (>= 1).
int DefaultThreads();

// `threads` if positive, else DefaultThreads(): what a `threads = 0 = all
// cores` option field means.
int ResolveThreads(int threads);

// Gives OpenMP (FAISS) `threads` threads and keeps BLAS single-threaded, so
// library threads do not multiply with each other or with ours.
void SetLibraryThreads(int threads);

}  // namespace lookalike
