// Tests of FindDuplicates over a generated collection: originals with
// re-encoded, resized, rotated, brightened and mirrored copies form exactly
// the expected groups at level copy, each around its original (the mirrored
// copy found and verified through its mirror image only), and with the
// large crops at level part; distinct images stay out of every group; byte-
// identical files group even without features; output order does not
// depend on threads; neighbours from an approximate index (and from the
// PCA-whitened search vectors) give the groups exact search gives; and
// option validation.
#include "search/dedup.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "indexer/file_walker.h"
#include "indexer/pipeline.h"
#include "indexer/search_vectors.h"
#include "search/search_index.h"
#include "storage/store.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::Transform;

constexpr int kOriginals = 4;  // img_000 .. img_003 get copies
constexpr int kDistinct = 8;   // img_004 .. img_011 have none

// Which copies each original gets: re-encoded, resized and cropped for all,
// plus a rotated or brightened one for some.
std::vector<Transform> CopiesOf(int original) {
  std::vector<Transform> t = {Transform::kJpeg, Transform::kScale, Transform::kCrop};
  if (original == 1) t.push_back(Transform::kRotate);
  if (original == 2) t.push_back(Transform::kBrightness);
  return t;
}

class DedupTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir;
    const std::string photos = *tmp_ / "photos";
    const std::vector<std::string> originals =
        testing::WriteSyntheticSet(photos, kOriginals + kDistinct, 100);
    expected_ = new std::set<std::set<std::string>>;
    expected_copy_ = new std::set<std::set<std::string>>;
    originals_ = new std::set<std::string>;
    mirrored_ = new std::string;
    for (int i = 0; i < kOriginals; ++i) {
      std::set<std::string> group = {AbsolutePath(originals[i])}, copies = group;
      originals_->insert(AbsolutePath(originals[i]));
      const cv::Mat image = cv::imread(originals[i], cv::IMREAD_COLOR);
      for (Transform t : CopiesOf(i)) {
        const std::string path =
            photos + "/copy_" + std::to_string(i) + "_" + testing::TransformName(t) + ".jpg";
        testing::WriteImage(path, testing::ApplyTransform(image, t));
        group.insert(AbsolutePath(path));
        // The central 49 % of the picture is a part of it, not a copy.
        if (t != Transform::kCrop) copies.insert(AbsolutePath(path));
      }
      // A mirrored copy (flipped left to right) of the fourth.
      if (i == 3) {
        cv::Mat mirrored;
        cv::flip(image, mirrored, 1);
        const std::string path = photos + "/copy_3_mirrored.jpg";
        testing::WriteImage(path, mirrored);
        *mirrored_ = AbsolutePath(path);
        group.insert(*mirrored_);
        copies.insert(*mirrored_);
      }
      expected_->insert(group);
      expected_copy_->insert(copies);
    }
    // Byte-identical files: a flat image (no keypoints, zero vector) twice,
    // and one distinct photo copied byte for byte.
    const cv::Mat flat(240, 320, CV_8UC3, cv::Scalar(40, 90, 200));
    testing::WriteImage(photos + "/flat_a.png", flat);
    fs::copy_file(photos + "/flat_a.png", photos + "/flat_b.png");
    for (auto* expected : {expected_, expected_copy_}) {
      expected->insert(
          {AbsolutePath(photos + "/flat_a.png"), AbsolutePath(photos + "/flat_b.png")});
      expected->insert(
          {AbsolutePath(originals[kOriginals]), AbsolutePath(photos + "/same_bytes.png")});
    }
    fs::copy_file(originals[kOriginals], photos + "/same_bytes.png");

    // Two different pictures sharing a logo: plain backgrounds with a few
    // soft shapes (few keypoints) and the same textured badge in a corner.
    const cv::Mat logo = testing::MakeSyntheticImage(999, 160, 120);
    for (int i = 0; i < 2; ++i) {
      cv::Mat poster(480, 640, CV_8UC3, cv::Scalar(60 + 80 * i, 120, 200 - 60 * i));
      cv::circle(poster, cv::Point(400 - 100 * i, 300), 90 + 30 * i,
                 cv::Scalar(20, 40 + 100 * i, 90), -1);
      logo.copyTo(poster(cv::Rect(460, 20, logo.cols, logo.rows)));
      testing::WriteImage(photos + "/logo_" + std::to_string(i) + ".png", poster);
    }

    IndexOptions o;
    o.image_dir = photos;
    o.db_path = *tmp_ / "db";
    o.model.codebook.num_clusters = 32;
    o.threads = 2;
    o.backend = Backend::kCpu;
    const IndexSummary s = BuildIndex(o, nullptr);
    ASSERT_EQ(s.total_skipped(), 0);
    ASSERT_EQ(s.no_features, 2);
  }
  static void TearDownTestSuite() {
    delete expected_;
    delete expected_copy_;
    delete originals_;
    delete mirrored_;
    delete tmp_;
  }

  static std::unique_ptr<Store> OpenStore() {
    return Store::Open(*tmp_ / "db", Store::Mode::kReadOnly);
  }
  // The same photos in a database with a PCA projection (16-d whitened
  // search vectors, as a large collection has at 112-d), built on first use.
  static std::unique_ptr<Store> OpenPcaStore() {
    const std::string db = *tmp_ / "pca_db";
    if (!fs::exists(db)) {
      IndexOptions o;
      o.image_dir = *tmp_ / "photos";
      o.db_path = db;
      o.model.codebook.num_clusters = 32;
      o.model.projection.out_dim = 16;
      o.model.projection.min_images = 0;
      o.threads = 2;
      o.backend = Backend::kCpu;
      BuildIndex(o, nullptr);
    }
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    EXPECT_EQ(SearchVectors(*store).dim(), 16);
    return store;
  }
  static std::set<std::set<std::string>> Groups(const DedupResult& r) {
    std::set<std::set<std::string>> groups;
    for (const DedupGroup& g : r.groups) {
      std::set<std::string> members;
      for (const DedupMember& m : g.members) members.insert(m.path);
      EXPECT_EQ(members.size(), g.members.size()) << "an image listed twice in a group";
      groups.insert(members);
    }
    return groups;
  }

  static TempDir* tmp_;
  // The groups at level part (originals with all their copies) and at copy
  // (without the large crops), with the byte-identical files.
  static std::set<std::set<std::string>>* expected_;
  static std::set<std::set<std::string>>* expected_copy_;
  static std::set<std::string>* originals_;  // the four photos with copies
  static std::string* mirrored_;             // the mirrored copy of img_003
};

TempDir* DedupTest::tmp_ = nullptr;
std::set<std::set<std::string>>* DedupTest::expected_ = nullptr;
std::set<std::set<std::string>>* DedupTest::expected_copy_ = nullptr;
std::set<std::string>* DedupTest::originals_ = nullptr;
std::string* DedupTest::mirrored_ = nullptr;

TEST_F(DedupTest, CopiesFormExactlyTheExpectedGroups) {
  auto store = OpenStore();
  const DedupResult r = FindDuplicates(*store, DedupOptions());
  EXPECT_EQ(r.num_images, static_cast<int64_t>(store->num_images()));
  EXPECT_EQ(r.num_without_features, 2);
  EXPECT_EQ(r.num_unverified, 0);
  EXPECT_EQ(r.num_unread, 0);
  EXPECT_EQ(r.level, MatchLevel::kCopy);
  EXPECT_EQ(Groups(r), *expected_copy_);

  for (const DedupGroup& g : r.groups) {
    ASSERT_GE(g.members.size(), 2u);
    ASSERT_FALSE(g.pairs.empty());
    EXPECT_GE(g.level, MatchLevel::kCopy);
    EXPECT_FALSE(g.keep_reason.empty());
    // The keeper first: an original when the group has one.
    const DedupMember& keeper = g.members[0];
    EXPECT_EQ(keeper.role, MemberRole::kKeep);
    EXPECT_EQ(keeper.reason, g.keep_reason);
    for (const DedupMember& m : g.members)
      if (originals_->count(m.path)) {
        EXPECT_EQ(keeper.path, m.path) << "kept " << keeper.path << ": " << g.keep_reason;
      }
    std::set<uint64_t> ids;
    for (size_t i = 0; i < g.members.size(); ++i) {
      const DedupMember& m = g.members[i];
      ids.insert(m.id);
      EXPECT_GT(m.score, 0.0f);
      EXPECT_LE(m.score, 1.0f);
      if (i == 0) continue;
      EXPECT_EQ(m.role, MemberRole::kDuplicate);
      EXPECT_GE(m.level, MatchLevel::kCopy);
      EXPECT_FALSE(m.reason.empty()) << m.path;
    }
    // A star: every member is paired with the keeper at the level.
    for (size_t i = 1; i < g.members.size(); ++i) {
      const uint64_t a = std::min(keeper.id, g.members[i].id),
                     b = std::max(keeper.id, g.members[i].id);
      bool paired = false;
      for (const DedupPair& p : g.pairs) paired |= p.a == a && p.b == b;
      EXPECT_TRUE(paired) << g.members[i].path << " is not paired with its keeper";
    }
    for (const DedupPair& p : g.pairs) {
      EXPECT_LT(p.a, p.b);
      EXPECT_TRUE(ids.count(p.a) && ids.count(p.b)) << "a group's pair joins its own members";
      EXPECT_TRUE(p.duplicate);
      EXPECT_GE(p.level, MatchLevel::kCopy);
      if (p.identical) {
        EXPECT_EQ(p.score, 1.0f);
        EXPECT_EQ(p.level, MatchLevel::kIdentical);
      } else {
        EXPECT_GE(p.inliers, DedupOptions().min_inliers);
        EXPECT_GE(p.score, DedupOptions().threshold);
        EXPECT_GE(p.spread, DedupOptions().min_spread);
        EXPECT_LE(p.spread, 1.0f);
      }
    }
  }
  for (const DedupPair& p : r.candidates) {
    EXPECT_LT(p.a, p.b);
    if (!p.completing && !p.identical) {
      EXPECT_GE(p.similarity, DedupOptions().min_similarity - 1e-6f);
    }
  }
}

// At level part the large crops join their originals' groups too; at
// identical only the byte-identical files group.
TEST_F(DedupTest, LevelsChooseWhatGroups) {
  auto store = OpenStore();
  DedupOptions part;
  part.level = MatchLevel::kPart;
  EXPECT_EQ(Groups(FindDuplicates(*store, part)), *expected_);
  DedupOptions identical;
  identical.level = MatchLevel::kIdentical;
  std::set<std::set<std::string>> same_bytes;
  for (const auto& g : *expected_)
    if (g.size() == 2) same_bytes.insert(g);
  const DedupResult r = FindDuplicates(*store, identical);
  EXPECT_EQ(Groups(r), same_bytes);
  for (const DedupGroup& g : r.groups) EXPECT_EQ(g.level, MatchLevel::kIdentical);
}

// The default verification (each image prepared once, 32 principal
// components, LO-RANSAC) and the exact matching with classic RANSAC the
// thresholds were first calibrated with give the same groups.
TEST_F(DedupTest, CheaperAndExactVerificationGiveTheSameGroups) {
  auto store = OpenStore();
  const DedupOptions cheaper;
  ASSERT_GT(cheaper.verify.match_dims, 0);
  ASSERT_EQ(cheaper.verify.ransac, RansacMethod::kUsac);
  DedupOptions exact;
  exact.verify = VerifyOptions();
  ASSERT_EQ(exact.verify.match_dims, 0);
  const DedupResult c = FindDuplicates(*store, cheaper), e = FindDuplicates(*store, exact);
  EXPECT_EQ(Groups(c), *expected_copy_);
  EXPECT_EQ(Groups(e), *expected_copy_);
  ASSERT_EQ(c.candidates.size(), e.candidates.size());
  for (size_t i = 0; i < c.candidates.size(); ++i)
    EXPECT_EQ(c.candidates[i].duplicate, e.candidates[i].duplicate)
        << c.candidates[i].path_a << " / " << c.candidates[i].path_b;
}

TEST_F(DedupTest, DistinctImagesStaySingletons) {
  auto store = OpenStore();
  DedupOptions o;
  const DedupResult r = FindDuplicates(*store, o);
  std::set<std::string> grouped;
  for (const DedupGroup& g : r.groups)
    for (const DedupMember& m : g.members) grouped.insert(m.path);
  for (int i = kOriginals + 1; i < kOriginals + kDistinct; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "/img_%03d.png", i);
    EXPECT_FALSE(grouped.count(AbsolutePath(*tmp_ / "photos") + name)) << name;
  }
  // The distinct photos were compared with each other (candidates exist)
  // and rejected by verification, not merely never looked at.
  int rejected = 0;
  for (const DedupPair& p : r.candidates) rejected += !p.duplicate;
  EXPECT_GT(rejected, 0);
}

TEST_F(DedupTest, SharedLogoIsNotADuplicate) {
  auto store = OpenStore();
  const std::string a = AbsolutePath(*tmp_ / "photos/logo_0.png");
  const std::string b = AbsolutePath(*tmp_ / "photos/logo_1.png");
  auto find_pair = [&](const DedupResult& r) -> const DedupPair* {
    for (const DedupPair& p : r.candidates)
      if ((p.path_a == a && p.path_b == b) || (p.path_a == b && p.path_b == a)) return &p;
    return nullptr;
  };
  const DedupResult r = FindDuplicates(*store, DedupOptions());
  const DedupPair* pair = find_pair(r);
  ASSERT_NE(pair, nullptr) << "the two logo pictures should at least be compared";
  // The badge verifies (many inliers, much of the sparse pictures' keypoints)
  // but covers a small corner: the spread check is what rejects it.
  EXPECT_GE(pair->inliers, DedupOptions().min_inliers);
  EXPECT_LT(pair->spread, 0.1f);
  EXPECT_FALSE(pair->duplicate);
  DedupOptions no_spread;
  no_spread.min_spread = 0;
  no_spread.threshold = 0.01f;
  no_spread.level = MatchLevel::kView;  // verified, whatever its level
  const DedupResult loose_result = FindDuplicates(*store, no_spread);
  const DedupPair* loose = find_pair(loose_result);
  ASSERT_NE(loose, nullptr);
  EXPECT_TRUE(loose->duplicate);
}

TEST_F(DedupTest, ImagesWithoutStoredKeypointsAreCountedNotGrouped) {
  // The same records and vectors in a database that kept no local features
  // (as one of the older layout indexed before they were stored).
  auto store = OpenStore();
  TempDir tmp;
  auto bare = Store::Create(tmp / "bare", store->model(), nullptr, 2);
  SearchVectors(*store).ForEach([&](const std::vector<ImageRecord>& records, const float* v) {
    for (size_t i = 0; i < records.size(); ++i) {
      ImageRecord copy = records[i];
      copy.id = 0;
      bare->PutImage(&copy, v + i * store->model().vlad_dim());
    }
  });
  const DedupResult r = FindDuplicates(*bare, DedupOptions());
  EXPECT_GT(r.num_unverified, 0);
  std::set<std::set<std::string>> identical;
  for (const auto& g : *expected_)
    if (g.size() == 2) identical.insert(g);
  EXPECT_EQ(Groups(r), identical) << "only byte-identical files can group without keypoints";
}

TEST_F(DedupTest, ThresholdOneKeepsOnlyByteIdenticalFiles) {
  auto store = OpenStore();
  DedupOptions o;
  o.threshold = 1.0f;
  const DedupResult r = FindDuplicates(*store, o);
  std::set<std::set<std::string>> identical;
  for (const auto& g : *expected_)
    if (g.size() == 2) identical.insert(g);
  EXPECT_EQ(Groups(r), identical);
  for (const DedupGroup& g : r.groups)
    for (const DedupPair& p : g.pairs) EXPECT_TRUE(p.identical);
}

TEST_F(DedupTest, ResultDoesNotDependOnThreads) {
  auto store = OpenStore();
  DedupOptions one, two;
  one.threads = 1;
  two.threads = 2;
  const DedupResult a = FindDuplicates(*store, one), b = FindDuplicates(*store, two);
  ASSERT_EQ(a.groups.size(), b.groups.size());
  for (size_t g = 0; g < a.groups.size(); ++g) {
    ASSERT_EQ(a.groups[g].members.size(), b.groups[g].members.size());
    for (size_t i = 0; i < a.groups[g].members.size(); ++i) {
      EXPECT_EQ(a.groups[g].members[i].path, b.groups[g].members[i].path);
      EXPECT_EQ(a.groups[g].members[i].score, b.groups[g].members[i].score);
    }
  }
  ASSERT_EQ(a.candidates.size(), b.candidates.size());
  for (size_t i = 0; i < a.candidates.size(); ++i) {
    EXPECT_EQ(a.candidates[i].a, b.candidates[i].a);
    EXPECT_EQ(a.candidates[i].b, b.candidates[i].b);
    EXPECT_EQ(a.candidates[i].inliers, b.candidates[i].inliers);
  }
  // Groups come ordered by their smallest path.
  auto smallest = [](const DedupGroup& g) {
    std::string s = g.members[0].path;
    for (const DedupMember& m : g.members) s = std::min(s, m.path);
    return s;
  };
  for (size_t g = 1; g < a.groups.size(); ++g)
    EXPECT_LT(smallest(a.groups[g - 1]), smallest(a.groups[g]));
}

// Two neighbours per image link each group into a chain or a tree only; the
// pairs inside such small components are verified too, so every group is
// still a whole star around its original.
TEST_F(DedupTest, FewerCandidatesAreCompletedInsideSmallComponents) {
  auto store = OpenStore();
  DedupOptions o;
  o.neighbours = 2;  // below the group sizes (3 to 5 images at level part)
  const DedupResult r = FindDuplicates(*store, o);
  EXPECT_EQ(Groups(r), *expected_copy_);
  int completing = 0;
  for (const DedupPair& p : r.candidates) completing += p.completing;
  EXPECT_GT(completing, 0);
}

// The neighbours of the database's own index are those of the exact one, and
// those of an ivfsq index (built in memory: the database keeps a flat one)
// give the groups and duplicate pairs exact search finds,
// over full VLAD vectors (no PCA, 4-bit codes) and over PCA-whitened search
// vectors (8-bit codes), with every list probed and with the default probes.
TEST_F(DedupTest, ApproximateIndexFindsTheGroupsExactSearchFinds) {
  for (const bool pca : {false, true}) {
    SCOPED_TRACE(pca ? "PCA-whitened search vectors" : "full VLAD vectors");
    auto store = pca ? OpenPcaStore() : OpenStore();
    const DedupResult e = FindDuplicates(*store, DedupOptions());  // exact: flat
    EXPECT_EQ(e.index_description.rfind("flat", 0), 0u) << e.index_description;
    EXPECT_EQ(Groups(e), *expected_copy_);
    // The database's own (persisted, flat at this size) index: the same pairs.
    DedupOptions persisted;
    persisted.index_kind = VectorIndexKind::kAuto;
    const DedupResult p = FindDuplicates(*store, persisted);
    ASSERT_EQ(p.candidates.size(), e.candidates.size());
    for (size_t i = 0; i < p.candidates.size(); ++i) {
      EXPECT_EQ(p.candidates[i].a, e.candidates[i].a);
      EXPECT_EQ(p.candidates[i].b, e.candidates[i].b);
    }
    for (const int64_t nprobe : {int64_t{0}, int64_t{65536}}) {
      DedupOptions approximate;
      approximate.index_kind = VectorIndexKind::kIvfSq;
      approximate.nprobe = nprobe;
      const DedupResult a = FindDuplicates(*store, approximate);
      EXPECT_EQ(a.index_description.rfind("ivfsq", 0), 0u) << a.index_description;
      EXPECT_GT(a.index_bytes, 0);
      EXPECT_EQ(Groups(a), Groups(e)) << a.index_description;
      // Every verified duplicate pair of the exact path is a candidate here.
      std::set<std::pair<uint64_t, uint64_t>> candidates;
      for (const DedupPair& p : a.candidates) candidates.insert({p.a, p.b});
      for (const DedupPair& p : e.candidates) {
        if (p.duplicate && !p.identical) {
          EXPECT_TRUE(candidates.count({p.a, p.b})) << p.path_a << " " << p.path_b;
        }
      }
    }
  }
}

// A database that keeps a current persisted flat index, as `lookalike index`
// leaves it: auto uses it as it is, and ivfsq is still built when asked for.
TEST_F(DedupTest, IvfsqIsBuiltOverACurrentPersistedFlatIndex) {
  OpenPcaStore();  // builds it
  {
    auto writable = Store::Open(*tmp_ / "pca_db", Store::Mode::kReadWrite);
    const SearchIndexSync saved =
        UpdateSearchIndex(writable.get(), SearchVectors(*writable), VectorIndexOptions());
    ASSERT_FALSE(saved.transient);
    ASSERT_EQ(saved.index->kind(), VectorIndexKind::kFlat);
  }
  auto store = OpenPcaStore();
  DedupOptions persisted;
  persisted.index_kind = VectorIndexKind::kAuto;
  const DedupResult p = FindDuplicates(*store, persisted);
  EXPECT_EQ(p.index_description.rfind("flat", 0), 0u) << p.index_description;
  DedupOptions approximate;
  approximate.index_kind = VectorIndexKind::kIvfSq;
  const DedupResult a = FindDuplicates(*store, approximate);
  EXPECT_EQ(a.index_description.rfind("ivfsq", 0), 0u) << a.index_description;
  EXPECT_EQ(Groups(a), *expected_copy_);
}

// nprobe reaches the index; each image gets at most `neighbours` candidates
// of its own, and as many for its mirror image (a pair counts for both of
// its images).
TEST_F(DedupTest, NprobeAndNeighboursAreHonoured) {
  auto store = OpenPcaStore();
  for (const bool mirrored : {false, true}) {
    SCOPED_TRACE(mirrored ? "with mirror images" : "without mirror images");
    DedupOptions o;
    o.index_kind = VectorIndexKind::kIvfSq;
    o.nprobe = 1;
    o.neighbours = 1;
    o.mirrored = mirrored;
    const DedupResult r = FindDuplicates(*store, o);
    EXPECT_NE(r.index_description.find("nprobe 1,"), std::string::npos) << r.index_description;
    const int64_t with_features = r.num_images - r.num_without_features;
    int64_t searched = 0;
    for (const DedupPair& p : r.candidates) searched += !p.identical && !p.completing;
    EXPECT_LE(searched, (mirrored ? 2 : 1) * with_features) << "one neighbour per image at most";
    EXPECT_LE(r.num_mirror_candidates, mirrored ? with_features : 0);
    EXPECT_GT(searched, 0);
  }
}

// The mirror images' search vectors (and derived vectors) read from several
// threads at once, as dedup's neighbour search reads them, are those read
// from one: each thread encodes with a VLAD encoder of its own.
TEST_F(DedupTest, MirrorVectorsReadFromSeveralThreadsAreTheSame) {
  for (const bool pca : {false, true}) {
    SCOPED_TRACE(pca ? "PCA-whitened search vectors" : "full VLAD vectors");
    auto store = pca ? OpenPcaStore() : OpenStore();
    SearchVectors vectors(*store);
    ASSERT_TRUE(vectors.PrepareMirrors());
    std::vector<ImageRecord> records;
    store->ForEachImage([&](const ImageRecord& r) { records.push_back(r); });
    std::vector<uint64_t> ids;
    for (const ImageRecord& r : records) ids.push_back(r.id);
    const size_t n = records.size() * static_cast<size_t>(vectors.dim());
    std::vector<float> mirrored(n), plain(n);
    vectors.ReadMirrored(records, mirrored.data());
    vectors.Read(ids, plain.data());
    // Mirror images are other vectors than the images' own.
    EXPECT_NE(mirrored, plain);
    std::vector<std::thread> threads;
    std::vector<int> differ(4, 0);
    for (size_t t = 0; t < differ.size(); ++t)
      threads.emplace_back([&, t] {
        std::vector<float> got(n);
        for (int round = 0; round < 10; ++round) {
          if (t % 2 == 0) {
            vectors.ReadMirrored(records, got.data());
            differ[t] += got != mirrored;
          } else {
            vectors.Read(ids, got.data());
            differ[t] += got != plain;
          }
        }
      });
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(differ, std::vector<int>(4, 0));
  }
}

// The mirrored copy joins its original's group at level copy only through
// the mirror images: its mirror's search vector finds the original (its own
// does not rank it first), and the pair verifies between the mirrored
// features and the original's, marked mirrored, its homography flipping
// one frame into the other. Without them it is in no group, and the other
// groups are the same.
TEST_F(DedupTest, MirroredCopyJoinsItsOriginalThroughItsMirrorImage) {
  for (const bool pca : {false, true}) {
    SCOPED_TRACE(pca ? "PCA-whitened search vectors" : "full VLAD vectors");
    auto store = pca ? OpenPcaStore() : OpenStore();
    const std::string original = AbsolutePath(*tmp_ / "photos/img_003.png");
    auto find_pair = [&](const DedupResult& r) -> const DedupPair* {
      for (const DedupPair& p : r.candidates)
        if (std::set<std::string>{p.path_a, p.path_b} ==
            std::set<std::string>{original, *mirrored_})
          return &p;
      return nullptr;
    };
    const DedupResult with = FindDuplicates(*store, DedupOptions());
    EXPECT_GT(with.num_mirror_candidates, 0);
    EXPECT_GT(with.num_mirrored, 0);
    const DedupPair* pair = find_pair(with);
    ASSERT_NE(pair, nullptr) << "the mirror image's nearest neighbour is its original";
    EXPECT_FALSE(pair->completing);
    EXPECT_EQ(pair->level, MatchLevel::kCopy);
    EXPECT_TRUE(pair->duplicate);
    EXPECT_TRUE(pair->evidence.mirrored);
    EXPECT_GE(pair->inliers, DedupOptions().min_inliers);
    ASSERT_TRUE(pair->geometry.valid);
    const cv::Matx33d h(pair->geometry.homography.data());
    EXPECT_LT(h(0, 0) * h(1, 1) - h(0, 1) * h(1, 0), 0) << "a's frame to b's includes the flip";
    // The original is kept, the mirrored JPEG offered for removal.
    for (const DedupGroup& g : with.groups)
      for (const DedupMember& m : g.members)
        if (m.path == *mirrored_) {
          EXPECT_EQ(g.members[0].path, original) << g.keep_reason;
          EXPECT_EQ(m.level, MatchLevel::kCopy);
        }

    DedupOptions plain;
    plain.mirrored = false;
    const DedupResult without = FindDuplicates(*store, plain);
    EXPECT_EQ(without.num_mirror_candidates, 0);
    EXPECT_EQ(without.num_mirrored, 0);
    // The same groups, but for the mirrored copy in its original's.
    std::set<std::set<std::string>> mirrors_added;
    for (std::set<std::string> g : Groups(without)) {
      EXPECT_FALSE(g.count(*mirrored_)) << "grouped without its mirror image";
      if (g.count(original)) g.insert(*mirrored_);
      mirrors_added.insert(g);
    }
    EXPECT_EQ(Groups(with), mirrors_added);
    const DedupPair* plain_pair = find_pair(without);
    if (plain_pair) {
      EXPECT_FALSE(plain_pair->duplicate);
      EXPECT_FALSE(plain_pair->evidence.mirrored);
    }
  }
}

TEST(DedupOptionsTest, ValidateNamesTheFlag) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    void (*edit)(DedupOptions*, float);
    float value;
    std::string flag;
  };
  const std::vector<Case> cases = {
      {[](DedupOptions* o, float v) { o->threshold = v; }, 0.0f, "--threshold"},
      {[](DedupOptions* o, float v) { o->threshold = v; }, 1.5f, "--threshold"},
      {[](DedupOptions* o, float v) { o->threshold = v; }, nan, "--threshold"},
      {[](DedupOptions* o, float v) { o->min_similarity = v; }, 1.01f, "--min-similarity"},
      {[](DedupOptions* o, float v) { o->min_similarity = v; }, nan, "--min-similarity"},
      {[](DedupOptions* o, float v) { o->neighbours = static_cast<int>(v); }, 0, "--neighbours"},
      {[](DedupOptions* o, float v) { o->neighbours = static_cast<int>(v); }, 2000, "--neighbours"},
      {[](DedupOptions* o, float v) { o->nprobe = static_cast<int64_t>(v); }, -1, "--nprobe"},
      {[](DedupOptions* o, float v) { o->nprobe = static_cast<int64_t>(v); }, 70000, "--nprobe"},
      {[](DedupOptions* o, float v) { o->min_inliers = static_cast<int>(v); }, 4, "--min-inliers"},
      {[](DedupOptions* o, float v) { o->min_spread = v; }, -0.1f, "--min-spread"},
      {[](DedupOptions* o, float v) { o->min_spread = v; }, nan, "--min-spread"},
      {[](DedupOptions* o, float v) { o->threads = static_cast<int>(v); }, -1, "threads"},
      {[](DedupOptions* o, float v) { o->verify.ratio = v; }, 0.0f, "ratio"},
  };
  for (const Case& c : cases) {
    DedupOptions o;
    c.edit(&o, c.value);
    try {
      o.Validate();
      ADD_FAILURE() << c.flag << " = " << c.value << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(c.flag), std::string::npos) << e.what();
    }
  }
  DedupOptions ok;
  EXPECT_NO_THROW(ok.Validate());
  ok.threshold = 1.0f;
  ok.min_similarity = -1.0f;
  ok.neighbours = 1000;
  ok.nprobe = 65536;
  EXPECT_NO_THROW(ok.Validate());
}

TEST_F(DedupTest, BadOptionsAreRefusedBeforeAnyWork) {
  auto store = OpenStore();
  DedupOptions o;
  o.threshold = 2;
  EXPECT_THROW(FindDuplicates(*store, o), std::invalid_argument);
}

TEST(DedupEmptyTest, EmptyDatabaseHasNoGroups) {
  TempDir tmp;
  testing::WriteSyntheticSet(tmp / "photos", 3, 7, 320, 240);
  IndexOptions o;
  o.image_dir = tmp / "photos";
  o.db_path = tmp / "db";
  o.model.codebook.num_clusters = 8;
  o.threads = 1;
  o.backend = Backend::kCpu;
  BuildIndex(o, nullptr);
  // The photos disappear: re-indexing removes their records.
  fs::remove_all(tmp / "photos");
  fs::create_directories(tmp / "photos");
  BuildIndex(o, nullptr);
  auto store = Store::Open(tmp / "db", Store::Mode::kReadOnly);
  ASSERT_EQ(store->num_images(), 0u);
  const DedupResult r = FindDuplicates(*store, DedupOptions());
  EXPECT_TRUE(r.groups.empty());
  EXPECT_TRUE(r.candidates.empty());
  EXPECT_EQ(r.num_images, 0);
}

}  // namespace
}  // namespace lookalike
