// The candidate stage of `lookalike dedup` alone, at sizes no real database
// here reaches: every vector queries the index for its k nearest neighbours,
// in batches of 256 searched in parallel, as search/dedup.cc does. Measures
// the wall and CPU time of the all-neighbours search per index kind and
// nprobe, the index's bytes per image, and how many of exact search's
// neighbour pairs and of the planted copy pairs each setting finds.
//
// Vectors: with --real FILE.fvecs (bench/dump_search_vectors of a database
// with a PCA, so 112-d whitened search vectors), a diagonal Gaussian fitted to
// them (per-dimension mean and spread), each draw L2-normalised; else a
// standard Gaussian. --group-size G makes groups of one original and G-1
// copies, a copy = normalise(v + s z) with z of the same spread and s chosen
// so that cos(copy, original) is uniform in [--min-copy-cos, --max-copy-cos]
// (defaults 0.32 and 0.89: p10 and p90 of real augmented copies, bench/README.md
// "Realistic vectors"). A rough model: real collections have
// clustered look-alikes the diagonal fit does not reproduce, so recall here is
// an optimistic bound and the timings are the point.
//
// usage: dedup_candidates [--n 100000] [--real FILE.fvecs] [--group-size 4]
//                         [--k 5] [--nlist 0] [--nprobe 4,8,16,32,0]
//                         [--threads 0] [--seed 1234]
//   --nprobe 0 = AutoNprobe (what the persisted index stores); --nlist 0 =
//   AutoNlist(n). --n 0 with --real: the real vectors themselves (zero rows
//   dropped; no planted copies, so the copy column is blank). Not a ctest test (timings on shared
//   machines are not pass/fail material).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "search/vector_index.h"
#include "util/threads.h"

namespace lookalike {
namespace {

struct Args {
  int64_t n = 100000;
  std::string real;
  int group_size = 4;
  int k = 5;
  int64_t nlist = 0;
  std::vector<int64_t> nprobes = {4, 8, 16, 32, 0};
  int threads = 0;
  uint64_t seed = 1234;
  float min_copy_cos = 0.32f, max_copy_cos = 0.89f;
};

std::vector<int64_t> ParseList(const char* s) {
  std::vector<int64_t> out;
  for (const char* p = s; *p;) {
    out.push_back(std::strtoll(p, nullptr, 10));
    p = std::strchr(p, ',');
    if (!p) break;
    ++p;
  }
  return out;
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) throw std::invalid_argument(f + " needs a value");
      return argv[++i];
    };
    if (f == "--n")
      a.n = std::atoll(next());
    else if (f == "--real")
      a.real = next();
    else if (f == "--group-size")
      a.group_size = std::atoi(next());
    else if (f == "--k")
      a.k = std::atoi(next());
    else if (f == "--nlist")
      a.nlist = std::atoll(next());
    else if (f == "--nprobe")
      a.nprobes = ParseList(next());
    else if (f == "--threads")
      a.threads = std::atoi(next());
    else if (f == "--seed")
      a.seed = std::strtoull(next(), nullptr, 10);
    else if (f == "--min-copy-cos")
      a.min_copy_cos = std::strtof(next(), nullptr);
    else if (f == "--max-copy-cos")
      a.max_copy_cos = std::strtof(next(), nullptr);
    else
      throw std::invalid_argument("unknown flag " + f +
                                  "; see the comment at the top of "
                                  "bench/dedup_candidates.cc");
  }
  if ((a.n < 2 && !(a.n == 0 && !a.real.empty())) || a.group_size < 1 || a.k < 1 || a.threads < 0 ||
      !(a.min_copy_cos > 0 && a.min_copy_cos <= a.max_copy_cos && a.max_copy_cos < 1))
    throw std::invalid_argument(
        "need --n >= 2 (or 0 with --real), --group-size >= 1, --k >= 1, --threads >= 0, "
        "0 < --min-copy-cos <= --max-copy-cos < 1");
  return a;
}

// .fvecs: per vector an int32 dimension then that many float32.
std::vector<float> ReadFvecs(const std::string& path, int64_t* dim) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path + "; write it with dump_search_vectors");
  std::vector<float> out;
  int32_t d = 0;
  while (in.read(reinterpret_cast<char*>(&d), 4)) {
    if (d <= 0 || (*dim && d != *dim)) throw std::runtime_error(path + ": not an .fvecs file");
    *dim = d;
    std::vector<float> v(d);
    if (!in.read(reinterpret_cast<char*>(v.data()), 4 * d))
      throw std::runtime_error(path + ": truncated");
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

void Normalise(float* v, int64_t dim) {
  double s = 0;
  for (int64_t j = 0; j < dim; ++j) s += double{v[j]} * v[j];
  const float inv = s > 0 ? static_cast<float>(1 / std::sqrt(s)) : 0;
  for (int64_t j = 0; j < dim; ++j) v[j] *= inv;
}

// The vectors (n x dim, rows normalised) and each one's group (original's row).
void Generate(const Args& a, int64_t* dim, std::vector<float>* x, std::vector<int64_t>* group) {
  std::vector<float> mean, spread;
  if (!a.real.empty()) {
    int64_t d = 0;
    const std::vector<float> real = ReadFvecs(a.real, &d);
    const int64_t m = static_cast<int64_t>(real.size()) / d;
    mean.assign(d, 0);
    spread.assign(d, 0);
    int64_t used = 0;
    for (int64_t i = 0; i < m; ++i) {
      double norm = 0;
      for (int64_t j = 0; j < d; ++j) norm += double{real[i * d + j]} * real[i * d + j];
      if (norm == 0) continue;  // images without features
      ++used;
      for (int64_t j = 0; j < d; ++j) mean[j] += real[i * d + j];
    }
    for (float& v : mean) v /= static_cast<float>(used);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < d; ++j) {
        const float c = real[i * d + j] - mean[j];
        spread[j] += c * c;
      }
    for (float& v : spread) v = std::sqrt(v / static_cast<float>(used));
    *dim = d;
    if (a.n == 0) {  // the real vectors as they are
      x->clear();
      group->clear();
      for (int64_t i = 0; i < m; ++i) {
        bool zero = true;
        for (int64_t j = 0; j < d; ++j) zero = zero && real[i * d + j] == 0;
        if (zero) continue;
        group->push_back(static_cast<int64_t>(group->size()));
        x->insert(x->end(), real.begin() + i * d, real.begin() + (i + 1) * d);
      }
      std::printf("the %lld real vectors of %lld dimensions (%s)\n",
                  static_cast<long long>(group->size()), static_cast<long long>(d), a.real.c_str());
      return;
    }
    std::printf("fitted to %lld real vectors of %lld dimensions (%s)\n",
                static_cast<long long>(used), static_cast<long long>(d), a.real.c_str());
  } else {
    *dim = 112;
    mean.assign(*dim, 0);
    spread.assign(*dim, 1);
  }
  const int64_t d = *dim;
  double spread2 = 0;
  for (float s : spread) spread2 += double{s} * s;
  std::mt19937_64 rng(a.seed);
  std::normal_distribution<float> z;
  std::uniform_real_distribution<float> cosine(a.min_copy_cos, a.max_copy_cos);
  x->assign(static_cast<size_t>(a.n * d), 0);
  group->assign(a.n, 0);
  for (int64_t i = 0; i < a.n; ++i) {
    float* v = x->data() + i * d;
    if (i % a.group_size == 0) {
      for (int64_t j = 0; j < d; ++j) v[j] = mean[j] + spread[j] * z(rng);
      (*group)[i] = i;
    } else {
      const int64_t o = i - i % a.group_size;
      const float c = cosine(rng);
      // |noise| ~ sqrt(spread2): cos(v, v + s noise) ~ 1 / sqrt(1 + s^2 spread2).
      const float s = static_cast<float>(std::sqrt((1.0 / (c * c) - 1.0) / spread2));
      for (int64_t j = 0; j < d; ++j) v[j] = (*x)[o * d + j] + s * spread[j] * z(rng);
      (*group)[i] = o;
    }
    Normalise(v, d);
  }
}

double CpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

// Every vector's k nearest other vectors (ids), as dedup searches them.
std::vector<std::vector<int64_t>> AllNeighbours(const VectorIndex& index, const float* x, int64_t n,
                                                int64_t dim, int k, int threads) {
  constexpr int64_t kBatch = 256;
  const int64_t kk = std::min<int64_t>(k + 1, n);
  std::vector<std::vector<int64_t>> out(n);
  const int64_t num_batches = (n + kBatch - 1) / kBatch;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t b = 0; b < num_batches; ++b) {
    const int64_t q0 = b * kBatch, nq = std::min(kBatch, n - q0);
    std::vector<float> scores(nq * kk);
    std::vector<int64_t> ids(nq * kk);
    index.Search(x + q0 * dim, nq, kk, scores.data(), ids.data());
    for (int64_t q = 0; q < nq; ++q)
      for (int64_t j = 0; j < kk && static_cast<int>(out[q0 + q].size()) < k; ++j)
        if (ids[q * kk + j] >= 0 && ids[q * kk + j] != q0 + q)
          out[q0 + q].push_back(ids[q * kk + j]);
  }
  return out;
}

std::set<std::pair<int64_t, int64_t>> Pairs(const std::vector<std::vector<int64_t>>& lists) {
  std::set<std::pair<int64_t, int64_t>> pairs;
  for (int64_t i = 0; i < static_cast<int64_t>(lists.size()); ++i)
    for (int64_t j : lists[i]) pairs.insert({std::min(i, j), std::max(i, j)});
  return pairs;
}

// Share of the planted copy pairs (copy, original) among the candidates, as
// text; "-" without planted copies.
std::string CopyRecall(const std::set<std::pair<int64_t, int64_t>>& pairs,
                       const std::vector<int64_t>& group) {
  int64_t copies = 0, found = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(group.size()); ++i) {
    if (group[i] == i) continue;
    ++copies;
    found += pairs.count({group[i], i});
  }
  if (copies == 0) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", static_cast<double>(found) / copies);
  return text;
}

int Run(const Args& a) {
  const int threads = ResolveThreads(a.threads);
  SetLibraryThreads(threads);
  int64_t dim = 0;
  std::vector<float> x;
  std::vector<int64_t> group;
  Generate(a, &dim, &x, &group);
  const int64_t n = static_cast<int64_t>(group.size());
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = i;
  const std::string groups =
      a.n == 0 ? "the real vectors" : "groups of " + std::to_string(a.group_size);
  std::printf("%lld vectors of %lld dimensions, %s; k %d; %d threads\n", static_cast<long long>(n),
              static_cast<long long>(dim), groups.c_str(), a.k, threads);
  std::printf("%-44s %9s %9s %9s %12s %12s\n", "index", "build s", "wall s", "CPU s", "exact pairs",
              "copy pairs");
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };

  VectorIndexOptions flat_options;
  flat_options.kind = VectorIndexKind::kFlat;
  auto t = Clock::now();
  auto flat = VectorIndex::Build(dim, flat_options, ids.data(), x.data(), n);
  const double flat_build = seconds(t);
  t = Clock::now();
  double cpu = CpuSeconds();
  const auto exact = Pairs(AllNeighbours(*flat, x.data(), n, dim, a.k, threads));
  std::printf("%-44s %9.1f %9.1f %9.1f %12s %12s\n",
              ("flat, " + std::to_string(flat->MemoryBytes() / n) + " B/img").c_str(), flat_build,
              seconds(t), CpuSeconds() - cpu, "1", CopyRecall(exact, group).c_str());
  std::fflush(stdout);
  flat.reset();

  VectorIndexOptions ivf_options;
  ivf_options.kind = VectorIndexKind::kIvfSq;
  ivf_options.nlist = a.nlist;
  ivf_options.Validate();  // VectorIndex::Build trusts its options
  t = Clock::now();
  auto ivf = VectorIndex::Build(dim, ivf_options, ids.data(), x.data(), n);
  const double ivf_build = seconds(t);
  for (int64_t nprobe : a.nprobes) {
    ivf->set_nprobe(nprobe > 0 ? std::min(nprobe, ivf->nlist()) : AutoNprobe(n, ivf->nlist()));
    t = Clock::now();
    cpu = CpuSeconds();
    const auto found = Pairs(AllNeighbours(*ivf, x.data(), n, dim, a.k, threads));
    const double wall = seconds(t), used = CpuSeconds() - cpu;
    int64_t common = 0;
    for (const auto& p : exact) common += found.count(p);
    char recall[32];
    std::snprintf(recall, sizeof recall, "%.3f", static_cast<double>(common) / exact.size());
    std::printf(
        "%-44s %9.1f %9.1f %9.1f %12s %12s\n",
        ("ivfsq nlist " + std::to_string(ivf->nlist()) + " nprobe " +
         std::to_string(ivf->nprobe()) + ", " + std::to_string(ivf->MemoryBytes() / n) + " B/img")
            .c_str(),
        ivf_build, wall, used, recall, CopyRecall(found, group).c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace lookalike

int main(int argc, char** argv) {
  try {
    return lookalike::Run(lookalike::Parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dedup_candidates: %s\n", e.what());
    return 2;
  }
}
