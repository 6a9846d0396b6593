// Issue 4, environment faults, table-driven, each against the real
// `lookalike` binary:
//   db_path_is_a_file        exit 2, one-line cause; the file untouched
//   missing_parent           exit 2, one-line cause; nothing created
//   non_empty_foreign_folder exit 2; the folder untouched (index, search, info)
//   read_only_db_folder      as an unprivileged user: index exits 2 with a
//   clear
//                            message; search, info and verify still work;
//                            DB byte-for-byte untouched (skipped, with the
//                            reason, when no unprivileged user is available)
//   lock_held                a second `index` during a running one exits 2
//                            within 1 s ("in use by another process"); the
//                            first finishes with exit 0 and a consistent DB
//   lock_held_while_creating the same while the first run is still creating
//                            the database (learning the codebook)
//   search_during_index      search, info and verify work while index writes;
//                            results are whole (paths exist, self-match first)
//   flipped_byte_in_sst      verify exits 2; search never prints results from
//                            the corrupt DB; read-only commands change nothing
//   changed_model            one centroid of m:model changed (hash kept): every
//                            command refuses with exit 2 naming the checksum
//                            mismatch; DB byte-for-byte untouched
//   disk_full                an update fills a tmpfs (private mount namespace)
//                            half way: exit 2 with a one-line cause, committed
//                            images survive (verify, info), and once space is
//                            freed a re-run resumes (skipped, with the reason,
//                            when mounting is not allowed)
// lookalike persists no side files besides RocksDB's (no FAISS index file), so
// "corrupted side files" reduce to the RocksDB files covered above.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/json_lite.h"
#include "tests/subprocess.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {
namespace fs = std::filesystem;
using testing::Json;
using testing::JsonParser;
using testing::ProcessOptions;
using testing::ProcessResult;
using testing::TempDir;

// Model flags only when the database is created (on an existing one they
// print a note, which would add a line to stderr).
constexpr const char* kModelFlags[] = {"--clusters", "16"};

ProcessOptions Options(std::vector<std::string> args, bool unprivileged = false,
                       double timeout = testing::kHangGuardSeconds) {
  ProcessOptions o;
  o.argv = testing::LookalikeArgs(LOOKALIKE_BIN, std::move(args));
  o.unprivileged = unprivileged;
  o.timeout_seconds = timeout;
  return o;
}

ProcessResult Lookalike(std::vector<std::string> args, bool unprivileged = false) {
  return testing::RunProcess(Options(std::move(args), unprivileged));
}

std::vector<std::string> IndexArgs(const std::string& photos, const std::string& db,
                                   std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"index", photos, "--db", db, "--threads", "2"};
  if (!fs::exists(db + "/CURRENT"))
    args.insert(args.end(), std::begin(kModelFlags), std::end(kModelFlags));
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Relative path -> bytes of every file under `dir` (LOG files included: an
// untouched database means untouched, diagnostics too).
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  if (!fs::exists(dir)) return files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string rel = fs::relative(e.path(), dir).string();
    files[rel] = e.is_regular_file() ? testing::ReadFileBytes(e.path().string()) : "<dir>";
  }
  return files;
}

std::string DiffSnapshots(const std::map<std::string, std::string>& a,
                          const std::map<std::string, std::string>& b) {
  std::string diff;
  for (const auto& [name, bytes] : a) {
    auto it = b.find(name);
    if (it == b.end())
      diff += "  removed " + name + "\n";
    else if (it->second != bytes)
      diff += "  changed " + name + "\n";
  }
  for (const auto& [name, bytes] : b)
    if (!a.count(name)) diff += "  added " + name + "\n";
  return diff;
}

// A cause on exactly one line of stderr, from lookalike.
void ExpectOneLineCause(const ProcessResult& r, const std::string& must_contain) {
  const auto lines = testing::SplitLines(r.err);
  EXPECT_EQ(lines.size(), 1u) << "expected a one-line cause: " << r.Describe();
  EXPECT_NE(r.err.find(must_contain), std::string::npos)
      << "the cause should mention '" << must_contain << "': " << r.Describe();
}

int64_t JsonNumber(const std::string& text, const std::string& key) {
  try {
    return static_cast<int64_t>(JsonParser::Parse(text)[key].number);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what() << " in: " << text;
    return -1;
  }
}

// True if some process holds an flock on `path`, read from /proc/locks (a
// probe that takes no lock itself, so it never disturbs the holder).
bool FlockHeld(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return false;
  std::ifstream locks("/proc/locks");
  const std::string inode = ":" + std::to_string(st.st_ino);
  for (std::string line; std::getline(locks, line);) {
    if (line.find("FLOCK") == std::string::npos) continue;
    // "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF": the 6th field is
    // major:minor:inode.
    std::istringstream fields(line);
    std::string field;
    for (int i = 0; i < 6 && fields >> field; ++i) {
    }
    if (field.size() > inode.size() &&
        field.compare(field.size() - inode.size(), inode.size(), inode) == 0)
      return true;
  }
  return false;
}

// Each case gets a fresh temp dir (readable by the unprivileged user) with
// `photos/` holding kNumPhotos generated images.
struct Env {
  TempDir tmp;
  std::string photos, db;
  static constexpr int kNumPhotos = 8;
  Env() {
    ::chmod(tmp.path().c_str(), 0755);
    photos = tmp / "photos";
    db = tmp / "db";
    testing::WriteSyntheticSet(photos, kNumPhotos, 500, 320, 240);
  }
  // Builds the database (exit 0 required).
  void Index() {
    const ProcessResult r = Lookalike(IndexArgs(photos, db));
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }
  // Adds `count` more images to photos/ under more/.
  void AddPhotos(int count, uint64_t seed, int width = 320, int height = 240) {
    testing::WriteSyntheticSet(photos + "/more", count, seed, width, height);
  }
};

// ---------------------------------------------------------------- the cases

void DbPathIsAFile(Env& env) {
  const std::string file = env.tmp / "db.txt";
  std::ofstream(file) << "precious\n";
  const ProcessResult r = Lookalike(IndexArgs(env.photos, file));
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  ExpectOneLineCause(r, "is a file");
  EXPECT_EQ(testing::ReadFileBytes(file), "precious\n");
  for (const char* cmd : {"search", "info", "verify"}) {
    std::vector<std::string> args = {cmd, "--db", file};
    if (std::string(cmd) == "search") args.push_back(env.photos + "/img_000.png");
    const ProcessResult q = Lookalike(args);
    EXPECT_EQ(q.exit_code, 2) << cmd << ": " << q.Describe();
    EXPECT_EQ(testing::SplitLines(q.err).size(), 1u) << cmd << ": " << q.Describe();
  }
  EXPECT_EQ(testing::ReadFileBytes(file), "precious\n");
}

void MissingParent(Env& env) {
  const std::string db = env.tmp / "no/such/parent/db";
  const ProcessResult r = Lookalike(IndexArgs(env.photos, db));
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  ExpectOneLineCause(r, "does not exist");
  EXPECT_FALSE(fs::exists(env.tmp / "no")) << "nothing may be created";
  for (const char* cmd : {"info", "verify"}) {
    const ProcessResult q = Lookalike({cmd, "--db", db});
    EXPECT_EQ(q.exit_code, 2) << q.Describe();
  }
  EXPECT_FALSE(fs::exists(env.tmp / "no")) << "search/info/verify never create anything";
}

void NonEmptyForeignFolder(Env& env) {
  const std::string folder = env.tmp / "documents";
  fs::create_directories(folder + "/sub");
  std::ofstream(folder + "/thesis.txt") << "years of work\n";
  std::ofstream(folder + "/sub/data.csv") << "1,2,3\n";
  const auto before = Snapshot(folder);
  const ProcessResult r = Lookalike(IndexArgs(env.photos, folder));
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  ExpectOneLineCause(r, "not empty");
  for (const char* cmd : {"info", "verify"}) {
    const ProcessResult q = Lookalike({cmd, "--db", folder});
    EXPECT_EQ(q.exit_code, 2) << q.Describe();
  }
  const ProcessResult s = Lookalike({"search", "--db", folder, env.photos + "/img_000.png"});
  EXPECT_EQ(s.exit_code, 2) << s.Describe();
  EXPECT_EQ(DiffSnapshots(before, Snapshot(folder)), "") << "the folder was modified";
  EXPECT_TRUE(fs::is_empty(env.tmp.path()) == false);
  for (const auto& e : fs::directory_iterator(env.tmp.path()))
    EXPECT_EQ(e.path().filename().string().find(".creating-"), std::string::npos)
        << "left behind: " << e.path();
}

void ReadOnlyDbFolder(Env& env) {
  const std::string reason = testing::UnprivilegedUnavailableReason(LOOKALIKE_BIN);
  if (!reason.empty()) GTEST_SKIP() << reason;
  env.Index();
  // Owned by root (or by us), not writable by the user that runs the checks.
  if (::geteuid() != 0) {
    for (const auto& e : fs::recursive_directory_iterator(env.db)) ::chmod(e.path().c_str(), 0444);
    ::chmod(env.db.c_str(), 0555);
  }
  env.AddPhotos(2, 900);  // something to write
  const auto before = Snapshot(env.db);
  const ProcessResult r = Lookalike(IndexArgs(env.photos, env.db), /*unprivileged=*/true);
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_EQ(testing::SplitLines(r.err).size(), 1u) << "a one-line cause: " << r.Describe();
  EXPECT_TRUE(r.err.find("ermission") != std::string::npos ||
              r.err.find("read-only") != std::string::npos)
      << "the message should say the database cannot be written: " << r.Describe();
  const ProcessResult s = Lookalike(
      {"search", "--db", env.db, env.photos + "/img_003.png", "-k", "1", "--format", "tsv"},
      /*unprivileged=*/true);
  EXPECT_EQ(s.exit_code, 0) << s.Describe();
  EXPECT_NE(s.out.find("\t1\t" + env.photos + "/img_003.png\t"), std::string::npos) << s.out;
  const ProcessResult i = Lookalike({"info", "--db", env.db, "--format", "json"}, true);
  EXPECT_EQ(i.exit_code, 0) << i.Describe();
  EXPECT_EQ(JsonNumber(i.out, "images"), Env::kNumPhotos);
  const ProcessResult v = Lookalike({"verify", "--db", env.db}, true);
  EXPECT_EQ(v.exit_code, 0) << v.Describe();
  if (::geteuid() != 0) {
    ::chmod(env.db.c_str(), 0755);
  }
  EXPECT_EQ(DiffSnapshots(before, Snapshot(env.db)), "") << "the read-only DB was modified";
}

// Images the run of WithRunningIndexer adds.
constexpr int kRunningIndexerPhotos = 240;

// Starts an index run that adds many images, waits until it is committing,
// runs `during` while it still runs, then checks it finishes cleanly.
void WithRunningIndexer(Env& env, bool creating,
                        const std::function<void(testing::ChildProcess&)>& during) {
  if (!creating) env.Index();
  // Enough work that the run outlasts the checks even when ctest runs other
  // tests beside it (90 images was not: the run ended first under load).
  env.AddPhotos(kRunningIndexerPhotos, 3000, 480, 360);
  const std::string committed = env.tmp / "committed.txt";
  // One thread, so the run lasts several seconds on any machine.
  std::vector<std::string> args = {"index", env.photos,  "--db", env.db,        "--clusters",
                                   "16",    "--threads", "1",    "--committed", committed};
  testing::ChildProcess first(Options(args));
  // Wait for the state the check needs, never for a fixed time: the first
  // run holds the creation lock (creating: it samples images to learn the
  // codebook, seconds at one thread), or has committed an image. The
  // deadline only ends a hung run.
  const std::string creation_lock =
      env.tmp / ("." + fs::path(env.db).filename().string() + ".lock");
  bool ready = false;
  for (const auto deadline = std::chrono::steady_clock::now() +
                             std::chrono::duration<double>(testing::kHangGuardSeconds);
       !ready && first.Running() && std::chrono::steady_clock::now() < deadline;) {
    ready = creating ? FlockHeld(creation_lock) && !fs::exists(env.db)
                     : fs::exists(committed) && fs::file_size(committed) > 0;
    if (!ready) ::usleep(5000);
  }
  ASSERT_TRUE(ready || !first.Running()) << "the first run never reached the state to check";
  ASSERT_TRUE(first.Running()) << "the first index run ended before the check could start: "
                               << first.Wait().Describe();
  during(first);
  const bool still_running = first.Running();
  const ProcessResult done = first.Wait();
  EXPECT_TRUE(still_running) << "the first run finished before the checks did; make it longer";
  EXPECT_EQ(done.exit_code, 0) << "the first run must be unaffected: " << done.Describe();
  const ProcessResult v = Lookalike({"verify", "--db", env.db});
  EXPECT_EQ(v.exit_code, 0) << v.Describe();
  const ProcessResult i = Lookalike({"info", "--db", env.db, "--format", "json"});
  EXPECT_EQ(JsonNumber(i.out, "images"), Env::kNumPhotos + kRunningIndexerPhotos) << i.Describe();
}

void SecondWriterRefused(Env& env, bool creating) {
  WithRunningIndexer(env, creating,
                     [&](testing::ChildProcess& first) {
                       const ProcessResult second = Lookalike(IndexArgs(env.photos, env.db));
                       EXPECT_EQ(second.exit_code, 2) << second.Describe();
                       // Refused at once: the first run still holds the lock when the second
                       // has exited (a second writer waiting for the lock would have outlived
                       // it). A state, not a time bound.
                       EXPECT_TRUE(first.Running())
                           << "the second writer must be refused at once, not wait for the lock: "
                           << second.Describe();
                       EXPECT_NE(second.err.find("in use by another process"), std::string::npos)
                           << second.Describe();
                       EXPECT_EQ(testing::SplitLines(second.err).size(), 1u) << second.Describe();
                     });
}

void LockHeld(Env& env) { SecondWriterRefused(env, /*creating=*/false); }
void LockHeldWhileCreating(Env& env) { SecondWriterRefused(env, /*creating=*/true); }

void SearchDuringIndex(Env& env) {
  WithRunningIndexer(env, false, [&](testing::ChildProcess&) {
    std::set<std::string> existing;
    for (const auto& e : fs::recursive_directory_iterator(env.photos))
      existing.insert(e.path().string());
    for (int round = 0; round < 3; ++round) {
      std::vector<std::string> args = {"search", "--db", env.db, "-k", "5", "--format", "tsv"};
      for (int q = 0; q < Env::kNumPhotos; q += 3)
        args.push_back(env.photos + "/img_00" + std::to_string(q) + ".png");
      const ProcessResult s = Lookalike(args);
      ASSERT_EQ(s.exit_code, 0) << s.Describe();
      int lines = 0;
      for (const std::string& line : testing::SplitLines(s.out)) {
        const auto cols = testing::SplitOn(line, '\t');
        ASSERT_EQ(cols.size(), 5u) << line;
        EXPECT_TRUE(existing.count(cols[2])) << "result is not an indexed file: " << line;
        const double score = std::stod(cols[3]);
        EXPECT_TRUE(score >= -1.0001 && score <= 1.0001) << line;
        if (cols[1] == "1") {
          EXPECT_EQ(cols[0], cols[2]) << "self-match must come first: " << line;
        }
        ++lines;
      }
      EXPECT_EQ(lines, 3 * 5) << s.out;
      const ProcessResult i = Lookalike({"info", "--db", env.db, "--format", "json"});
      EXPECT_EQ(i.exit_code, 0) << i.Describe();
      EXPECT_GE(JsonNumber(i.out, "images"), Env::kNumPhotos);
    }
  });
}

// Rewrites the DB's memtable into SST files so the data lives there.
void FlushWithRocksDb(const std::string& db) {
  rocksdb::Options options;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, db, &raw).ok());
  std::unique_ptr<rocksdb::DB> guard(raw);
  ASSERT_TRUE(raw->Flush(rocksdb::FlushOptions()).ok());
  ASSERT_TRUE(raw->Close().ok());
}

void FlippedByteInSst(Env& env) {
  env.Index();
  FlushWithRocksDb(env.db);
  std::string biggest;
  for (const auto& e : fs::directory_iterator(env.db))
    if (e.path().extension() == ".sst" &&
        (biggest.empty() || fs::file_size(e.path()) > fs::file_size(biggest)))
      biggest = e.path().string();
  ASSERT_FALSE(biggest.empty()) << "no SST file";
  // 8 vectors of 2048 floats dominate the file: its middle is vector data.
  {
    std::fstream f(biggest, std::ios::in | std::ios::out | std::ios::binary);
    const std::streamoff at = static_cast<std::streamoff>(fs::file_size(biggest) / 2);
    f.seekg(at);
    char c;
    f.get(c);
    f.seekp(at);
    f.put(static_cast<char>(c ^ 0x10));
  }
  const auto before = Snapshot(env.db);
  const ProcessResult v = Lookalike({"verify", "--db", env.db});
  EXPECT_EQ(v.exit_code, 2) << "verify must report the flipped byte: " << v.Describe();
  EXPECT_EQ(v.out.find("ok"), std::string::npos) << v.Describe();
  const ProcessResult s = Lookalike(
      {"search", "--db", env.db, env.photos + "/img_001.png", "-k", "3", "--format", "tsv"});
  if (s.exit_code == 2) {
    EXPECT_EQ(s.out, "") << "no results may be printed from a corrupt database";
    EXPECT_NE(s.err.find("orrupt"), std::string::npos) << s.Describe();
  } else {
    ADD_FAILURE() << "search over a corrupt vector block should exit 2: " << s.Describe();
  }
  const ProcessResult i = Lookalike({"info", "--db", env.db, "--format", "json"});
  if (i.exit_code == 0)
    EXPECT_EQ(JsonNumber(i.out, "images"), Env::kNumPhotos) << i.out;
  else
    EXPECT_EQ(i.exit_code, 2) << i.Describe();
  EXPECT_EQ(DiffSnapshots(before, Snapshot(env.db)), "") << "read-only commands modified the DB";
}

void ChangedModel(Env& env) {
  env.Index();
  {
    rocksdb::Options options;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, env.db, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::string model;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), "m:model", &model).ok());
    // The value ends with the K x dim f32 centroids, then u32 min_keypoints
    // and a u64 checksum of the whole value: change the last centroid.
    const size_t last_centroid = model.size() - 12 - 2;
    model[last_centroid] = static_cast<char>(model[last_centroid] ^ 0x01);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "m:model", model).ok());
    ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
    ASSERT_TRUE(db->Close().ok());
  }
  env.AddPhotos(2, 700);
  const auto before = Snapshot(env.db);
  const std::vector<std::vector<std::string>> commands = {
      IndexArgs(env.photos, env.db),
      {"search", "--db", env.db, env.photos + "/img_001.png"},
      {"info", "--db", env.db},
      {"verify", "--db", env.db}};
  for (const auto& args : commands) {
    const ProcessResult r = Lookalike(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.Describe();
    EXPECT_NE(r.err.find("checksum mismatch"), std::string::npos)
        << args[0] << ": " << r.Describe();
    EXPECT_EQ(r.out, "") << args[0] << " printed output from a refused database";
  }
  EXPECT_EQ(DiffSnapshots(before, Snapshot(env.db)), "") << "the refused DB was modified";
}

// Bytes the files under `dir` hold (what a tmpfs charges for them).
uintmax_t DirBytes(const std::string& dir) {
  uintmax_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) bytes += e.file_size();
  return bytes;
}

void DiskFull(Env& env) {
  // A private mount namespace for this (single-threaded) process, so the
  // tmpfs is invisible elsewhere and disappears with the process.
  if (::unshare(CLONE_NEWNS) != 0)
    GTEST_SKIP() << "cannot create a mount namespace (unshare: " << std::strerror(errno)
                 << "; needs CAP_SYS_ADMIN), so a full disk cannot be simulated";
  if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    GTEST_SKIP() << "cannot make mounts private: " << std::strerror(errno);
  const std::string mnt = env.tmp / "mnt";
  fs::create_directories(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64m") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs: " << std::strerror(errno);
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{mnt};
  // The database is created on the tmpfs with room to spare; the disk fills
  // while an update adds 40 photos, one commit per image.
  const std::string db = mnt + "/db", committed = env.tmp / "committed.txt";
  const ProcessResult created = Lookalike(IndexArgs(env.photos, db));
  ASSERT_EQ(created.exit_code, 0) << created.Describe();
  env.AddPhotos(40, 4000);
  const int total = Env::kNumPhotos + 40;
  const std::vector<std::string> update = {"--batch", "1", "--committed", committed};
  // How much the update writes, measured on a copy on the real disk (the
  // same photos give the same bytes): the tmpfs keeps half of that free, so
  // it fills part way through, whatever size the model and an image take.
  const std::string copy = env.tmp / "calibration.db";
  fs::copy(db, copy, fs::copy_options::recursive);
  const uintmax_t before = DirBytes(copy);
  const ProcessResult calibration =
      Lookalike(IndexArgs(env.photos, copy, {"--batch", "1", "--quiet"}));
  ASSERT_EQ(calibration.exit_code, 0) << calibration.Describe();
  const uintmax_t growth = DirBytes(copy) - before;
  struct statvfs fs_stat {};
  ASSERT_EQ(::statvfs(mnt.c_str(), &fs_stat), 0) << std::strerror(errno);
  const uintmax_t free_bytes = static_cast<uintmax_t>(fs_stat.f_bavail) * fs_stat.f_frsize;
  ASSERT_GT(free_bytes, growth) << "the 64 MiB tmpfs cannot hold the update";
  const std::string ballast = mnt + "/ballast";
  {
    const int fd = ::open(ballast.c_str(), O_CREAT | O_WRONLY, 0644);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(free_bytes - growth / 2));
    ::close(fd);
    ASSERT_EQ(rc, 0) << "ballast: " << std::strerror(rc);
  }
  const ProcessResult full = Lookalike(IndexArgs(env.photos, db, update));
  EXPECT_EQ(full.exit_code, 2) << full.Describe();
  ExpectOneLineCause(full, "No space left on device");
  const auto acked = testing::SplitLines(testing::ReadFileBytes(committed));
  ASSERT_GT(acked.size(), 0u) << "nothing was committed before the disk filled (" << growth
                              << " bytes to write, half of them free)";
  ASSERT_LT(acked.size(), 40u) << "the disk never filled (" << growth
                               << " bytes to write, half of them free)";
  // Committed data survives, readable on the still-full disk.
  const ProcessResult v = Lookalike({"verify", "--db", db});
  EXPECT_EQ(v.exit_code, 0) << v.Describe();
  const ProcessResult i = Lookalike({"info", "--db", db, "--format", "json"});
  EXPECT_EQ(i.exit_code, 0) << i.Describe();
  EXPECT_GE(JsonNumber(i.out, "images"), Env::kNumPhotos + static_cast<int64_t>(acked.size()))
      << i.out;
  for (const std::string& path : {acked.front(), acked.back()}) {
    const ProcessResult s =
        Lookalike({"search", "--db", db, path, "-k", "1", "--format", "tsv", "--rerank", "0"});
    EXPECT_EQ(s.exit_code, 0) << s.Describe();
    // VLAD cosine alone, for a whole stored image: itself first, just below
    // 1 (a compact database's vectors come from quantised descriptors).
    const std::string prefix = path + "\t1\t" + path + "\t";
    ASSERT_EQ(s.out.rfind(prefix, 0), 0u) << s.Describe();
    EXPECT_GT(std::stod(s.out.substr(prefix.size())), 0.9) << s.Describe();
  }
  // Fix the fault; the re-run resumes with what was not committed.
  ASSERT_TRUE(fs::remove(ballast));
  const ProcessResult resume = Lookalike(IndexArgs(env.photos, db, {"--format", "json"}));
  EXPECT_EQ(resume.exit_code, 0) << resume.Describe();
  EXPECT_EQ(JsonNumber(resume.out, "indexed") + JsonNumber(resume.out, "unchanged"), total)
      << resume.out;
  EXPECT_LE(JsonNumber(resume.out, "indexed"), 40 - static_cast<int64_t>(acked.size()))
      << "acknowledged images must not be encoded again: " << resume.out;
  const ProcessResult v2 = Lookalike({"verify", "--db", db});
  EXPECT_EQ(v2.exit_code, 0) << v2.Describe();
  const ProcessResult i2 = Lookalike({"info", "--db", db, "--format", "json"});
  EXPECT_EQ(JsonNumber(i2.out, "images"), total) << i2.out;
}

struct EnvCase {
  const char* name;
  void (*run)(Env&);
};

// Shown by gtest (and so in ctest's test names) instead of the raw bytes.
void PrintTo(const EnvCase& c, std::ostream* os) { *os << c.name; }

const EnvCase kCases[] = {
    {"db_path_is_a_file", DbPathIsAFile},
    {"missing_parent", MissingParent},
    {"non_empty_foreign_folder", NonEmptyForeignFolder},
    {"read_only_db_folder", ReadOnlyDbFolder},
    {"lock_held", LockHeld},
    {"lock_held_while_creating", LockHeldWhileCreating},
    {"search_during_index", SearchDuringIndex},
    {"flipped_byte_in_sst", FlippedByteInSst},
    {"changed_model", ChangedModel},
    {"disk_full", DiskFull},
};

class EnvironmentFault : public ::testing::TestWithParam<EnvCase> {};

TEST_P(EnvironmentFault, ExitsTwoAndKeepsData) {
  Env env;
  GetParam().run(env);
}

INSTANTIATE_TEST_SUITE_P(Cases, EnvironmentFault, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<EnvCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace lookalike
