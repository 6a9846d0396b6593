// What the CPU running this build offers beyond the build's baseline, asked
// once: for kernels that pick an AVX2 path at run time and keep a portable
// one for other CPUs and compilers.
#pragma once

namespace lookalike {

// x86-64 with GCC or Clang: the only builds that compile AVX2 paths.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define LOOKALIKE_X86_DISPATCH 1

// True when this CPU has AVX2 and FMA (Intel since 2013, AMD since 2015).
inline bool CpuHasAvx2Fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

// True when this CPU has POPCNT (x86-64 CPUs since 2008; not in the
// baseline x86-64 builds target).
inline bool CpuHasPopcnt() {
  static const bool has = __builtin_cpu_supports("popcnt");
  return has;
}
#endif

}  // namespace lookalike
