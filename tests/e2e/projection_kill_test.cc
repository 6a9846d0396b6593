// The PCA projection learned again at more bits as a collection grows
// (indexer/projection_growth.h), against the real binary. A collection of 3
// images stores its matrix at 1 bit; the `index` run that adds 6 more learns
// it again at 4 bits and replaces every search vector in one write. That run
// is SIGKILLed just before and just after the write (frozen there by
// LOOKALIKE_TEST_STOP_AT, waited for with waitpid: no timing involved) and at
// seeded random moments. After each kill `verify` passes, no image is lost,
// the database holds one projection with vectors that find every stored
// image, and a re-run finishes at 4 bits with a persisted search index.
// The first projection of a collection grown to --pca-min-images
// (Store::AddProjection) is killed the same way around its write.
// LOOKALIKE_KILL_SEED=<n> replays a schedule.
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "indexer/file_walker.h"
#include "storage/store.h"
#include "tests/subprocess.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// K = 64 and 16 components: a 16 x 8,192 matrix, 64 KiB at 4 bits. At the
// automatic budget of 8 KiB per image, 3 images get 1 bit and 9 get 4.
const std::vector<std::string> kModelFlags = {"--clusters", "64",        "--pca-dim",
                                              "16",         "--threads", "2"};

testing::ProcessResult Lookalike(std::vector<std::string> args,
                                 double timeout = testing::kHangGuardSeconds) {
  testing::ProcessOptions o;
  o.argv = testing::LookalikeArgs(LOOKALIKE_BIN, std::move(args));
  o.timeout_seconds = timeout;
  return testing::RunProcess(o);
}

std::vector<std::string> IndexArgs(const std::string& photos, const std::string& db,
                                   int min_images = 2) {
  std::vector<std::string> args = {"index", photos, "--db", db, "--format", "json", "-q"};
  args.insert(args.end(), kModelFlags.begin(), kModelFlags.end());
  args.insert(args.end(), {"--pca-min-images", std::to_string(min_images)});
  return args;
}

int64_t JsonInt(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\":\\s*(-?\\d+)"))) return -1;
  return std::stoll(m[1]);
}

uint64_t Seed() {
  if (const char* s = std::getenv("LOOKALIKE_KILL_SEED")) return std::stoull(s);
  return std::random_device{}();
}

// path -> record, of every stored image.
std::map<std::string, ImageRecord> Records(const std::string& db) {
  std::map<std::string, ImageRecord> out;
  Store::Open(db, Store::Mode::kReadOnly)->ForEachImage([&](const ImageRecord& r) {
    out[r.path] = r;
  });
  return out;
}

// No projection stored (ExpectConsistent's `bits`).
constexpr int kNoProjection = -1;

// The database verifies, has one projection of `bits` (1 or 4 when 0) whose
// out_dim its stored vectors have, or none (kNoProjection) and no stored
// vectors, and the first stage alone ranks every stored image first for its
// own file.
void ExpectConsistent(const std::string& db, int bits) {
  const auto verify = Lookalike({"verify", "--db", db});
  ASSERT_EQ(verify.exit_code, 0) << verify.Describe() << verify.out;
  std::vector<std::string> stored;
  {
    auto store = Store::Open(db, Store::Mode::kReadOnly);
    const auto p = store->GetProjection();
    if (bits == kNoProjection) {
      EXPECT_FALSE(p.has_value());
      EXPECT_EQ(store->vector_dim(), 0u);
    } else {
      ASSERT_TRUE(p.has_value());
      if (bits)
        EXPECT_EQ(p->component_bits, static_cast<uint32_t>(bits));
      else
        EXPECT_TRUE(p->component_bits == 1 || p->component_bits == 4) << p->component_bits;
      EXPECT_EQ(store->vector_dim(), p->out_dim);
    }
    store->ForEachImage([&](const ImageRecord& r) { stored.push_back(r.path); });
  }
  std::vector<std::string> args = {"search", "--db",        db,         "--format", "tsv",
                                   "-k",     "1",           "--rerank", "0",        "--rerank-vlad",
                                   "0",      "--expansion", "0"};
  args.insert(args.end(), stored.begin(), stored.end());
  const auto r = Lookalike(args);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::map<std::string, std::string> first;  // query -> first hit
  for (const std::string& line : testing::SplitLines(r.out)) {
    const auto f = testing::SplitOn(line, '\t');
    if (f.size() == 5 && f[1] == "1")
      first[testing::UnescapeField(f[0])] = testing::UnescapeField(f[2]);
  }
  for (const std::string& path : stored) EXPECT_EQ(first[path], path) << "query " << path;
}

// Runs `index` frozen at `stop` and SIGKILLs it there; false if it exited
// first.
bool KillIndexAt(const std::vector<std::string>& args, const std::string& stop) {
  testing::ProcessOptions o;
  o.argv = testing::LookalikeArgs(LOOKALIKE_BIN, args);
  return testing::KillAtStopPoint(o, stop);
}

TEST(ProjectionKillTest, RelearningKilledAnywhereKeepsOneProjectionAndARerunFinishes) {
  const uint64_t seed = Seed();
  SCOPED_TRACE("replay with LOOKALIKE_KILL_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  testing::TempDir tmp;
  const std::string photos = tmp / "photos", base = tmp / "base";
  testing::WriteSyntheticSet(photos + "/a", 3, 300, 320, 240);
  const auto created = Lookalike(IndexArgs(photos, base));
  ASSERT_EQ(created.exit_code, 0) << created.Describe();
  ExpectConsistent(base, 1);
  const std::map<std::string, ImageRecord> before = Records(base);
  ASSERT_EQ(before.size(), 3u);
  {
    // On the existing database the model flags are noted as ignored, but
    // not --pca-bits, which says whether a run may learn the matrix again.
    std::vector<std::string> args = IndexArgs(photos, base);
    args.insert(args.end(), {"--pca-bits", "0"});
    const auto rerun = Lookalike(args);
    ASSERT_EQ(rerun.exit_code, 0) << rerun.Describe();
    EXPECT_NE(rerun.err.find("--clusters ignored"), std::string::npos) << rerun.err;
    EXPECT_EQ(rerun.err.find("--pca-bits ignored"), std::string::npos) << rerun.err;
  }
  testing::WriteSyntheticSet(photos + "/b", 6, 310, 320, 240);

  // A fresh copy of the 3-image database for each kill.
  int trial = 0;
  auto fresh = [&] {
    const std::string db = tmp / ("db" + std::to_string(trial++));
    fs::copy(base, db, fs::copy_options::recursive);
    return db;
  };
  // Nothing stored before the run is lost or changed.
  auto expect_kept = [&](const std::string& db) {
    const auto now = Records(db);
    for (const auto& [path, r] : before) {
      const auto it = now.find(path);
      ASSERT_TRUE(it != now.end()) << "image lost: " << path;
      EXPECT_EQ(it->second.content_hash, r.content_hash) << path;
      EXPECT_EQ(it->second.id, r.id) << path;
    }
  };
  // A re-run finishes: 9 images, 4 bits, a persisted search index.
  auto expect_rerun_finishes = [&](const std::string& db) {
    const auto rerun = Lookalike(IndexArgs(photos, db));
    ASSERT_EQ(rerun.exit_code, 0) << rerun.Describe();
    EXPECT_EQ(Records(db).size(), 9u);
    ExpectConsistent(db, 4);
    EXPECT_TRUE(Store::Open(db, Store::Mode::kReadOnly)->GetSearchIndex().has_value());
  };

  // The uninterrupted run: learned again at 4 bits; its length aims the kills.
  const std::string whole = fresh();
  const auto t0 = Clock::now();
  const auto grown = Lookalike(IndexArgs(photos, whole));
  const double run_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  ASSERT_EQ(grown.exit_code, 0) << grown.Describe();
  EXPECT_EQ(JsonInt(grown.out, "indexed"), 6) << grown.out;
  EXPECT_EQ(JsonInt(grown.out, "projection_bits"), 4) << grown.out;
  EXPECT_EQ(JsonInt(grown.out, "projection_replaced_bits"), 1) << grown.out;
  ExpectConsistent(whole, 4);
  EXPECT_TRUE(Store::Open(whole, Store::Mode::kReadOnly)->GetSearchIndex().has_value());

  {
    SCOPED_TRACE("killed with the new projection learned, not yet stored");
    const std::string db = fresh();
    ASSERT_TRUE(KillIndexAt(IndexArgs(photos, db), "projection-learned"));
    expect_kept(db);
    EXPECT_EQ(Records(db).size(), 9u) << "the new images were committed before";
    ExpectConsistent(db, 1);
    expect_rerun_finishes(db);
  }
  {
    SCOPED_TRACE("killed with the new projection stored, the search index not yet rebuilt");
    const std::string db = fresh();
    ASSERT_TRUE(KillIndexAt(IndexArgs(photos, db), "projection-stored"));
    expect_kept(db);
    EXPECT_FALSE(Store::Open(db, Store::Mode::kReadOnly)->GetSearchIndex().has_value())
        << "the old vectors' index went with them";
    ExpectConsistent(db, 4);
    expect_rerun_finishes(db);
  }
  for (int k = 0; k < 4; ++k) {
    const double delay = std::uniform_real_distribution<double>(0, run_ms)(rng);
    SCOPED_TRACE("killed at " + std::to_string(delay) + " ms of a " + std::to_string(run_ms) +
                 " ms run");
    const std::string db = fresh();
    testing::ProcessOptions o;
    o.argv = testing::LookalikeArgs(LOOKALIKE_BIN, IndexArgs(photos, db));
    {
      testing::ChildProcess child(o);
      // Blocks until the run exits or the chosen moment comes, whichever is
      // first (a pidfd turns readable at exit): the moment only places the
      // kill, nothing is asserted about time.
      const int fd = static_cast<int>(::syscall(SYS_pidfd_open, child.pid(), 0));
      ASSERT_GE(fd, 0) << "pidfd_open: " << std::strerror(errno);
      pollfd exited{fd, POLLIN, 0};
      ::poll(&exited, 1, static_cast<int>(delay));
      ::close(fd);
    }  // killed here if still running
    expect_kept(db);
    ExpectConsistent(db, 0);
    expect_rerun_finishes(db);
  }
}

// The first projection of a collection created below --pca-min-images (5
// here: 3 images, none) is learned by the run that brings it to 9, in one
// write (Store::AddProjection): killed just before and just after it, the
// database verifies and holds all or nothing of it, and a re-run finishes.
TEST(ProjectionKillTest, FirstProjectionKilledBeforeOrAfterItsWriteIsAllOrNothing) {
  testing::TempDir tmp;
  const std::string photos = tmp / "photos", base = tmp / "base";
  testing::WriteSyntheticSet(photos + "/a", 3, 400, 320, 240);
  ASSERT_EQ(Lookalike(IndexArgs(photos, base, 5)).exit_code, 0);
  ExpectConsistent(base, kNoProjection);
  testing::WriteSyntheticSet(photos + "/b", 6, 410, 320, 240);
  int trial = 0;
  for (const auto& [stop, bits] : std::vector<std::pair<std::string, int>>{
           {"projection-learned", kNoProjection}, {"projection-stored", 4}}) {
    SCOPED_TRACE("killed at " + stop);
    const std::string db = tmp / ("db" + std::to_string(trial++));
    fs::copy(base, db, fs::copy_options::recursive);
    ASSERT_TRUE(KillIndexAt(IndexArgs(photos, db, 5), stop));
    EXPECT_EQ(Records(db).size(), 9u);
    ExpectConsistent(db, bits);
    const auto rerun = Lookalike(IndexArgs(photos, db, 5));
    ASSERT_EQ(rerun.exit_code, 0) << rerun.Describe();
    ExpectConsistent(db, 4);
  }
}

}  // namespace
}  // namespace lookalike
