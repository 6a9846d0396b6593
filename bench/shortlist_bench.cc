// Verification's nearest-neighbour shortlists (search/subspace_shortlist.h):
// the fused AVX2 kernel against the BLAS product and scan it replaces, on
// one thread, at the shapes of a search query (its 2,000 strongest
// features, about 1,000 per candidate image, 32 principal components,
// shortlists of 4). Rows are Gaussian, normalised, as projected RootSIFT's
// are roughly; both implementations get the same rows, and the share of
// query rows whose shortlists agree is printed beside the times.
//
// usage: build/bench/shortlist_bench [--nq 2000] [--nc 1000] [--dim 32]
//                                    [--shortlist 4] [--images 200]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "search/subspace_shortlist.h"
#include "util/threads.h"

namespace {

std::vector<float> UnitRows(int n, int dim, std::mt19937* rng) {
  std::normal_distribution<float> g;
  std::vector<float> rows(static_cast<size_t>(n) * dim);
  for (int i = 0; i < n; ++i) {
    float* r = rows.data() + static_cast<size_t>(i) * dim;
    double norm2 = 0;
    for (int k = 0; k < dim; ++k) {
      r[k] = g(*rng);
      norm2 += double{r[k]} * r[k];
    }
    for (int k = 0; k < dim; ++k) r[k] /= static_cast<float>(std::sqrt(norm2));
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  int nq = 2000, nc = 1000, dim = 32, shortlist = 4, images = 200;
  if (argc % 2 == 0) {
    std::fprintf(stderr, "shortlist_bench: flag %s has no value\n", argv[argc - 1]);
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (flag == "--nq")
      nq = v;
    else if (flag == "--nc")
      nc = v;
    else if (flag == "--dim")
      dim = v;
    else if (flag == "--shortlist")
      shortlist = v;
    else if (flag == "--images")
      images = v;
    else {
      std::fprintf(stderr, "shortlist_bench: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (nq < 1 || nc < 1 || dim < 1 || shortlist < 1 || shortlist > 64 || images < 1) {
    std::fprintf(stderr,
                 "shortlist_bench: --nq, --nc, --dim and --images must be >= 1 and --shortlist "
                 "1..64\n");
    return 2;
  }
  lookalike::SetLibraryThreads(1);  // one BLAS thread, as search runs it
  std::mt19937 rng(1234);
  const std::vector<float> query = UnitRows(nq, dim, &rng);
  std::vector<std::vector<float>> candidates;
  for (int c = 0; c < 8; ++c) candidates.push_back(UnitRows(nc, dim, &rng));
  std::vector<int> blas(static_cast<size_t>(nq) * shortlist), fused(blas.size());
  if (!lookalike::SubspaceShortlistsFused(query.data(), nq, candidates[0].data(), nc, dim,
                                          shortlist, fused.data())) {
    std::printf("this CPU or build has no AVX2 and FMA: only the BLAS path runs\n");
    return 0;
  }
  using Clock = std::chrono::steady_clock;
  double t_blas = 0, t_fused = 0;
  long agree = 0, rows = 0;
  // Alternating, so the machine's drift falls on both.
  for (int i = 0; i < images; ++i) {
    const std::vector<float>& cand = candidates[static_cast<size_t>(i) % candidates.size()];
    auto t0 = Clock::now();
    lookalike::SubspaceShortlistsBlas(query.data(), nq, cand.data(), nc, dim, shortlist,
                                      blas.data());
    auto t1 = Clock::now();
    lookalike::SubspaceShortlistsFused(query.data(), nq, cand.data(), nc, dim, shortlist,
                                       fused.data());
    auto t2 = Clock::now();
    t_blas += std::chrono::duration<double>(t1 - t0).count();
    t_fused += std::chrono::duration<double>(t2 - t1).count();
    for (int q = 0; q < nq; ++q, ++rows)
      agree += std::memcmp(blas.data() + static_cast<size_t>(q) * shortlist,
                           fused.data() + static_cast<size_t>(q) * shortlist,
                           sizeof(int) * static_cast<size_t>(shortlist)) == 0;
  }
  std::printf("%d query rows x %d candidate rows x %d dims, shortlists of %d, %d images\n", nq, nc,
              dim, shortlist, images);
  std::printf("BLAS product + scan (baseline): %.3f ms per image\n", 1e3 * t_blas / images);
  std::printf("fused kernel:                   %.3f ms per image (%.2fx the baseline)\n",
              1e3 * t_fused / images, t_fused / t_blas);
  std::printf("query rows whose shortlists are identical: %.4f\n",
              static_cast<double>(agree) / static_cast<double>(rows));
  return 0;
}
