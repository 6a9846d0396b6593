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
// signatures. The colour histogram is the mean of the two.
//
// usage: grow_distractors --from DB --out SHARD --images N --source-prefix P [--seed X]
//                         [--start I]
//
// DB is a schema-3 database with a PCA (it stores search vectors); only its
// images whose path starts with P are sources, so nothing is derived from a
// relevant image of the dev set. SHARD is created with DB's model, as
// `index --model-from DB` would, and can be merged into a copy of DB with
// `lookalike merge`. Paths are /synthetic/<i / 1000>/<i>.jpg for i = I .. I + N - 1
// (I = --start, default 0): image i depends only on the seed and i, so a run
// stopped early is continued by another shard from where it stopped.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

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

}  // namespace

int main(int argc, char** argv) {
  std::string from, out, prefix;
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
    else {
      std::fprintf(stderr, "grow_distractors: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  if (from.empty() || out.empty() || images < 1 || prefix.empty() || start < 0) {
    std::fprintf(stderr,
                 "usage: grow_distractors --from DB --out SHARD --images N --source-prefix P "
                 "[--seed X] [--start I]\n");
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
    auto store = Store::Create(out, real->model(), &*projection_record, real->schema_version(),
                               *real->GetDescriptorQuantizer());
    const auto t = SteadyClock::now();
    constexpr int64_t kBatch = 256;
    const int64_t vlad_dim = encoder->vlad_dim();
    const int64_t dim = projection.out_dim();
    int64_t descriptors_total = 0;
    for (int64_t begin = 0; begin < images; begin += kBatch) {
      const int64_t n = std::min(kBatch, images - begin);
      std::vector<ImageRecord> records(n);
      std::vector<std::string> blobs(n);
      std::vector<std::vector<float>> decoded(n);
#pragma omp parallel for schedule(dynamic, 4)
      for (int64_t j = 0; j < n; ++j) {
        // Image i's sources and line depend only on the seed and i.
        const int64_t i = start + begin + j;
        std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i));
        std::uniform_int_distribution<size_t> pick(0, sources.size() - 1);
        const size_t ia = pick(rng);
        size_t ib = pick(rng);
        if (ib == ia) ib = (ia + 1) % sources.size();
        std::uniform_real_distribution<float> unit(0.0f, 1.0f);
        const float theta = 6.2831853f * unit(rng);
        const float nx = std::cos(theta), ny = std::sin(theta);
        // Through a point in the central half of the frame: each side keeps
        // a real share of its image.
        const float px = 0.25f + 0.5f * unit(rng), py = 0.25f + 0.5f * unit(rng);
        const LocalFeatures a = DecodeLocalFeatures(sources[ia].features, &*quantizer);
        const LocalFeatures b = DecodeLocalFeatures(sources[ib].features, &*quantizer);
        const Descriptors collage = Collage(a, b, nx, ny, nx * px + ny * py);
        blobs[j] = EncodeCompactFeatures(collage, a.width, a.height, *quantizer, &decoded[j]);
        ImageRecord r = sources[ia].record;
        r.id = 0;
        r.path = "/synthetic/" + std::to_string(i / 1000) + "/" + std::to_string(i) + ".jpg";
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
        store->PutImage(&records[j], search.data() + j * dim, blobs[j]);
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
