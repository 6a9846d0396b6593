// VLAD encoder benchmark: times the CPU encoder's stages on
// synthetic descriptors and compares its aggregation (everything after the
// assignment: sort/segment, reduce, normalise) on one thread with
//   * VLFeat's vl_vlad_encode given the same assignments (as the one-hot
//     numData x K matrix it expects, built outside the timed region),
//   * a straightforward scalar implementation (scatter residuals into the
//     output in float, then normalise),
//   * the machine's memory-bandwidth bound: bytes the aggregation must read
//     (descriptors + labels) divided by the measured copy bandwidth.
// Targets: aggregation >= 2x faster than vl_vlad, within 3x of the bound.
// Not a ctest test (timings on shared machines are not pass/fail material).
//
// Usage: vlad_bench [--descriptors N] [--images T] [--dim D] [--clusters 64,256]
//                   [--repeats R]
// The assignment stage uses OpenBLAS with OPENBLAS_NUM_THREADS threads;
// everything else runs on one thread.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" {
#include <vl/generic.h>
#include <vl/vlad.h>
}

#include "indexer/codebook.h"
#include "indexer/vlad.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Best of `repeats` runs of fn (after its setup, which is not timed).
double BestOf(int repeats, const std::function<void()>& fn) {
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    fn();
    best = std::min(best, Seconds(t0, Clock::now()));
  }
  return best;
}

// memcpy bandwidth of a buffer far larger than the caches, bytes copied per
// second (each byte read once and written once).
double CopyBandwidth() {
  const size_t bytes = size_t{256} << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  const double t = BestOf(5, [&] {
    std::memcpy(b.data(), a.data(), bytes);
    a[0] = b[bytes / 2];  // keep both buffers live
  });
  return bytes / t;
}

struct Args {
  int64_t num_descriptors = 1000000;
  int64_t num_images = 1000;
  int dim = 128;
  std::vector<int> clusters = {64, 256};
  int repeats = 3;
};

Args Parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "vlad_bench: %s needs a value\n", flag.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (flag == "--descriptors")
      args.num_descriptors = std::stoll(value());
    else if (flag == "--images")
      args.num_images = std::stoll(value());
    else if (flag == "--dim")
      args.dim = std::stoi(value());
    else if (flag == "--repeats")
      args.repeats = std::stoi(value());
    else if (flag == "--clusters") {
      args.clusters.clear();
      std::stringstream ss(value());
      for (std::string k; std::getline(ss, k, ',');) args.clusters.push_back(std::stoi(k));
    } else {
      std::fprintf(stderr,
                   "usage: vlad_bench [--descriptors N] [--images T] [--dim D] "
                   "[--clusters 64,256] [--repeats R]\n");
      std::exit(flag == "--help" ? 0 : 2);
    }
  }
  if (args.num_descriptors < 1 || args.num_images < 1 || args.dim < 1 || args.clusters.empty() ||
      args.repeats < 1) {
    std::fprintf(stderr, "vlad_bench: sizes must be positive\n");
    std::exit(2);
  }
  return args;
}

// The straightforward implementation: scatter each residual into its
// image's cluster block in float, then power / intra / L2 in float.
void ScalarVlad(const float* x, const int32_t* labels, const int64_t* image_offsets,
                int64_t num_images, const float* centroids, int K, int d, float* vlad) {
  const int64_t vd = int64_t{K} * d;
  std::fill(vlad, vlad + num_images * vd, 0.0f);
  for (int64_t img = 0; img < num_images; ++img) {
    float* v = vlad + img * vd;
    for (int64_t i = image_offsets[img]; i < image_offsets[img + 1]; ++i) {
      const float* c = centroids + int64_t{labels[i]} * d;
      float* out = v + int64_t{labels[i]} * d;
      for (int j = 0; j < d; ++j) out[j] += x[i * d + j] - c[j];
    }
    for (int64_t e = 0; e < vd; ++e) v[e] = v[e] < 0 ? -std::sqrt(-v[e]) : std::sqrt(v[e]);
    for (int k = 0; k < K; ++k) {
      float s = 0;
      for (int j = 0; j < d; ++j) s += v[k * d + j] * v[k * d + j];
      const float inv = s > 0 ? 1.0f / std::sqrt(s) : 0.0f;
      for (int j = 0; j < d; ++j) v[k * d + j] *= inv;
    }
    float s = 0;
    for (int64_t e = 0; e < vd; ++e) s += v[e] * v[e];
    const float inv = s > 0 ? 1.0f / std::sqrt(s) : 0.0f;
    for (int64_t e = 0; e < vd; ++e) v[e] *= inv;
  }
}

// Worst relative error of unnormalised residual sums against a long-double
// reference, relative to the largest |component| of the segment's sum of |x|.
double WorstSumError(const std::vector<float>& sums, const float* x, const int32_t* labels,
                     const std::vector<int64_t>& offs, int64_t num_images, const float* c, int K,
                     int d) {
  std::vector<long double> ref(int64_t{K} * d), mag(int64_t{K} * d);
  double worst = 0;
  for (int64_t img = 0; img < num_images; ++img) {
    std::fill(ref.begin(), ref.end(), 0.0L);
    std::fill(mag.begin(), mag.end(), 0.0L);
    for (int64_t i = offs[img]; i < offs[img + 1]; ++i)
      for (int j = 0; j < d; ++j) {
        const long double r = (long double)x[i * d + j] - c[int64_t{labels[i]} * d + j];
        ref[int64_t{labels[i]} * d + j] += r;
        mag[int64_t{labels[i]} * d + j] += std::fabs(r);
      }
    for (int64_t e = 0; e < int64_t{K} * d; ++e) {
      if (mag[e] == 0) continue;
      const double err = std::fabs((double)(sums[img * K * d + e] - ref[e])) / (double)mag[e];
      worst = std::max(worst, err);
    }
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  const int64_t n = args.num_descriptors, T = args.num_images;
  const int d = args.dim;
  vl_set_num_threads(1);
  omp_set_num_threads(1);

  std::printf("VLAD CPU benchmark: %lld descriptors, d = %d, %lld images, best of %d\n",
              (long long)n, d, (long long)T, args.repeats);
  const double copy_bw = CopyBandwidth();
  std::printf("memcpy bandwidth: %.2f GB/s (bytes copied per second, 256 MiB buffers)\n\n",
              copy_bw / 1e9);

  // Descriptors like RootSIFT components: non-negative, in [0, 0.5).
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.0f, 0.5f);
  std::vector<float> x(n * d);
  for (float& v : x) v = u(rng);
  std::vector<int64_t> offs(T + 1);
  for (int64_t i = 0; i <= T; ++i) offs[i] = i * n / T;

  std::printf("%-4s %-34s %10s %12s %8s\n", "K", "stage (one thread unless noted)", "time [s]",
              "ns/desc", "GB/s");
  auto row = [&](int K, const char* stage, double t, double bytes) {
    std::printf("%-4d %-34s %10.4f %12.1f %8.2f\n", K, stage, t, t * 1e9 / n,
                bytes > 0 ? bytes / t / 1e9 : 0.0);
  };
  bool all_met = true;
  for (const int K : args.clusters) {
    std::vector<float> cent(int64_t{K} * d);
    for (int k = 0; k < K; ++k)  // centroids: K descriptors spread over the data
      std::copy_n(x.data() + (int64_t{k} * n / K) * d, d, cent.data() + int64_t{k} * d);
    const lookalike::Codebook codebook(K, d, cent);
    // Signed square root + intra + L2: the heaviest normalisation we offer
    // (the default skips the root), and the one VLFeat's flags below ask for.
    lookalike::VladOptions options;
    options.power_alpha = 0.5f;
    const int64_t vd = int64_t{K} * d;
    std::vector<int32_t> labels(n);
    std::vector<int64_t> order, segment_offsets;
    std::vector<float> vlad(T * vd), sums;

    const double t_assign = BestOf(1, [&] { codebook.Assign(x.data(), n, labels.data()); });
    const double t_sort = BestOf(args.repeats, [&] {
      lookalike::SortBySegment(labels.data(), offs.data(), T, K, &order, &segment_offsets);
    });
    const double t_reduce = BestOf(args.repeats, [&] {
      lookalike::ReduceSegments(x.data(), d, order.data(), segment_offsets, T, codebook, false,
                                vlad.data());
    });
    sums = vlad;
    std::vector<float> normalized;
    // NormalizeVlad works in place: time copy + normalise, minus the copy.
    const double t_copy = BestOf(args.repeats, [&] { normalized = sums; });
    const double t_norm_total = BestOf(args.repeats, [&] {
      normalized = sums;
      lookalike::NormalizeVlad(normalized.data(), T, K, d, options);
    });
    const double t_normalize = std::max(0.0, t_norm_total - t_copy);
    const double t_aggregate = t_sort + t_reduce + t_normalize;

    // VLFeat, per image, given the one-hot assignment matrix it expects.
    std::vector<float> vl_out(T * vd), onehot;
    double t_vl = 1e300;
    for (int r = 0; r < args.repeats; ++r) {
      double t = 0;
      for (int64_t img = 0; img < T; ++img) {
        const int64_t m = offs[img + 1] - offs[img];
        onehot.assign(m * K, 0.0f);
        for (int64_t i = 0; i < m; ++i) onehot[i * K + labels[offs[img] + i]] = 1.0f;
        const auto t0 = Clock::now();
        vl_vlad_encode(vl_out.data() + img * vd, VL_TYPE_FLOAT, cent.data(), d, K,
                       x.data() + offs[img] * d, m, onehot.data(),
                       VL_VLAD_FLAG_SQUARE_ROOT | VL_VLAD_FLAG_NORMALIZE_COMPONENTS);
        t += Seconds(t0, Clock::now());
      }
      t_vl = std::min(t_vl, t);
    }
    std::vector<float> scalar_out(T * vd);
    const double t_scalar = BestOf(args.repeats, [&] {
      ScalarVlad(x.data(), labels.data(), offs.data(), T, cent.data(), K, d, scalar_out.data());
    });

    // Accuracy of the residual sums (unnormalised) against long double.
    std::vector<float> scalar_sums(T * vd, 0.0f);
    for (int64_t img = 0; img < T; ++img)
      for (int64_t i = offs[img]; i < offs[img + 1]; ++i)
        for (int j = 0; j < d; ++j)
          scalar_sums[img * vd + int64_t{labels[i]} * d + j] +=
              x[i * d + j] - cent[int64_t{labels[i]} * d + j];
    const double err_ours =
        WorstSumError(sums, x.data(), labels.data(), offs, T, cent.data(), K, d);
    const double err_scalar =
        WorstSumError(scalar_sums, x.data(), labels.data(), offs, T, cent.data(), K, d);
    double max_vs_vl = 0;
    for (size_t e = 0; e < normalized.size(); ++e)
      max_vs_vl = std::max(max_vs_vl, (double)std::fabs(normalized[e] - vl_out[e]));

    const double desc_bytes = double(n) * d * sizeof(float);
    const double read_bytes = desc_bytes + double(n) * sizeof(int32_t);
    const double bound = read_bytes / copy_bw;
    row(K, "assignment (BLAS sgemm + argmin)", t_assign, 0);
    row(K, "sort/segment (counting sort)", t_sort, n * 4.0);
    row(K, "reduce (double accumulation)", t_reduce, desc_bytes);
    row(K, "normalise (power, intra, L2)", t_normalize, double(T) * vd * 4);
    row(K, "= aggregation (sort+reduce+norm)", t_aggregate, read_bytes);
    row(K, "vl_vlad_encode (VLFeat, 1 thread)", t_vl, desc_bytes);
    row(K, "scalar scatter (float)", t_scalar, desc_bytes);
    row(K, "bandwidth bound (bytes read/copy)", bound, read_bytes);
    const double vs_vl = t_vl / t_aggregate, vs_bound = t_aggregate / bound;
    const bool met = vs_vl >= 2.0 && vs_bound <= 3.0;
    all_met = all_met && met;
    std::printf(
        "K=%d: aggregation is %.2fx faster than vl_vlad (target >= 2), "
        "%.2fx the bandwidth bound (target <= 3), %.2fx faster than scalar: %s\n",
        K, vs_vl, vs_bound, t_scalar / t_aggregate, met ? "MET" : "MISSED");
    std::printf(
        "K=%d: bytes read %.1f MB; residual-sum error vs long double: ours %.2e, "
        "scalar float %.2e (relative to sum |r|); max |ours - vl_vlad| after "
        "normalisation %.2e\n\n",
        K, read_bytes / 1e6, err_ours, err_scalar, max_vs_vl);
  }
  std::printf("targets %s\n", all_met ? "met" : "MISSED");
  return 0;
}
