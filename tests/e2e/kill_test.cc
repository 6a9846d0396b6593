// Crash-safety harness, in the style of RocksDB's black-box crash
// test (tools/db_crashtest.py): the real `lookalike index` is SIGKILLed at
// seeded random moments -- during startup, around the atomic creation of the
// database and all over encoding -- and after every kill the database must
// pass `lookalike verify`, and every image the indexer acknowledged through
// `--committed` must be present and whole. The run is then finished and its
// vectors must equal those of an uninterrupted run over the same folder.
// The indexer runs with a 64 KiB RocksDB memtable (LOOKALIKE_TEST_WRITE_BUFFER_BYTES),
// so memtable flushes happen every few images and L0 compactions every few
// flushes: the kills land in the middle of those too, not only between
// write-ahead-log appends.
// A second test sends SIGINT/SIGTERM and expects a clean, prompt exit 1 that
// keeps the committed work.
//
// LOOKALIKE_KILL_SEED=<n> in the environment replays one schedule; the seed in
// use is printed and named by every failure.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "indexer/search_vectors.h"
#include "storage/store.h"
#include "tests/subprocess.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;
// Every child's limit and every wait for a state: only a hung run reaches it.
const Ms kHangGuard{static_cast<Ms::rep>(testing::kHangGuardSeconds * 1000)};
using testing::TempDir;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// ------------------------------------------------------------ child processes

// Every child still running; SIGKILLed and reaped when a test ends, however it
// ends (a failed ASSERT returns early), so no indexer outlives its test.
class Children {
 public:
  static Children& Get() {
    static Children children;
    return children;
  }
  void Add(pid_t pid) { pids_.insert(pid); }
  void Reaped(pid_t pid) { pids_.erase(pid); }
  void KillAll() {
    for (pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      int status;
      ::waitpid(pid, &status, 0);
    }
    pids_.clear();
  }

 private:
  std::set<pid_t> pids_;
};

struct ChildGuard {
  ~ChildGuard() { Children::Get().KillAll(); }
};

// Starts LOOKALIKE_BIN with `args` (fork + execv, no shell: any byte in a path
// is passed as is), stdin from /dev/null, stdout and stderr to files.
pid_t Spawn(const std::vector<std::string>& args, const std::string& out_path,
            const std::string& err_path) {
  // Everything the child needs is prepared before fork: after it, only
  // async-signal-safe calls (the test process may have OpenCV threads).
  std::vector<std::string> storage;
  storage.push_back(LOOKALIKE_BIN);
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Should the test itself be killed (ctest timeout), take the child along.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(125);
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  if (pid > 0) Children::Get().Add(pid);
  return pid;
}

// Polls (1 ms) until `pid` exits, `deadline` passes or `stop()` returns true
// (called at every poll). Returns the wait status, or nullopt if the child is
// still running.
template <typename Stop>
std::optional<int> WaitUntil(pid_t pid, Clock::time_point deadline, Stop stop) {
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      Children::Get().Reaped(pid);
      return status;
    }
    if (r < 0) {
      Children::Get().Reaped(pid);
      return std::nullopt;
    }
    if (stop()) return std::nullopt;
    const auto now = Clock::now();
    if (now >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::min<Clock::duration>(Ms(1), deadline - now));
  }
}
std::optional<int> WaitUntil(pid_t pid, Clock::time_point deadline) {
  return WaitUntil(pid, deadline, [] { return false; });
}

Clock::time_point After(Clock::time_point t, double ms) {
  return t +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
}

// SIGKILLs and reaps `pid`; returns its wait status.
int KillNow(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  Children::Get().Reaped(pid);
  return status;
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + ::strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

struct Result {
  int exit_code = -1;  // -1: killed by a signal or timed out
  std::string out, err;
};

// Runs LOOKALIKE_BIN to completion (SIGKILL after `timeout`).
Result RunTool(const std::vector<std::string>& args, const std::string& scratch,
               Ms timeout = kHangGuard) {
  const std::string out_path = scratch + "/run.out", err_path = scratch + "/run.err";
  Result result;
  const pid_t pid = Spawn(args, out_path, err_path);
  if (pid < 0) return result;
  std::optional<int> status = WaitUntil(pid, Clock::now() + timeout);
  if (!status) {
    KillNow(pid);
    result.err = "timed out after " + std::to_string(timeout.count()) + " ms; ";
  } else if (WIFEXITED(*status)) {
    result.exit_code = WEXITSTATUS(*status);
  }
  result.out = ReadFile(out_path);
  result.err += ReadFile(err_path);
  return result;
}

// ------------------------------------------------------------------- parsing

std::vector<std::string> SplitLines(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> SplitTabs(const std::string& s) {
  std::vector<std::string> cols;
  size_t start = 0;
  for (size_t tab; (tab = s.find('\t', start)) != std::string::npos; start = tab + 1)
    cols.push_back(s.substr(start, tab - start));
  cols.push_back(s.substr(start));
  return cols;
}

// The value of `"key":<number>` in one line of JSON, or -1.
int64_t JsonInt(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\":(-?[0-9]+)"))) return -1;
  return std::stoll(m[1]);
}
std::string JsonText(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\":\"([^\"]*)\""))) return "";
  return m[1];
}

// The acknowledgement log written by `index --committed FILE`.
struct Acks {
  std::set<std::string> paths;  // distinct acknowledged images
  int64_t lines = 0;
  std::string torn_tail;  // bytes after the last newline (must be none)
};
Acks ReadAcks(const std::string& file) {
  Acks acks;
  const std::string text = ReadFile(file);
  const size_t end = text.rfind('\n');
  if (end == std::string::npos) {
    acks.torn_tail = text;
    return acks;
  }
  acks.torn_tail = text.substr(end + 1);
  for (const std::string& line : SplitLines(text.substr(0, end + 1))) {
    ++acks.lines;
    acks.paths.insert(testing::UnescapeField(line));
  }
  return acks;
}

// ------------------------------------------------------------------ the data

// A folder of `count` distinct synthetic photos of awkward sizes between
// 160x120 and 320x240, in PNG and JPEG, with a few file names that need
// escaping in the acknowledgement log. Returns the absolute paths.
std::vector<std::string> MakeCollection(const std::string& dir, int count, uint64_t seed) {
  fs::create_directories(dir + "/sub");
  std::mt19937_64 rng(seed);
  std::vector<std::string> paths;
  for (int i = 0; i < count; ++i) {
    const int width = std::uniform_int_distribution<int>(160, 320)(rng);
    const int height = std::uniform_int_distribution<int>(120, 240)(rng);
    char name[64];
    std::snprintf(name, sizeof name, "%simg_%03d.%s", i % 3 == 0 ? "sub/" : "", i,
                  i % 4 == 0 ? "jpg" : "png");
    std::string path = dir + "/" + name;
    if (i == 7) path = dir + "/with space\tand tab.png";
    if (i == 11) path = dir + "/new\nline.png";
    testing::WriteImage(path, testing::MakeSyntheticImage(seed * 1000 + i, width, height));
    paths.push_back(fs::absolute(path).lexically_normal().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// The seed of this run's kill times: LOOKALIKE_KILL_SEED, else a random one;
// printed, so a failure can be replayed.
uint64_t Seed() {
  const char* given = std::getenv("LOOKALIKE_KILL_SEED");
  const uint64_t seed = given ? std::strtoull(given, nullptr, 10) : std::random_device{}();
  std::printf("[ kill     ] LOOKALIKE_KILL_SEED=%llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

// Same flags for the killed and the uninterrupted runs. Small K, a small
// training sample and small batches keep runs short and commits frequent.
std::vector<std::string> IndexArgs(const std::string& dir, const std::string& db,
                                   const std::string& acks) {
  return {"index",          dir,  "--db",    db,  "--committed", acks,   "--clusters", "16",
          "--train-images", "40", "--batch", "8", "--format",    "json", "-q"};
}

// Vectors and records read straight from a (closed) database, by path.
struct Stored {
  std::string record;  // size, hash, dimensions, descriptors, status
  std::vector<float> vector;
};
std::map<std::string, Stored> ReadStore(const std::string& db) {
  std::map<std::string, Stored> all;
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  const SearchVectors vectors(*store);
  const int64_t dim = vectors.dim();
  vectors.ForEach([&](const std::vector<ImageRecord>& records, const float* v) {
    for (size_t i = 0; i < records.size(); ++i) {
      const ImageRecord& r = records[i];
      std::ostringstream rec;
      rec << r.size_bytes << " " << r.content_hash << " " << r.width << "x" << r.height << " "
          << r.num_descriptors << " " << static_cast<int>(r.status);
      all[r.path] = Stored{rec.str(), std::vector<float>(v + i * dim, v + (i + 1) * dim)};
    }
  });
  return all;
}

// ------------------------------------------------------ checks after a crash

// Failed assertions so far in the running test.
int FailureCount() {
  const ::testing::TestResult* r =
      ::testing::UnitTest::GetInstance()->current_test_info()->result();
  int n = 0;
  for (int i = 0; i < r->total_part_count(); ++i) n += r->GetTestPartResult(i).failed();
  return n;
}

struct Checker {
  std::string db, acks_file, scratch;
  std::set<std::string> generated;
  std::set<std::string> checked;  // acked paths already searched for
  std::mt19937_64* rng = nullptr;
  int64_t images = 0;  // from the last `info`

  // Everything that must hold after any kill. Returns false (with failures
  // recorded) when the database is broken.
  bool AfterCrash(const std::string& when) {
    SCOPED_TRACE(when);
    const int failures_before = FailureCount();
    const Acks acks = ReadAcks(acks_file);
    EXPECT_EQ(acks.torn_tail, "") << "a torn line in the --committed file";
    for (const std::string& p : acks.paths)
      EXPECT_TRUE(generated.count(p)) << "acknowledged path is not a generated image: " << p;
    const fs::path parent = fs::path(db).parent_path();
    if (!fs::exists(db)) {
      EXPECT_EQ(acks.lines, 0) << "images were acknowledged but the database is missing";
      images = 0;
      return FailureCount() == failures_before;
    }
    // The database appears complete (atomic rename), and its creator swept
    // the temporary folders of earlier, killed creators.
    for (const auto& e : fs::directory_iterator(parent)) {
      const std::string name = e.path().filename().string();
      EXPECT_NE(name.rfind(fs::path(db).filename().string() + ".creating-", 0), 0u)
          << "stale temporary database folder left beside a complete database: " << name;
    }
    const Result verify = RunTool({"verify", "--db", db}, scratch);
    EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
    const Result info = RunTool({"info", "--db", db, "--format", "json"}, scratch);
    EXPECT_EQ(info.exit_code, 0) << info.err;
    images = JsonInt(info.out, "images");
    EXPECT_GE(images, static_cast<int64_t>(acks.paths.size())) << info.out;
    EXPECT_LE(images, static_cast<int64_t>(generated.size())) << info.out;
    if (verify.exit_code != 0 || info.exit_code != 0) return false;

    // Every acknowledged image has its record and a whole vector.
    {
      const std::map<std::string, Stored> stored = ReadStore(db);
      EXPECT_EQ(static_cast<int64_t>(stored.size()), images);
      for (const std::string& p : acks.paths) {
        auto it = stored.find(p);
        EXPECT_TRUE(it != stored.end()) << "acknowledged image lost: " << p;
      }
    }
    // And is found by search as itself: all newly acknowledged images (up to
    // 8) and a few older ones, in one query run.
    std::vector<std::string> fresh, old;
    for (const std::string& p : acks.paths) (checked.count(p) ? old : fresh).push_back(p);
    std::shuffle(fresh.begin(), fresh.end(), *rng);
    std::shuffle(old.begin(), old.end(), *rng);
    fresh.resize(std::min<size_t>(fresh.size(), 8));
    old.resize(std::min<size_t>(old.size(), 3));
    std::vector<std::string> sample = fresh;
    sample.insert(sample.end(), old.begin(), old.end());
    if (sample.empty()) return FailureCount() == failures_before;
    // VLAD ranking alone (--rerank 0): the score is then the cosine of the
    // stored vector with the query's, 1 for a whole vector; query expansion
    // would blend in neighbours.
    std::vector<std::string> args = {"search",   "--db", db,         "-k", "1",
                                     "--format", "tsv",  "--rerank", "0"};
    args.insert(args.end(), sample.begin(), sample.end());
    const Result search = RunTool(args, scratch);
    EXPECT_EQ(search.exit_code, 0) << search.err;
    std::map<std::string, std::vector<std::string>> top;  // query -> columns
    for (const std::string& line : SplitLines(search.out)) {
      const auto cols = SplitTabs(line);
      if (cols.size() == 5) top[testing::UnescapeField(cols[0])] = cols;
    }
    for (const std::string& p : sample) {
      checked.insert(p);
      auto it = top.find(p);
      if (it == top.end()) {
        ADD_FAILURE() << "no search result for acknowledged image " << p << "\n" << search.out;
        continue;
      }
      EXPECT_EQ(it->second[1], "1");
      EXPECT_EQ(testing::UnescapeField(it->second[2]), p)
          << "acknowledged image is not its own best match";
      // An image searched for itself: below 1 in a compact database (its
      // stored vector comes from quantised descriptors, the query's from
      // exact ones; 0.89-0.99 at this test's 16 clusters), while unrelated
      // images stay below 0.5. A torn value also fails its checksum, which
      // the verify step above checks.
      EXPECT_GT(std::stod(it->second[3]), 0.8) << "vector of " << p << " is not whole";
    }
    return FailureCount() == failures_before;
  }
};

// ------------------------------------------------------------------ the tests

TEST(KillTest, RandomSigkillsLoseNoAcknowledgedImageAndResumeToTheSameVectors) {
  ChildGuard guard;
  ::setenv("LOOKALIKE_TEST_WRITE_BUFFER_BYTES", "65536", 1);  // inherited by every run
  const uint64_t seed = Seed();
  SCOPED_TRACE("replay with LOOKALIKE_KILL_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };

  TempDir tmp;
  constexpr int kNumImages = 264;
  constexpr int kMinKills = 24;
  constexpr int kStartupKills = 5;   // within the first 50 ms
  constexpr int kCreationKills = 4;  // around the atomic creation of the DB
  constexpr int kMinEncodingKills = 12;
  const std::string photos = tmp / "photos";
  const auto t_gen = Clock::now();
  const std::vector<std::string> paths = MakeCollection(photos, kNumImages, 4242);
  std::printf("[ kill     ] %d images generated in %.0f ms\n", kNumImages, MsSince(t_gen));
  fs::create_directories(tmp / "ref");
  fs::create_directories(tmp / "killed");
  fs::create_directories(tmp / "scratch");
  const std::string scratch = tmp / "scratch";

  // The oracle: one uninterrupted run. Its timeline (database renamed into
  // place, first acknowledgement, end) aims the kills below.
  const std::string ref_db = tmp / "ref/db", ref_acks = tmp / "ref/acks";
  double t_creating = -1, t_db = -1, t_first_ack = -1, t_end = -1;
  {
    const auto start = Clock::now();
    const pid_t pid =
        Spawn(IndexArgs(photos, ref_db, ref_acks), scratch + "/ref.out", scratch + "/ref.err");
    ASSERT_GT(pid, 0);
    const std::string creating = ref_db + ".creating-" + std::to_string(pid);
    const auto status = WaitUntil(pid, start + kHangGuard, [&] {
      if (t_creating < 0 && fs::exists(creating)) t_creating = MsSince(start);
      if (t_db < 0 && fs::exists(ref_db)) t_db = MsSince(start);
      struct stat st;
      if (t_first_ack < 0 && ::stat(ref_acks.c_str(), &st) == 0 && st.st_size > 0)
        t_first_ack = MsSince(start);
      return false;
    });
    t_end = MsSince(start);
    ASSERT_TRUE(status) << "uninterrupted index run timed out";
    ASSERT_EQ(DescribeStatus(*status), "exit 0") << ReadFile(scratch + "/ref.err");
    const std::string summary = ReadFile(scratch + "/ref.out");
    ASSERT_EQ(JsonInt(summary, "indexed"), kNumImages) << summary;
    ASSERT_EQ(JsonInt(summary, "no_features"), 0) << summary;
    ASSERT_GT(t_db, 0);
    ASSERT_GT(t_first_ack, 0);
    std::printf(
        "[ kill     ] uninterrupted run: DB built aside from %.0f ms, renamed into place "
        "by %.0f ms, first ack %.0f ms, done %.0f ms\n",
        t_creating, t_db, t_first_ack, t_end);
  }
  // How long the database is being built aside (1 ms polls may miss it).
  const double creation_window = t_creating >= 0 ? std::max(1.0, t_db - t_creating) : 5.0;
  // Encoding rate after the database exists, images per ms.
  const double rate = kNumImages / std::max(1.0, t_end - t_first_ack);

  // Kills go into one database until it is complete; should one complete
  // before enough kills have landed, the next round starts a fresh one.
  int round = 0;
  std::string db, acks_file;
  Checker checker;
  checker.scratch = scratch;
  checker.generated.insert(paths.begin(), paths.end());
  checker.rng = &rng;
  auto next_round = [&] {
    const std::string dir = tmp / ("killed/round" + std::to_string(++round));
    fs::create_directories(dir);
    db = checker.db = dir + "/db";
    acks_file = checker.acks_file = dir + "/acks";
    checker.checked.clear();
    checker.images = 0;
  };
  next_round();

  int kills = 0, startup_kills = 0, creation_kills = 0, encoding_kills = 0, idle_kills = 0,
      finished_runs = 0, idle_in_round = 0;
  std::vector<std::string> log;
  for (int run = 0; kills < kMinKills || encoding_kills < kMinEncodingKills; ++run) {
    ASSERT_LT(run, 80) << "could not place " << kMinKills << " kills";
    if (checker.images == kNumImages && idle_in_round >= 2) {
      next_round();
      idle_in_round = 0;
    }
    const bool had_db = fs::exists(db);
    const int64_t remaining = kNumImages - checker.images;
    double delay;  // from spawn, or from the anchor below
    std::string kind, anchor;
    if (startup_kills < kStartupKills) {
      delay = uniform(0, 50);
      kind = "startup";
    } else if (!had_db && creation_kills < kCreationKills) {
      // Aimed at the build-aside-and-rename window: the delay counts from the
      // moment this run's DB.creating-<pid> folder appears.
      delay = uniform(0, creation_window);
      kind = "creation";
      anchor = "creating";
    } else if (!had_db) {
      // Counted from the rename, over the first half of the encoding.
      delay = uniform(0, 0.5 * (t_end - t_db));
      kind = "encoding";
      anchor = "db";
    } else if (remaining > 0) {
      // Startup of a run on an existing DB is short (open, WAL recovery,
      // walk); then aim at the first half of what is left, so the work left
      // shrinks but rarely vanishes before the kills are done.
      delay = uniform(10, 150 + 0.5 * remaining / rate);
      kind = "encoding";
    } else {
      delay = uniform(0, 120);
      kind = "idle";  // a complete DB: open, WAL recovery, walk
      ++idle_in_round;
    }
    const auto start = Clock::now();
    const pid_t pid =
        Spawn(IndexArgs(photos, db, acks_file), scratch + "/killed.out", scratch + "/killed.err");
    ASSERT_GT(pid, 0);
    const std::string creating = db + ".creating-" + std::to_string(pid);
    std::optional<int> status;
    double creating_at = -1;
    if (anchor == "creating") {
      status = WaitUntil(pid, start + kHangGuard,
                         [&] { return fs::exists(creating) || fs::exists(db); });
      creating_at = MsSince(start);
    } else if (anchor == "db") {
      status = WaitUntil(pid, start + kHangGuard, [&] { return fs::exists(db); });
    }
    if (!status) status = WaitUntil(pid, After(Clock::now(), delay));
    char line[200];
    if (status) {
      // Finished before its kill: it must have finished properly.
      ++finished_runs;
      std::snprintf(line, sizeof line, "run %2d: %-8s kill at %6.1f ms: finished first (%s), ", run,
                    kind.c_str(), delay, DescribeStatus(*status).c_str());
      log.push_back(line);
      ASSERT_EQ(DescribeStatus(*status), "exit 0") << line << "\n"
                                                   << ReadFile(scratch + "/killed.err");
    } else {
      const int killed = KillNow(pid);
      ++kills;
      if (kind == "startup") ++startup_kills;
      if (kind == "creation") ++creation_kills;
      if (kind == "encoding") ++encoding_kills;
      if (kind == "idle") ++idle_kills;
      if (kind == "creation")
        std::snprintf(line, sizeof line,
                      "run %2d: %-8s kill %4.1f ms after the DB.creating "
                      "folder appeared (at %.0f ms): %s, %s, ",
                      run, kind.c_str(), delay, creating_at, DescribeStatus(killed).c_str(),
                      fs::exists(db)         ? "after the rename"
                      : fs::exists(creating) ? "inside the window, temp folder left"
                                             : "before the temp folder");
      else
        std::snprintf(line, sizeof line, "run %2d: %-8s kill at %6.1f ms%s (%s), ", run,
                      kind.c_str(), delay, anchor == "db" ? " after the DB appeared" : "",
                      DescribeStatus(killed).c_str());
      log.push_back(line);
    }
    const auto t_check = Clock::now();
    const bool ok = checker.AfterCrash(log.back());
    log.back() += "round " + std::to_string(round) + ": " +
                  (fs::exists(db) ? "DB has " + std::to_string(checker.images) + " images, "
                                  : std::string("no DB, ")) +
                  std::to_string(ReadAcks(acks_file).paths.size()) + " acked (checked in " +
                  std::to_string(static_cast<int>(MsSince(t_check))) + " ms)";
    if (!ok) {
      for (const std::string& l : log) std::printf("%s\n", l.c_str());
      FAIL() << "database broken after: " << log.back() << "\n"
             << "last indexer stderr:\n"
             << ReadFile(scratch + "/killed.err");
    }
  }
  for (const std::string& l : log) std::printf("[ kill     ] %s\n", l.c_str());
  std::printf(
      "[ kill     ] %d kills: %d startup, %d creation, %d encoding, %d on a complete DB; "
      "%d runs finished before their kill; %d round(s)\n",
      kills, startup_kills, creation_kills, encoding_kills, idle_kills, finished_runs, round);
  EXPECT_GE(startup_kills, kStartupKills);

  // Finish the job without killing: only what was never committed is encoded.
  const auto t_final = Clock::now();
  const int64_t before = fs::exists(db) ? checker.images : 0;
  const Result resume = RunTool(IndexArgs(photos, db, acks_file), scratch);
  ASSERT_EQ(resume.exit_code, 0) << resume.out << resume.err;
  EXPECT_EQ(JsonInt(resume.out, "indexed"), kNumImages - before) << resume.out;
  EXPECT_EQ(JsonInt(resume.out, "unchanged"), before) << resume.out;
  EXPECT_EQ(JsonInt(resume.out, "no_features"), 0) << resume.out;
  EXPECT_NE(resume.out.find("\"cancelled\":false"), std::string::npos) << resume.out;
  ASSERT_TRUE(checker.AfterCrash("after the resumed run"));
  EXPECT_EQ(checker.images, kNumImages);
  EXPECT_EQ(ReadAcks(acks_file).paths, checker.generated) << "every image acknowledged once done";

  // Same model and the same vectors as the uninterrupted run.
  const Result info_killed = RunTool({"info", "--db", db, "--format", "json"}, scratch);
  const Result info_ref = RunTool({"info", "--db", ref_db, "--format", "json"}, scratch);
  ASSERT_EQ(info_ref.exit_code, 0) << info_ref.err;
  EXPECT_EQ(JsonInt(info_ref.out, "images"), kNumImages);
  EXPECT_NE(JsonText(info_ref.out, "codebook_hash"), "");
  EXPECT_EQ(JsonText(info_killed.out, "codebook_hash"), JsonText(info_ref.out, "codebook_hash"))
      << "the killed-and-resumed DB learned another codebook";
  EXPECT_EQ(RunTool({"verify", "--db", ref_db}, scratch).exit_code, 0);

  // The same ranked paths, and scores equal to within 2e-3. The stored values
  // are bit-identical (checked below), but ids, and so the rows of the search
  // index, follow commit order. Some kill patterns move a few scores by up
  // to ~1e-3 (measured: 34 of 780 lines, at most 9e-4), not yet explained;
  // the likely cause is a row's inner product rounding with its position
  // and a near-tie (e.g. which verified results expand the query) going the
  // other way.
  const Result search_killed =
      RunTool({"search", "--db", db, photos, "-k", "3", "--format", "tsv"}, scratch);
  const Result search_ref =
      RunTool({"search", "--db", ref_db, photos, "-k", "3", "--format", "tsv"}, scratch);
  ASSERT_EQ(search_ref.exit_code, 0) << search_ref.err;
  ASSERT_EQ(search_killed.exit_code, 0) << search_killed.err;
  EXPECT_EQ(SplitLines(search_ref.out).size(), 3u * kNumImages);
  {
    const auto killed_lines = SplitLines(search_killed.out), ref_lines = SplitLines(search_ref.out);
    ASSERT_EQ(killed_lines.size(), ref_lines.size());
    std::string diff;  // the lines that differ, not two pages of output
    for (size_t i = 0; i < ref_lines.size(); ++i) {
      const auto a = SplitTabs(killed_lines[i]), b = SplitTabs(ref_lines[i]);
      const bool same = a.size() == 5 && b.size() == 5 && a[0] == b[0] && a[1] == b[1] &&
                        a[2] == b[2] && a[4] == b[4] &&
                        std::fabs(std::stod(a[3]) - std::stod(b[3])) <= 2e-3;
      if (!same) diff += "killed: " + killed_lines[i] + "\nref:    " + ref_lines[i] + "\n";
    }
    EXPECT_TRUE(diff.empty())
        << "folder search differs between the killed-and-resumed and the uninterrupted DB:\n"
        << diff;
  }

  // Bit for bit, image by image (ids differ: they follow commit order).
  const std::map<std::string, Stored> killed = ReadStore(db), ref = ReadStore(ref_db);
  ASSERT_EQ(killed.size(), ref.size());
  int differing = 0;
  for (const auto& [path, s] : ref) {
    auto it = killed.find(path);
    if (it == killed.end()) {
      ADD_FAILURE() << "missing after resume: " << path;
      continue;
    }
    EXPECT_EQ(it->second.record, s.record) << path;
    const bool same = it->second.vector.size() == s.vector.size() &&
                      std::memcmp(it->second.vector.data(), s.vector.data(),
                                  s.vector.size() * sizeof(float)) == 0;
    differing += !same;
  }
  EXPECT_EQ(differing, 0) << "vectors differ from the uninterrupted run";
  std::printf("[ kill     ] resume and comparison with the uninterrupted run: %.0f ms\n",
              MsSince(t_final));
}

// The images of an older database get their thumbnails from the next
// `index` run (decoded, one write each). Killed at random moments of that
// run: every image keeps its record and vector bit for bit, the database
// verifies, and a final run adds exactly the thumbnails still missing.
TEST(KillTest, ThumbnailBackfillKilledAnywhereLosesNothingAndFinishes) {
  ChildGuard guard;
  ::setenv("LOOKALIKE_TEST_WRITE_BUFFER_BYTES", "65536", 1);  // flushes every few writes
  const uint64_t seed = Seed();
  SCOPED_TRACE("replay with LOOKALIKE_KILL_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  TempDir tmp;
  constexpr int kNumImages = 120;
  constexpr int kKills = 6;
  const std::string photos = tmp / "photos", scratch = tmp / "scratch", db = tmp / "db";
  MakeCollection(photos, kNumImages, 77);
  fs::create_directories(scratch);
  const Result built = RunTool(IndexArgs(photos, db, tmp / "acks"), scratch);
  ASSERT_EQ(built.exit_code, 0) << built.err;
  std::vector<uint64_t> ids;
  Store::Open(db, Store::Mode::kReadOnly)->ForEachImage([&](const ImageRecord& r) {
    ids.push_back(r.id);
  });
  // What a build that kept no thumbnails left: the same images without them.
  auto strip_thumbnails = [&] {
    auto store = Store::Open(db, Store::Mode::kReadWrite);
    for (uint64_t id : ids) {
      const ImageRecord r = *store->FindById(id);
      const auto vector = store->GetVector(id);
      store->PutImageWithId(r, vector ? vector->data() : nullptr, *store->GetFeatures(id));
    }
    ASSERT_TRUE(store->IdsWithThumbnails().empty());
  };
  strip_thumbnails();
  const std::map<std::string, Stored> before = ReadStore(db);
  ASSERT_EQ(before.size(), static_cast<size_t>(kNumImages));

  // The length of an uninterrupted backfill, on a copy, aims the kills.
  const std::string copy = tmp / "copy";
  fs::copy(db, copy, fs::copy_options::recursive);
  const auto t0 = Clock::now();
  const Result whole = RunTool(IndexArgs(photos, copy, tmp / "copy_acks"), scratch);
  const double run_ms = MsSince(t0);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  ASSERT_EQ(JsonInt(whole.out, "thumbnails_added"), kNumImages) << whole.out;

  // Half the kills at a random moment of the run, half once its first
  // thumbnails are in the database (a state, polled through read-only opens),
  // so some surely land in the middle of the backfill.
  auto thumbnails_in_db = [&] {
    return Store::Open(db, Store::Mode::kReadOnly)->IdsWithThumbnails().size();
  };
  int kills = 0, mid_backfill = 0;
  for (int run = 0; kills < kKills; ++run) {
    ASSERT_LT(run, 30) << "could not place " << kKills << " kills";
    const bool at_state = kills >= kKills / 2;
    const double delay = std::uniform_real_distribution<double>(0, run_ms)(rng);
    const pid_t pid = Spawn(IndexArgs(photos, db, tmp / "acks"), scratch + "/killed.out",
                            scratch + "/killed.err");
    ASSERT_GT(pid, 0);
    std::optional<int> status =
        at_state ? WaitUntil(pid, Clock::now() + kHangGuard, [&] { return thumbnails_in_db() > 0; })
                 : WaitUntil(pid, After(Clock::now(), delay));
    bool finished = status.has_value();
    std::string what = "finished first";
    if (status) {
      ASSERT_EQ(DescribeStatus(*status), "exit 0") << ReadFile(scratch + "/killed.err");
    } else {
      const int killed = KillNow(pid);
      // A kill that found the run already exited is a run that finished.
      finished = !WIFSIGNALED(killed);
      kills += !finished;
      what = DescribeStatus(killed);
    }
    const size_t added = thumbnails_in_db();
    mid_backfill += !finished && added > 0 && added < ids.size();
    SCOPED_TRACE("run " + std::to_string(run) +
                 (at_state ? ", kill once thumbnails appear"
                           : ", kill at " + std::to_string(delay) + " ms") +
                 ": " + what + ", " + std::to_string(added) + " thumbnails in the database");
    const Result verify = RunTool({"verify", "--db", db}, scratch);
    ASSERT_EQ(verify.exit_code, 0) << verify.out << verify.err;
    const std::map<std::string, Stored> now = ReadStore(db);
    ASSERT_EQ(now.size(), before.size());
    for (const auto& [path, s] : before) {
      const auto it = now.find(path);
      ASSERT_TRUE(it != now.end()) << "image lost: " << path;
      EXPECT_EQ(it->second.record, s.record) << path;
      EXPECT_EQ(it->second.vector, s.vector) << path;
    }
    // A run that finished left nothing to add: the next kill needs work.
    if (finished) strip_thumbnails();
  }
  std::printf("[ kill     ] %d kills, %d of them in the middle of the backfill\n", kills,
              mid_backfill);
  const size_t had = Store::Open(db, Store::Mode::kReadOnly)->IdsWithThumbnails().size();
  const Result finish = RunTool(IndexArgs(photos, db, tmp / "acks"), scratch);
  ASSERT_EQ(finish.exit_code, 0) << finish.err;
  EXPECT_EQ(JsonInt(finish.out, "thumbnails_added"), static_cast<int64_t>(kNumImages - had))
      << finish.out;
  EXPECT_EQ(JsonInt(finish.out, "indexed"), 0) << finish.out;
  EXPECT_EQ(Store::Open(db, Store::Mode::kReadOnly)->IdsWithThumbnails(), ids);
  EXPECT_EQ(RunTool({"verify", "--db", db}, scratch).exit_code, 0);
}

// SIGINT and SIGTERM during encoding: the current batch is committed, the
// process exits by itself promptly with exit code 1, and a re-run finishes.
class SignalTest : public ::testing::TestWithParam<int> {};

TEST_P(SignalTest, StopsCleanlyKeepsCommittedWorkAndResumes) {
  ChildGuard guard;
  const int sig = GetParam();
  TempDir tmp;
  constexpr int kNumImages = 160;
  const std::string photos = tmp / "photos";
  const std::vector<std::string> paths = MakeCollection(photos, kNumImages, 777 + sig);
  const std::string db = tmp / "db", acks_file = tmp / "acks", scratch = tmp.path();
  std::mt19937_64 rng(sig);

  const auto start = Clock::now();
  const pid_t pid = Spawn(IndexArgs(photos, db, acks_file), tmp / "index.out", tmp / "index.err");
  ASSERT_GT(pid, 0);
  // Wait until encoding is well under way: more acknowledged images than the
  // 40 training images, which are committed first.
  std::optional<int> status;
  status = WaitUntil(pid, start + kHangGuard, [&] { return ReadAcks(acks_file).lines >= 56; });
  ASSERT_FALSE(status) << "indexing finished before it could be interrupted ("
                       << DescribeStatus(*status) << "); make the collection larger";
  ASSERT_GE(ReadAcks(acks_file).lines, 56) << "no encoding progress: the run hung";
  const auto sent = Clock::now();
  ASSERT_EQ(::kill(pid, sig), 0);
  // How soon it stops is printed, not asserted: that it stopped early is
  // checked below by what it committed.
  status = WaitUntil(pid, sent + kHangGuard);
  ASSERT_TRUE(status) << strsignal(sig) << " did not stop the indexer (it hung)";
  const double stop_ms = MsSince(sent);
  std::printf("[ signal   ] %s at %.0f ms, exited after %.0f ms\n", strsignal(sig),
              std::chrono::duration<double, std::milli>(sent - start).count(), stop_ms);
  const std::string summary = ReadFile(tmp / "index.out");
  EXPECT_EQ(DescribeStatus(*status), "exit 1") << summary << ReadFile(tmp / "index.err");
  EXPECT_NE(summary.find("\"cancelled\":true"), std::string::npos) << summary;

  Checker checker;
  checker.db = db;
  checker.acks_file = acks_file;
  checker.scratch = scratch;
  checker.generated.insert(paths.begin(), paths.end());
  checker.rng = &rng;
  ASSERT_TRUE(checker.AfterCrash("after the signal"));
  const int64_t before = checker.images;
  EXPECT_GE(before, 56);
  EXPECT_LT(before, kNumImages) << "the signal did not stop the run early";
  EXPECT_EQ(before, static_cast<int64_t>(ReadAcks(acks_file).paths.size()))
      << "a clean stop acknowledges everything it committed";

  const Result resume = RunTool(IndexArgs(photos, db, acks_file), scratch);
  ASSERT_EQ(resume.exit_code, 0) << resume.out << resume.err;
  EXPECT_EQ(JsonInt(resume.out, "indexed"), kNumImages - before) << resume.out;
  EXPECT_EQ(JsonInt(resume.out, "unchanged"), before) << resume.out;
  ASSERT_TRUE(checker.AfterCrash("after the resumed run"));
  EXPECT_EQ(checker.images, kNumImages);
  EXPECT_EQ(ReadAcks(acks_file).paths, checker.generated);
}

INSTANTIATE_TEST_SUITE_P(Signals, SignalTest, ::testing::Values(SIGINT, SIGTERM),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(info.param == SIGINT ? "SIGINT" : "SIGTERM");
                         });

}  // namespace
}  // namespace lookalike
