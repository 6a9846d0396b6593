// Search-at-scale benchmark: fills N (default 1,000,000) synthetic
// search vectors and measures every VectorIndex kind lookalike offers on them:
// build (training + adding) time, bytes per image in the index's RAM (codes,
// ids, lists and quantisers, from VectorIndex::MemoryBytes, and the resident
// growth and build peak measured by the kernel), batch-1 query latency
// p50/p99 on one thread and with two client threads querying concurrently,
// recall@10 against exact search on the same vectors, and the ratios against
// the exact (flat) index measured in the same run. For the approximate kinds
// it also sweeps nprobe, so the default can be read off the table.
// Targets at 1M: p50 < 2 ms, recall@10 >= 0.95, <= 128 bytes/image.
//
// Data (--data):
//   mixture (the first generator, kept for comparison): a seeded Gaussian
//     mixture shaped like PCA-reduced VLAD vectors: `clusters` centres,
//     per-dimension scale decaying as (j+1)^-decay, each vector =
//     scale * (centre + spread * z), L2-normalised. Queries are database
//     vectors perturbed by noise of the same spectrum (`query_noise`),
//     renormalised: like a re-encoded copy of an image.
//   real-spectrum: fitted to real search vectors (--real FILE.fvecs, written by
//     bench/dump_search_vectors from a database built with `lookalike index`):
//     their mean and covariance (eigen-decomposed with LAPACK dsyev), each
//     vector = normalise(mean + sum_j sqrt(lambda_j) z_j e_j). With
//     --real-groups FILE (one group label per real vector: an original and its
//     augmented copies share one), the copies' differences to their original
//     are fitted the same way (mean and covariance of copy - original), and a
//     query is normalise(v + difference drawn from that fit) for a random
//     database vector v: a new copy of an indexed image, as far from it as the
//     real copies are from theirs; without groups, v + query_noise-scaled noise
//     of the data's spectrum. --group-size G > 1 makes the database itself
//     groups of G (one drawn vector and G-1 copies of it, drawn like queries),
//     the real set's structure (an original and its copies); 1 (default) is a
//     collection of distinct photos. It prints the eigen-spectrum and the
//     nearest-neighbour similarities of the real vectors and of as many
//     synthetic ones, so the fit can be checked.
//
// Usage: search_scale [--n 1000000] [--dim 112] [--queries 1000]
//                     [--kinds flat,ivfsq] [--nlist 0] [--nprobe 8,16,32,64,128]
//                     [--data mixture|real-spectrum] [--real FILE.fvecs]
//                     [--real-groups FILE] [--group-size 1]
//                     [--clusters 2000] [--decay 0.5] [--spread 0.5]
//                     [--query-noise 0.35] [--seed 1234] [--max-bytes 128]
//                     [--latency-k 10]
//   --nlist: comma-separated list sizes for the approximate kinds, each built
//   and swept over --nprobe (0 = AutoNlist, the default).
// Smoke test: search_scale --n 20000 --queries 200
// Realistic data (bench/README.md, "Realistic vectors"):
//   search_scale --data real-spectrum --real real.fvecs --real-groups real.groups
// Not a ctest test (timings on shared machines are not pass/fail material).
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "search/vector_index.h"
#include "util/blas.h"

namespace {

using lookalike::VectorIndex;
using lookalike::VectorIndexKind;
using lookalike::VectorIndexOptions;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Args {
  int64_t n = 1000000;
  int64_t dim = 112;
  int64_t queries = 1000;
  std::vector<std::string> kinds = {"flat", "ivfsq"};
  std::vector<int64_t> nprobes = {8, 16, 32, 64, 128};
  std::vector<int64_t> nlists = {0};  // 0 = AutoNlist
  std::string data = "mixture";       // or "real-spectrum"
  std::string real_path, groups_path;
  int64_t group_size = 1;
  int64_t latency_k = 10;
  int64_t clusters = 2000;
  double decay = 0.5;
  double spread = 0.5;
  double query_noise = 0.35;
  uint64_t seed = 1234;
  int64_t max_bytes = VectorIndexOptions().max_bytes_per_vector;  // ivfsq byte budget
};

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::printf(
          "search_scale [--n N] [--dim D] [--queries Q] [--kinds flat,ivfsq]\n"
          "             [--nprobe 8,16,...] [--clusters C] [--decay A] [--spread S]\n"
          "             [--query-noise E] [--seed S] [--max-bytes B] [--nlist L1,L2,..]\n"
          "             [--data mixture|real-spectrum] [--real FILE.fvecs]\n"
          "             [--real-groups FILE] [--group-size G] [--latency-k K]\n"
          "defaults: --n 1000000 --dim 112 --queries 1000 --clusters 2000 --decay 0.5\n"
          "          --spread 0.5 --query-noise 0.35 --seed 1234 --nlist 0 (auto)\n"
          "          --data mixture --group-size 1 --latency-k 10\n"
          "real-spectrum takes --dim from the .fvecs file\n");
      std::exit(0);
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value (see --help)\n", flag.c_str());
      std::exit(2);
    }
    const std::string v = argv[++i];
    if (flag == "--n")
      a.n = std::stoll(v);
    else if (flag == "--dim")
      a.dim = std::stoll(v);
    else if (flag == "--queries")
      a.queries = std::stoll(v);
    else if (flag == "--kinds")
      a.kinds = SplitList(v);
    else if (flag == "--nprobe") {
      a.nprobes.clear();
      for (const auto& s : SplitList(v)) a.nprobes.push_back(std::stoll(s));
    } else if (flag == "--nlist") {
      a.nlists.clear();
      for (const auto& s : SplitList(v)) a.nlists.push_back(std::stoll(s));
    } else if (flag == "--data")
      a.data = v;
    else if (flag == "--real")
      a.real_path = v;
    else if (flag == "--real-groups")
      a.groups_path = v;
    else if (flag == "--group-size")
      a.group_size = std::stoll(v);
    else if (flag == "--latency-k")
      a.latency_k = std::stoll(v);
    else if (flag == "--clusters")
      a.clusters = std::stoll(v);
    else if (flag == "--decay")
      a.decay = std::stod(v);
    else if (flag == "--spread")
      a.spread = std::stod(v);
    else if (flag == "--query-noise")
      a.query_noise = std::stod(v);
    else if (flag == "--seed")
      a.seed = std::stoull(v);
    else if (flag == "--max-bytes")
      a.max_bytes = std::stoll(v);
    else {
      std::fprintf(stderr, "unknown flag %s (see --help)\n", flag.c_str());
      std::exit(2);
    }
  }
  if (a.n < 100 || a.dim < 2 || a.queries < 1 || a.clusters < 1 || a.group_size < 1 ||
      a.latency_k < 1) {
    std::fprintf(stderr,
                 "need --n >= 100, --dim >= 2, --queries >= 1, --clusters >= 1,"
                 " --group-size >= 1, --latency-k >= 1\n");
    std::exit(2);
  }
  if (a.data != "mixture" && a.data != "real-spectrum") {
    std::fprintf(stderr, "--data is mixture or real-spectrum\n");
    std::exit(2);
  }
  if (a.data == "real-spectrum" && a.real_path.empty()) {
    std::fprintf(stderr, "--data real-spectrum needs --real FILE.fvecs\n");
    std::exit(2);
  }
  return a;
}

// Resident set size and its peak, bytes (from /proc/self/status).
int64_t ProcStatusKb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t len = std::strlen(field);
  while (std::getline(f, line))
    if (line.compare(0, len, field) == 0) return std::atoll(line.c_str() + len + 1);
  return -1;
}
int64_t RssBytes() { return ProcStatusKb("VmRSS:") * 1024; }
int64_t PeakRssBytes() { return ProcStatusKb("VmHWM:") * 1024; }
// Resets VmHWM to the current RSS (Linux >= 4.0), so each build's peak is its own.
bool ResetPeakRss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  return static_cast<bool>(f);
}

void Normalize(float* v, int64_t d) {
  double s = 0;
  for (int64_t j = 0; j < d; ++j) s += double{v[j]} * v[j];
  const float inv = static_cast<float>(1.0 / std::sqrt(std::max(s, 1e-30)));
  for (int64_t j = 0; j < d; ++j) v[j] *= inv;
}

// --data mixture: database vectors and queries as described at the top of
// the file; sources[q] is the database row query q was made from.
void GenerateMixture(const Args& a, std::vector<float>* db, std::vector<float>* queries,
                     std::vector<int64_t>* sources) {
  const int64_t d = a.dim;
  std::vector<float> scale(d), centres(a.clusters * d);
  for (int64_t j = 0; j < d; ++j) scale[j] = static_cast<float>(std::pow(j + 1.0, -a.decay));
  {
    std::mt19937_64 rng(a.seed);
    std::normal_distribution<float> g;
    for (float& c : centres) c = g(rng);
  }
  db->resize(static_cast<size_t>(a.n * d));
  constexpr int64_t kBlock = 4096;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t b = 0; b < (a.n + kBlock - 1) / kBlock; ++b) {
    std::mt19937_64 rng(a.seed * 1000003 + b);
    std::normal_distribution<float> g;
    std::uniform_int_distribution<int64_t> pick(0, a.clusters - 1);
    for (int64_t i = b * kBlock; i < std::min(a.n, (b + 1) * kBlock); ++i) {
      const float* c = &centres[pick(rng) * d];
      float* v = db->data() + i * d;
      for (int64_t j = 0; j < d; ++j)
        v[j] = scale[j] * (c[j] + static_cast<float>(a.spread) * g(rng));
      Normalize(v, d);
    }
  }
  queries->resize(static_cast<size_t>(a.queries * d));
  std::mt19937_64 rng(a.seed + 17);
  std::normal_distribution<float> g;
  std::uniform_int_distribution<int64_t> pick(0, a.n - 1);
  sources->resize(a.queries);
  for (int64_t q = 0; q < a.queries; ++q) {
    (*sources)[q] = pick(rng);
    const float* src = db->data() + (*sources)[q] * d;
    float* v = queries->data() + q * d;
    // Noise with the data's spectrum, scaled so its norm is query_noise
    // relative to the (unit) source vector.
    std::vector<float> noise(d);
    double n2 = 0;
    for (int64_t j = 0; j < d; ++j) {
      noise[j] = scale[j] * g(rng);
      n2 += double{noise[j]} * noise[j];
    }
    const float f = static_cast<float>(a.query_noise / std::sqrt(n2));
    for (int64_t j = 0; j < d; ++j) v[j] = src[j] + f * noise[j];
    Normalize(v, d);
  }
}

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "search_scale: %s\n", why.c_str());
  std::exit(2);
}

// An .fvecs file: per vector an int32 dimension, then that many float32.
struct Fvecs {
  int64_t n = 0, d = 0;
  std::vector<float> v;  // n x d
};

Fvecs ReadFvecs(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) Die("cannot read " + path);
  Fvecs r;
  int32_t d = 0;
  while (f.read(reinterpret_cast<char*>(&d), sizeof d)) {
    if (d <= 0 || (r.d != 0 && d != r.d)) Die(path + ": not an .fvecs file of one dimension");
    r.d = d;
    const size_t at = r.v.size();
    r.v.resize(at + d);
    if (!f.read(reinterpret_cast<char*>(r.v.data() + at), d * sizeof(float)))
      Die(path + ": truncated");
    ++r.n;
  }
  if (r.n < 2) Die(path + ": fewer than 2 vectors");
  return r;
}

// A fitted Gaussian: mean and covariance = sum_k lambda_k e_k e_k^T.
struct Gaussian {
  int64_t d = 0;
  std::vector<double> mean;         // d
  std::vector<double> eigenvalues;  // d, descending, >= 0
  std::vector<float> factor;        // d x d: row k = sqrt(lambda_k) e_k

  // out = mean + sum_k sqrt(lambda_k) z_k e_k, z standard normal.
  void Draw(std::mt19937_64& rng, std::normal_distribution<float>& g, float* out) const {
    for (int64_t j = 0; j < d; ++j) out[j] = static_cast<float>(mean[j]);
    for (int64_t k = 0; k < d; ++k) {
      const float z = g(rng);
      const float* row = &factor[k * d];
      for (int64_t j = 0; j < d; ++j) out[j] += z * row[j];
    }
  }
};

// Sample mean and covariance of n rows of d floats, eigen-decomposed (LAPACK dsyev).
Gaussian Fit(const float* x, int64_t n, int64_t d) {
  Gaussian fit;
  fit.d = d;
  fit.mean.assign(d, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) fit.mean[j] += x[i * d + j];
  for (double& m : fit.mean) m /= static_cast<double>(n);
  std::vector<double> cov(d * d, 0.0), row(d);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) row[j] = x[i * d + j] - fit.mean[j];
    for (int64_t j = 0; j < d; ++j)
      for (int64_t k = 0; k <= j; ++k) cov[j * d + k] += row[j] * row[k];
  }
  for (int64_t j = 0; j < d; ++j)
    for (int64_t k = 0; k <= j; ++k) cov[k * d + j] = cov[j * d + k] /= static_cast<double>(n - 1);
  const int di = static_cast<int>(d);
  std::vector<double> w(d);
  if (const int info = lookalike::SymmetricEigen(di, cov.data(), w.data()); info != 0)
    Die("dsyev failed (info " + std::to_string(info) + ")");
  // dsyev: ascending eigenvalues, eigenvector k in column k (contiguous).
  fit.eigenvalues.resize(d);
  fit.factor.resize(d * d);
  for (int64_t k = 0; k < d; ++k) {
    const int64_t src = d - 1 - k;
    const double lambda = std::max(w[src], 0.0);
    fit.eigenvalues[k] = lambda;
    for (int64_t j = 0; j < d; ++j)
      fit.factor[k * d + j] = static_cast<float>(std::sqrt(lambda) * cov[src * d + j]);
  }
  return fit;
}

double Quantile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

std::string Summary(const std::vector<double>& v) {
  char buf[160];
  double mean = 0;
  for (double x : v) mean += x;
  mean /= std::max<size_t>(v.size(), 1);
  std::snprintf(buf, sizeof buf, "mean %.3f  p1 %.3f  p10 %.3f  p50 %.3f  p90 %.3f  p99 %.3f", mean,
                Quantile(v, 0.01), Quantile(v, 0.1), Quantile(v, 0.5), Quantile(v, 0.9),
                Quantile(v, 0.99));
  return buf;
}

// One line per spectrum: shares of the variance and decay of the eigenvalues.
void PrintSpectrum(const char* name, const Gaussian& fit) {
  const int64_t d = fit.d;
  double total = 0, sq = 0, mean_norm = 0;
  for (double l : fit.eigenvalues) total += l, sq += l * l;
  for (double m : fit.mean) mean_norm += m * m;
  auto share = [&](int64_t k) {
    double s = 0;
    for (int64_t i = 0; i < std::min(k, d); ++i) s += fit.eigenvalues[i];
    return s / total;
  };
  auto rel = [&](int64_t k) { return fit.eigenvalues[std::min(k, d) - 1] / fit.eigenvalues[0]; };
  std::printf(
      "  %-22s |mean| %.3f  trace %.3f  effective dim %.1f  variance in top 1/5/10/28/56: "
      "%.3f/%.3f/%.3f/%.3f/%.3f  lambda_k/lambda_1 at k=2/5/10/20/50/100/%lld: "
      "%.3f/%.3f/%.3f/%.3f/%.3f/%.3f/%.4f\n",
      name, std::sqrt(mean_norm), total, total * total / sq, share(1), share(5), share(10),
      share(28), share(56), static_cast<long long>(d), rel(2), rel(5), rel(10), rel(20), rel(50),
      rel(100), rel(d));
}

// For each of n unit rows: the largest similarity to another row (of another
// group when groups are given), and a sample of similarities of random pairs.
void NeighbourSimilarities(const float* x, int64_t n, int64_t d, const std::vector<int64_t>* group,
                           std::vector<double>* nn, std::vector<double>* random_pairs) {
  nn->assign(n, -2.0);
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t i = 0; i < n; ++i) {
    double best = -2.0;
    for (int64_t j = 0; j < n; ++j) {
      if (j == i || (group && (*group)[i] == (*group)[j])) continue;
      float s = 0;
      for (int64_t k = 0; k < d; ++k) s += x[i * d + k] * x[j * d + k];
      best = std::max(best, double{s});
    }
    (*nn)[i] = best;
  }
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  random_pairs->clear();
  for (int p = 0; p < 20000; ++p) {
    const int64_t i = pick(rng), j = pick(rng);
    if (i == j) continue;
    float s = 0;
    for (int64_t k = 0; k < d; ++k) s += x[i * d + k] * x[j * d + k];
    random_pairs->push_back(s);
  }
}

double Dot(const float* a, const float* b, int64_t d) {
  double s = 0;
  for (int64_t j = 0; j < d; ++j) s += double{a[j]} * b[j];
  return s;
}

// --data real-spectrum, as described at the top of the file. Sets a->dim.
void GenerateRealSpectrum(Args* a, std::vector<float>* db, std::vector<float>* queries,
                          std::vector<int64_t>* sources) {
  const Fvecs real = ReadFvecs(a->real_path);
  const int64_t d = real.d, m = real.n;
  a->dim = d;
  for (int64_t i = 0; i < m; ++i) {
    const double norm = std::sqrt(Dot(&real.v[i * d], &real.v[i * d], d));
    if (std::fabs(norm - 1.0) > 1e-3) Die(a->real_path + ": vectors are not unit length");
  }
  // Groups: "LABEL o" for an original, "LABEL c" for a copy of it.
  std::vector<int64_t> group(m);
  std::vector<char> original(m, 1);
  std::vector<double> copy_cos;
  std::vector<float> diffs;
  if (!a->groups_path.empty()) {
    std::ifstream f(a->groups_path);
    std::vector<std::string> labels;
    std::string line;
    while (std::getline(f, line)) labels.push_back(line);
    if (static_cast<int64_t>(labels.size()) != m)
      Die(a->groups_path + ": " + std::to_string(labels.size()) + " lines for " +
          std::to_string(m) + " vectors");
    std::map<std::string, int64_t> ids, first_original;
    for (int64_t i = 0; i < m; ++i) {
      std::istringstream ls(labels[i]);
      std::string label, role;
      ls >> label >> role;
      group[i] = ids.emplace(label, static_cast<int64_t>(ids.size())).first->second;
      original[i] = role != "c";
      if (original[i]) first_original.emplace(label, i);
    }
    for (int64_t i = 0; i < m; ++i) {
      if (original[i]) continue;
      std::istringstream ls(labels[i]);
      std::string label;
      ls >> label;
      const auto it = first_original.find(label);
      if (it == first_original.end()) continue;  // a copy without its original
      const float* o = &real.v[it->second * d];
      const float* c = &real.v[i * d];
      copy_cos.push_back(Dot(o, c, d));
      for (int64_t j = 0; j < d; ++j) diffs.push_back(c[j] - o[j]);
    }
  } else {
    std::iota(group.begin(), group.end(), 0);
  }
  const Gaussian fit = Fit(real.v.data(), m, d);
  const bool have_diffs = diffs.size() >= static_cast<size_t>(2 * d);
  const Gaussian diff_fit =
      have_diffs ? Fit(diffs.data(), static_cast<int64_t>(diffs.size() / d), d) : Gaussian();
  // A copy of `src` (unit): with groups, at a similarity to it picked from
  // the real copies' similarities to their originals, in a direction drawn
  // from the fit of their differences (its part orthogonal to src); else src
  // plus noise of the data's spectrum of norm query_noise.
  auto perturb = [&](const float* src, std::mt19937_64& rng, std::normal_distribution<float>& g,
                     float* out) {
    std::vector<float> noise(d);
    if (have_diffs) {
      diff_fit.Draw(rng, g, noise.data());
      const float along = static_cast<float>(Dot(noise.data(), src, d));
      for (int64_t j = 0; j < d; ++j) noise[j] -= along * src[j];
      Normalize(noise.data(), d);
      std::uniform_int_distribution<size_t> pick(0, copy_cos.size() - 1);
      const double c = copy_cos[pick(rng)];
      const float s = static_cast<float>(std::sqrt(std::max(0.0, 1.0 - c * c)));
      for (int64_t j = 0; j < d; ++j) out[j] = static_cast<float>(c) * src[j] + s * noise[j];
    } else {
      double n2 = 0;
      for (int64_t j = 0; j < d; ++j) noise[j] = 0;
      for (int64_t k = 0; k < d; ++k) {
        const float z = g(rng);
        for (int64_t j = 0; j < d; ++j) noise[j] += z * fit.factor[k * d + j];
      }
      for (float v : noise) n2 += double{v} * v;
      const float f = static_cast<float>(a->query_noise / std::sqrt(std::max(n2, 1e-30)));
      for (int64_t j = 0; j < d; ++j) out[j] = src[j] + f * noise[j];
    }
    Normalize(out, d);
  };
  const int64_t gsize = a->group_size;
  auto fill = [&](float* rows, int64_t n, uint64_t seed) {
    const int64_t block = gsize * std::max<int64_t>(1, 4096 / gsize);
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t b = 0; b < (n + block - 1) / block; ++b) {
      std::mt19937_64 rng(seed * 1000003 + b);
      std::normal_distribution<float> g;
      for (int64_t i = b * block; i < std::min(n, (b + 1) * block); ++i) {
        float* v = rows + i * d;
        if (i % gsize == 0) {
          fit.Draw(rng, g, v);
          Normalize(v, d);
        } else {
          perturb(rows + (i - i % gsize) * d, rng, g, v);
        }
      }
    }
  };
  db->resize(static_cast<size_t>(a->n * d));
  fill(db->data(), a->n, a->seed);
  queries->resize(static_cast<size_t>(a->queries * d));
  sources->resize(a->queries);
  {
    std::mt19937_64 rng(a->seed + 17);
    std::normal_distribution<float> g;
    std::uniform_int_distribution<int64_t> pick(0, a->n - 1);
    for (int64_t q = 0; q < a->queries; ++q) {
      (*sources)[q] = pick(rng);
      perturb(db->data() + (*sources)[q] * d, rng, g, queries->data() + q * d);
    }
  }

  // The check: the real vectors against as many synthetic ones.
  std::printf("real vectors: %lld x %lld-d from %s; %zu copies with their original\n",
              static_cast<long long>(m), static_cast<long long>(d), a->real_path.c_str(),
              copy_cos.size());
  std::vector<float> sample(m * d);
  fill(sample.data(), m, a->seed + 5);
  std::printf("eigen-spectrum (covariance of the unit vectors):\n");
  PrintSpectrum("real", fit);
  PrintSpectrum("synthetic (same count)", Fit(sample.data(), m, d));
  if (have_diffs) PrintSpectrum("real copy - original", diff_fit);
  std::vector<double> nn, pairs;
  std::printf("similarities (inner products of unit vectors):\n");
  NeighbourSimilarities(real.v.data(), m, d, nullptr, &nn, &pairs);
  std::printf("  real, nearest other vector:              %s\n", Summary(nn).c_str());
  std::printf("  real, random pairs:                      %s\n", Summary(pairs).c_str());
  if (!a->groups_path.empty()) {
    // The originals alone (one per group): a collection of distinct photos,
    // against as many synthetic vectors (which come in groups of G).
    std::vector<float> originals;
    for (int64_t i = 0; i < m; ++i)
      if (original[i]) originals.insert(originals.end(), &real.v[i * d], &real.v[(i + 1) * d]);
    const int64_t mo = static_cast<int64_t>(originals.size()) / d;
    NeighbourSimilarities(originals.data(), mo, d, nullptr, &nn, &pairs);
    std::printf("  real originals (%lld), nearest other:     %s\n", static_cast<long long>(mo),
                Summary(nn).c_str());
    NeighbourSimilarities(sample.data(), mo, d, nullptr, &nn, &pairs);
    std::printf("  synthetic (%lld), nearest other:          %s\n", static_cast<long long>(mo),
                Summary(nn).c_str());
  }
  NeighbourSimilarities(sample.data(), m, d, nullptr, &nn, &pairs);
  std::printf("  synthetic (%lld), nearest other:         %s\n", static_cast<long long>(m),
              Summary(nn).c_str());
  std::printf("  synthetic, random pairs:                 %s\n", Summary(pairs).c_str());
  if (!copy_cos.empty())
    std::printf("  real, copy to its original:              %s\n", Summary(copy_cos).c_str());
  std::vector<double> query_cos(a->queries);
  for (int64_t q = 0; q < a->queries; ++q)
    query_cos[q] = Dot(queries->data() + q * d, db->data() + (*sources)[q] * d, d);
  std::printf("  synthetic, query to its source:          %s\n\n", Summary(query_cos).c_str());
}

struct Latency {
  double p50_ms = 0, p99_ms = 0, qps = 0;
  double cpu_p50_ms = 0;  // CPU time of the querying thread: robust to other load
  double cpu_p99_ms = 0;
};

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5));
  return v[i];
}

// Batch-1 queries from `clients` threads at once (each FAISS call on one
// OpenMP thread), each client taking every clients-th query.
Latency MeasureLatency(const VectorIndex& index, const std::vector<float>& queries, int64_t num,
                       int clients, int64_t k) {
  const int64_t d = index.dim();
  std::vector<double> ms(num), cpu_ms(num);
  omp_set_num_threads(1);
  // Warm-up: page in the lists.
  {
    std::vector<float> s(k);
    std::vector<int64_t> l(k);
    for (int64_t q = 0; q < std::min<int64_t>(num, 20); ++q)
      index.Search(queries.data() + q * d, 1, k, s.data(), l.data());
  }
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      omp_set_num_threads(1);
      std::vector<float> s(k);
      std::vector<int64_t> l(k);
      for (int64_t q = c; q < num; q += clients) {
        const auto a = Clock::now();
        const double c0 = ThreadCpuSeconds();
        index.Search(queries.data() + q * d, 1, k, s.data(), l.data());
        cpu_ms[q] = 1e3 * (ThreadCpuSeconds() - c0);
        ms[q] = 1e3 * Seconds(a, Clock::now());
      }
    });
  }
  for (auto& t : threads) t.join();
  const double wall = Seconds(t0, Clock::now());
  omp_set_num_threads(2);
  return Latency{Percentile(ms, 0.5), Percentile(ms, 0.99), num / wall, Percentile(cpu_ms, 0.5),
                 Percentile(cpu_ms, 0.99)};
}

// How deep the CLI's search looks: `search` asks the index for the top
// --colour-depth (1000) and re-ranks them by colour, then verifies the top 50.
constexpr int64_t kDepth = 1000;

struct Quality {
  double recall = 0;        // recall@10 against exact search
  double source = 0;        // share of queries whose source vector is in the top 10
  double source_depth = 0;  // ... in the top kDepth
};

// source_ids[q]: the id of the database vector query q was made from.
Quality RecallAt10(const VectorIndex& index, const std::vector<float>& queries, int64_t num,
                   const std::vector<int64_t>& truth, const std::vector<int64_t>& source_ids) {
  constexpr int64_t k = 10;
  std::vector<float> s(num * kDepth);
  std::vector<int64_t> l(num * kDepth);
  index.Search(queries.data(), num, kDepth, s.data(), l.data());  // sorted: top 10 first
  int64_t hit = 0, source = 0, source_depth = 0;
  for (int64_t q = 0; q < num; ++q) {
    const int64_t* top = &l[q * kDepth];
    for (int64_t i = 0; i < kDepth; ++i)
      if (top[i] == source_ids[q]) {
        ++source_depth;
        source += i < k;
      }
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j)
        if (top[i] == truth[q * k + j]) {
          ++hit;
          break;
        }
  }
  return Quality{static_cast<double>(hit) / (num * k), static_cast<double>(source) / num,
                 static_cast<double>(source_depth) / num};
}

}  // namespace

int main(int argc, char** argv) {
  Args a = Parse(argc, argv);
  omp_set_num_threads(2);
  if (a.data == "mixture")
    std::printf(
        "search_scale: N = %lld vectors, d = %lld, %lld queries, %lld mixture components,"
        " spectrum decay %.2f, spread %.2f, query noise %.2f, seed %llu, %d hardware threads\n",
        static_cast<long long>(a.n), static_cast<long long>(a.dim),
        static_cast<long long>(a.queries), static_cast<long long>(a.clusters), a.decay, a.spread,
        a.query_noise, static_cast<unsigned long long>(a.seed),
        static_cast<int>(std::thread::hardware_concurrency()));
  else
    std::printf(
        "search_scale: N = %lld vectors fitted to %s (groups %s, database groups of %lld),"
        " %lld queries, seed %llu, %d hardware threads\n",
        static_cast<long long>(a.n), a.real_path.c_str(),
        a.groups_path.empty() ? "none" : a.groups_path.c_str(),
        static_cast<long long>(a.group_size), static_cast<long long>(a.queries),
        static_cast<unsigned long long>(a.seed),
        static_cast<int>(std::thread::hardware_concurrency()));
  auto t = Clock::now();
  std::vector<float> db, queries;
  std::vector<int64_t> sources;
  if (a.data == "mixture")
    GenerateMixture(a, &db, &queries, &sources);
  else
    GenerateRealSpectrum(&a, &db, &queries, &sources);
  std::vector<int64_t> ids(a.n);
  for (int64_t i = 0; i < a.n; ++i) ids[i] = i + 1;  // image ids start at 1
  std::vector<int64_t> source_ids(a.queries);
  for (int64_t q = 0; q < a.queries; ++q) source_ids[q] = sources[q] + 1;
  std::printf("generated in %.1f s; raw vectors %.0f MB; RSS %.0f MB\n", Seconds(t, Clock::now()),
              a.n * a.dim * 4 / 1e6, RssBytes() / 1e6);

  // Exact ground truth with the flat kind (BLAS over all queries at once).
  VectorIndexOptions flat_options;
  flat_options.kind = VectorIndexKind::kFlat;
  t = Clock::now();
  std::vector<int64_t> truth(a.queries * 10);
  {
    auto exact = VectorIndex::Build(a.dim, flat_options, ids.data(), db.data(), a.n);
    std::vector<float> s(a.queries * 10);
    exact->Search(queries.data(), a.queries, 10, s.data(), truth.data());
  }
  std::printf("exact top-10 of all queries in %.1f s\n\n", Seconds(t, Clock::now()));

  struct Row {
    std::string kind, describe;
    double build_s = 0, bytes_per_image = 0, rss_per_image = 0, peak_mb = 0;
    Quality quality;
    Latency one, two;
  };
  std::vector<Row> rows;
  int64_t max_peak = 0;
  std::printf(
      "load average before the measurements: %s (latency is wall time, so other\n"
      "processes on the machine inflate it; 'cpu p50' is the querying thread's CPU time)\n",
      LoadAverage().c_str());
  std::printf("latency: batch-1 searches for the top %lld\n", static_cast<long long>(a.latency_k));
  std::printf(
      "R@10: recall@10 against exact search; src@10 / src@1k: share of queries whose source\n"
      "vector (the database image the query is a copy of) is in the top 10 / top %lld\n",
      static_cast<long long>(kDepth));
  std::printf("%-6s %-50s %7s %7s %8s %8s %9s %9s %9s %9s %9s %9s %9s %7s %7s %7s\n", "kind",
              "index", "build s", "B/image", "RSS B/im", "build pk", "p50 1t", "p99 1t", "cpu p50",
              "cpu p99", "p50 2c", "p99 2c", "qps 2c", "R@10", "src@10", "src@1k");
  struct Build {
    std::string kind;
    int64_t nlist;
  };
  std::vector<Build> builds;
  for (const std::string& name : a.kinds) {
    if (lookalike::ParseVectorIndexKind(name) == VectorIndexKind::kFlat)
      builds.push_back({name, 0});
    else
      for (int64_t nl : a.nlists) builds.push_back({name, nl});
  }
  for (const Build& build : builds) {
    const std::string& name = build.kind;
    VectorIndexOptions o;
    o.kind = lookalike::ParseVectorIndexKind(name);
    o.seed = a.seed;
    o.max_bytes_per_vector = a.max_bytes;
    o.nlist = build.nlist;
    o.Validate();  // VectorIndex::Build trusts its options
    max_peak = std::max(max_peak, PeakRssBytes());
    ResetPeakRss();
    const int64_t rss0 = RssBytes();
    t = Clock::now();
    auto index = VectorIndex::Build(a.dim, o, ids.data(), db.data(), a.n);
    Row r;
    r.kind = name;
    r.build_s = Seconds(t, Clock::now());
    r.rss_per_image = static_cast<double>(RssBytes() - rss0) / a.n;
    r.peak_mb = (PeakRssBytes() - rss0) / 1e6;
    r.bytes_per_image = static_cast<double>(index->MemoryBytes()) / a.n;
    // Flat is a linear scan per query: fewer latency samples keep the run short.
    const int64_t num_lat =
        index->kind() == VectorIndexKind::kFlat ? std::min<int64_t>(a.queries, 200) : a.queries;
    auto report = [&](Row& row) {
      row.describe = index->Describe();
      row.quality = RecallAt10(*index, queries, a.queries, truth, source_ids);
      row.one = MeasureLatency(*index, queries, num_lat, 1, a.latency_k);
      row.two = MeasureLatency(*index, queries, num_lat, 2, a.latency_k);
      std::printf(
          "%-6s %-50s %7.1f %7.1f %8.1f %6.0fMB %7.3fms %7.3fms %7.3fms %7.3fms %7.3fms %7.3fms "
          "%9.0f %7.4f %7.4f %7.4f\n",
          row.kind.c_str(), row.describe.c_str(), row.build_s, row.bytes_per_image,
          row.rss_per_image, row.peak_mb, row.one.p50_ms, row.one.p99_ms, row.one.cpu_p50_ms,
          row.one.cpu_p99_ms, row.two.p50_ms, row.two.p99_ms, row.two.qps, row.quality.recall,
          row.quality.source, row.quality.source_depth);
      std::fflush(stdout);
    };
    report(r);
    rows.push_back(r);
    if (index->kind() != VectorIndexKind::kFlat) {
      const int64_t default_nprobe = index->nprobe();
      for (int64_t np : a.nprobes) {
        if (np == default_nprobe || np > index->nlist()) continue;
        index->set_nprobe(np);
        Row s = r;
        report(s);
      }
      index->set_nprobe(default_nprobe);
    }
    // Round trip through the persisted form: size and load time.
    t = Clock::now();
    const std::string blob = index->Serialize();
    const double ser = Seconds(t, Clock::now());
    t = Clock::now();
    auto loaded = VectorIndex::Deserialize(blob);
    std::printf(
        "       serialized %.1f MB (%.1f B/image) in %.2f s, loaded in %.2f s (%lld vectors)\n",
        blob.size() / 1e6, static_cast<double>(blob.size()) / a.n, ser, Seconds(t, Clock::now()),
        static_cast<long long>(loaded->ntotal()));
  }

  const Row* flat = nullptr;
  for (const Row& r : rows)
    if (r.kind == "flat") flat = &r;
  if (flat) {
    std::printf("\nagainst exact search (flat) in this run, default nprobe of each build:\n");
    std::printf("%-6s %-50s %12s %14s %14s %18s %10s\n", "kind", "index", "B/image", "p50 speed-up",
                "p99 speed-up", "cpu p50 speed-up", "R@10");
    for (const Row& r : rows)
      std::printf("%-6s %-50s %11.2fx %13.1fx %13.1fx %17.1fx %10.4f\n", r.kind.c_str(),
                  r.describe.c_str(), r.bytes_per_image / flat->bytes_per_image,
                  flat->one.p50_ms / r.one.p50_ms, flat->one.p99_ms / r.one.p99_ms,
                  flat->one.cpu_p50_ms / r.one.cpu_p50_ms, r.quality.recall);
  }
  std::printf("peak RSS of the run: %.0f MB (raw vectors and ground truth included)\n",
              std::max(max_peak, PeakRssBytes()) / 1e6);
  return 0;
}
