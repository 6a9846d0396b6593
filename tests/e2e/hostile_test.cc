// Issue 4, hostile inputs: runs the real `lookalike` binary over a generated
// corpus of bad files of every kind mixed with good images (see
// tests/hostile_corpus.cc, where each file's expected outcome and the reason
// are written down) under a time limit and an address-space limit, and checks
//   - the run ends by itself, with exit code 1 (finished, some inputs skipped);
//   - every bad file gets exactly one JSON error line with its expected code:
//       TRUNCATED          JPEG cut in the headers, in the SOS header, early,
//       mid
//                          and late in the scan, before EOI; progressive JPEG
//                          cut between scans; PNG cut in IHDR, IDAT, IEND
//       TOO_MANY_PIXELS    JPEG SOF / PNG IHDR / TIFF IFD / BMP / PGM / WebP
//                          headers claiming far more than 100 Mpx
//       DECODE_FAILED      corrupt JPEG scan with EOI intact, PNG CRC mismatch,
//                          0x0 IHDR, SOF claiming more rows than the scan holds
//       UNSUPPORTED_FORMAT random bytes / text / empty file named .jpg; GIF,
//                          HEIC and AVIF images (by content, any name)
//       FILE_TOO_LARGE     2 MiB file with --max-file-mb 1
//       NOT_REGULAR        FIFO, symlink to /dev/zero and /dev/null, dangling
//                          and self-referencing symlinks (image names)
//       NO_FEATURES        flat and 1x1 images (a warning; stored as zero
//       vectors) PERMISSION_DENIED  mode-000 file, unlistable folder, file in a
//       folder
//                          without search permission (separate test, run as
//                          an unprivileged user)
//   - ignored files (text, an MP4 video's header, FIFO without extension,
//     directory symlinks and the loop a/b -> ..) are neither reported nor
//     indexed;
//   - every good image, including the 16-bit, grey, RGBA, multi-page, 36 Mpx,
//     wrongly-named and oddly-named ones, is committed once and finds itself
//     at rank 1 (paths compared in their escaped TSV form; the non-UTF-8 name
//     also through JSON's path_bytes);
//   - names with newlines or tabs never break a line of stderr, TSV or the
//     JSON error file, and every JSON line is valid on its own;
//   - `verify` finds the database consistent (no NaN, unit or zero norms) and
//     `info` counts agree;
//   - peak RSS of the indexer stays under kPeakRssBudgetKb.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/hostile_corpus.h"
#include "tests/json_lite.h"
#include "tests/subprocess.h"
#include "tests/test_images.h"
#include "tools/cli.h"
#include "tools/output.h"

namespace lookalike {
namespace {

using testing::HostileEntry;
using testing::Json;
using testing::JsonParser;
using testing::ProcessOptions;
using testing::ProcessResult;
using testing::TempDir;

// Budgets of one indexing run over the corpus. The address-space limit makes
// a run that tries to allocate a bomb's pixels fail instead of swapping; the
// RSS budget is what the run may really use (this corpus: ~320 MiB). Its time
// limit, testing::kHangGuardSeconds, only catches a hang.
constexpr double kIndexTimeLimitSeconds = testing::kHangGuardSeconds;
constexpr uint64_t kAddressSpaceLimit = 2ull << 30;  // VmPeak of a normal run: ~600 MB
constexpr int64_t kPeakRssBudgetKb = 1 << 20;        // 1 GiB

std::string Hex(const std::string& bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string s;
  for (unsigned char c : bytes) {
    s += kHex[c >> 4];
    s += kHex[c & 15];
  }
  return s;
}

bool ValidUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80           ? 1
                       : (c >> 5) == 0x6  ? 2
                       : (c >> 4) == 0xE  ? 3
                       : (c >> 3) == 0x1E ? 4
                                          : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t j = 1; j < len; ++j)
      if ((static_cast<unsigned char>(s[i + j]) >> 6) != 0x2) return false;
    i += len;
  }
  return true;
}

// Printable form of a path for failure messages.
std::string Show(const std::string& path) { return EscapeField(path); }

ProcessResult Lookalike(std::vector<std::string> args, double timeout = testing::kHangGuardSeconds,
                        uint64_t address_space = 0, bool unprivileged = false) {
  ProcessOptions o;
  o.argv = testing::LookalikeArgs(LOOKALIKE_BIN, std::move(args));
  o.timeout_seconds = timeout;
  o.address_space_bytes = address_space;
  o.unprivileged = unprivileged;
  return testing::RunProcess(o);
}

// Per-path outcome of an index run: the codes of its JSON error lines and how
// often it was acknowledged in the --committed file.
struct Outcomes {
  std::map<std::string, std::vector<std::string>> codes;  // raw path -> codes
  std::map<std::string, int> committed;                   // escaped path -> count
  std::vector<std::string> problems;                      // malformed lines

  // The single outcome name used in the corpus expectations.
  std::string Of(const std::string& path) const {
    auto it = codes.find(path);
    if (it != codes.end()) {
      std::string joined;
      for (const auto& c : it->second) joined += (joined.empty() ? "" : "+") + c;
      return joined;
    }
    auto c = committed.find(EscapeField(path));
    return c != committed.end() ? testing::kIndexed : testing::kIgnored;
  }
};

Outcomes ReadOutcomes(const std::string& errors_file, const std::string& committed_file) {
  Outcomes o;
  const std::string errors = testing::ReadFileBytes(errors_file);
  for (const std::string& line : testing::SplitLines(errors)) {
    try {
      const Json j = JsonParser::Parse(line);
      if (j.type != Json::Type::kObject) throw std::runtime_error("not an object");
      for (const char* k : {"code", "path", "message"})
        if (!j.Has(k) || j[k].type != Json::Type::kString)
          throw std::runtime_error(std::string("missing string field ") + k);
      std::string path = j["path"].str;
      if (j.Has("path_bytes")) {
        const std::string& hex = j["path_bytes"].str;
        std::string raw;
        for (size_t i = 0; i + 1 < hex.size(); i += 2)
          raw += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
        path = raw;
      }
      if (!ValidUtf8(path) && !j.Has("path_bytes"))
        throw std::runtime_error("non-UTF-8 path without path_bytes");
      o.codes[path].push_back(j["code"].str);
    } catch (const std::exception& e) {
      o.problems.push_back(std::string(e.what()) + " in line: " + Show(line));
    }
  }
  if (!errors.empty() && errors.back() != '\n')
    o.problems.push_back("errors file does not end in a newline");
  for (const std::string& line : testing::SplitLines(testing::ReadFileBytes(committed_file)))
    ++o.committed[line];
  return o;
}

TEST(HostileCorpus, EveryFileGetsItsDocumentedOutcome) {
  TempDir tmp;
  ::chmod(tmp.path().c_str(), 0755);
  const std::string corpus = tmp / "corpus", db = tmp / "db";
  std::filesystem::create_directories(corpus);
  testing::HostileCorpusOptions options;
  const std::vector<HostileEntry> entries = testing::MakeHostileCorpus(corpus, options);

  const std::string errors_file = tmp / "errors.jsonl", committed_file = tmp / "committed.txt";
  const ProcessResult index = Lookalike(
      {"index", corpus, "--db", db, "--errors", errors_file, "--committed", committed_file,
       "--max-file-mb", "1", "--clusters", "32", "--threads", "2", "--format", "json"},
      kIndexTimeLimitSeconds, kAddressSpaceLimit);
  std::printf("index: %.2f s, peak RSS %.1f MiB, exit %d\n", index.seconds,
              index.max_rss_kb / 1024.0, index.exit_code);
  ASSERT_FALSE(index.timed_out) << "index hung on the hostile corpus: " << index.Describe();
  ASSERT_EQ(index.term_signal, 0) << index.Describe();
  EXPECT_EQ(index.exit_code, 1) << index.Describe();
  EXPECT_LT(index.max_rss_kb, kPeakRssBudgetKb) << "peak RSS over the 1 GiB budget";

  // stderr: a raw newline from a file name would start a line with the rest
  // of the name; and every line should be lookalike's own, naming its file
  // (a codec's bare "Corrupt JPEG data" names nothing).
  std::string foreign;
  for (const std::string& line : testing::SplitLines(index.err)) {
    if (line.rfind("lookalike", 0) == 0) continue;
    EXPECT_EQ(line.find("name.jpg"), std::string::npos)
        << "stderr line broken by a file name: " << Show(line);
    foreign += "  " + Show(line) + "\n";
  }
  EXPECT_TRUE(foreign.empty()) << "stderr holds lines not written by lookalike "
                                  "(decoder messages that name no file):\n"
                               << foreign;
  EXPECT_NE(index.err.find(Show(corpus + "/bad\nname.jpg")), std::string::npos)
      << "the name with a newline must appear escaped in stderr:\n"
      << index.err;

  const Outcomes outcomes = ReadOutcomes(errors_file, committed_file);
  for (const std::string& p : outcomes.problems) ADD_FAILURE() << "errors file: " << p;

  // Each file's outcome.
  std::set<std::string> known;
  int expect_indexed = 0, expect_no_features = 0;
  for (const HostileEntry& e : entries) {
    known.insert(e.path);
    const std::string actual = outcomes.Of(e.path);
    bool ok = false;
    for (const std::string& x : e.expected) ok = ok || x == actual;
    std::string want;
    for (const std::string& x : e.expected) want += (want.empty() ? "" : " or ") + x;
    EXPECT_TRUE(ok) << Show(e.path.substr(corpus.size() + 1)) << " (" << e.why << "): expected "
                    << want << ", got " << actual;
    const int committed =
        outcomes.committed.count(Show(e.path)) ? outcomes.committed.at(Show(e.path)) : 0;
    if (e.expected[0] == testing::kIndexed || e.expected[0] == "NO_FEATURES")
      EXPECT_EQ(committed, 1) << Show(e.path) << " must be committed exactly once";
    else
      EXPECT_EQ(committed, 0) << Show(e.path) << " must not be committed";
    // Counts follow the observed outcomes, so a misclassified file fails
    // above, once, and the summary is checked for consistency with it.
    expect_indexed += actual == testing::kIndexed;
    expect_no_features += actual == "NO_FEATURES";
  }
  for (const auto& [path, codes] : outcomes.codes)
    EXPECT_TRUE(known.count(path))
        << "error for a path that is not in the corpus: " << Show(path) << " " << codes[0];
  for (const auto& [escaped, n] : outcomes.committed) {
    EXPECT_EQ(escaped.find("/a/b/"), std::string::npos)
        << "walked through the symlink loop: " << escaped;
    (void)n;
  }

  // The summary agrees.
  try {
    const Json summary = JsonParser::Parse(index.out);
    EXPECT_EQ(summary["indexed"].number, expect_indexed + expect_no_features) << index.out;
    EXPECT_EQ(summary["no_features"].number, expect_no_features) << index.out;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "index --format json summary: " << e.what() << "\n" << index.out;
  }

  // Every good image finds itself, all in one search call.
  std::vector<std::string> args = {"search", "--db", db, "-k", "1", "--format", "tsv"};
  std::vector<std::string> good;
  for (const HostileEntry& e : entries)
    if (e.expected[0] == testing::kIndexed) good.push_back(e.path);
  args.insert(args.end(), good.begin(), good.end());
  const ProcessResult search = Lookalike(args);
  EXPECT_EQ(search.exit_code, 0) << search.Describe();
  std::map<std::string, std::string> top1;
  for (const std::string& line : testing::SplitLines(search.out)) {
    const auto cols = testing::SplitOn(line, '\t');
    ASSERT_EQ(cols.size(), 5u) << "TSV line broken (a raw tab or newline in a path?): "
                               << Show(line);
    EXPECT_EQ(cols[1], "1");
    top1[cols[0]] = cols[2];
  }
  for (const std::string& path : good)
    EXPECT_EQ(top1[Show(path)], Show(path)) << "good image does not find itself: " << Show(path);

  // The non-UTF-8 name round-trips byte for byte through JSON.
  const std::string odd = corpus + "/\xff\xfe.png";
  const ProcessResult json = Lookalike({"search", "--db", db, "-k", "1", "--format", "json", odd});
  EXPECT_EQ(json.exit_code, 0) << json.Describe();
  try {
    const auto lines = testing::SplitLines(json.out);
    ASSERT_EQ(lines.size(), 1u) << json.out;
    const Json j = JsonParser::Parse(lines[0]);
    EXPECT_EQ(j["query_bytes"].str, Hex(odd)) << lines[0];
    ASSERT_EQ(j["results"].items.size(), 1u) << lines[0];
    EXPECT_EQ(j["results"].items[0]["path_bytes"].str, Hex(odd)) << lines[0];
  } catch (const std::exception& e) {
    ADD_FAILURE() << "search --format json: " << e.what() << "\n" << json.out;
  }

  // No NaN, consistent records; counts agree.
  const ProcessResult verify = Lookalike({"verify", "--db", db});
  EXPECT_EQ(verify.exit_code, 0) << verify.Describe();
  const ProcessResult info = Lookalike({"info", "--db", db, "--format", "json"});
  ASSERT_EQ(info.exit_code, 0) << info.Describe();
  try {
    const Json j = JsonParser::Parse(info.out);
    EXPECT_EQ(j["images"].number, expect_indexed + expect_no_features) << info.out;
    EXPECT_EQ(j["images_without_features"].number, expect_no_features) << info.out;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "info --format json: " << e.what() << "\n" << info.out;
  }
}

// PERMISSION_DENIED needs a user that permissions apply to: as root (CI) the
// indexer runs as nobody; if that is impossible the test says so and skips.
TEST(HostileCorpus, PermissionDeniedAsUnprivilegedUser) {
  const std::string reason = testing::UnprivilegedUnavailableReason(LOOKALIKE_BIN);
  if (!reason.empty()) GTEST_SKIP() << reason;
  TempDir tmp;
  ::chmod(tmp.path().c_str(), 0755);
  const std::string corpus = tmp / "corpus", out = tmp / "out";
  std::filesystem::create_directories(out);
  const std::vector<HostileEntry> entries = testing::MakePermissionCorpus(corpus, 9);
  testing::GiveToUnprivilegedUser(out);  // the unprivileged run writes its DB here
  const std::string db = out + "/db", errors_file = out + "/errors.jsonl",
                    committed_file = out + "/committed.txt";
  const ProcessResult index =
      Lookalike({"index", corpus, "--db", db, "--errors", errors_file, "--committed",
                 committed_file, "--clusters", "16", "--threads", "2"},
                kIndexTimeLimitSeconds, kAddressSpaceLimit, /*unprivileged=*/true);
  ASSERT_FALSE(index.timed_out) << index.Describe();
  ASSERT_EQ(index.term_signal, 0) << "the indexer crashed on unreadable files: "
                                  << index.Describe();
  EXPECT_EQ(index.exit_code, 1) << index.Describe();
  const Outcomes outcomes = ReadOutcomes(errors_file, committed_file);
  for (const std::string& p : outcomes.problems) ADD_FAILURE() << "errors file: " << p;
  for (const HostileEntry& e : entries) {
    const std::string actual = outcomes.Of(e.path);
    EXPECT_EQ(actual, e.expected[0]) << Show(e.path) << " (" << e.why << ")\n" << index.err;
  }
  const ProcessResult verify = Lookalike({"verify", "--db", db});
  EXPECT_EQ(verify.exit_code, 0) << verify.Describe();

  // An unreadable folder is not evidence that its files are gone: with every
  // file readable the DB gets all 6 images; after the folder becomes
  // unlistable again, a re-run must remove nothing (README: "folders that
  // could not be listed keep their records").
  ::chmod((corpus + "/noaccess").c_str(), 0755);
  ::chmod((corpus + "/nosearch").c_str(), 0755);
  ::chmod((corpus + "/secret.png").c_str(), 0644);
  const ProcessResult all = Lookalike({"index", corpus, "--db", db, "--format", "json"},
                                      kIndexTimeLimitSeconds, 0, /*unprivileged=*/true);
  EXPECT_EQ(all.exit_code, 0) << all.Describe();
  ::chmod((corpus + "/noaccess").c_str(), 0);
  const ProcessResult again = Lookalike({"index", corpus, "--db", db, "--format", "json"},
                                        kIndexTimeLimitSeconds, 0, /*unprivileged=*/true);
  EXPECT_EQ(again.exit_code, 1) << "the unlistable folder must be reported: " << again.Describe();
  try {
    const Json summary = JsonParser::Parse(again.out);
    EXPECT_EQ(summary["removed"].number, 0)
        << "records removed because a folder could not be listed:\n"
        << again.out << again.err;
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what() << "\n" << again.Describe();
  }
  const ProcessResult info = Lookalike({"info", "--db", db, "--format", "json"});
  EXPECT_NE(info.out.find("\"images\":6,"), std::string::npos) << info.out;
}

}  // namespace
}  // namespace lookalike
