// Would the stored thumbnails make a first stage of their own? For every
// query of a labelled set, the rank of its first relevant image when all the
// database's thumbnails are compared with the query's as tiny images: each
// shrunk to S x S (area averaging), its mean subtracted and L2-normalised, so
// the dot product is their normalised correlation at that size. With
// --windows, each stored thumbnail also offers 9 windows of 70 % of its sides
// (half its area: a crop's original) and the best is kept.
//
// usage: build/bench/thumbnail_candidates --db DB --devset DIR [--side S]
//          [--windows] [--out FILE]
//   DIR holds queries/, gt.csv and queries_meta.csv (../shared/data/devset);
//   the database holds its db/ images (their paths end in db/...).
// Prints, per query kind, how many have their relevant image within the
// first 10 / 50 / 100 / 1,000, and (--out) every query's rank.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "indexer/grey_thumbnail.h"
#include "indexer/image_file.h"
#include "storage/store.h"

namespace {

using lookalike::GreyThumbnail;

// The tiny image of a window of `t` (x, y, w, h in its pixels), S x S.
std::vector<float> Tiny(const GreyThumbnail& t, const cv::Rect& window, int side) {
  const cv::Mat grey(t.height, t.width, CV_8UC1, const_cast<uint8_t*>(t.pixels.data()));
  cv::Mat small;
  cv::resize(grey(window), small, cv::Size(side, side), 0, 0, cv::INTER_AREA);
  std::vector<float> v(static_cast<size_t>(side) * side);
  double mean = 0;
  for (int i = 0; i < side * side; ++i) mean += v[i] = small.data[i];
  mean /= v.size();
  double norm2 = 0;
  for (float& x : v) {
    x = static_cast<float>(x - mean);
    norm2 += double{x} * x;
  }
  const float inv = norm2 > 0 ? static_cast<float>(1.0 / std::sqrt(norm2)) : 0.0f;
  for (float& x : v) x *= inv;
  return v;
}

std::vector<cv::Rect> Windows(const GreyThumbnail& t, bool crops) {
  std::vector<cv::Rect> out = {cv::Rect(0, 0, t.width, t.height)};
  if (!crops) return out;
  const int w = std::max(1, static_cast<int>(std::lround(0.7 * t.width)));
  const int h = std::max(1, static_cast<int>(std::lround(0.7 * t.height)));
  for (int iy = 0; iy < 3; ++iy)
    for (int ix = 0; ix < 3; ++ix)
      out.emplace_back(ix * (t.width - w) / 2, iy * (t.height - h) / 2, w, h);
  return out;
}

std::vector<std::vector<std::string>> ReadCsv(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<std::string> f;
    std::string cell;
    bool quoted = false;
    for (char c : line) {
      if (c == '"') {
        quoted = !quoted;
      } else if (c == ',' && !quoted) {
        f.push_back(cell);
        cell.clear();
      } else {
        cell += c;
      }
    }
    f.push_back(cell);
    rows.push_back(f);
  }
  return rows;
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string db, devset, out;
  int side = 8;
  bool windows = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--db" && i + 1 < argc) {
      db = argv[++i];
    } else if (a == "--devset" && i + 1 < argc) {
      devset = argv[++i];
    } else if (a == "--side" && i + 1 < argc) {
      side = std::stoi(argv[++i]);
    } else if (a == "--windows") {
      windows = true;
    } else if (a == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: thumbnail_candidates --db DB --devset DIR [--side S] [--windows] "
                   "[--out FILE]\n");
      return 2;
    }
  }
  if (db.empty() || devset.empty() || side < 2) {
    std::fprintf(stderr, "thumbnail_candidates: --db and --devset are required\n");
    return 2;
  }
  auto store = lookalike::Store::Open(db, lookalike::Store::Mode::kReadOnly);
  std::map<uint64_t, std::string> path_of;
  store->ForEachImage([&](const lookalike::ImageRecord& r) { path_of[r.id] = r.path; });
  const std::vector<uint64_t> ids = store->IdsWithThumbnails();
  const size_t dim = static_cast<size_t>(side) * side;
  std::vector<float> table;   // one row per window
  std::vector<size_t> owner;  // window -> index in ids
  for (size_t start = 0; start < ids.size(); start += 4096) {
    const std::vector<uint64_t> chunk(ids.begin() + start,
                                      ids.begin() + std::min(ids.size(), start + 4096));
    const auto values = store->GetThumbnails(chunk);
    for (size_t j = 0; j < chunk.size(); ++j) {
      if (!values[j]) continue;
      const GreyThumbnail t = lookalike::DecodeGreyThumbnail(*values[j]);
      for (const cv::Rect& w : Windows(t, windows)) {
        const std::vector<float> v = Tiny(t, w, side);
        table.insert(table.end(), v.begin(), v.end());
        owner.push_back(start + j);
      }
    }
  }
  std::printf("%zu thumbnails, %zu windows, %d x %d\n", ids.size(), owner.size(), side, side);

  std::map<std::string, std::string> relevant, kind;  // query -> db path tail, kind
  for (const auto& r : ReadCsv(devset + "/gt.csv"))
    if (r.size() >= 2 && !relevant.count(r[0])) relevant[r[0]] = r[1];
  for (const auto& r : ReadCsv(devset + "/queries_meta.csv"))
    if (r.size() >= 3) kind[r[0]] = r[1] == "copy" ? "copy:" + r[2] : r[1];
  std::map<std::string, std::vector<int64_t>> ranks_by_kind;
  std::ofstream per_query;
  if (!out.empty()) per_query.open(out);
  lookalike::ImageFileLimits limits;
  for (const auto& [query, tail] : relevant) {
    const lookalike::LoadResult loaded =
        lookalike::LoadImageFile(devset + "/" + query, 512, limits);
    if (!loaded.image) continue;
    const GreyThumbnail q =
        lookalike::MakeGreyThumbnail(loaded.image->gray, lookalike::kQueryThumbnailSide);
    const std::vector<float> qv = Tiny(q, cv::Rect(0, 0, q.width, q.height), side);
    std::vector<float> best(ids.size(), -2.0f);
    for (size_t w = 0; w < owner.size(); ++w) {
      const float* row = table.data() + w * dim;
      float dot = 0;
      for (size_t k = 0; k < dim; ++k) dot += row[k] * qv[k];
      best[owner[w]] = std::max(best[owner[w]], dot);
    }
    // The rank of the best-scoring relevant image (gt lists the first one).
    float target = -3.0f;
    for (size_t i = 0; i < ids.size(); ++i)
      if (EndsWith(path_of[ids[i]], "/" + tail)) target = std::max(target, best[i]);
    int64_t rank = 0;
    if (target > -3.0f) {
      rank = 1;
      for (float s : best) rank += s > target;
    }
    ranks_by_kind[kind[query]].push_back(rank);
    ranks_by_kind["all"].push_back(rank);
    if (per_query)
      per_query << query << '\t' << kind[query] << '\t' << rank << '\t' << target << '\n';
  }
  for (const auto& [k, ranks] : ranks_by_kind) {
    int within[4] = {0, 0, 0, 0};
    const int64_t limit[4] = {10, 50, 100, 1000};
    for (int64_t r : ranks)
      for (int j = 0; j < 4; ++j) within[j] += r > 0 && r <= limit[j];
    std::printf("%-12s %3zu queries: relevant within 10 %3d, 50 %3d, 100 %3d, 1000 %3d\n",
                k.c_str(), ranks.size(), within[0], within[1], within[2], within[3]);
  }
  return 0;
}
