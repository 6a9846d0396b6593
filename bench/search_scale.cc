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
// Data: a seeded Gaussian mixture shaped like PCA-reduced VLAD vectors:
// `clusters` centres, per-dimension scale decaying as (j+1)^-decay (the
// eigen-spectrum of a PCA output), each vector = scale * (centre + spread * z),
// L2-normalised. Queries are database vectors perturbed by noise of the same
// spectrum (`query_noise`), renormalised: like a re-encoded copy of an image.
//
// Usage: search_scale [--n 1000000] [--dim 112] [--queries 1000]
//                     [--kinds flat,ivfsq] [--nprobe 8,16,32,64,128]
//                     [--clusters 2000] [--decay 0.5] [--spread 0.5]
//                     [--query-noise 0.35] [--seed 1234] [--max-bytes 128]
// Smoke test: search_scale --n 20000 --queries 200
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
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "search/vector_index.h"

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
          "             [--query-noise E] [--seed S] [--max-bytes B]\n"
          "defaults: --n 1000000 --dim 112 --queries 1000 --clusters 2000 --decay 0.5\n"
          "          --spread 0.5 --query-noise 0.35 --seed 1234\n");
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
    } else if (flag == "--clusters")
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
  if (a.n < 100 || a.dim < 2 || a.queries < 1 || a.clusters < 1) {
    std::fprintf(stderr, "need --n >= 100, --dim >= 2, --queries >= 1, --clusters >= 1\n");
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

// Database vectors and queries as described at the top of the file.
void Generate(const Args& a, std::vector<float>* db, std::vector<float>* queries) {
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
  for (int64_t q = 0; q < a.queries; ++q) {
    const float* src = db->data() + pick(rng) * d;
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

struct Latency {
  double p50_ms = 0, p99_ms = 0, qps = 0;
  double cpu_p50_ms = 0;  // CPU time of the querying thread: robust to other load
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
                       int clients) {
  const int64_t d = index.dim();
  constexpr int64_t k = 10;
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
  return Latency{Percentile(ms, 0.5), Percentile(ms, 0.99), num / wall, Percentile(cpu_ms, 0.5)};
}

double RecallAt10(const VectorIndex& index, const std::vector<float>& queries, int64_t num,
                  const std::vector<int64_t>& truth) {
  constexpr int64_t k = 10;
  std::vector<float> s(num * k);
  std::vector<int64_t> l(num * k);
  index.Search(queries.data(), num, k, s.data(), l.data());
  int64_t hit = 0;
  for (int64_t q = 0; q < num; ++q)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j)
        if (l[q * k + i] == truth[q * k + j]) {
          ++hit;
          break;
        }
  return static_cast<double>(hit) / (num * k);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  omp_set_num_threads(2);
  std::printf(
      "search_scale: N = %lld vectors, d = %lld, %lld queries, %lld mixture components,"
      " spectrum decay %.2f, spread %.2f, query noise %.2f, seed %llu, %d hardware threads\n",
      static_cast<long long>(a.n), static_cast<long long>(a.dim), static_cast<long long>(a.queries),
      static_cast<long long>(a.clusters), a.decay, a.spread, a.query_noise,
      static_cast<unsigned long long>(a.seed),
      static_cast<int>(std::thread::hardware_concurrency()));
  auto t = Clock::now();
  std::vector<float> db, queries;
  Generate(a, &db, &queries);
  std::vector<int64_t> ids(a.n);
  for (int64_t i = 0; i < a.n; ++i) ids[i] = i + 1;  // image ids start at 1
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
    double build_s = 0, bytes_per_image = 0, rss_per_image = 0, peak_mb = 0, recall = 0;
    Latency one, two;
  };
  std::vector<Row> rows;
  int64_t max_peak = 0;
  std::printf(
      "load average before the measurements: %s (latency is wall time, so other\n"
      "processes on the machine inflate it; 'cpu p50' is the querying thread's CPU time)\n",
      LoadAverage().c_str());
  std::printf("%-6s %-50s %7s %7s %8s %8s %9s %9s %9s %9s %9s %9s %7s\n", "kind", "index",
              "build s", "B/image", "RSS B/im", "build pk", "p50 1t", "p99 1t", "cpu p50", "p50 2c",
              "p99 2c", "qps 2c", "R@10");
  for (const std::string& name : a.kinds) {
    VectorIndexOptions o;
    o.kind = lookalike::ParseVectorIndexKind(name);
    o.seed = a.seed;
    o.max_bytes_per_vector = a.max_bytes;
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
      row.recall = RecallAt10(*index, queries, a.queries, truth);
      row.one = MeasureLatency(*index, queries, num_lat, 1);
      row.two = MeasureLatency(*index, queries, num_lat, 2);
      std::printf(
          "%-6s %-50s %7.1f %7.1f %8.1f %6.0fMB %7.3fms %7.3fms %7.3fms %7.3fms %7.3fms %9.0f "
          "%7.4f\n",
          row.kind.c_str(), row.describe.c_str(), row.build_s, row.bytes_per_image,
          row.rss_per_image, row.peak_mb, row.one.p50_ms, row.one.p99_ms, row.one.cpu_p50_ms,
          row.two.p50_ms, row.two.p99_ms, row.two.qps, row.recall);
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
    std::printf("\nagainst exact search (flat) in this run, default settings:\n");
    std::printf("%-6s %12s %14s %14s %18s %10s\n", "kind", "B/image", "p50 speed-up",
                "p99 speed-up", "cpu p50 speed-up", "R@10");
    for (const Row& r : rows)
      std::printf("%-6s %11.2fx %13.1fx %13.1fx %17.1fx %10.4f\n", r.kind.c_str(),
                  r.bytes_per_image / flat->bytes_per_image, flat->one.p50_ms / r.one.p50_ms,
                  flat->one.p99_ms / r.one.p99_ms, flat->one.cpu_p50_ms / r.one.cpu_p50_ms,
                  r.recall);
  }
  std::printf("peak RSS of the run: %.0f MB (raw vectors and ground truth included)\n",
              std::max(max_peak, PeakRssBytes()) / 1e6);
  return 0;
}
