// Backend selection without a GPU: `auto` resolves to the CPU, an explicit
// `cuda` is an error that says why (the CLI maps it to exit code 2), never
// a silent fallback. On a machine with a usable device the expectations flip.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "cuda/cuda_vlad.h"
#include "indexer/vlad.h"

namespace lookalike {
namespace {

TEST(BackendTest, ProbeReportsHowCudaWasBuilt) {
  const BackendReport report = ProbeBackends();
#if defined(LOOKALIKE_WITH_CUDA)
  EXPECT_TRUE(report.cuda_compiled);
#else
  EXPECT_FALSE(report.cuda_compiled);
  EXPECT_FALSE(report.cuda_usable);
#endif
  EXPECT_FALSE(report.detail.empty());
}

TEST(BackendTest, AutoPicksTheCpuWithoutADevice) {
  const Backend expected = ProbeBackends().cuda_usable ? Backend::kCuda : Backend::kCpu;
  EXPECT_EQ(ResolveBackend(Backend::kAuto), expected);
  EXPECT_EQ(ResolveBackend(Backend::kCpu), Backend::kCpu);
}

TEST(BackendTest, ExplicitCudaWithoutADeviceIsAClearError) {
  if (ProbeBackends().cuda_usable) GTEST_SKIP() << "a CUDA device is usable here";
  try {
    ResolveBackend(Backend::kCuda);
    FAIL() << "ResolveBackend(kCuda) fell back silently";
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("--backend cuda"), std::string::npos) << message;
    EXPECT_NE(message.find(ProbeBackends().detail), std::string::npos) << message;
    EXPECT_NE(message.find("--backend cpu"), std::string::npos) << message;
  }
  const Codebook codebook(2, 3, {0, 0, 0, 1, 1, 1});
  EXPECT_THROW(CreateVladEncoder(Backend::kCuda, codebook, VladOptions{}), std::runtime_error);
  // The CPU encoder is what auto gives here.
  EXPECT_EQ(CreateVladEncoder(Backend::kAuto, codebook, VladOptions{})->backend(), Backend::kCpu);
}

TEST(BackendTest, DeviceEncoderConstructorThrowsWithoutADevice) {
  if (ProbeBackends().cuda_usable) GTEST_SKIP() << "a CUDA device is usable here";
  const float centroids[6] = {0, 0, 0, 1, 1, 1};
  cuda::CudaVladConfig config;
  config.num_clusters = 2;
  config.dim = 3;
  config.centroids = centroids;
  EXPECT_THROW(cuda::CudaVladEncoder encoder(config), std::runtime_error);
}

TEST(BackendTest, ParseBackendNamesTheBadValue) {
  EXPECT_EQ(ParseBackend("cuda"), Backend::kCuda);
  try {
    ParseBackend("gpu");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gpu"), std::string::npos);
  }
}

}  // namespace
}  // namespace lookalike
