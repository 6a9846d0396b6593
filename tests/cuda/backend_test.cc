// Backend selection without a GPU: `auto` resolves to the CPU, an explicit
// `cuda` is an error that says why (the CLI maps it to exit code 2), never
// a silent fallback. On a machine with a usable device the expectations flip.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "cuda/cuda_vlad.h"
#include "cuda/cuda_vlad_module.h"
#include "indexer/vlad.h"
#include "util/module.h"

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

std::string MappedFiles() {
  std::ifstream maps("/proc/self/maps");
  std::ostringstream text;
  text << maps.rdbuf();
  return text.str();
}

// Probing and resolving `auto` ask the driver only: without a usable device
// (and so on every machine without one) the CUDA runtime and cuBLAS are
// never mapped. Checked in a fresh process (a death test re-executing this
// binary), since another test here loads the module.
TEST(BackendTest, ProbingMapsNeitherTheRuntimeNorCublas) {
  if (ProbeBackends().cuda_usable) GTEST_SKIP() << "a CUDA device is usable here";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const Codebook codebook(2, 3, {0, 0, 0, 1, 1, 1});
        ProbeBackends();
        ResolveBackend(Backend::kAuto);
        CreateVladEncoder(Backend::kAuto, codebook, VladOptions{});
        const std::string maps = MappedFiles();
        for (const std::string library : {"libcudart", "libcublas", cuda::kCudaVladModuleFile})
          if (maps.find(library) != std::string::npos) {
            std::fprintf(stderr, "mapped %s:\n%s", library.c_str(), maps.c_str());
            std::exit(1);
          }
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

#if defined(LOOKALIKE_WITH_CUDA)
// The encoder module itself: found in the build tree, speaks this build's
// interface, and its runtime probe answers (without a device: why not).
TEST(BackendTest, EncoderModuleLoadsAndProbesTheRuntime) {
  const LoadedModule module =
      LoadModule(cuda::kCudaVladModuleFile, cuda::kCudaVladModuleEntry, cuda::kCudaVladAbi);
  ASSERT_NE(module.api, nullptr) << module.error;
  const auto& api = *static_cast<const cuda::CudaVladModuleApi*>(module.api);
  const cuda::DeviceProbe runtime = api.probe_runtime();
  EXPECT_TRUE(runtime.compiled);
  EXPECT_FALSE(runtime.detail.empty());
  if (!ProbeBackends().cuda_usable) {
    EXPECT_FALSE(runtime.usable) << runtime.detail;
    EXPECT_NE(runtime.detail.find("cudaGetDeviceCount"), std::string::npos) << runtime.detail;
  }
  EXPECT_NE(MappedFiles().find("libcudart"), std::string::npos);

  const LoadedModule other =
      LoadModule(cuda::kCudaVladModuleFile, cuda::kCudaVladModuleEntry, cuda::kCudaVladAbi + 1);
  EXPECT_EQ(other.api, nullptr);
  EXPECT_NE(other.error.find("another version"), std::string::npos) << other.error;
}
#endif

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
