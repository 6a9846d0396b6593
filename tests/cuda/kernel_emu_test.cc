// Runs the CUDA kernel bodies (cuda/kernel_bodies.h) on the SIMT emulator and
// compares every stage with the CPU oracle (indexer/vlad_cpu.cc) on the
// awkward cases. Built three times: plain, -fsanitize=thread (a missing
// barrier is a data race and kills the test) and -fsanitize=address (an
// out-of-bounds index kills the test). The last suite proves each of those
// failure modes is really caught, with deliberately broken bodies.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "cuda/kernel_bodies.h"
#include "indexer/vlad.h"
#include "simt_emulator.h"
#include "vlad_cases.h"

#if defined(__SANITIZE_THREAD__)
#define LOOKALIKE_EMU_TSAN 1
// Any race reported by TSan ends the process at once: a test with a race
// fails even if its results happen to be right.
extern "C" const char* __tsan_default_options() {
  return "halt_on_error=1:second_deadlock_stack=1";
}
#endif
#if defined(__SANITIZE_ADDRESS__)
#define LOOKALIKE_EMU_ASAN 1
#endif

namespace lookalike {
namespace {

namespace k = kernels;
using testing_cases::VladCase;
using testing_cases::VladInput;

// Device-side arrays of one emulated batch, with exactly the sizes the .cu
// allocates for it (so ASan sees any overflow).
struct EmulatedBatch {
  std::vector<uint32_t> keys, sorted_keys;
  std::vector<int32_t> values, order, offsets;
  std::vector<float> vlad;
};

// Dot products of rows [start, start + rows) with every centroid, laid out
// as cuBLAS SGEMM(T, N) writes them (K per row).
std::vector<float> Dots(const VladInput& in, int64_t start, int rows) {
  const int K = in.codebook.num_clusters(), d = in.codebook.dim();
  std::vector<float> dots(static_cast<size_t>(rows) * K);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < K; ++c) {
      float s = 0;
      for (int j = 0; j < d; ++j)
        s += in.descriptors[(start + r) * d + j] *
             in.codebook.centroids()[static_cast<size_t>(c) * d + j];
      dots[static_cast<size_t>(r) * K + c] = s;
    }
  return dots;
}

// What AssignKeys reads to decide near-ties, from the codebook as the CUDA
// encoder uploads it.
k::NearTieInputs NearTie(const VladInput& in) {
  return k::NearTieInputs{in.descriptors.data(), in.codebook.centroids().data(), in.codebook.dim(),
                          in.codebook.max_half_norm2()};
}

// Stage 2: SGEMM (on the CPU) + AssignKeys (emulated), in small odd chunks,
// with the launch shape the .cu uses.
void EmulateAssign(const VladInput& in, EmulatedBatch* b) {
  const int K = in.codebook.num_clusters();
  const int64_t n = in.num_descriptors();
  b->keys.assign(n, 0xFFFFFFFFu);
  b->values.assign(n, -1);
  constexpr int kChunk = 45;
  for (int64_t start = 0; start < n; start += kChunk) {
    const int rows = static_cast<int>(std::min<int64_t>(kChunk, n - start));
    const std::vector<float> dots = Dots(in, start, rows);
    const int grid = static_cast<int>(k::AssignGrid(rows));
    simt::Launch(grid, k::kAssignBlock, 0, [&](const simt::EmuCtx& ctx, void*) {
      k::AssignKeys(ctx, dots.data(), in.codebook.neg_half_norms2().data(), NearTie(in), K, start,
                    rows, in.image_offsets.data(), static_cast<int>(in.num_images()),
                    b->keys.data(), b->values.data());
    });
  }
}

// Stage 3 stands in for cub::DeviceRadixSort::SortPairs: a stable sort of
// (key, value) pairs by key.
void EmulateSort(EmulatedBatch* b) {
  std::vector<int32_t> perm(b->keys.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(),
                   [&](int32_t x, int32_t y) { return b->keys[x] < b->keys[y]; });
  b->sorted_keys.resize(perm.size());
  b->order.resize(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    b->sorted_keys[i] = b->keys[perm[i]];
    b->order[i] = b->values[perm[i]];
  }
}

void EmulateOffsets(int64_t num_segments, EmulatedBatch* b) {
  const int64_t n = static_cast<int64_t>(b->sorted_keys.size());
  b->offsets.assign(num_segments + 1, -7);
  const int grid = static_cast<int>(k::OffsetsGrid(n));
  simt::Launch(grid, k::kOffsetsBlock, 0, [&](const simt::EmuCtx& ctx, void*) {
    k::SegmentOffsets(ctx, b->sorted_keys.data(), n, num_segments, b->offsets.data());
  });
}

void EmulateReduce(const VladInput& in, bool residual_normalize, EmulatedBatch* b) {
  const int K = in.codebook.num_clusters(), d = in.codebook.dim();
  const int64_t num_segments = in.num_images() * K;
  b->vlad.assign(num_segments * d, std::nanf(""));
  // The .cu's grid function with a small cap, so the grid-stride loop runs.
  const int grid = static_cast<int>(k::StridedGrid(num_segments, /*max_grid=*/7));
  const int block = k::SegmentBlock(d);
  if (residual_normalize) {
    simt::Launch(grid, block, k::kReduceSharedBytes, [&](const simt::EmuCtx& ctx, void* smem) {
      k::SegmentNormalizedResidualSum(
          ctx, in.descriptors.data(), d, b->order.data(), b->offsets.data(), num_segments,
          in.codebook.centroids().data(), K, b->vlad.data(), static_cast<double*>(smem));
    });
  } else {
    simt::Launch(grid, block, 0, [&](const simt::EmuCtx& ctx, void*) {
      k::SegmentResidualSum(ctx, in.descriptors.data(), d, b->order.data(), b->offsets.data(),
                            num_segments, in.codebook.centroids().data(), K, b->vlad.data());
    });
  }
}

void EmulateNormalize(const VladInput& in, const VladOptions& options, EmulatedBatch* b) {
  const int K = in.codebook.num_clusters(), d = in.codebook.dim();
  const int64_t num_images = in.num_images();
  const int grid = static_cast<int>(k::StridedGrid(num_images, /*max_grid=*/3));
  simt::Launch(grid, k::kNormalizeBlock, k::kReduceSharedBytes,
               [&](const simt::EmuCtx& ctx, void* smem) {
                 k::NormalizeImage(ctx, b->vlad.data(), num_images, K, d, options.power_alpha,
                                   options.intra_normalize, static_cast<double*>(smem));
               });
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, double tolerance,
                const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err =
        std::fabs(double(got[i]) - want[i]) / std::max(1.0, std::fabs(double(want[i])));
    if (!(err <= worst)) {  // also catches NaN
      worst = std::isnan(err) ? INFINITY : err;
      worst_at = i;
    }
  }
  EXPECT_LE(worst, tolerance) << what << ": worst relative error at " << worst_at << " got "
                              << got[worst_at] << " want " << want[worst_at];
}

class KernelEmuTest : public ::testing::TestWithParam<std::tuple<VladCase, int>> {};

TEST_P(KernelEmuTest, EveryStageMatchesTheCpuOracle) {
  const VladCase& vc = std::get<0>(GetParam());
  const VladOptions options = testing_cases::OptionVariants()[std::get<1>(GetParam())];
  const VladInput in = testing_cases::MakeInput(vc);
  const int K = vc.num_clusters, d = vc.dim;
  const int64_t n = in.num_descriptors(), num_images = in.num_images();
  const int64_t num_segments = num_images * K;
  const double tol = testing_cases::Tolerance(d);

  // Oracle, stage by stage.
  std::vector<int32_t> labels(n);
  in.codebook.Assign(in.descriptors.data(), n, labels.data());
  ASSERT_EQ(labels, in.labels) << "test data must not have near ties";
  std::vector<int64_t> order, offsets;
  SortBySegment(labels.data(), in.image_offsets.data(), num_images, K, &order, &offsets);
  std::vector<float> reduced(num_segments * d);
  ReduceSegments(in.descriptors.data(), d, order.data(), offsets, num_images, in.codebook,
                 options.residual_normalize, reduced.data());
  std::vector<float> normalized = reduced;
  NormalizeVlad(normalized.data(), num_images, K, d, options);

  EmulatedBatch b;
  EmulateAssign(in, &b);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(static_cast<int64_t>(b.keys[i] % K), labels[i]) << "row " << i;
    const int64_t image = b.keys[i] / K;
    ASSERT_TRUE(in.image_offsets[image] <= i && i < in.image_offsets[image + 1])
        << "row " << i << " keyed to image " << image;
    ASSERT_EQ(b.values[i], i);
  }
  EmulateSort(&b);
  EmulateOffsets(num_segments, &b);
  ASSERT_EQ(std::vector<int64_t>(b.order.begin(), b.order.end()), order);
  ASSERT_EQ(std::vector<int64_t>(b.offsets.begin(), b.offsets.end()), offsets);
  EmulateReduce(in, options.residual_normalize, &b);
  ExpectNear(b.vlad, reduced, tol, "segment residual sums");
  EmulateNormalize(in, options, &b);
  ExpectNear(b.vlad, normalized, tol, "normalised VLAD");

  // And the whole encoder, as the index pipeline calls it.
  auto encoder = CreateVladEncoder(Backend::kCpu, in.codebook, options);
  std::vector<float> encoded(num_images * encoder->vlad_dim());
  encoder->Encode(in.descriptors.data(), in.image_offsets.data(), num_images, encoded.data());
  ExpectNear(b.vlad, encoded, tol, "encoder output");
  // Images without descriptors are exactly zero, never NaN.
  for (int64_t i = 0; i < num_images; ++i) {
    if (in.image_offsets[i] != in.image_offsets[i + 1]) continue;
    for (int64_t e = 0; e < int64_t{K} * d; ++e)
      ASSERT_EQ(b.vlad[i * K * d + e], 0.0f) << "image " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AwkwardCases, KernelEmuTest,
                         ::testing::Combine(::testing::ValuesIn(testing_cases::AwkwardCases()),
                                            ::testing::Range(0, 3)),
                         [](const ::testing::TestParamInfo<KernelEmuTest::ParamType>& info) {
                           return std::get<0>(info.param).name + "_options" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(KernelEmuTest, AssignTiesGoToTheLowerIndexAcrossLanes) {
  // 70 clusters of norm 4: (4, 0) for clusters 5, 37 and 69 (different lanes
  // and different strides of the same lane), (0, 4) for the others. The
  // descriptor (1, 0) is equally near the three, which the near-tie
  // rescoring sees as a tie too.
  const int K = 70, d = 2;
  std::vector<float> centroids;
  for (int c = 0; c < K; ++c) {
    const bool tied = c == 5 || c == 37 || c == 69;
    centroids.push_back(tied ? 4.0f : 0.0f);
    centroids.push_back(tied ? 0.0f : 4.0f);
  }
  testing_cases::VladInput in{Codebook(K, d, centroids), {1.0f, 0.0f}, {0, 1}, {}};
  const std::vector<float> dots = Dots(in, 0, 1);
  uint32_t key = 0;
  int32_t value = -1;
  simt::Launch(1, k::kAssignBlock, 0, [&](const simt::EmuCtx& ctx, void*) {
    k::AssignKeys(ctx, dots.data(), in.codebook.neg_half_norms2().data(), NearTie(in), K, 0, 1,
                  in.image_offsets.data(), 1, &key, &value);
  });
  EXPECT_EQ(key, 5u);
  EXPECT_EQ(value, 0);
  int32_t cpu = -1;
  in.codebook.Assign(in.descriptors.data(), 1, &cpu);
  EXPECT_EQ(cpu, 5);
}

// The CPU gets its scores from one SGEMM with the constant inside, the GPU
// adds the constant after its SGEMM: the same formula, rounded differently.
// Both only shortlist with them and decide near-ties with the same
// fixed-order AssignmentDot, so they must pick the same centroid for every
// descriptor, however near the tie. Descriptors placed on purpose between
// two centroids, at distances from the exact tie spread over ten orders of
// magnitude, check it; without the kernel's rescoring, one of the 1,800
// takes the other centroid (the emulated SGEMM sums in another order).
TEST(KernelEmuTest, NearTiesAreDecidedAsOnTheCpu) {
  const int K = 8, d = 64;
  const int kImages = 6, kPerImage = 300;
  testing_cases::VladInput in{testing_cases::MakeCodebook(K, d, 7), {}, {0}, {}};
  const std::vector<float>& c = in.codebook.centroids();
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> pick(0, K - 1);
  std::uniform_real_distribution<double> exponent(-9.0, 0.0), unit(-1.0, 1.0);
  for (int i = 0; i < kImages; ++i) {
    for (int j = 0; j < kPerImage; ++j) {
      const int a = pick(rng);
      int b = pick(rng);
      if (b == a) b = (a + 1) % K;
      // Midpoint of a and b, moved towards a by 10^-9 .. 1 of a small step
      // and jittered orthogonally-ish: the tie is broken by that margin.
      const double toward = std::pow(10.0, exponent(rng));
      for (int e = 0; e < d; ++e) {
        const double ca = c[static_cast<size_t>(a) * d + e], cb = c[static_cast<size_t>(b) * d + e];
        in.descriptors.push_back(
            static_cast<float>(0.5 * (ca + cb) + 0.01 * toward * (ca - cb) + 1e-3 * unit(rng)));
      }
    }
    in.image_offsets.push_back(in.image_offsets.back() + kPerImage);
  }
  const int64_t n = in.num_descriptors();
  std::vector<int32_t> cpu(n);
  in.codebook.Assign(in.descriptors.data(), n, cpu.data());
  EmulatedBatch b;
  EmulateAssign(in, &b);

  // Exact (long double) score of descriptor r for centroid k, and a bound on
  // the rounding of a float evaluation of it: d products and the constant.
  auto exact = [&](int64_t r, int k) {
    long double dot = 0, norm2 = 0;
    for (int e = 0; e < d; ++e) {
      dot +=
          static_cast<long double>(in.descriptors[r * d + e]) * c[static_cast<size_t>(k) * d + e];
      norm2 += static_cast<long double>(c[static_cast<size_t>(k) * d + e]) *
               c[static_cast<size_t>(k) * d + e];
    }
    return dot - norm2 / 2;
  };
  auto rounding = [&](int64_t r, int k) {
    long double magnitude = 0;
    for (int e = 0; e < d; ++e)
      magnitude += std::fabs(static_cast<long double>(in.descriptors[r * d + e]) *
                             c[static_cast<size_t>(k) * d + e]);
    magnitude += 0.5L * in.codebook.centroid_norms2()[k];
    return 2.0L * (d + 2) * std::numeric_limits<float>::epsilon() * magnitude;
  };
  int64_t near_ties = 0, differing = 0;
  for (int64_t r = 0; r < n; ++r) {
    // Near tie: the best two exact scores within the rounding bound.
    int best = 0, second = -1;
    for (int k = 1; k < K; ++k)
      if (exact(r, k) > exact(r, best)) best = k;
    for (int k = 0; k < K; ++k)
      if (k != best && (second < 0 || exact(r, k) > exact(r, second))) second = k;
    near_ties += exact(r, best) - exact(r, second) <= rounding(r, best) + rounding(r, second);
    const int32_t gpu = static_cast<int32_t>(b.keys[r] % K);
    if (gpu != cpu[r] && ++differing <= 5)
      ADD_FAILURE() << "row " << r << ": CPU label " << cpu[r] << ", GPU path " << gpu;
  }
  EXPECT_EQ(differing, 0) << "labels differ between the CPU and the GPU path";
  EXPECT_GT(near_ties, 0) << "the construction must produce ties within rounding";
  std::printf(
      "[ near tie ] %lld of %lld descriptors within rounding of a tie, %lld labels differ\n",
      static_cast<long long>(near_ties), static_cast<long long>(n),
      static_cast<long long>(differing));
}

TEST(KernelEmuTest, ImageOfRowSkipsEmptyImages) {
  const int64_t offsets[] = {0, 0, 3, 3, 3, 5, 5};
  const int expected[] = {1, 1, 1, 4, 4};
  for (int row = 0; row < 5; ++row) EXPECT_EQ(k::ImageOfRow(offsets, 6, row), expected[row]) << row;
}

// ---- the emulator catches broken kernels -------------------------------------

TEST(EmulatorCatches, DivergentBarrier) {
  try {
    simt::Launch(1, 64, 0, [](const simt::EmuCtx& ctx, void*) {
      if (ctx.thread_idx() < 32) ctx.sync();
    });
    FAIL() << "a barrier reached by half the block was not reported";
  } catch (const simt::EmulationError& e) {
    EXPECT_NE(std::string(e.what()).find("divergent barrier"), std::string::npos) << e.what();
  }
}

TEST(EmulatorCatches, BarrierCountMismatch) {
  // Every thread reaches a barrier, but warp 1 one time fewer.
  try {
    simt::Launch(2, 64, 0, [](const simt::EmuCtx& ctx, void*) {
      ctx.sync();
      if (ctx.thread_idx() < 32) ctx.sync();
    });
    FAIL() << "mismatched barrier counts were not reported";
  } catch (const simt::EmulationError& e) {
    EXPECT_NE(std::string(e.what()).find("divergent barrier"), std::string::npos) << e.what();
  }
}

TEST(EmulatorCatches, DivergentShuffle) {
  try {
    simt::Launch(1, 32, 0, [](const simt::EmuCtx& ctx, void*) {
      if (ctx.thread_idx() < 16) (void)ctx.shfl_down(1.0f, 1);
    });
    FAIL() << "a shuffle by half a warp was not reported";
  } catch (const simt::EmulationError& e) {
    EXPECT_NE(std::string(e.what()).find("divergent shuffle"), std::string::npos) << e.what();
  }
}

TEST(EmulatorCatches, PartialWarpBlock) {
  EXPECT_THROW(simt::Launch(1, 48, 0, [](const simt::EmuCtx&, void*) {}), simt::EmulationError);
}

TEST(EmulatorCatches, ShuffleResultsAreThoseOfTheHardware) {
  std::vector<int> down(64), idx(64);
  simt::Launch(1, 64, 0, [&](const simt::EmuCtx& ctx, void*) {
    const int t = ctx.thread_idx();
    down[t] = ctx.shfl_down(t, 3);
    idx[t] = ctx.shfl(t * 10, 7);
  });
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    EXPECT_EQ(down[t], lane + 3 < 32 ? t + 3 : t) << t;
    EXPECT_EQ(idx[t], (t / 32 * 32 + 7) * 10) << t;
  }
}

// A block sum with the barrier between the per-warp writes and warp 0's
// read removed: a data race on shared memory. Thread 0 reads only once
// warp 1's write has happened, seen through a relaxed flag, which orders
// nothing for ThreadSanitizer: without it, on a busy machine thread 0 could
// finish before thread 32 started, and the emulator's own locks between the
// two threads made the accesses look ordered (the death test failed to die
// once in a suite run at load 15).
[[maybe_unused]] void RacyBlockSum() {
  double total = 0;
  std::atomic<bool> written{false};
  simt::Launch(1, 64, k::kReduceSharedBytes, [&](const simt::EmuCtx& ctx, void* p) {
    double* smem = static_cast<double*>(p);
    const double v = k::WarpSum(ctx, 1.0);
    if (ctx.thread_idx() % 32 == 0) smem[ctx.thread_idx() / 32] = v;
    if (ctx.thread_idx() == 32) written.store(true, std::memory_order_relaxed);
    // missing: ctx.sync();
    if (ctx.thread_idx() == 0) {
      while (!written.load(std::memory_order_relaxed)) std::this_thread::yield();
      total = smem[0] + smem[1];
    }
  });
  (void)total;
}

// Reads one element past a block's shared memory and writes one past a
// global array.
[[maybe_unused]] void OutOfBoundsBody() {
  std::vector<float> out(64);
  simt::Launch(1, 64, 64 * sizeof(float), [&](const simt::EmuCtx& ctx, void* p) {
    float* smem = static_cast<float*>(p);
    smem[ctx.thread_idx()] = 1.0f;
    ctx.sync();
    out.data()[ctx.thread_idx() + 1] = smem[ctx.thread_idx() + 1];
  });
}

TEST(EmulatorCatchesDeathTest, MissingBarrierIsADataRace) {
#if defined(LOOKALIKE_EMU_TSAN)
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(RacyBlockSum(), "ThreadSanitizer: data race");
#else
  GTEST_SKIP() << "detected by the ThreadSanitizer build of this test";
#endif
}

TEST(EmulatorCatchesDeathTest, OutOfBoundsIndex) {
#if defined(LOOKALIKE_EMU_ASAN)
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(OutOfBoundsBody(), "AddressSanitizer: heap-buffer-overflow");
#else
  GTEST_SKIP() << "detected by the AddressSanitizer build of this test";
#endif
}

}  // namespace
}  // namespace lookalike
