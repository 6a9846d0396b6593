// The real device path against the CPU oracle on the awkward cases. Exits
// with 77 (ctest: "Skipped") when no CUDA device is usable, so it shows as
// skipped here and runs wherever a GPU exists. This covers what the emulator
// tests cannot: cuBLAS, the CUB sort, launch configuration, streams and the
// batch splitting / two-slot pipeline.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "cuda/cuda_vlad.h"
#include "indexer/vlad.h"
#include "vlad_cases.h"

namespace lookalike {
namespace {

using testing_cases::VladCase;

class GpuVladTest : public ::testing::TestWithParam<std::tuple<VladCase, int, bool>> {};

TEST_P(GpuVladTest, MatchesTheCpuOracle) {
  const VladCase& vc = std::get<0>(GetParam());
  const VladOptions options = testing_cases::OptionVariants()[std::get<1>(GetParam())];
  const bool tiny_batches = std::get<2>(GetParam());
  const testing_cases::VladInput in = testing_cases::MakeInput(vc);
  const int64_t num_images = in.num_images();
  const int64_t vlad_dim = int64_t{vc.num_clusters} * vc.dim;

  auto cpu = CreateVladEncoder(Backend::kCpu, in.codebook, options);
  std::vector<float> want(num_images * vlad_dim);
  cpu->Encode(in.descriptors.data(), in.image_offsets.data(), num_images, want.data());

  cuda::CudaVladConfig config;
  config.num_clusters = vc.num_clusters;
  config.dim = vc.dim;
  config.centroids = in.codebook.centroids().data();
  config.power_alpha = options.power_alpha;
  config.intra_normalize = options.intra_normalize;
  config.residual_normalize = options.residual_normalize;
  if (tiny_batches) {  // many sub-batches: exercises splitting and both slots
    config.max_batch_descriptors = 64;
    config.max_batch_images = 2;
    config.gemm_chunk_rows = 17;
  }
  cuda::CudaVladEncoder gpu(config);
  std::vector<float> got(want.size(), std::nanf(""));
  for (int repeat = 0; repeat < 2; ++repeat) {  // buffers are reused
    gpu.Encode(in.descriptors.data(), in.image_offsets.data(), num_images, got.data());
    const double tol = testing_cases::Tolerance(vc.dim);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i])))
          << "component " << i << ", repeat " << repeat;
  }
}

INSTANTIATE_TEST_SUITE_P(AwkwardCases, GpuVladTest,
                         ::testing::Combine(::testing::ValuesIn(testing_cases::AwkwardCases()),
                                            ::testing::Range(0, 3), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<GpuVladTest::ParamType>& info) {
                           return std::get<0>(info.param).name + "_options" +
                                  std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_tiny_batches" : "");
                         });

// Through the indexer's adapter (CreateVladEncoder): a batch mixing ordinary
// images with one larger than the device buffers (2^18 rows) must match the
// oracle; the large image is routed to the CPU encoder, the rest to the GPU.
TEST(GpuVladAdapterTest, OversizeImageInABatchMatchesTheOracle) {
  const int k = 8, dim = 128;
  std::vector<float> centroids(k * dim);
  for (size_t i = 0; i < centroids.size(); ++i) centroids[i] = std::sin(0.37 * i) * 0.5f + 0.5f;
  const Codebook codebook(k, dim, centroids);
  const std::vector<int64_t> counts = {100, (1 << 18) + 5, 0, 333};
  std::vector<int64_t> offsets = {0};
  for (int64_t c : counts) offsets.push_back(offsets.back() + c);
  std::vector<float> x(offsets.back() * dim);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::fmod(0.6180339f * i, 1.0f);
  const VladOptions options;
  const int64_t n = static_cast<int64_t>(counts.size()), vd = int64_t{k} * dim;
  std::vector<float> want(n * vd), got(n * vd, std::nanf(""));
  CreateVladEncoder(Backend::kCpu, codebook, options)
      ->Encode(x.data(), offsets.data(), n, want.data());
  auto gpu = CreateVladEncoder(Backend::kCuda, codebook, options);
  ASSERT_EQ(gpu->backend(), Backend::kCuda);
  gpu->Encode(x.data(), offsets.data(), n, got.data());
  const double tol = testing_cases::Tolerance(dim);
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i]))) << "component " << i;
}

}  // namespace
}  // namespace lookalike

int main(int argc, char** argv) {
  const lookalike::cuda::DeviceProbe probe = lookalike::cuda::ProbeDevice();
  if (!probe.usable) {
    std::printf("SKIP: %s\n", probe.detail.c_str());
    return 77;
  }
  std::printf("CUDA device: %s\n", probe.detail.c_str());
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
