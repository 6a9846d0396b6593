#include "util/threads.h"

#include <dlfcn.h>
#include <omp.h>

#include <thread>

namespace lookalike {

int DefaultThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

int ResolveThreads(int threads) { return threads > 0 ? threads : DefaultThreads(); }

void SetLibraryThreads(int threads) {
  // FAISS parallelises with OpenMP around its BLAS calls; OpenBLAS threads
  // inside those would multiply (k-means measured 25 % slower on 2 cores with
  // both at 2). So BLAS stays single-threaded and OpenMP gets the threads.
  // The OpenBLAS setter is looked up at run time so any BLAS can stand
  // behind FAISS.
  using SetFn = void (*)(int);
  static const auto openblas_set =
      reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (openblas_set) openblas_set(1);
  omp_set_num_threads(threads);
}

ScopedOmpThreads::ScopedOmpThreads(int threads) : previous_(omp_get_max_threads()) {
  omp_set_num_threads(threads);
}
ScopedOmpThreads::~ScopedOmpThreads() { omp_set_num_threads(previous_); }

}  // namespace lookalike
