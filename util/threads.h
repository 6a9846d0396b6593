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

// Runs OpenMP (FAISS) on `threads` threads until it goes out of scope, then
// restores the previous count: for FAISS work too fine-grained for OpenMP
// to pay (many small k-means), whose spinning workers are slower than one
// thread on a busy machine.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int threads);
  ~ScopedOmpThreads();
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int previous_;
};

}  // namespace lookalike
