// grow_distractors: a shard of N synthetic distractor images for the large
// points of the distractor curve (bench/distractor_curve.sh, N = 100,000),
// where extracting N real images would take hours. Each synthetic image is a
// collage of two real distractors' stored local features: the keypoints of
// image a on one side of a random line through the frame, those of image b
// (mapped into a's frame) on the other. Every descriptor, its position and
// scale are real, the combination is new, and everything search uses is
// derived from it exactly as `index` derives it from an image's features:
// the compact feature blob (re-encoded with the database's descriptor
// quantizer), the VLAD vector of the decoded descriptors and its PCA
// projection (the search vector), and later, in `merge`, the word
// signatures. The colour histogram is the mean of the two; the grey
// thumbnail search correlates (indexer/grey_thumbnail.h) is the same collage
// of the two sources' thumbnails, when both have one.
//
// usage: grow_distractors --from DB --out SHARD --images N --source-prefix P [--seed X]
//                         [--start I]
//        grow_distractors --from DB --thumbnails-into GROWN --source-prefix P [--seed X]
//
// DB is a schema-3 database with a PCA (it stores search vectors); only its
// images whose path starts with P are sources, so nothing is derived from a
// relevant image of the dev set. SHARD is created with DB's model, as
// `index --model-from DB` would, and can be merged into a copy of DB with
// `lookalike merge`. Paths are /synthetic/<i / 1000>/<i>.jpg for i = I .. I + N - 1
// (I = --start, default 0): image i depends only on the seed and i, so a run
// stopped early is continued by another shard from where it stopped.
//
// The second form gives thumbnails to a database grown before synthetic
// images had them (GROWN: DB merged with shards made with the same seed and
// prefix): each image of GROWN without one gets its collage's, or, for a
// real image, DB's thumbnail of the same path. Nothing else is written.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "indexer/grey_thumbnail.h"
#include "indexer/local_features.h"
#include "indexer/model.h"
#include "indexer/projection.h"
#include "indexer/vlad.h"
#include "storage/store.h"
#include "util/timing.h"

using namespace lookalike;

namespace {

struct Source {
  ImageRecord record;
  std::string features;
};

// The collage of a and b: a's keypoints where n . (x, y) >= c in a's unit
// frame, b's (scaled into a's frame) where it is below.
Descriptors Collage(const LocalFeatures& a, const LocalFeatures& b, float nx, float ny, float c) {
  Descriptors out;
  out.dim = a.dim;
  const float sx = static_cast<float>(a.width) / std::max<uint32_t>(b.width, 1);
  const float sy = static_cast<float>(a.height) / std::max<uint32_t>(b.height, 1);
  const float ss = std::sqrt(sx * sy);
  auto side = [&](float x, float y) {
    return nx * x / std::max<uint32_t>(a.width, 1) + ny * y / std::max<uint32_t>(a.height, 1) >= c;
  };
  for (int64_t i = 0; i < a.num(); ++i) {
    const Keypoint& k = a.keypoints[i];
    if (!side(k.x, k.y)) continue;
    out.keypoints.push_back(k);
    out.values.insert(out.values.end(), a.descriptors.begin() + i * a.dim,
                      a.descriptors.begin() + (i + 1) * a.dim);
  }
  for (int64_t i = 0; i < b.num(); ++i) {
    Keypoint k = b.keypoints[i];
    k.x *= sx;
    k.y *= sy;
    k.size *= ss;
    if (side(k.x, k.y)) continue;
    out.keypoints.push_back(k);
    out.values.insert(out.values.end(), b.descriptors.begin() + i * b.dim,
                      b.descriptors.begin() + (i + 1) * b.dim);
  }
  out.num = static_cast<int64_t>(out.keypoints.size());
  return out;
}

// Synthetic image i's sources and line: they depend only on the seed and i.
struct Pick {
  size_t a = 0, b = 0;
  float nx = 0, ny = 0, c = 0;  // a's side: nx x + ny y >= c, in the unit frame
};
Pick Choose(uint64_t seed, int64_t i, size_t num_sources) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i));
  std::uniform_int_distribution<size_t> pick(0, num_sources - 1);
  Pick p;
  p.a = pick(rng);
  p.b = pick(rng);
  if (p.b == p.a) p.b = (p.a + 1) % num_sources;
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const float theta = 6.2831853f * unit(rng);
  p.nx = std::cos(theta);
  p.ny = std::sin(theta);
  // Through a point in the central half of the frame: each side keeps
  // a real share of its image.
  const float px = 0.25f + 0.5f * unit(rng), py = 0.25f + 0.5f * unit(rng);
  p.c = p.nx * px + p.ny * py;
  return p;
}

// The thumbnail of the collage: a's pixels on a's side of the line, b's
// (stretched to a's frame, as its keypoints are) on the other; empty unless
// both sources have a thumbnail.
std::string CollageThumbnail(const std::optional<std::string>& a_blob,
                             const std::optional<std::string>& b_blob, const Pick& p) {
  if (!a_blob || !b_blob) return {};
  const GreyThumbnail a = DecodeGreyThumbnail(*a_blob), b = DecodeGreyThumbnail(*b_blob);
  if (a.empty() || b.empty()) return {};
  cv::Mat stretched;
  cv::resize(cv::Mat(b.height, b.width, CV_8UC1, const_cast<uint8_t*>(b.pixels.data())), stretched,
             cv::Size(a.width, a.height), 0, 0, cv::INTER_AREA);
  GreyThumbnail out = a;
  for (int y = 0; y < a.height; ++y)
    for (int x = 0; x < a.width; ++x)
      if (p.nx * (x + 0.5f) / a.width + p.ny * (y + 0.5f) / a.height < p.c)
        out.pixels[static_cast<size_t>(y) * a.width + x] = stretched.at<uint8_t>(y, x);
  return EncodeGreyThumbnail(out);
}

// Synthetic image i's path.
std::string SyntheticPath(int64_t i) {
  return "/synthetic/" + std::to_string(i / 1000) + "/" + std::to_string(i) + ".jpg";
}

// The second form of the usage: thumbnails for every image of `grown`
// without one. Returns the exit status.
int AddThumbnails(const Store& real, const std::vector<Source>& sources,
                  const std::vector<std::optional<std::string>>& source_thumbnails,
                  const DescriptorQuantizer& quantizer, const std::string& grown_path,
                  uint64_t seed) {
  auto grown = Store::Open(grown_path, Store::Mode::kReadWrite);
  const std::vector<uint64_t> have = grown->IdsWithThumbnails();
  std::vector<ImageRecord> todo;
  grown->ForEachImage([&](const ImageRecord& r) {
    if (!std::binary_search(have.begin(), have.end(), r.id)) todo.push_back(r);
  });
  int64_t synthetic = 0, copied = 0, none = 0;
  const std::string prefix = "/synthetic/";
  for (const ImageRecord& r : todo) {
    std::string blob;
    if (r.path.compare(0, prefix.size(), prefix) == 0) {
      const int64_t i = std::atoll(r.path.c_str() + r.path.rfind('/') + 1);
      if (SyntheticPath(i) != r.path) throw std::runtime_error("not a synthetic path: " + r.path);
      const Pick p = Choose(seed, i, sources.size());
      // The same collage as when it was grown, or the wrong sources: its
      // keypoint count says which.
      const int64_t num =
          Collage(DecodeLocalFeatures(sources[p.a].features, &quantizer),
                  DecodeLocalFeatures(sources[p.b].features, &quantizer), p.nx, p.ny, p.c)
              .num;
      if (num != r.num_descriptors)
        throw std::runtime_error(r.path + " has " + std::to_string(r.num_descriptors) +
                                 " keypoints, its collage under this seed and prefix " +
                                 std::to_string(num) + ": not grown from this database");
      blob = CollageThumbnail(source_thumbnails[p.a], source_thumbnails[p.b], p);
      if (!blob.empty()) ++synthetic;
    } else if (const auto same = real.FindByPath(r.path)) {
      if (auto t = real.GetThumbnails({same->id})[0]) blob = std::move(*t);
      if (!blob.empty()) ++copied;
    }
    if (blob.empty()) {
      ++none;
      continue;
    }
    grown->PutThumbnail(r.id, blob);
  }
  std::printf("%s: thumbnails for %lld synthetic and %lld real images; %lld left without\n",
              grown_path.c_str(), static_cast<long long>(synthetic), static_cast<long long>(copied),
              static_cast<long long>(none));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string from, out, prefix, thumbnails_into;
  int64_t images = 0, start = 0;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--from")
      from = v;
    else if (a == "--out")
      out = v;
    else if (a == "--images")
      images = std::atoll(v.c_str());
    else if (a == "--source-prefix")
      prefix = v;
    else if (a == "--start")
      start = std::atoll(v.c_str());
    else if (a == "--seed")
      seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (a == "--thumbnails-into")
      thumbnails_into = v;
    else {
      std::fprintf(stderr, "grow_distractors: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  const bool grow = thumbnails_into.empty();
  if (from.empty() || prefix.empty() || (grow && (out.empty() || images < 1 || start < 0))) {
    std::fprintf(stderr,
                 "usage: grow_distractors --from DB --out SHARD --images N --source-prefix P "
                 "[--seed X] [--start I]\n"
                 "       grow_distractors --from DB --thumbnails-into GROWN --source-prefix P "
                 "[--seed X]\n");
    return 2;
  }
  try {
    auto real = Store::Open(from, Store::Mode::kReadOnly);
    const auto projection_record = real->GetProjection();
    const auto quantizer = LoadDescriptorQuantizer(*real);
    if (real->schema_version() < 3 || !projection_record || !quantizer) {
      std::fprintf(stderr,
                   "grow_distractors: %s is not a compact database with a PCA (schema 3, "
                   "over --pca-min-images images)\n",
                   from.c_str());
      return 2;
    }
    const SearchProjection projection = SearchProjection::FromStore(*real);
    auto encoder = CreateVladEncoder(Backend::kCpu, CodebookFromModel(real->model()),
                                     SettingsFromModel(real->model()).vlad);
    std::vector<Source> sources;
    real->ForEachImage([&](const ImageRecord& r) {
      if (r.status != ImageStatus::kOk || r.path.compare(0, prefix.size(), prefix) != 0) return;
      if (auto f = real->GetFeatures(r.id)) sources.push_back(Source{r, std::move(*f)});
    });
    if (sources.size() < 2) {
      std::fprintf(stderr, "grow_distractors: fewer than 2 images of %s start with %s\n",
                   from.c_str(), prefix.c_str());
      return 2;
    }
    std::printf("sources: %zu images under %s\n", sources.size(), prefix.c_str());
    std::vector<uint64_t> source_ids;
    for (const Source& src : sources) source_ids.push_back(src.record.id);
    const std::vector<std::optional<std::string>> source_thumbnails =
        real->GetThumbnails(source_ids);
    if (!grow)
      return AddThumbnails(*real, sources, source_thumbnails, *quantizer, thumbnails_into, seed);
    const auto words = real->GetModelWordVocabulary();
    auto store = Store::Create(out, real->model(), &*projection_record, real->schema_version(),
                               *real->GetDescriptorQuantizer(), words ? *words : std::string());
    const auto t = SteadyClock::now();
    constexpr int64_t kBatch = 256;
    const int64_t vlad_dim = encoder->vlad_dim();
    const int64_t dim = projection.out_dim();
    int64_t descriptors_total = 0;
    for (int64_t begin = 0; begin < images; begin += kBatch) {
      const int64_t n = std::min(kBatch, images - begin);
      std::vector<ImageRecord> records(n);
      std::vector<std::string> blobs(n), thumbnails(n);
      std::vector<std::vector<float>> decoded(n);
#pragma omp parallel for schedule(dynamic, 4)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t i = start + begin + j;
        const Pick p = Choose(seed, i, sources.size());
        const size_t ia = p.a, ib = p.b;
        const LocalFeatures a = DecodeLocalFeatures(sources[ia].features, &*quantizer);
        const LocalFeatures b = DecodeLocalFeatures(sources[ib].features, &*quantizer);
        const Descriptors collage = Collage(a, b, p.nx, p.ny, p.c);
        blobs[j] = EncodeCompactFeatures(collage, a.width, a.height, *quantizer, &decoded[j]);
        thumbnails[j] = CollageThumbnail(source_thumbnails[ia], source_thumbnails[ib], p);
        ImageRecord r = sources[ia].record;
        r.id = 0;
        r.path = SyntheticPath(i);
        r.content_hash = std::hash<std::string>()(r.path) ^ (seed << 1);
        r.num_descriptors = static_cast<uint32_t>(collage.num);
        r.status = collage.num > 0 ? ImageStatus::kOk : ImageStatus::kNoFeatures;
        const std::vector<uint8_t>& cb = sources[ib].record.colour;
        if (r.colour.size() == cb.size())
          for (size_t k = 0; k < cb.size(); ++k)
            r.colour[k] = static_cast<uint8_t>((r.colour[k] + cb[k] + 1) / 2);
        records[j] = std::move(r);
      }
      std::vector<float> descriptors;
      std::vector<int64_t> offsets{0};
      for (int64_t j = 0; j < n; ++j) {
        descriptors.insert(descriptors.end(), decoded[j].begin(), decoded[j].end());
        offsets.push_back(offsets.back() + records[j].num_descriptors);
      }
      descriptors_total += offsets.back();
      std::vector<float> vlad(static_cast<size_t>(n * vlad_dim));
      encoder->Encode(descriptors.data(), offsets.data(), n, vlad.data());
      std::vector<float> search(static_cast<size_t>(n * dim));
      projection.Apply(vlad.data(), n, search.data());
      for (int64_t j = 0; j < n; ++j)
        store->PutImage(&records[j], search.data() + j * dim, blobs[j], thumbnails[j]);
      if ((begin / kBatch) % 40 == 0) {
        std::printf("  %lld / %lld\n", static_cast<long long>(begin + n),
                    static_cast<long long>(images));
        std::fflush(stdout);
      }
    }
    store->Flush();
    const double seconds = SecondsBetween(t, SteadyClock::now());
    std::printf("%s: %lld images (%.0f descriptors each) in %.1f s, %.1f MiB\n", out.c_str(),
                static_cast<long long>(images), static_cast<double>(descriptors_total) / images,
                seconds, store->SizeOnDisk() / 1048576.0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grow_distractors: %s\n", e.what());
    return 2;
  }
  return 0;
}
