// Crash safety of `dedup --move-to` and `--undo`, against the real binary:
// each run is SIGKILLed in the states around a move, reached through the
// LOOKALIKE_TEST_STOP_AT hook (the process stops itself there and is killed
// while stopped: the manifest line written but the file not moved, a file
// just moved, the nth of them; between file systems also the copy synced
// but not in place, and in place with the original not yet removed), and at
// seeded random moments of the moving. After every kill no file is lost:
// each duplicate is whole at its origin or in the move-to folder (or, only
// in the middle of a move between file systems, at both with the same
// bytes), every keeper is untouched, and nothing else lies in the folder.
// Running the same command again finishes the job; so does --undo, which is
// killed the same way. Moves within one file system and, when /dev/shm is
// another one, across file systems.
//
// LOOKALIKE_KILL_SEED=<n> replays one schedule; the seed is printed.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/subprocess.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::Transform;

testing::ProcessOptions Lookalike(std::vector<std::string> args) {
  testing::ProcessOptions o;
  o.argv = testing::LookalikeArgs(LOOKALIKE_BIN, std::move(args));
  return o;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A folder on /dev/shm, removed by the destructor; empty path() when /dev/shm
// is missing or on the same file system as `other`.
class OtherFileSystemDir {
 public:
  explicit OtherFileSystemDir(const std::string& other) {
    struct stat a, b;
    if (::stat("/dev/shm", &a) != 0 || ::stat(other.c_str(), &b) != 0 || a.st_dev == b.st_dev)
      return;
    char name[] = "/dev/shm/lookalike-kill.XXXXXX";
    if (::mkdtemp(name)) path_ = name;
  }
  ~OtherFileSystemDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class DedupMoveKillTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir;
    photos_ = new std::string(fs::canonical(tmp_->path()).string() + "/photos");
    duplicates_ = new std::set<std::string>;
    keepers_ = new std::set<std::string>;
    bytes_ = new std::map<std::string, std::string>;
    const std::vector<std::string> originals = testing::WriteSyntheticSet(*photos_, 6, 700);
    for (int i = 0; i < 4; ++i) {
      keepers_->insert(originals[i]);
      const cv::Mat image = cv::imread(originals[i], cv::IMREAD_COLOR);
      const std::string dir = *photos_ + "/copies/set " + std::to_string(i);
      fs::create_directories(dir);
      for (Transform t : {Transform::kJpeg, Transform::kScale}) {
        const std::string path = dir + "/" + testing::TransformName(t) + ".jpg";
        testing::WriteImage(path, testing::ApplyTransform(image, t));
        duplicates_->insert(path);
      }
    }
    for (const auto& e : fs::recursive_directory_iterator(*photos_))
      if (e.is_regular_file()) (*bytes_)[e.path().string()] = Read(e.path().string());
    const auto index = testing::RunProcess(
        Lookalike({"index", *photos_, "--db", *tmp_ / "db", "--clusters", "16", "--quiet"}));
    ASSERT_EQ(index.exit_code, 0) << index.Describe();
  }
  static void TearDownTestSuite() {
    delete bytes_;
    delete keepers_;
    delete duplicates_;
    delete photos_;
    delete tmp_;
  }
  void SetUp() override {
    seed_ = std::getenv("LOOKALIKE_KILL_SEED")
                ? std::strtoull(std::getenv("LOOKALIKE_KILL_SEED"), nullptr, 10)
                : std::random_device{}();
    std::printf("[ kill     ] LOOKALIKE_KILL_SEED=%llu\n", static_cast<unsigned long long>(seed_));
    rng_.seed(seed_);
  }
  void TearDown() override { ::unsetenv("LOOKALIKE_TEST_STOP_AT"); }

  static testing::ProcessOptions Move(const std::string& to) {
    return Lookalike({"dedup", "--db", *tmp_ / "db", "--format", "tsv", "--move-to", to});
  }
  static testing::ProcessOptions Undo(const std::string& to) {
    return Lookalike({"dedup", "--undo", to});
  }
  static std::string Destination(const std::string& to, const std::string& origin) {
    return to + origin.substr(photos_->size());
  }

  // No file lost or changed, whatever state the kill left; `when` names it.
  void CheckWhole(const std::string& to, const std::string& when) {
    SCOPED_TRACE(when + " (LOOKALIKE_KILL_SEED=" + std::to_string(seed_) + ")");
    for (const std::string& k : *keepers_) EXPECT_EQ(Read(k), bytes_->at(k)) << k;
    std::set<std::string> expected_in_to = {to + "/lookalike-moves.tsv"};
    for (const std::string& d : *duplicates_) {
      const std::string dest = Destination(to, d);
      const bool at_origin = fs::exists(d), moved = fs::exists(dest);
      EXPECT_TRUE(at_origin || moved) << d << " lost";
      if (at_origin) {
        EXPECT_EQ(Read(d), bytes_->at(d)) << d;
      }
      if (moved) {
        EXPECT_EQ(Read(dest), bytes_->at(d)) << dest;
        expected_in_to.insert(dest);
      }
    }
    if (!fs::exists(to)) return;
    for (const auto& e : fs::recursive_directory_iterator(to)) {
      if (!e.is_regular_file()) continue;
      const std::string p = e.path().string();
      const bool partial = p.size() > 18 && p.substr(p.size() - 18) == ".lookalike-partial";
      EXPECT_TRUE(expected_in_to.count(p) || partial) << "unexpected " << p;
    }
  }
  void ExpectAllMoved(const std::string& to) {
    for (const std::string& d : *duplicates_) {
      EXPECT_FALSE(fs::exists(d)) << d;
      EXPECT_EQ(Read(Destination(to, d)), bytes_->at(d));
    }
    for (const std::string& k : *keepers_) EXPECT_EQ(Read(k), bytes_->at(k));
  }
  void ExpectAllBack(const std::string& to) {
    for (const auto& [path, bytes] : *bytes_) EXPECT_EQ(Read(path), bytes) << path;
    for (const auto& e : fs::recursive_directory_iterator(to))
      EXPECT_TRUE(e.is_directory() || e.path().filename() == "lookalike-moves.tsv") << e.path();
  }

  // Kills `run` where `stop` says (LOOKALIKE_TEST_STOP_AT), or, for "random",
  // at a seeded moment after the moves begin.
  bool KillAt(const testing::ProcessOptions& run, const std::string& stop, const char* begin) {
    if (stop != "random") return testing::KillAtStopPoint(run, stop);
    ::setenv("LOOKALIKE_TEST_STOP_AT", begin, 1);
    testing::ChildProcess child(run);
    ::unsetenv("LOOKALIKE_TEST_STOP_AT");
    int status = 0;
    while (::waitpid(child.pid(), &status, WUNTRACED) < 0) {
    }
    if (!WIFSTOPPED(status)) return false;
    ::kill(child.pid(), SIGCONT);
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::uniform_int_distribution<int>(0, 20000)(rng_)));
    ::kill(child.pid(), SIGKILL);
    return true;
  }

  // One schedule: the move killed at `move_stop`, re-run; the undo killed at
  // `undo_stop`, re-run.
  void Schedule(const std::string& to, const std::string& move_stop, const std::string& undo_stop) {
    SCOPED_TRACE("move killed at " + move_stop + ", undo killed at " + undo_stop);
    ASSERT_TRUE(KillAt(Move(to), move_stop, "dedup-moves-begin")) << "never reached " << move_stop;
    CheckWhole(to, "after the move killed at " + move_stop);
    const auto rerun = testing::RunProcess(Move(to));
    ASSERT_EQ(rerun.exit_code, 0) << rerun.Describe();
    ExpectAllMoved(to);
    ASSERT_TRUE(KillAt(Undo(to), undo_stop, "dedup-undo-begin")) << "never reached " << undo_stop;
    CheckWhole(to, "after the undo killed at " + undo_stop);
    const auto undo = testing::RunProcess(Undo(to));
    ASSERT_EQ(undo.exit_code, 0) << undo.Describe();
    ExpectAllBack(to);
    fs::remove_all(to);
  }

  static TempDir* tmp_;
  static std::string* photos_;
  static std::set<std::string>*duplicates_, *keepers_;
  static std::map<std::string, std::string>* bytes_;  // every file's bytes as made
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

TempDir* DedupMoveKillTest::tmp_ = nullptr;
std::string* DedupMoveKillTest::photos_ = nullptr;
std::set<std::string>* DedupMoveKillTest::duplicates_ = nullptr;
std::set<std::string>* DedupMoveKillTest::keepers_ = nullptr;
std::map<std::string, std::string>* DedupMoveKillTest::bytes_ = nullptr;

TEST_F(DedupMoveKillTest, KilledWithinOneFileSystem) {
  const std::string to = *tmp_ / "moved";
  // A plain run moves every duplicate and nothing else.
  const auto plain = testing::RunProcess(Move(to));
  ASSERT_EQ(plain.exit_code, 0) << plain.Describe();
  ExpectAllMoved(to);
  ASSERT_EQ(testing::RunProcess(Undo(to)).exit_code, 0);
  ExpectAllBack(to);
  fs::remove_all(to);
  const std::vector<std::pair<std::string, std::string>> schedules = {
      {"dedup-moves-begin", "dedup-undo-begin"},
      {"dedup-move-logged@1", "dedup-undo-done@1"},
      {"dedup-move-logged@5", "dedup-undo-done@4"},
      {"dedup-move-done@3", "dedup-undo-done@8"},
      {"dedup-move-done@8", "random"},
      {"random", "random"},
      {"random", "dedup-undo-done@2"},
  };
  for (const auto& [move, undo] : schedules) Schedule(to, move, undo);
}

TEST_F(DedupMoveKillTest, KilledAcrossFileSystems) {
  const OtherFileSystemDir other(tmp_->path());
  if (other.path().empty()) GTEST_SKIP() << "/dev/shm is missing or on the same file system";
  const std::string to = other.path() + "/moved";
  const std::vector<std::pair<std::string, std::string>> schedules = {
      {"dedup-move-copied@1", "dedup-undo-copied@1"},
      {"dedup-move-placed@1", "dedup-undo-placed@1"},
      {"dedup-move-copied@6", "dedup-undo-placed@5"},
      {"dedup-move-placed@8", "dedup-undo-copied@8"},
      {"random", "random"},
      {"random", "random"},
  };
  for (const auto& [move, undo] : schedules) Schedule(to, move, undo);
}

}  // namespace
}  // namespace lookalike
