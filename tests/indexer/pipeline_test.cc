// Tests of BuildIndex on generated folders: creation, incremental updates
// (add, change, touch, delete), per-file errors, zero-feature images, the
// database inside the indexed folder, and determinism across runs and
// thread counts.
#include "indexer/pipeline.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "indexer/file_walker.h"
#include "indexer/grey_thumbnail.h"
#include "indexer/search_vectors.h"
#include "indexer/word_signatures.h"
#include "storage/store.h"
#include "tests/indexer/small_index_options.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr int kImages = 12;

class RecordingObserver : public IndexObserver {
 public:
  void OnFileError(const FileError& e) override { errors.push_back(e); }
  std::vector<FileError> errors;
};

std::vector<std::string> MakeFolder(const std::string& dir, int count = kImages) {
  return testing::WriteSyntheticSet(dir, count, 1, 320, 240);
}

// fn(record, search vector, dim) for every stored image, whatever the
// schema keeps (SearchVectors).
void ForEachSearchVector(const Store& store,
                         const std::function<void(const ImageRecord&, const float*, int64_t)>& fn) {
  const SearchVectors vectors(store);
  vectors.ForEach([&](const std::vector<ImageRecord>& records, const float* v) {
    for (size_t i = 0; i < records.size(); ++i)
      fn(records[i], v + i * vectors.dim(), vectors.dim());
  });
}

std::map<std::string, std::vector<float>> VectorsByPath(const std::string& db) {
  std::map<std::string, std::vector<float>> out;
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  ForEachSearchVector(*store, [&](const ImageRecord& r, const float* v, int64_t dim) {
    out[r.path] = std::vector<float>(v, v + dim);
  });
  return out;
}

void SetMtime(const std::string& path, int64_t seconds) {
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = seconds;
  times[0].tv_nsec = times[1].tv_nsec = 0;
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

TEST(PipelineTest, BuildsThenSecondRunDecodesNothing) {
  TempDir tmp;
  const auto paths = MakeFolder(tmp / "photos");
  { std::ofstream(tmp / "photos/readme.txt") << "not an image"; }
  const std::string db = tmp / "db";
  RecordingObserver observer;
  const IndexSummary first = BuildIndex(testing::SmallIndexOptions(tmp / "photos", db), &observer);
  EXPECT_TRUE(first.created);
  EXPECT_EQ(first.listed, kImages);
  EXPECT_EQ(first.indexed, kImages);
  EXPECT_EQ(first.unchanged, 0);
  EXPECT_EQ(first.removed, 0);
  EXPECT_EQ(first.no_features, 0);
  EXPECT_EQ(first.ignored, 1);
  EXPECT_EQ(first.total_skipped(), 0);
  EXPECT_TRUE(observer.errors.empty());
  EXPECT_EQ(first.backend, "cpu");
  EXPECT_EQ(first.threads, 2);
  // The finer stages add up to the totals they split.
  EXPECT_GT(first.stages.read, 0.0);
  EXPECT_GT(first.stages.decode, 0.0);
  EXPECT_EQ(first.stages.resize, 0.0) << "320 x 240 images are below the max side";
  EXPECT_NEAR(first.stages.read + first.stages.decode + first.stages.resize,
              first.stages.read_decode, 1e-9);
  EXPECT_GT(first.stages.assign, 0.0);
  EXPECT_GT(first.stages.aggregate, 0.0);
  EXPECT_NEAR(first.stages.assign + first.stages.aggregate, first.stages.encode, 1e-9);
  // A compact database: its quantizer learned, every image's features quantised.
  EXPECT_GT(first.stages.quantizer, 0.0);
  EXPECT_GT(first.stages.compact, 0.0);
  ASSERT_TRUE(Store::IsDatabase(db));
  {
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    EXPECT_EQ(store->num_images(), static_cast<uint64_t>(kImages));
    EXPECT_EQ(store->model().num_clusters, 16u);
    EXPECT_EQ(store->model().dim, 128u);
    EXPECT_EQ(store->model().max_side, static_cast<uint32_t>(EncodingSettings().max_side));
    for (const std::string& p : paths) {
      const auto rec = store->FindByPath(AbsolutePath(p));
      ASSERT_TRUE(rec.has_value()) << p;
      EXPECT_EQ(rec->width, 320u);
      EXPECT_EQ(rec->height, 240u);
      EXPECT_GT(rec->num_descriptors, 20u);
      EXPECT_EQ(rec->status, ImageStatus::kOk);
    }
    ForEachSearchVector(*store, [&](const ImageRecord& r, const float* v, int64_t dim) {
      double n2 = 0;
      for (int64_t j = 0; j < dim; ++j) n2 += double{v[j]} * v[j];
      EXPECT_NEAR(n2, 1.0, 1e-4) << r.path;
    });
  }
  const auto before = VectorsByPath(db);

  RecordingObserver again_observer;
  const IndexSummary again =
      BuildIndex(testing::SmallIndexOptions(tmp / "photos", db), &again_observer);
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.listed, kImages);
  EXPECT_EQ(again.unchanged, kImages);
  EXPECT_EQ(again.indexed, 0);
  EXPECT_EQ(again.touched, 0);
  EXPECT_EQ(again.removed, 0);
  EXPECT_EQ(again.stages.read_decode, 0.0) << "an unchanged file was decoded";
  EXPECT_EQ(again.stages.extract, 0.0);
  EXPECT_EQ(again.stages.train, 0.0);
  EXPECT_TRUE(again_observer.errors.empty());
  EXPECT_EQ(VectorsByPath(db), before);
}

// Every stored image gets a thumbnail; one stored before thumbnails were
// kept gets it from the next run, its file decoded but not re-extracted.
TEST(PipelineTest, ThumbnailsAreStoredAndAddedToImagesIndexedWithout) {
  TempDir tmp;
  MakeFolder(tmp / "photos");
  const std::string db = tmp / "db";
  const IndexOptions options = testing::SmallIndexOptions(tmp / "photos", db);
  BuildIndex(options, nullptr);
  std::vector<uint64_t> ids;
  {
    auto store = Store::Open(db, Store::Mode::kReadWrite);
    store->ForEachImage([&](const ImageRecord& r) { ids.push_back(r.id); });
    ASSERT_EQ(store->IdsWithThumbnails(), ids);
    const auto stored = store->GetThumbnails(ids);
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_TRUE(stored[i]);
      const GreyThumbnail t = DecodeGreyThumbnail(*stored[i]);
      EXPECT_EQ(t.width, kThumbnailSide);  // 320 x 240 photos
      EXPECT_EQ(t.height, 36);
    }
    // What an older build left: the same images without thumbnails.
    for (uint64_t id : std::vector<uint64_t>(ids.begin(), ids.begin() + 5)) {
      const ImageRecord r = *store->FindById(id);
      store->PutImageWithId(r, store->GetVector(id)->data(), *store->GetFeatures(id));
    }
    ASSERT_EQ(store->IdsWithThumbnails().size(), ids.size() - 5);
  }
  const auto before = VectorsByPath(db);
  const IndexSummary again = BuildIndex(options, nullptr);
  EXPECT_EQ(again.thumbnails_added, 5);
  EXPECT_EQ(again.unchanged, kImages);
  EXPECT_EQ(again.indexed, 0);
  EXPECT_EQ(again.touched, 0);
  EXPECT_EQ(again.stages.extract, 0.0) << "a file was re-extracted for its thumbnail";
  EXPECT_EQ(VectorsByPath(db), before);
  EXPECT_EQ(Store::Open(db, Store::Mode::kReadOnly)->IdsWithThumbnails(), ids);
  EXPECT_EQ(BuildIndex(options, nullptr).thumbnails_added, 0);
}

TEST(PipelineTest, IncrementalAddChangeTouchDelete) {
  TempDir tmp;
  const std::string dir = tmp / "photos";
  const auto paths = MakeFolder(dir);
  const std::string db = tmp / "db";
  BuildIndex(testing::SmallIndexOptions(dir, db), nullptr);
  const auto base = VectorsByPath(db);
  uint64_t codebook_hash = 0;
  std::map<std::string, ImageRecord> base_records;
  {
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    codebook_hash = store->model().codebook_hash;
    store->ForEachImage([&](const ImageRecord& r) { base_records[r.path] = r; });
  }

  // Add one file.
  const std::string added = AbsolutePath(dir + "/sub/new.jpg");
  fs::create_directories(dir + "/sub");
  testing::WriteImage(added, testing::MakeSyntheticImage(500, 320, 240));
  IndexSummary s = BuildIndex(testing::SmallIndexOptions(dir, db), nullptr);
  EXPECT_EQ(s.indexed, 1);
  EXPECT_EQ(s.unchanged, kImages);
  EXPECT_EQ(s.removed, 0);
  EXPECT_FALSE(s.created);
  auto vectors = VectorsByPath(db);
  EXPECT_EQ(vectors.size(), static_cast<size_t>(kImages + 1));
  ASSERT_TRUE(vectors.count(added));

  // Change one: different content (new mtime set explicitly, so the test does
  // not depend on the file system's timestamp granularity).
  const std::string changed = AbsolutePath(paths[3]);
  testing::WriteImage(changed, testing::MakeSyntheticImage(600, 320, 240));
  SetMtime(changed, 1'800'000'000);
  s = BuildIndex(testing::SmallIndexOptions(dir, db), nullptr);
  EXPECT_EQ(s.indexed, 1);
  EXPECT_EQ(s.touched, 0);
  EXPECT_EQ(s.unchanged, kImages);
  vectors = VectorsByPath(db);
  EXPECT_NE(vectors.at(changed), base.at(changed)) << "changed content, same vector";
  {
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    const auto rec = store->FindByPath(changed);
    ASSERT_TRUE(rec.has_value());
    EXPECT_EQ(rec->id, base_records.at(changed).id) << "a changed file keeps its id";
    EXPECT_NE(rec->content_hash, base_records.at(changed).content_hash);
    EXPECT_EQ(rec->mtime_ns, int64_t{1'800'000'000} * 1'000'000'000);
    EXPECT_EQ(store->num_images(), static_cast<uint64_t>(kImages + 1));
    EXPECT_EQ(store->model().codebook_hash, codebook_hash) << "the codebook must not be retrained";
  }

  // Touch one: same bytes, new mtime.
  const std::string touched = AbsolutePath(paths[5]);
  SetMtime(touched, 1'900'000'000);
  s = BuildIndex(testing::SmallIndexOptions(dir, db), nullptr);
  EXPECT_EQ(s.touched, 1);
  EXPECT_EQ(s.indexed, 0);
  EXPECT_EQ(s.stages.read_decode, 0.0) << "a touched file was decoded";
  vectors = VectorsByPath(db);
  EXPECT_EQ(vectors.at(touched), base.at(touched));
  {
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    const auto rec = store->FindByPath(touched);
    ASSERT_TRUE(rec.has_value());
    EXPECT_EQ(rec->mtime_ns, int64_t{1'900'000'000} * 1'000'000'000);
    EXPECT_EQ(rec->id, base_records.at(touched).id);
  }
  // ... and the touch was recorded: the next run sees it unchanged.
  s = BuildIndex(testing::SmallIndexOptions(dir, db), nullptr);
  EXPECT_EQ(s.touched, 0);
  EXPECT_EQ(s.unchanged, kImages + 1);

  // Delete one.
  const std::string deleted = AbsolutePath(paths[7]);
  fs::remove(deleted);
  s = BuildIndex(testing::SmallIndexOptions(dir, db), nullptr);
  EXPECT_EQ(s.removed, 1);
  EXPECT_EQ(s.indexed, 0);
  EXPECT_EQ(s.unchanged, kImages);
  {
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    EXPECT_FALSE(store->FindByPath(deleted).has_value());
    EXPECT_EQ(store->num_images(), static_cast<uint64_t>(kImages));
  }
  vectors = VectorsByPath(db);
  EXPECT_EQ(vectors.count(deleted), 0u);
  // Untouched images kept their vectors through all of this.
  for (int i : {0, 1, 2, 4, 6, 8, 11}) {
    const std::string p = AbsolutePath(paths[i]);
    EXPECT_EQ(vectors.at(p), base.at(p)) << p;
  }
}

TEST(PipelineTest, CorruptFileReportedAndRunContinues) {
  TempDir tmp;
  const std::string dir = tmp / "photos";
  MakeFolder(dir);
  const std::string bad = AbsolutePath(dir + "/broken.jpg");
  {
    std::ofstream out(bad, std::ios::binary);
    out << "\xFF\xD8\xFF\xE0 this is not really a JPEG at all";
  }
  const std::string noise = AbsolutePath(dir + "/noise.png");
  { std::ofstream(noise, std::ios::binary) << std::string(300, 'z'); }
  RecordingObserver observer;
  const IndexSummary s = BuildIndex(testing::SmallIndexOptions(dir, tmp / "db"), &observer);
  EXPECT_EQ(s.indexed, kImages);
  EXPECT_EQ(s.total_skipped(), 2);
  EXPECT_EQ(s.skipped.count("UNSUPPORTED_FORMAT"), 1u);
  ASSERT_EQ(observer.errors.size(), 2u) << "each bad file is reported once";
  std::map<std::string, FileErrorCode> by_path;
  for (const FileError& e : observer.errors) {
    by_path[e.path] = e.code;
    EXPECT_FALSE(e.message.empty());
  }
  ASSERT_TRUE(by_path.count(bad));
  ASSERT_TRUE(by_path.count(noise));
  EXPECT_EQ(by_path[noise], FileErrorCode::kUnsupportedFormat);
  EXPECT_TRUE(by_path[bad] == FileErrorCode::kTruncated ||
              by_path[bad] == FileErrorCode::kDecodeFailed)
      << FileErrorCodeName(by_path[bad]);
  auto store = Store::Open(tmp / "db", Store::Mode::kReadOnly);
  EXPECT_EQ(store->num_images(), static_cast<uint64_t>(kImages));
  EXPECT_FALSE(store->FindByPath(bad).has_value());
}

TEST(PipelineTest, FlatImageStoredAsZeroVector) {
  TempDir tmp;
  const std::string dir = tmp / "photos";
  MakeFolder(dir);
  const std::string flat = AbsolutePath(dir + "/flat.png");
  testing::WriteImage(flat, cv::Mat(240, 320, CV_8UC3, cv::Scalar(90, 120, 150)));
  RecordingObserver observer;
  const IndexSummary s = BuildIndex(testing::SmallIndexOptions(dir, tmp / "db"), &observer);
  EXPECT_EQ(s.indexed, kImages + 1);
  EXPECT_EQ(s.no_features, 1);
  EXPECT_EQ(s.total_skipped(), 0) << "a flat image is indexed, not skipped";
  ASSERT_EQ(observer.errors.size(), 1u);
  EXPECT_EQ(observer.errors[0].code, FileErrorCode::kNoFeatures);
  EXPECT_EQ(observer.errors[0].path, flat);
  auto store = Store::Open(tmp / "db", Store::Mode::kReadOnly);
  const auto rec = store->FindByPath(flat);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->status, ImageStatus::kNoFeatures);
  EXPECT_EQ(rec->num_descriptors, 0u);
  bool seen = false;
  ForEachSearchVector(*store, [&](const ImageRecord& r, const float* v, int64_t dim) {
    if (r.path != flat) return;
    seen = true;
    for (int64_t j = 0; j < dim; ++j) ASSERT_EQ(v[j], 0.0f) << j;
  });
  EXPECT_TRUE(seen);
}

TEST(PipelineTest, ExcludesDatabaseInsideTheFolder) {
  TempDir tmp;
  const std::string dir = tmp / "photos";
  MakeFolder(dir);
  const std::string db = dir + "/.lookalike-db";
  const IndexSummary first = BuildIndex(testing::SmallIndexOptions(dir, db), nullptr);
  EXPECT_EQ(first.indexed, kImages);
  // The second run lists the folder with the database's files in it.
  RecordingObserver observer;
  const IndexSummary second = BuildIndex(testing::SmallIndexOptions(dir, db), &observer);
  EXPECT_EQ(second.listed, kImages);
  EXPECT_EQ(second.unchanged, kImages);
  EXPECT_EQ(second.ignored, 0) << "database files were looked at";
  EXPECT_TRUE(observer.errors.empty());
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  store->ForEachImage([&](const ImageRecord& r) {
    EXPECT_EQ(r.path.find(".lookalike-db"), std::string::npos) << r.path;
  });
}

TEST(PipelineTest, TrainingAndEncodingAreDeterministic) {
  TempDir tmp;
  const std::string dir = tmp / "photos";
  MakeFolder(dir);
  BuildIndex(testing::SmallIndexOptions(dir, tmp / "a", 2), nullptr);
  BuildIndex(testing::SmallIndexOptions(dir, tmp / "b", 2), nullptr);
  BuildIndex(testing::SmallIndexOptions(dir, tmp / "c", 1), nullptr);
  uint64_t hash_a, hash_b, hash_c;
  {
    hash_a = Store::Open(tmp / "a", Store::Mode::kReadOnly)->model().codebook_hash;
    hash_b = Store::Open(tmp / "b", Store::Mode::kReadOnly)->model().codebook_hash;
    hash_c = Store::Open(tmp / "c", Store::Mode::kReadOnly)->model().codebook_hash;
  }
  EXPECT_EQ(hash_a, hash_b) << "same folder, same seed: same codebook";
  EXPECT_EQ(hash_a, hash_c) << "the codebook depends on the thread count";
  const auto va = VectorsByPath(tmp / "a");
  EXPECT_EQ(va.size(), static_cast<size_t>(kImages));
  EXPECT_TRUE(va == VectorsByPath(tmp / "b")) << "two fresh databases differ";
  EXPECT_TRUE(va == VectorsByPath(tmp / "c")) << "threads=1 and threads=2 differ";

  // A different seed gives a different codebook (the seed is used).
  IndexOptions other = testing::SmallIndexOptions(dir, tmp / "d", 2);
  other.model.codebook.seed = 99;
  BuildIndex(other, nullptr);
  EXPECT_NE(Store::Open(tmp / "d", Store::Mode::kReadOnly)->model().codebook_hash, hash_a);
}

// A run cancelled before the model is trained creates nothing and must not
// say it did.
TEST(PipelineTest, CancelledWhileTrainingCreatesNothing) {
  TempDir tmp;
  fs::create_directories(tmp / "photos");
  for (int i = 0; i < 3; ++i)
    testing::WriteImage(tmp / ("photos/" + std::to_string(i) + ".jpg"),
                        testing::MakeSyntheticImage(700 + i, 320, 240));
  const std::atomic<bool> cancel{true};
  const IndexSummary s =
      BuildIndex(testing::SmallIndexOptions(tmp / "photos", tmp / "db"), nullptr, &cancel);
  EXPECT_TRUE(s.cancelled);
  EXPECT_FALSE(s.created);
  EXPECT_FALSE(Store::IsDatabase(tmp / "db"));
}

// A new database's model carries the word index's vocabulary, learned from
// the codebook's sample at the size the options ask for; a database made
// with --model-from copies it byte for byte.
TEST(PipelineTest, TheModelCarriesTheWordVocabularyAtItsSize) {
  TempDir tmp;
  MakeFolder(tmp / "photos");
  IndexOptions o = testing::SmallIndexOptions(tmp / "photos", tmp / "db");
  o.model.words.fine_per_word = 3;
  const IndexSummary s = BuildIndex(o, nullptr);
  EXPECT_GT(s.stages.words, 0.0);
  std::string blob;
  {
    auto store = Store::Open(tmp / "db", Store::Mode::kReadOnly);
    const std::optional<WordVocabulary> v = ModelWordVocabulary(*store);
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->num_words(), 16 * 3);
    blob = *store->GetModelWordVocabulary();
  }
  IndexOptions copy = testing::SmallIndexOptions(tmp / "photos", tmp / "copy");
  copy.model_from = tmp / "db";
  BuildIndex(copy, nullptr);
  EXPECT_EQ(Store::Open(tmp / "copy", Store::Mode::kReadOnly)->GetModelWordVocabulary(), blob);
  for (int bad : {0, 257}) {
    o = testing::SmallIndexOptions(tmp / "photos", tmp / "bad");
    o.model.words.fine_per_word = bad;
    EXPECT_THROW(BuildIndex(o, nullptr), std::invalid_argument) << bad;
  }
}

TEST(PipelineTest, ValidationAndFatalErrors) {
  TempDir tmp;
  IndexOptions o = testing::SmallIndexOptions(tmp / "photos", tmp / "db");
  o.threads = -1;
  EXPECT_THROW(BuildIndex(o, nullptr), std::invalid_argument);
  o = testing::SmallIndexOptions(tmp / "photos", tmp / "db");
  o.batch_images = 0;
  EXPECT_THROW(BuildIndex(o, nullptr), std::invalid_argument);
  o = testing::SmallIndexOptions("", tmp / "db");
  EXPECT_THROW(BuildIndex(o, nullptr), std::invalid_argument);
  // Missing folder: fatal, and no database is created.
  o = testing::SmallIndexOptions(tmp / "missing", tmp / "db");
  EXPECT_THROW(BuildIndex(o, nullptr), std::runtime_error);
  EXPECT_FALSE(fs::exists(tmp / "db"));
  // Too few descriptors for the codebook: fatal, nothing created.
  fs::create_directories(tmp / "tiny");
  testing::WriteImage(tmp / "tiny/a.png", testing::MakeSyntheticImage(1, 64, 48));
  o = testing::SmallIndexOptions(tmp / "tiny", tmp / "db");
  o.model.codebook.num_clusters = 5000;
  try {
    BuildIndex(o, nullptr);
    FAIL() << "learned 5000 clusters from one tiny image";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--clusters"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp / "db"));
}

}  // namespace
}  // namespace lookalike
