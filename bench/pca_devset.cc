// PCA(-whitening) settings compared on a labelled set without re-indexing:
// reads the stored VLAD vectors of a database built without a projection,
// encodes the queries once, then for each setting learns the projection from
// the database's vectors (what `index --pca-dim` learns from its training
// sample when every image is sampled and cached, as for the 97-image
// development set), ranks every database image by cosine similarity of the
// projected vectors (VLAD alone, no re-ranking) and writes one TSV per
// setting in the `search --format tsv` layout, for evaluate.py.
//
//   build/tools/lookalike index DEVSET/db --db /tmp/dev-db
//   build/bench/pca_devset --db /tmp/dev-db --queries DEVSET/queries --out /tmp/pca
//       off 96 64 32 96:nowhiten 96:reg=0 96:power=0.5        (one command line)
//   for f in /tmp/pca/*.tsv; do
//     python3 DEVSET/../evaluate.py DEVSET/gt.csv $f --groups DEVSET/queries_meta.csv
//   done
//
// A setting is "off" or DIM[:nowhiten][:reg=R][:power=A][:f32|:f16][:qB[:clip=C]]:
// the matrix as stored by default (4-bit), as float32 or float16; or, as an
// experiment, the float32 matrix on a grid of 2^B levels per row spanning its
// largest magnitude, or +-C x its RMS.
//
//   build/bench/pca_devset --timing 1000 256 [--f32]
// times the costs at K = 512 on synthetic unit vectors instead: learning from
// 1000 vectors, the m:pca bytes, loading it (Store::GetProjection +
// SearchProjection), projecting one query and 1000 stored vectors.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "indexer/file_walker.h"
#include "indexer/model.h"
#include "indexer/projection.h"
#include "indexer/search_vectors.h"
#include "search/searcher.h"
#include "storage/encoding.h"
#include "storage/store.h"
#include "storage/values.h"

namespace {

using namespace lookalike;
using Clock = std::chrono::steady_clock;

struct Setting {
  std::string name;
  bool off = false;
  int quant_bits = 0;  // components rounded to this many bits per value (0 = off)
  float clip = 0;      // ... over +-clip x the row's RMS (0 = its largest magnitude)
  ProjectionOptions options;
};

Setting ParseSetting(const std::string& text) {
  Setting s;
  s.name = text;
  if (text == "off") {
    s.off = true;
    return s;
  }
  s.options.component_bits = 4;  // the matrix a large collection stores
  std::stringstream in(text);
  std::string part;
  std::getline(in, part, ':');
  s.options.out_dim = std::stoi(part);
  while (std::getline(in, part, ':')) {
    if (part == "nowhiten")
      s.options.whiten = false;
    else if (part == "f32")
      s.options.component_bits = 32;
    else if (part == "f16")
      s.options.component_bits = 16;
    else if (part.rfind("clip=", 0) == 0)
      s.clip = std::stof(part.substr(5));
    else if (part.rfind("q", 0) == 0) {
      s.quant_bits = std::stoi(part.substr(1));
      s.options.component_bits = 32;
    } else if (part.rfind("reg=", 0) == 0)
      s.options.eigen_regularization = std::stof(part.substr(4));
    else if (part.rfind("power=", 0) == 0)
      s.options.power_alpha = std::stof(part.substr(6));
    else
      throw std::invalid_argument("unknown setting part '" + part + "'");
  }
  s.options.Validate();
  return s;
}

}  // namespace

int Timing(int64_t n, int out_dim, bool half) {
  const int64_t dim = 512 * 128;
  auto secs = [](Clock::time_point a) {
    return std::chrono::duration<double>(Clock::now() - a).count();
  };
  std::mt19937_64 rng(1);
  std::normal_distribution<float> g;
  std::vector<float> x(n * dim);
  for (int64_t i = 0; i < n; ++i) {
    double norm2 = 0;
    for (int64_t j = 0; j < dim; ++j) {
      // A few shared directions plus noise, so the spectrum decays.
      float v = g(rng) * (j % 97 == 0 ? 8.0f : 1.0f);
      x[i * dim + j] = v;
      norm2 += double{v} * v;
    }
    const float inv = static_cast<float>(1.0 / std::sqrt(norm2));
    for (int64_t j = 0; j < dim; ++j) x[i * dim + j] *= inv;
  }
  ProjectionOptions o;
  o.out_dim = out_dim;
  o.component_bits = half ? 16 : 32;
  auto t = Clock::now();
  const ProjectionRecord rec = LearnProjection(x.data(), n, dim, o);
  std::printf("learn from %lld vectors -> %u dims: %.2f s\n", static_cast<long long>(n),
              rec.out_dim, secs(t));
  const std::string db = "/tmp/pca_devset_timing." + std::to_string(::getpid());
  std::filesystem::remove_all(db);
  ModelRecord m;
  m.num_clusters = 512;
  m.max_side = 512;
  m.centroids.assign(m.vlad_dim(), 0.0f);
  m.codebook_hash = encoding::Fnv1a64(m.centroids.data(), m.centroids.size() * 4);
  t = Clock::now();
  Store::Create(db, m, &rec);
  std::printf("create with projection: %.2f s\n", secs(t));
  {
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    for (int round = 0; round < 3; ++round) {
      t = Clock::now();
      const auto loaded = store->GetProjection();
      const double get_s = secs(t);
      t = Clock::now();
      const SearchProjection sp = SearchProjection::FromRecord(&*loaded, dim);
      std::printf("load: GetProjection %.3f s + SearchProjection %.3f s\n", get_s, secs(t));
      if (round < 2) continue;
      std::vector<float> out(1000 * sp.out_dim());
      t = Clock::now();
      for (int q = 0; q < 20; ++q) sp.Apply(x.data() + q * dim, 1, out.data());
      std::printf("project one query: %.2f ms\n", secs(t) * 1e3 / 20);
      const int64_t batch = std::min<int64_t>(n, 1000);
      t = Clock::now();
      sp.Apply(x.data(), batch, out.data());
      std::printf("project %lld stored vectors: %.3f s\n", static_cast<long long>(batch), secs(t));
    }
  }
  std::printf(
      "database size on disk (model + projection): %.1f MiB\n",
      static_cast<double>(Store::Open(db, Store::Mode::kReadOnly)->SizeOnDisk()) / (1 << 20));
  std::printf("m:pca value: %zu bytes\n", store_detail::EncodeProjection(rec).size());
  std::filesystem::remove_all(db);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 4 && std::string(argv[1]) == "--timing")
    return Timing(std::atoll(argv[2]), std::atoi(argv[3]),
                  !(argc >= 5 && std::string(argv[4]) == "--f32"));
  std::string db, queries, out_dir;
  std::vector<Setting> settings;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--db" && i + 1 < argc)
      db = argv[++i];
    else if (a == "--queries" && i + 1 < argc)
      queries = argv[++i];
    else if (a == "--out" && i + 1 < argc)
      out_dir = argv[++i];
    else
      settings.push_back(ParseSetting(a));
  }
  if (db.empty() || queries.empty() || out_dir.empty() || settings.empty()) {
    std::cerr << "usage: pca_devset --db DB --queries DIR --out DIR SETTING...\n"
                 "  SETTING: off | DIM[:nowhiten][:reg=R][:power=A][:f32|:f16][:qB[:clip=C]]\n";
    return 2;
  }
  std::filesystem::create_directories(out_dir);
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  const int64_t dim = static_cast<int64_t>(store->model().vlad_dim());
  std::vector<float> base;
  std::vector<std::string> paths;
  // Full VLAD vectors, stored (schemas 1-2) or derived from the stored
  // features (schema 3 without a projection).
  const SearchVectors vectors(*store);
  if (vectors.dim() != dim) {
    std::cerr << "pca_devset: " << db << " has a PCA projection; index it with --pca-dim 0\n";
    return 2;
  }
  vectors.ForEach([&](const std::vector<ImageRecord>& records, const float* v) {
    for (size_t i = 0; i < records.size(); ++i) {
      if (records[i].status == ImageStatus::kNoFeatures) continue;
      paths.push_back(records[i].path);
      base.insert(base.end(), v + i * dim, v + (i + 1) * dim);
    }
  });
  const int64_t n = static_cast<int64_t>(paths.size());
  std::vector<FileError> errors;
  const std::vector<std::string> query_paths = ExpandQueryPaths({queries}, &errors);
  ImageEncoder encoder(store->model(), Backend::kCpu);
  std::vector<float> qv;
  std::vector<std::string> qnames;
  for (const std::string& q : query_paths) {
    ImageEncoder::Result r = encoder.EncodeFile(q, ImageFileLimits());
    if (r.error) continue;
    qnames.push_back(q);
    qv.insert(qv.end(), r.vlad.begin(), r.vlad.end());
  }
  const int64_t nq = static_cast<int64_t>(qnames.size());
  std::cerr << n << " database vectors, " << nq << " queries, VLAD " << dim << "-d\n";
  for (const Setting& s : settings) {
    const auto t0 = Clock::now();
    SearchProjection sp = SearchProjection::FromRecord(nullptr, dim);
    double learn_s = 0;
    if (!s.off) {
      const ProjectionRecord rec = LearnProjection(base.data(), n, dim, s.options);
      learn_s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (s.quant_bits > 0) {
        // An experiment beside the stored formats: the float32 matrix put on
        // a uniform grid of 2^bits levels per row, symmetric, its range the
        // row's largest magnitude or +-clip x its RMS.
        ProjectionRecord q = rec;
        const int64_t w = static_cast<int64_t>(q.in_dim);
        const float levels = static_cast<float>((1 << (s.quant_bits - 1)) - 1) + 0.5f;
        for (uint32_t c = 0; c < q.out_dim; ++c) {
          float* row = q.components.data() + c * w;
          float mx = 0;
          double ss = 0;
          for (int64_t j = 0; j < w; ++j) {
            mx = std::max(mx, std::fabs(row[j]));
            ss += double{row[j]} * row[j];
          }
          if (s.clip > 0) mx = std::min(mx, s.clip * static_cast<float>(std::sqrt(ss / w)));
          const float step = mx / levels;
          const float top = levels - 0.5f;
          for (int64_t j = 0; j < w; ++j)
            row[j] = step * (std::clamp(std::floor(row[j] / step), -top - 1, top) + 0.5f);
        }
        sp = SearchProjection::FromRecord(&q, dim);
      } else {
        // Through the stored encoding (m:pca), so its rounding is included.
        const ProjectionRecord stored = store_detail::DecodeProjection(
            store_detail::EncodeProjection(rec), static_cast<uint64_t>(dim));
        sp = SearchProjection::FromRecord(&stored, dim);
      }
    }
    const int64_t od = sp.out_dim();
    std::vector<float> pb(n * od), pq(nq * od);
    const auto t1 = Clock::now();
    sp.Apply(base.data(), n, pb.data());
    const auto t2 = Clock::now();
    sp.Apply(qv.data(), nq, pq.data());
    const auto t3 = Clock::now();
    std::ofstream tsv(out_dir + "/" + s.name + ".tsv");
    for (int64_t q = 0; q < nq; ++q) {
      std::vector<std::pair<float, int64_t>> scored(n);
      for (int64_t i = 0; i < n; ++i) {
        double dot = 0;
        for (int64_t j = 0; j < od; ++j) dot += double{pq[q * od + j]} * pb[i * od + j];
        scored[i] = {static_cast<float>(dot), i};
      }
      std::sort(scored.begin(), scored.end(),
                [](const auto& a, const auto& b) { return a.first > b.first; });
      for (int64_t r = 0; r < std::min<int64_t>(100, n); ++r)
        tsv << qnames[q] << '\t' << r + 1 << '\t' << paths[scored[r].second] << '\t'
            << scored[r].first << '\n';
    }
    std::fprintf(stderr, "%-24s out %5lld  learn %.2f s  project db %.3f s  queries %.2f ms each\n",
                 s.name.c_str(), static_cast<long long>(od), learn_s,
                 std::chrono::duration<double>(t2 - t1).count(),
                 1e3 * std::chrono::duration<double>(t3 - t2).count() / std::max<int64_t>(1, nq));
  }
  return 0;
}
