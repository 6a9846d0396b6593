// ivf_merge: how `lookalike merge` should build the merged database's ivfsq
// search index, measured at N vectors:
//   (a) rebuild (what merge does today once it has read the stored vectors):
//       VectorIndex::Build over all N, training the coarse quantizer on its
//       seeded sample and adding every vector;
//   (b) IVF merge: the index trained once before any shard exists
//       (VectorIndex::Train on a separate sample, as `train` would do and
//       keep in BASE), S shards each filling a copy of it with their slice
//       (on the cluster nodes, in parallel: reported per shard) and writing
//       it out, then the merging machine reading the S shard indexes and
//       joining their inverted lists (VectorIndex::MergeFrom, FAISS
//       IndexIVF::merge_from), with nprobe re-chosen for N.
// Both use the index lookalike builds (search/vector_index.cc: nlist =
// AutoNlist(N), nprobe = AutoNprobe(N, nlist), 8-bit residual scalar
// quantizer at 112-d, 64 training vectors per list). For each step it prints
// wall and CPU seconds, the peak RSS of the process that ran it (each step
// runs in its own process, this binary re-executed with --step, so peaks do
// not mix) and, for the two finished indexes, recall@10 against exact search
// (IndexFlatIP through VectorIndex's flat kind) on --queries queries, then
// the ratio (b)/(a) of the merging machine's time.
//
// Vectors: a seeded Gaussian with the eigen-spectrum of real search vectors
// (bench/README.md, "Realistic vectors": 4,170 PCA-whitened
// VLAD vectors of real photos; eigenvalues relative to the first 0.386 at
// the 10th, 0.145 at the 50th, 0.075 at the 112th, log-linear between, and a
// mean of norm 0.043), L2-normalised: no cluster structure for the lists to
// exploit, the realistic-spectrum G = 1 case of search_scale. Queries are new
// copies of random database vectors at cosine 0.35-0.95 from them (real
// copies: p10 / p90 0.32 / 0.89). Training samples are drawn separately from
// the same distribution. Shard s holds the contiguous slice of ids
// [s·N/S, (s+1)·N/S) (the vectors are i.i.d., so this is a random split).
//
// Usage: ivf_merge [--n 1000000] [--dim 112] [--shards 4,16] [--queries 200]
//                  [--train-vectors 0] [--seed 1234] [--work DIR]
//   --train-vectors: the sample the IVF merge's index is trained on (0 = 64
//   per list, as Build samples); --work: scratch folder (default
//   /tmp/ivf_merge-PID; ~4.6 · N · dim bytes, removed at the end).
// Quick run: ivf_merge --n 100000. Not a ctest test.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "search/vector_index.h"
#include "util/timing.h"

namespace {

using lookalike::AutoNlist;
using lookalike::AutoNprobe;
using lookalike::SecondsBetween;
using lookalike::SteadyClock;
using lookalike::VectorIndex;
using lookalike::VectorIndexKind;
using lookalike::VectorIndexOptions;
namespace fs = std::filesystem;

constexpr int64_t kK = 10;  // recall@10

struct Args {
  int64_t n = 1000000;
  int64_t dim = 112;
  std::vector<int64_t> shards = {4, 16};
  int64_t queries = 200;
  int64_t train_vectors = 0;
  uint64_t seed = 1234;
  std::string work;
  // Internal: the step a child process runs, and its parameters.
  std::string step;
  int64_t num_shards = 0, shard = 0;
};

// ---- measurements --------------------------------------------------------

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double PeakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

// Wall and CPU time of a stretch of work.
struct Stopwatch {
  SteadyClock::time_point wall = SteadyClock::now();
  double cpu = CpuSeconds();
  double WallSeconds() const { return SecondsBetween(wall, SteadyClock::now()); }
  double CpuSecondsSince() const { return CpuSeconds() - cpu; }
};

// A child's result line: "RESULT key=value ...".
void Report(const std::map<std::string, double>& values) {
  std::printf("RESULT");
  for (const auto& [key, value] : values) std::printf(" %s=%.6g", key.c_str(), value);
  std::printf("\n");
  std::fflush(stdout);
}

// ---- data ----------------------------------------------------------------

// Eigenvalue k (0-based) of the real search vectors' covariance relative to
// the first, log-linear between the measured points, stretched to `dim`.
double RelativeEigenvalue(int64_t k, int64_t dim) {
  const double knots[][2] = {{1, 1.0}, {10, 0.386}, {50, 0.145}, {112, 0.075}};
  const double x = 1.0 + static_cast<double>(k) * 111.0 / std::max<int64_t>(dim - 1, 1);
  for (int i = 0; i + 1 < 4; ++i) {
    if (x <= knots[i + 1][0]) {
      const double t = (x - knots[i][0]) / (knots[i + 1][0] - knots[i][0]);
      return std::exp((1 - t) * std::log(knots[i][1]) + t * std::log(knots[i + 1][1]));
    }
  }
  return knots[3][1];
}

void Normalize(float* v, int64_t d) {
  double s = 0;
  for (int64_t j = 0; j < d; ++j) s += double{v[j]} * v[j];
  const double inv = s > 0 ? 1.0 / std::sqrt(s) : 0.0;
  for (int64_t j = 0; j < d; ++j) v[j] = static_cast<float>(v[j] * inv);
}

// Draws unit vectors as described at the top of the file.
class Generator {
 public:
  Generator(int64_t dim, uint64_t seed) : dim_(dim), rng_(seed), scale_(dim), mean_(dim) {
    double total = 0;
    for (int64_t j = 0; j < dim; ++j) {
      const double l = RelativeEigenvalue(j, dim);
      scale_[j] = static_cast<float>(std::sqrt(l));
      total += l;
    }
    std::mt19937_64 mean_rng(0x5eed);  // one mean for every draw
    std::normal_distribution<float> g;
    for (float& m : mean_) m = g(mean_rng);
    Normalize(mean_.data(), dim);
    for (float& m : mean_) m *= static_cast<float>(0.043 * std::sqrt(total));
  }
  void Draw(float* v) {
    for (int64_t j = 0; j < dim_; ++j) v[j] = mean_[j] + scale_[j] * g_(rng_);
    Normalize(v, dim_);
  }
  // A copy of unit vector `v`: c·v + sqrt(1-c²)·u, u a unit direction of
  // the spectrum orthogonal to v, c uniform in 0.35..0.95.
  void Copy(const float* v, float* out) {
    std::vector<float> u(dim_);
    for (int64_t j = 0; j < dim_; ++j) u[j] = scale_[j] * g_(rng_);
    double dot = 0;
    for (int64_t j = 0; j < dim_; ++j) dot += double{u[j]} * v[j];
    for (int64_t j = 0; j < dim_; ++j) u[j] -= static_cast<float>(dot * v[j]);
    Normalize(u.data(), dim_);
    const float c = std::uniform_real_distribution<float>(0.35f, 0.95f)(rng_);
    const float s = std::sqrt(1 - c * c);
    for (int64_t j = 0; j < dim_; ++j) out[j] = c * v[j] + s * u[j];
    Normalize(out, dim_);
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  int64_t dim_;
  std::mt19937_64 rng_;
  std::normal_distribution<float> g_;
  std::vector<float> scale_, mean_;
};

// ---- files in the work folder -----------------------------------------------

void WriteFile(const std::string& path, const void* data, size_t bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::string ReadFile(const std::string& path) {
  std::string s(static_cast<size_t>(fs::file_size(path)), '\0');
  std::ifstream f(path, std::ios::binary);
  f.read(s.data(), static_cast<std::streamsize>(s.size()));
  if (!f) throw std::runtime_error("cannot read " + path);
  return s;
}

// Rows [first, first + count) of a row-major float file of `dim` columns.
std::vector<float> ReadRows(const std::string& path, int64_t dim, int64_t first, int64_t count) {
  std::vector<float> rows(static_cast<size_t>(count * dim));
  std::ifstream f(path, std::ios::binary);
  f.seekg(static_cast<std::streamoff>(first * dim * sizeof(float)));
  f.read(reinterpret_cast<char*>(rows.data()),
         static_cast<std::streamsize>(rows.size() * sizeof(float)));
  if (!f) throw std::runtime_error("cannot read rows of " + path);
  return rows;
}

std::string PathOf(const Args& a, const std::string& name) { return a.work + "/" + name; }

VectorIndexOptions IvfSqOptions(const Args& a) {
  VectorIndexOptions o;  // lookalike's defaults: 8-bit codes at 112-d, 64 per list
  o.kind = VectorIndexKind::kIvfSq;
  o.seed = a.seed;
  o.Validate();  // the boundary: Build and Train trust their options
  return o;
}

// recall@10 of `index` against the exact top 10 in the work folder.
double Recall(const Args& a, const VectorIndex& index) {
  const std::string q = ReadFile(PathOf(a, "queries.f32"));
  const std::string t = ReadFile(PathOf(a, "truth.i64"));
  const auto* queries = reinterpret_cast<const float*>(q.data());
  const auto* truth = reinterpret_cast<const int64_t*>(t.data());
  std::vector<float> scores(a.queries * kK);
  std::vector<int64_t> ids(a.queries * kK);
  index.Search(queries, a.queries, kK, scores.data(), ids.data());
  int64_t found = 0;
  for (int64_t i = 0; i < a.queries; ++i)
    for (int64_t j = 0; j < kK; ++j)
      found += std::count(truth + i * kK, truth + (i + 1) * kK, ids[i * kK + j]);
  return static_cast<double>(found) / static_cast<double>(a.queries * kK);
}

std::vector<int64_t> IdRange(int64_t first, int64_t count) {
  std::vector<int64_t> ids(count);
  for (int64_t i = 0; i < count; ++i) ids[i] = first + i;
  return ids;
}

// ---- steps, each in its own process -------------------------------------

// (a) merge today, once the vectors are read: Build over all of them.
void StepRebuild(const Args& a) {
  Stopwatch read;
  const std::vector<float> all = ReadRows(PathOf(a, "base.f32"), a.dim, 0, a.n);
  const double read_wall = read.WallSeconds();
  const std::vector<int64_t> ids = IdRange(0, a.n);
  Stopwatch build;
  auto index = VectorIndex::Build(a.dim, IvfSqOptions(a), ids.data(), all.data(), a.n);
  const double wall = build.WallSeconds(), cpu = build.CpuSecondsSince();
  const double rss = PeakRssMiB();
  Stopwatch save;
  const std::string blob = index->Serialize();
  const double save_wall = save.WallSeconds();
  Report({{"read_wall", read_wall},
          {"wall", wall},
          {"cpu", cpu},
          {"serialize_wall", save_wall},
          {"rss_mib", rss},
          {"rss_saved_mib", PeakRssMiB()},
          {"nlist", static_cast<double>(index->nlist())},
          {"nprobe", static_cast<double>(index->nprobe())},
          {"code_bytes", static_cast<double>(index->code_bytes())},
          {"recall", Recall(a, *index)}});
}

// (b1) `train`: the empty index every shard starts from.
void StepTrain(const Args& a) {
  VectorIndexOptions o = IvfSqOptions(a);
  o.nlist = AutoNlist(a.n);  // sized for the whole collection
  const int64_t m = a.train_vectors > 0 ? a.train_vectors : 64 * o.nlist;
  const std::vector<float> sample = ReadRows(PathOf(a, "train.f32"), a.dim, 0, m);
  Stopwatch train;
  auto index = VectorIndex::Train(a.dim, o, sample.data(), m);
  const std::string blob = index->Serialize();
  const double wall = train.WallSeconds(), cpu = train.CpuSecondsSince();
  WriteFile(PathOf(a, "trained.idx"), blob.data(), blob.size());
  Report({{"wall", wall},
          {"cpu", cpu},
          {"rss_mib", PeakRssMiB()},
          {"train_vectors", static_cast<double>(m)},
          {"blob_mib", blob.size() / 1048576.0}});
}

// (b2) shard s of S on its node: a copy of the trained index, its slice added.
void StepShard(const Args& a) {
  const int64_t first = a.shard * a.n / a.num_shards;
  const int64_t count = (a.shard + 1) * a.n / a.num_shards - first;
  const std::vector<float> slice = ReadRows(PathOf(a, "base.f32"), a.dim, first, count);
  const std::vector<int64_t> ids = IdRange(first, count);
  Stopwatch fill;
  auto index = VectorIndex::Deserialize(ReadFile(PathOf(a, "trained.idx")));
  index->Add(ids.data(), slice.data(), count);
  const std::string blob = index->Serialize();
  const double wall = fill.WallSeconds(), cpu = fill.CpuSecondsSince();
  WriteFile(PathOf(a, "shard-" + std::to_string(a.num_shards) + "-" + std::to_string(a.shard)),
            blob.data(), blob.size());
  Report({{"wall", wall},
          {"cpu", cpu},
          {"rss_mib", PeakRssMiB()},
          {"vectors", static_cast<double>(count)},
          {"blob_mib", blob.size() / 1048576.0}});
}

// (b3) the merging machine: read the S shard indexes, join their lists.
void StepMerge(const Args& a) {
  Stopwatch merge;
  std::vector<std::unique_ptr<VectorIndex>> shards;
  double read_wall = 0;
  for (int64_t s = 0; s < a.num_shards; ++s) {
    Stopwatch read;
    const std::string blob =
        ReadFile(PathOf(a, "shard-" + std::to_string(a.num_shards) + "-" + std::to_string(s)));
    read_wall += read.WallSeconds();
    shards.push_back(VectorIndex::Deserialize(blob));
  }
  std::unique_ptr<VectorIndex> merged = std::move(shards[0]);
  std::vector<VectorIndex*> others;
  for (size_t s = 1; s < shards.size(); ++s) others.push_back(shards[s].get());
  Stopwatch join;
  merged->MergeFrom(others);
  merged->set_nprobe(AutoNprobe(merged->ntotal(), merged->nlist()));
  const double join_wall = join.WallSeconds();
  shards.clear();
  const double wall = merge.WallSeconds(), cpu = merge.CpuSecondsSince();
  const double rss = PeakRssMiB();
  Stopwatch save;
  const std::string blob = merged->Serialize();
  const double save_wall = save.WallSeconds();
  if (merged->ntotal() != a.n) throw std::runtime_error("merged index lost vectors");
  Report({{"wall", wall},
          {"cpu", cpu},
          {"read_wall", read_wall},
          {"merge_from_wall", join_wall},
          {"serialize_wall", save_wall},
          {"rss_mib", rss},
          {"rss_saved_mib", PeakRssMiB()},
          {"nlist", static_cast<double>(merged->nlist())},
          {"nprobe", static_cast<double>(merged->nprobe())},
          {"recall", Recall(a, *merged)}});
}

// ---- the driver ------------------------------------------------------------

// Writes the database, training sample and queries, and the exact top 10.
void Prepare(const Args& a) {
  Stopwatch t;
  Generator gen(a.dim, a.seed);
  std::vector<float> base(static_cast<size_t>(a.n * a.dim));
  for (int64_t i = 0; i < a.n; ++i) gen.Draw(&base[i * a.dim]);
  WriteFile(PathOf(a, "base.f32"), base.data(), base.size() * sizeof(float));
  const int64_t max_train = std::max<int64_t>(a.train_vectors, 64 * AutoNlist(a.n));
  std::vector<float> train(static_cast<size_t>(max_train * a.dim));
  for (int64_t i = 0; i < max_train; ++i) gen.Draw(&train[i * a.dim]);
  WriteFile(PathOf(a, "train.f32"), train.data(), train.size() * sizeof(float));
  std::vector<float> queries(static_cast<size_t>(a.queries * a.dim));
  std::uniform_int_distribution<int64_t> pick(0, a.n - 1);
  for (int64_t i = 0; i < a.queries; ++i)
    gen.Copy(&base[pick(gen.rng()) * a.dim], &queries[i * a.dim]);
  WriteFile(PathOf(a, "queries.f32"), queries.data(), queries.size() * sizeof(float));
  VectorIndexOptions flat;
  flat.kind = VectorIndexKind::kFlat;
  const std::vector<int64_t> ids = IdRange(0, a.n);
  auto exact = VectorIndex::Build(a.dim, flat, ids.data(), base.data(), a.n);
  std::vector<float> scores(a.queries * kK);
  std::vector<int64_t> truth(a.queries * kK);
  exact->Search(queries.data(), a.queries, kK, scores.data(), truth.data());
  WriteFile(PathOf(a, "truth.i64"), truth.data(), truth.size() * sizeof(int64_t));
  std::printf(
      "data: %lld vectors × %lld-d (real-spectrum Gaussian), %lld training, %lld queries,"
      " exact top %lld: %.1f s\n",
      static_cast<long long>(a.n), static_cast<long long>(a.dim), static_cast<long long>(max_train),
      static_cast<long long>(a.queries), static_cast<long long>(kK), t.WallSeconds());
}

// Runs this binary with `step`; returns its RESULT values.
std::map<std::string, double> RunStep(const Args& a, const std::string& self,
                                      const std::string& step, int64_t num_shards = 0,
                                      int64_t shard = 0) {
  std::ostringstream cmd;
  cmd << "'" << self << "' --step " << step << " --n " << a.n << " --dim " << a.dim << " --queries "
      << a.queries << " --train-vectors " << a.train_vectors << " --seed " << a.seed << " --work '"
      << a.work << "' --num-shards " << num_shards << " --shard " << shard;
  FILE* pipe = popen(cmd.str().c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run " + cmd.str());
  std::map<std::string, double> values;
  char line[4096];
  while (std::fgets(line, sizeof line, pipe)) {
    std::istringstream s(line);
    std::string word;
    s >> word;
    if (word != "RESULT") {
      std::fputs(line, stdout);
      continue;
    }
    while (s >> word) {
      const size_t eq = word.find('=');
      values[word.substr(0, eq)] = std::stod(word.substr(eq + 1));
    }
  }
  if (pclose(pipe) != 0 || values.empty()) throw std::runtime_error("step failed: " + cmd.str());
  return values;
}

std::vector<int64_t> ParseList(const std::string& v) {
  std::vector<int64_t> out;
  std::stringstream s(v);
  std::string item;
  while (std::getline(s, item, ',')) out.push_back(std::atoll(item.c_str()));
  return out;
}

bool ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") return false;
    if (i + 1 >= argc) return false;
    const std::string v = argv[++i];
    if (flag == "--n")
      a->n = std::atoll(v.c_str());
    else if (flag == "--dim")
      a->dim = std::atoll(v.c_str());
    else if (flag == "--shards")
      a->shards = ParseList(v);
    else if (flag == "--queries")
      a->queries = std::atoll(v.c_str());
    else if (flag == "--train-vectors")
      a->train_vectors = std::atoll(v.c_str());
    else if (flag == "--seed")
      a->seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (flag == "--work")
      a->work = v;
    else if (flag == "--step")
      a->step = v;
    else if (flag == "--num-shards")
      a->num_shards = std::atoll(v.c_str());
    else if (flag == "--shard")
      a->shard = std::atoll(v.c_str());
    else
      return false;
  }
  for (int64_t s : a->shards)
    if (s < 2) return false;
  return a->n >= 1000 && a->dim >= 2 && a->queries >= 1 && a->train_vectors >= 0 &&
         !a->shards.empty();
}

void PrintComparison(const Args& a, const std::string& self) {
  const auto rebuild = RunStep(a, self, "rebuild");
  std::printf(
      "\n(a) rebuild, on the merging machine (vectors in RAM; read from a flat file in"
      " %.1f s, not counted)\n",
      rebuild.at("read_wall"));
  std::printf(
      "    Build (train on %lld, add %lld): %.1f s wall, %.1f s CPU, peak RSS %.0f MiB"
      " (%.0f MiB once serialized); nlist %.0f, nprobe %.0f, %.0f B codes; serialize %.1f s;"
      " recall@10 %.3f\n",
      static_cast<long long>(64 * AutoNlist(a.n)), static_cast<long long>(a.n), rebuild.at("wall"),
      rebuild.at("cpu"), rebuild.at("rss_mib"), rebuild.at("rss_saved_mib"), rebuild.at("nlist"),
      rebuild.at("nprobe"), rebuild.at("code_bytes"), rebuild.at("serialize_wall"),
      rebuild.at("recall"));
  std::fflush(stdout);
  const auto train = RunStep(a, self, "train");
  std::printf(
      "\n(b) IVF merge\n    train (once, before the shards): %.0f vectors, %.1f s wall,"
      " %.1f s CPU, peak RSS %.0f MiB, trained index %.2f MiB\n",
      train.at("train_vectors"), train.at("wall"), train.at("cpu"), train.at("rss_mib"),
      train.at("blob_mib"));
  std::fflush(stdout);
  for (int64_t s : a.shards) {
    double max_wall = 0, sum_wall = 0, sum_cpu = 0, max_rss = 0, mib = 0;
    for (int64_t i = 0; i < s; ++i) {
      const auto shard = RunStep(a, self, "shard", s, i);
      max_wall = std::max(max_wall, shard.at("wall"));
      sum_wall += shard.at("wall");
      sum_cpu += shard.at("cpu");
      max_rss = std::max(max_rss, shard.at("rss_mib"));
      mib += shard.at("blob_mib");
    }
    const auto merge = RunStep(a, self, "merge", s);
    std::printf(
        "    S = %lld: per shard (deserialize, add %lld, serialize) max %.1f s wall"
        " (all %lld: %.1f s wall, %.1f s CPU), peak RSS max %.0f MiB, %.1f MiB of shard"
        " indexes\n",
        static_cast<long long>(s), static_cast<long long>(a.n / s), max_wall,
        static_cast<long long>(s), sum_wall, sum_cpu, max_rss, mib);
    std::printf(
        "           merge (read %.2f s + deserialize + MergeFrom %.2f s): %.2f s wall,"
        " %.2f s CPU, peak RSS %.0f MiB (%.0f MiB once serialized); nlist %.0f, nprobe"
        " %.0f; serialize %.1f s; recall@10 %.3f\n",
        merge.at("read_wall"), merge.at("merge_from_wall"), merge.at("wall"), merge.at("cpu"),
        merge.at("rss_mib"), merge.at("rss_saved_mib"), merge.at("nlist"), merge.at("nprobe"),
        merge.at("serialize_wall"), merge.at("recall"));
    std::printf("           merge-side time (b)/(a) = %.4f (wall), %.4f (CPU)\n",
                merge.at("wall") / rebuild.at("wall"), merge.at("cpu") / rebuild.at("cpu"));
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!ParseArgs(argc, argv, &a)) {
    std::fprintf(stderr,
                 "usage: ivf_merge [--n 1000000] [--dim 112] [--shards 4,16] [--queries 200]\n"
                 "                 [--train-vectors 0] [--seed 1234] [--work DIR]\n"
                 "(--n >= 1000, shard counts >= 2; see the top of bench/ivf_merge.cc)\n");
    return 2;
  }
  bool own_work = false;
  try {
    if (a.step == "rebuild")
      StepRebuild(a);
    else if (a.step == "train")
      StepTrain(a);
    else if (a.step == "shard")
      StepShard(a);
    else if (a.step == "merge")
      StepMerge(a);
    else if (!a.step.empty())
      throw std::runtime_error("unknown step " + a.step);
    if (!a.step.empty()) return 0;

    own_work = a.work.empty();
    if (own_work) a.work = "/tmp/ivf_merge-" + std::to_string(::getpid());
    fs::create_directories(a.work);
    const std::string self = fs::read_symlink("/proc/self/exe").string();
    std::printf("ivf_merge: N %lld, dim %lld, shards", static_cast<long long>(a.n),
                static_cast<long long>(a.dim));
    for (int64_t s : a.shards) std::printf(" %lld", static_cast<long long>(s));
    std::printf(", %lld queries, seed %llu, %ld CPUs online\n", static_cast<long long>(a.queries),
                static_cast<unsigned long long>(a.seed), ::sysconf(_SC_NPROCESSORS_ONLN));
    Prepare(a);
    PrintComparison(a, self);
    if (own_work) fs::remove_all(a.work);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ivf_merge: %s\n", e.what());
    std::error_code ec;
    if (own_work) fs::remove_all(a.work, ec);
    return 2;
  }
  return 0;
}
