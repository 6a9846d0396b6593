// Crash safety of `lookalike migrate`, against the real binary: a schema-2
// database is migrated while the migration is SIGKILLed again and again,
// each run continuing what the killed one left: at seeded random moments
// (startup, conversion; aimed with the timeline of an uninterrupted
// migration of a copy), and in exactly the states around the folder
// exchange, reached through the LOOKALIKE_TEST_STOP_AT hook (the process
// stops itself there and is killed while stopped): the copy just created,
// half converted, synced, just exchanged, the original marked for removal,
// the original emptied. After every kill the database opens, verifies, holds
// every image with its id and record and finds each image searched for, and
// whatever lies beside it is a copy to continue or an original to remove.
// At the end the database equals the uninterrupted migration's, value for
// value. RocksDB runs with a 64 KiB memtable, so kills land in flushes too.
//
// LOOKALIKE_KILL_SEED=<n> replays one schedule; the seed is printed.
#include <gtest/gtest.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "storage/folder_swap.h"
#include "storage/store.h"
#include "tests/subprocess.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using testing::TempDir;

constexpr int kNumImages = 120;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

testing::ProcessOptions Lookalike(std::vector<std::string> args,
                                  double timeout = testing::kHangGuardSeconds) {
  testing::ProcessOptions o;
  o.argv = testing::LookalikeArgs(LOOKALIKE_BIN, std::move(args));
  o.timeout_seconds = timeout;
  return o;
}

// 'T' when the process is stopped (/proc/<pid>/stat's state field).
bool Stopped(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'T';
}

// Polls (1 ms) until the child exits or `stop()` holds; true if it exited.
// The deadline only ends a hung run.
template <typename Stop>
bool RunsUntil(testing::ChildProcess* child, Stop stop,
               double deadline_ms = testing::kHangGuardSeconds * 1000) {
  const auto start = Clock::now();
  for (;;) {
    if (!child->Running()) return true;
    if (stop()) return false;
    if (MsSince(start) > deadline_ms) {
      ADD_FAILURE() << "migrate neither finished nor reached the awaited state in "
                    << deadline_ms / 1000 << " s";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// One image as the original database holds it.
struct Image {
  std::string path;
  uint64_t size = 0, hash = 0;
  int64_t mtime = 0;
  bool operator==(const Image& o) const {
    return path == o.path && size == o.size && hash == o.hash && mtime == o.mtime;
  }
};
std::map<uint64_t, Image> ReadImages(const std::string& db) {
  std::map<uint64_t, Image> images;
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  store->ForEachImage([&](const ImageRecord& r) {
    images[r.id] = Image{r.path, r.size_bytes, r.content_hash, r.mtime_ns};
  });
  return images;
}

// Every stored value by id: record, features and vector bytes as read back.
std::map<uint64_t, std::string> ReadValues(const std::string& db) {
  std::map<uint64_t, std::string> values;
  auto store = Store::Open(db, Store::Mode::kReadOnly);
  store->ForEachImage([&](const ImageRecord& r) {
    std::string v = r.path + "|" + std::to_string(r.content_hash) + "|" +
                    store->GetFeatures(r.id).value_or("(none)") + "|";
    if (const auto vec = store->GetVector(r.id))
      v.append(reinterpret_cast<const char*>(vec->data()), vec->size() * sizeof(float));
    values[r.id] = v;
  });
  return values;
}

class MigrateKillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("LOOKALIKE_TEST_WRITE_BUFFER_BYTES", "65536", 1);  // inherited by every run
    seed_ = std::getenv("LOOKALIKE_KILL_SEED")
                ? std::strtoull(std::getenv("LOOKALIKE_KILL_SEED"), nullptr, 10)
                : std::random_device{}();
    std::printf("[ kill     ] LOOKALIKE_KILL_SEED=%llu\n", static_cast<unsigned long long>(seed_));
    rng_.seed(seed_);
    paths_ = testing::WriteSyntheticSet(tmp_ / "photos", kNumImages, 900, 320, 240);
  }
  void TearDown() override {
    ::unsetenv("LOOKALIKE_TEST_WRITE_BUFFER_BYTES");
    ::unsetenv("LOOKALIKE_TEST_STOP_AT");
  }

  // Everything that must hold after any kill; `when` names the kill.
  void Check(const std::string& db, const std::string& when) {
    SCOPED_TRACE(when + " (LOOKALIKE_KILL_SEED=" + std::to_string(seed_) + ")");
    const auto verify = testing::RunProcess(Lookalike({"verify", "--db", db}));
    ASSERT_EQ(verify.exit_code, 0) << verify.Describe() << verify.out;
    const std::map<uint64_t, Image> now = ReadImages(db);
    EXPECT_EQ(now, original_) << "images lost or changed";
    const uint32_t schema = Store::Open(db, Store::Mode::kReadOnly)->schema_version();
    EXPECT_TRUE(schema == 2 || schema == 3) << schema;
    const Sibling sibling = InspectSibling(db, kSchemaVersion);
    EXPECT_NE(sibling, Sibling::kForeign) << "an unrecognised folder beside the database";
    if (schema == 2) {
      EXPECT_NE(sibling, Sibling::kOriginal);
    }
    if (schema == 3) {
      EXPECT_NE(sibling, Sibling::kCopy);
    }
    // A few images find themselves first.
    std::vector<std::string> sample = paths_;
    std::shuffle(sample.begin(), sample.end(), rng_);
    sample.resize(6);
    std::vector<std::string> args = {"search", "--db", db, "-k", "1", "--format", "tsv"};
    args.insert(args.end(), sample.begin(), sample.end());
    const auto search = testing::RunProcess(Lookalike(args));
    ASSERT_EQ(search.exit_code, 0) << search.Describe();
    const auto lines = testing::SplitLines(search.out);
    ASSERT_EQ(lines.size(), sample.size()) << search.out;
    for (const std::string& line : lines) {
      const auto f = testing::SplitOn(line, '\t');
      ASSERT_EQ(f.size(), 5u) << line;
      EXPECT_EQ(f[0], f[2]) << "an image does not find itself first";
    }
  }

  TempDir tmp_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  std::vector<std::string> paths_;
  std::map<uint64_t, Image> original_;
};

TEST_F(MigrateKillTest, KilledAtAnyMomentLosesNothingAndARerunFinishes) {
  // The database as the previous layout wrote it, with a PCA (stored search
  // vectors) and more than one SST file.
  const std::string orig = tmp_ / "orig";
  const auto index = testing::RunProcess(
      Lookalike({"index", tmp_ / "photos", "--db", orig, "--clusters", "16", "--train-images", "40",
                 "--descriptor-bytes", "0", "--pca-min-images", "0", "--pca-dim", "8", "-q"}));
  ASSERT_EQ(index.exit_code, 0) << index.Describe();
  original_ = ReadImages(orig);
  ASSERT_EQ(original_.size(), static_cast<size_t>(kNumImages));

  // The oracle: an uninterrupted migration of a copy, and its timeline.
  const std::string ref = tmp_ / "ref", db = tmp_ / "db";
  fs::copy(orig, ref, fs::copy_options::recursive);
  fs::copy(orig, db, fs::copy_options::recursive);
  double t_copy = -1, t_end = -1;
  {
    const auto start = Clock::now();
    testing::ChildProcess child(Lookalike({"migrate", "--db", ref, "-q"}));
    RunsUntil(&child, [&] {
      if (t_copy < 0 && fs::exists(SiblingPath(ref))) t_copy = MsSince(start);
      return false;
    });
    t_end = MsSince(start);
    const auto result = child.Wait();
    ASSERT_EQ(result.exit_code, 0) << result.Describe();
    ASSERT_GT(t_copy, 0);
    std::printf("[ kill     ] uninterrupted migration: copy created at %.0f ms, done at %.0f ms\n",
                t_copy, t_end);
  }

  // The schedule: random moments first, then each state of the exchange in
  // order; every run continues what the killed one left.
  struct Kill {
    std::string what;
    double at_ms = -1;       // a random moment, counted from the start or
    bool from_copy = false;  // from the moment the copy appears
    std::string stop_at;     // or a LOOKALIKE_TEST_STOP_AT state
  };
  // Before the copy exists (opening, sampling, learning the quantizer; the
  // first half of that window, since runs vary with the machine's load), or
  // after (conversion, search index, verification, exchange).
  std::uniform_real_distribution<double> early(0, 0.5 * t_copy), during(0, t_end - t_copy);
  const std::vector<Kill> schedule = {
      {"startup", early(rng_), false, ""},
      {"copy-ready", -1, false, "copy-ready"},
      {"random", during(rng_), true, ""},
      {"random", during(rng_), true, ""},
      {"half-converted", -1, false, "half-converted"},
      {"random", during(rng_), true, ""},
      {"startup", early(rng_), false, ""},
      {"half-converted", -1, false, "half-converted"},
      {"synced", -1, false, "synced"},
      {"synced", -1, false, "synced"},
      {"exchanged", -1, false, "exchanged"},
      {"marked", -1, false, "marked"},
      {"emptied", -1, false, "emptied"},
  };
  int kills = 0;
  for (const Kill& k : schedule) {
    if (k.stop_at.empty())
      ::unsetenv("LOOKALIKE_TEST_STOP_AT");
    else
      ::setenv("LOOKALIKE_TEST_STOP_AT", k.stop_at.c_str(), 1);
    const auto start = Clock::now();
    testing::ChildProcess child(Lookalike({"migrate", "--db", db, "-q"}));
    Clock::time_point from = start;
    const bool exited = !k.stop_at.empty() ? RunsUntil(&child, [&] { return Stopped(child.pid()); })
                                           : RunsUntil(&child, [&] {
                                               if (k.from_copy && from == start) {
                                                 if (!fs::exists(SiblingPath(db))) return false;
                                                 from = Clock::now();
                                               }
                                               return MsSince(from) >= k.at_ms;
                                             });
    ::unsetenv("LOOKALIKE_TEST_STOP_AT");
    const std::string moment = k.stop_at.empty()
                                   ? " at " + std::to_string(static_cast<int>(k.at_ms)) +
                                         (k.from_copy ? " ms after the copy appeared" : " ms")
                                   : "";
    char line[200];
    std::optional<testing::ProcessResult> finished;
    if (exited) {
      finished = child.Wait();
    } else {
      ::kill(child.pid(), SIGKILL);
      const auto result = child.Wait();
      // A random moment can also land in the instant between the last poll
      // and the signal, when the run had just exited by itself: the zombie
      // ignores the SIGKILL. That is the run finishing first as well.
      if (result.term_signal != SIGKILL) finished = result;
    }
    if (finished) {
      // Only a random kill may come too late; a state must be reached.
      ASSERT_TRUE(k.stop_at.empty()) << k.what << " never reached: " << finished->Describe();
      ASSERT_EQ(finished->exit_code, 0) << finished->Describe();
      std::snprintf(line, sizeof line, "%s%s: finished first; starting again", k.what.c_str(),
                    moment.c_str());
      std::printf("[ kill     ] %s\n", line);
      // The states still to come need an unconverted database again.
      Check(db, line);
      fs::remove_all(db);
      fs::copy(orig, db, fs::copy_options::recursive);
      continue;
    }
    ++kills;
    std::snprintf(line, sizeof line, "%s%s: killed (%s), DB schema %u", k.what.c_str(),
                  moment.c_str(), fs::exists(SiblingPath(db)) ? "folder beside" : "nothing beside",
                  Store::Open(db, Store::Mode::kReadOnly)->schema_version());
    std::printf("[ kill     ] %s\n", line);
    Check(db, line);
    if (HasFatalFailure()) return;
    // A random moment can land after a resumed run (which has less left to
    // do) finished the whole migration: the kill then found a converted
    // database and nothing beside. The states still to come need an
    // unconverted one again, as after a run that finished first.
    if (k.stop_at.empty() && !fs::exists(SiblingPath(db)) &&
        Store::Open(db, Store::Mode::kReadOnly)->schema_version() == kSchemaVersion) {
      std::printf("[ kill     ] the run had finished; starting again\n");
      fs::remove_all(db);
      fs::copy(orig, db, fs::copy_options::recursive);
    }
  }
  EXPECT_GE(kills, 9);  // every state; random moments may come after the run finished
  EXPECT_EQ(Store::Open(db, Store::Mode::kReadOnly)->schema_version(), 3u)
      << "the exchange was killed after it happened";
  ASSERT_TRUE(fs::exists(SiblingPath(db))) << "the emptied original was expected beside it";

  // The next writer to open the database removes what is left of the
  // original; migrate then has nothing to do.
  const auto update = testing::RunProcess(
      Lookalike({"index", tmp_ / "photos", "--db", db, "-q", "--format", "json"}));
  ASSERT_EQ(update.exit_code, 0) << update.Describe();
  EXPECT_NE(update.out.find("\"indexed\":0,"), std::string::npos) << update.out;
  EXPECT_FALSE(fs::exists(SiblingPath(db))) << "the original's remains were not removed";
  const auto rerun = testing::RunProcess(Lookalike({"migrate", "--db", db, "--format", "json"}));
  ASSERT_EQ(rerun.exit_code, 0) << rerun.Describe();
  EXPECT_NE(rerun.out.find("\"migrated\":false"), std::string::npos) << rerun.out;
  Check(db, "after the runs");

  // Value for value what the uninterrupted migration made (the quantizer is
  // learned once, by the first run, deterministically).
  const auto killed = ReadValues(db), uninterrupted = ReadValues(ref);
  ASSERT_EQ(killed.size(), uninterrupted.size());
  int differing = 0;
  for (const auto& [id, v] : uninterrupted)
    differing += killed.count(id) == 0 || killed.at(id) != v;
  EXPECT_EQ(differing, 0) << "images differ from the uninterrupted migration";
}

// SIGINT and SIGTERM half-way through the conversion (delivered while the run
// is stopped in that state, then let go): the run stops by itself with exit
// 1, the database unchanged and the copy kept; the next run continues it.
// A database of the current schema whose model has no word vocabulary (as
// builds before the model carried one wrote it): `migrate` gives the model
// its word index's in one write. Killed in the states around that write, it
// is left without it or with it, verifies and finds its images; a re-run
// finishes, and the word index stays valid (the same hits and scores).
TEST_F(MigrateKillTest, AddingTheWordVocabularyIsAtomic) {
  const std::string donor = tmp_ / "donor", orig = tmp_ / "orig";
  const std::vector<std::string> model = {"--clusters", "16", "--train-images", "40", "-q"};
  std::vector<std::string> args = {"index", tmp_ / "photos", "--db", donor};
  args.insert(args.end(), model.begin(), model.end());
  ASSERT_EQ(testing::RunProcess(Lookalike(args)).exit_code, 0);
  {
    auto source = Store::Open(donor, Store::Mode::kReadOnly);
    const auto projection = source->GetProjection();
    Store::Create(orig, source->model(), projection ? &*projection : nullptr, kSchemaVersion,
                  *source->GetDescriptorQuantizer());
  }
  args = {"index", tmp_ / "photos", "--db", orig, "--word-index-min-images", "1"};
  args.insert(args.end(), model.begin(), model.end());
  ASSERT_EQ(testing::RunProcess(Lookalike(args)).exit_code, 0);
  original_ = ReadImages(orig);
  const std::string own = Store::Open(orig, Store::Mode::kReadOnly)->GetWordVocabulary().value();
  const std::vector<std::string> queries(paths_.begin(), paths_.begin() + 8);
  const auto search = [&](const std::string& db) {
    std::vector<std::string> a = {"search", "--db", db, "-k", "5", "--format", "tsv"};
    a.insert(a.end(), queries.begin(), queries.end());
    const auto r = testing::RunProcess(Lookalike(a));
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    return r.out;
  };
  const std::string hits = search(orig);
  for (const std::string stop : {"word-vocabulary-ready", "word-vocabulary-stored"}) {
    SCOPED_TRACE(stop);
    const std::string db = tmp_ / ("db-" + stop);
    fs::copy(orig, db, fs::copy_options::recursive);
    ::setenv("LOOKALIKE_TEST_STOP_AT", stop.c_str(), 1);
    testing::ChildProcess child(Lookalike({"migrate", "--db", db, "-q"}));
    const bool exited = RunsUntil(&child, [&] { return Stopped(child.pid()); });
    ::unsetenv("LOOKALIKE_TEST_STOP_AT");
    ASSERT_FALSE(exited) << "migrate never reached " << stop;
    ::kill(child.pid(), SIGKILL);
    child.Wait();
    Check(db, "killed at " + stop);
    const auto kept = Store::Open(db, Store::Mode::kReadOnly)->GetModelWordVocabulary();
    if (stop == std::string("word-vocabulary-ready"))
      EXPECT_FALSE(kept.has_value());
    else
      EXPECT_EQ(kept, own);
    EXPECT_EQ(search(db), hits);
    const auto rerun = testing::RunProcess(Lookalike({"migrate", "--db", db, "-q"}));
    ASSERT_EQ(rerun.exit_code, 0) << rerun.Describe();
    EXPECT_EQ(Store::Open(db, Store::Mode::kReadOnly)->GetModelWordVocabulary(), own);
    Check(db, "re-run after " + stop);
    EXPECT_EQ(search(db), hits);
  }
}

TEST_F(MigrateKillTest, SignalStopsCleanlyAndARerunContinues) {
  const std::string db = tmp_ / "db";
  const auto index =
      testing::RunProcess(Lookalike({"index", tmp_ / "photos", "--db", db, "--clusters", "16",
                                     "--train-images", "40", "--descriptor-bytes", "0", "-q"}));
  ASSERT_EQ(index.exit_code, 0) << index.Describe();
  original_ = ReadImages(db);
  for (const int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(strsignal(sig));
    ::setenv("LOOKALIKE_TEST_STOP_AT", "half-converted", 1);
    testing::ChildProcess child(Lookalike({"migrate", "--db", db, "--format", "json"}));
    const bool exited = RunsUntil(&child, [&] { return Stopped(child.pid()); });
    ::unsetenv("LOOKALIKE_TEST_STOP_AT");
    ASSERT_FALSE(exited) << child.Wait().Describe();
    ::kill(child.pid(), sig);
    ::kill(child.pid(), SIGCONT);
    const auto result = child.Wait();
    EXPECT_EQ(result.exit_code, 1) << result.Describe();
    EXPECT_NE(
        result.out.find("\"migrated\":false,\"resumed\":" +
                        std::string(sig == SIGINT ? "false" : "true") + ",\"cancelled\":true"),
        std::string::npos)
        << result.out;
    EXPECT_EQ(Store::Open(db, Store::Mode::kReadOnly)->schema_version(), 2u);
    EXPECT_EQ(InspectSibling(db, kSchemaVersion), Sibling::kCopy);
    const auto info = testing::RunProcess(Lookalike({"info", "--db", db}));
    EXPECT_EQ(info.exit_code, 0) << info.Describe();
    EXPECT_NE(info.err.find("holds the unfinished copy of an interrupted migration"),
              std::string::npos)
        << info.err;
    Check(db, std::string("after ") + strsignal(sig));
  }
  const auto rerun = testing::RunProcess(Lookalike({"migrate", "--db", db, "--format", "json"}));
  ASSERT_EQ(rerun.exit_code, 0) << rerun.Describe();
  EXPECT_NE(rerun.out.find("\"migrated\":true,\"resumed\":true"), std::string::npos) << rerun.out;
  EXPECT_NE(rerun.out.find("\"converted\":" + std::to_string(kNumImages - kNumImages / 2)),
            std::string::npos)
      << rerun.out;
  Check(db, "after the re-run");
  EXPECT_EQ(Store::Open(db, Store::Mode::kReadOnly)->schema_version(), 3u);
}

}  // namespace
}  // namespace lookalike
