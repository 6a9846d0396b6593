// Runs the CUDA kernel bodies (cuda/kernel_bodies.h) on the SIMT emulator and
// compares every stage with the CPU oracle (indexer/vlad_cpu.cc) on the
// awkward cases. Built three times: plain, -fsanitize=thread (a missing
// barrier is a data race and kills the test) and -fsanitize=address (an
// out-of-bounds index kills the test). The last suite proves each of those
// failure modes is really caught, with deliberately broken bodies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
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

// Stage 2: SGEMM (on the CPU) + ArgminKeys (emulated), in small odd chunks.
void EmulateAssign(const VladInput& in, EmulatedBatch* b) {
  const int K = in.codebook.num_clusters();
  const int64_t n = in.num_descriptors();
  b->keys.assign(n, 0xFFFFFFFFu);
  b->values.assign(n, -1);
  constexpr int kChunk = 45;
  for (int64_t start = 0; start < n; start += kChunk) {
    const int rows = static_cast<int>(std::min<int64_t>(kChunk, n - start));
    const std::vector<float> dots = Dots(in, start, rows);
    const int grid = (rows + k::kArgminRowsPerBlock - 1) / k::kArgminRowsPerBlock;
    simt::Launch(grid, k::kArgminBlock, 0, [&](const simt::EmuCtx& ctx, void*) {
      k::ArgminKeys(ctx, dots.data(), in.codebook.centroid_norms2().data(), K,
                    start, rows, in.image_offsets.data(),
                    static_cast<int>(in.num_images()), b->keys.data(),
                    b->values.data());
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
  const int grid = static_cast<int>((n + 1 + k::kOffsetsBlock - 1) / k::kOffsetsBlock);
  simt::Launch(grid, k::kOffsetsBlock, 0, [&](const simt::EmuCtx& ctx, void*) {
    k::SegmentOffsets(ctx, b->sorted_keys.data(), n, num_segments,
                      b->offsets.data());
  });
}

void EmulateReduce(const VladInput& in, bool residual_normalize,
                   EmulatedBatch* b) {
  const int K = in.codebook.num_clusters(), d = in.codebook.dim();
  const int64_t num_segments = in.num_images() * K;
  b->vlad.assign(num_segments * d, std::nanf(""));
  // A grid smaller than the segment count exercises the grid-stride loop.
  const int grid = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(num_segments, 7)));
  const int block = k::SegmentBlock(d);
  if (residual_normalize) {
    simt::Launch(grid, block, k::kReduceSharedBytes,
                 [&](const simt::EmuCtx& ctx, void* smem) {
                   k::SegmentNormalizedResidualSum(
                       ctx, in.descriptors.data(), d, b->order.data(),
                       b->offsets.data(), num_segments,
                       in.codebook.centroids().data(), K, b->vlad.data(),
                       static_cast<double*>(smem));
                 });
  } else {
    simt::Launch(grid, block, 0, [&](const simt::EmuCtx& ctx, void*) {
      k::SegmentResidualSum(ctx, in.descriptors.data(), d, b->order.data(),
                            b->offsets.data(), num_segments,
                            in.codebook.centroids().data(), K, b->vlad.data());
    });
  }
}

void EmulateNormalize(const VladInput& in, const VladOptions& options,
                      EmulatedBatch* b) {
  const int K = in.codebook.num_clusters(), d = in.codebook.dim();
  const int64_t num_images = in.num_images();
  const int grid = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(num_images, 3)));
  simt::Launch(grid, k::kNormalizeBlock, k::kReduceSharedBytes,
               [&](const simt::EmuCtx& ctx, void* smem) {
                 k::NormalizeImage(ctx, b->vlad.data(), num_images, K, d,
                                   options.power_alpha, options.intra_normalize,
                                   static_cast<double*>(smem));
               });
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want,
                double tolerance, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - want[i]) /
                       std::max(1.0, std::fabs(double(want[i])));
    if (!(err <= worst)) {  // also catches NaN
      worst = std::isnan(err) ? INFINITY : err;
      worst_at = i;
    }
  }
  EXPECT_LE(worst, tolerance) << what << ": worst relative error at " << worst_at
                              << " got " << got[worst_at] << " want "
                              << want[worst_at];
}

class KernelEmuTest
    : public ::testing::TestWithParam<std::tuple<VladCase, int>> {};

TEST_P(KernelEmuTest, EveryStageMatchesTheCpuOracle) {
  const VladCase& vc = std::get<0>(GetParam());
  const VladOptions options =
      testing_cases::OptionVariants()[std::get<1>(GetParam())];
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
  SortBySegment(labels.data(), in.image_offsets.data(), num_images, K, &order,
                &offsets);
  std::vector<float> reduced(num_segments * d);
  ReduceSegments(in.descriptors.data(), d, order.data(), offsets, num_images,
                 in.codebook, options.residual_normalize, reduced.data());
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
  encoder->Encode(in.descriptors.data(), in.image_offsets.data(), num_images,
                  encoded.data());
  ExpectNear(b.vlad, encoded, tol, "encoder output");
  // Images without descriptors are exactly zero, never NaN.
  for (int64_t i = 0; i < num_images; ++i) {
    if (in.image_offsets[i] != in.image_offsets[i + 1]) continue;
    for (int64_t e = 0; e < int64_t{K} * d; ++e)
      ASSERT_EQ(b.vlad[i * K * d + e], 0.0f) << "image " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AwkwardCases, KernelEmuTest,
    ::testing::Combine(::testing::ValuesIn(testing_cases::AwkwardCases()),
                       ::testing::Range(0, 3)),
    [](const ::testing::TestParamInfo<KernelEmuTest::ParamType>& info) {
      return std::get<0>(info.param).name + "_options" +
             std::to_string(std::get<1>(info.param));
    });

TEST(KernelEmuTest, ArgminTiesGoToTheLowerIndexAcrossLanes) {
  // 70 clusters, the minimum shared by clusters 5, 37 and 69 (different
  // lanes and different strides of the same lane).
  const int K = 70;
  std::vector<float> norms2(K, 10.0f), dots(K, 0.0f);
  for (int c : {69, 37, 5}) dots[c] = 4.0f;
  const int64_t offsets[2] = {0, 1};
  uint32_t key = 0;
  int32_t value = -1;
  simt::Launch(1, k::kArgminBlock, 0, [&](const simt::EmuCtx& ctx, void*) {
    k::ArgminKeys(ctx, dots.data(), norms2.data(), K, 0, 1, offsets, 1, &key,
                  &value);
  });
  EXPECT_EQ(key, 5u);
  EXPECT_EQ(value, 0);
}

TEST(KernelEmuTest, ImageOfRowSkipsEmptyImages) {
  const int64_t offsets[] = {0, 0, 3, 3, 3, 5, 5};
  const int expected[] = {1, 1, 1, 4, 4};
  for (int row = 0; row < 5; ++row)
    EXPECT_EQ(k::ImageOfRow(offsets, 6, row), expected[row]) << row;
}

// ---- the emulator catches broken kernels -------------------------------------

TEST(EmulatorCatches, DivergentBarrier) {
  try {
    simt::Launch(1, 64, 0, [](const simt::EmuCtx& ctx, void*) {
      if (ctx.thread_idx() < 32) ctx.sync();
    });
    FAIL() << "a barrier reached by half the block was not reported";
  } catch (const simt::EmulationError& e) {
    EXPECT_NE(std::string(e.what()).find("divergent barrier"), std::string::npos)
        << e.what();
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
    EXPECT_NE(std::string(e.what()).find("divergent barrier"), std::string::npos)
        << e.what();
  }
}

TEST(EmulatorCatches, DivergentShuffle) {
  try {
    simt::Launch(1, 32, 0, [](const simt::EmuCtx& ctx, void*) {
      if (ctx.thread_idx() < 16) (void)ctx.shfl_down(1.0f, 1);
    });
    FAIL() << "a shuffle by half a warp was not reported";
  } catch (const simt::EmulationError& e) {
    EXPECT_NE(std::string(e.what()).find("divergent shuffle"), std::string::npos)
        << e.what();
  }
}

TEST(EmulatorCatches, PartialWarpBlock) {
  EXPECT_THROW(simt::Launch(1, 48, 0, [](const simt::EmuCtx&, void*) {}),
               simt::EmulationError);
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
// read removed: a data race on shared memory.
[[maybe_unused]] void RacyBlockSum() {
  double total = 0;
  simt::Launch(1, 64, k::kReduceSharedBytes, [&](const simt::EmuCtx& ctx, void* p) {
    double* smem = static_cast<double*>(p);
    const double v = k::WarpSum(ctx, 1.0);
    if (ctx.thread_idx() % 32 == 0) smem[ctx.thread_idx() / 32] = v;
    // missing: ctx.sync();
    if (ctx.thread_idx() == 0) total = smem[0] + smem[1];
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
