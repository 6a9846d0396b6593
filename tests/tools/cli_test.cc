// Tests of the command line through RunCli (and the real binary once):
// usage errors, --help with defaults, backends, output formats, exit codes,
// and the escaping of fields.
#include "tools/cli.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <xxhash.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "indexer/file_walker.h"
#include "indexer/pipeline.h"
#include "indexer/vlad.h"
#include "search/searcher.h"
#include "storage/encoding.h"
#include "storage/store.h"
#include "tests/test_images.h"
#include "tools/output.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

struct CliRun {
  int code;
  std::string out, err;
};

CliRun RunLookalike(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunCli(args, out, err, /*stderr_is_tty=*/false, nullptr);
  return {code, out.str(), err.str()};
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> fields;
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(sep, start);
    fields.push_back(s.substr(start, at - start));
    if (at == std::string::npos) break;
    start = at + 1;
  }
  return fields;
}

size_t Count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
  return n;
}

TEST(CliTest, UsageErrorsExitTwoAndNameTheProblem) {
  TempDir tmp;
  fs::create_directories(tmp / "photos");
  const std::string db = tmp / "db";
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"frobnicate"}, "unknown command 'frobnicate'"},
      {{"index", tmp / "photos"}, "missing --db"},
      {{"index", "--db", db}, "missing DIR"},
      {{"search", tmp / "photos"}, "missing --db"},
      {{"search", "--db", db}, "missing QUERY"},
      {{"info"}, "missing --db"},
      {{"search", "--db", db, "q.jpg", "--format", "xml"}, "--format"},
      {{"info", "--db", db, "--format", "tsv"}, "--format"},
      {{"index", tmp / "photos", "--db", db, "--format", "yaml"}, "--format"},
      {{"index", tmp / "photos", "--db", db, "--backend", "gpu"},
       "backend must be auto, cpu or cuda"},
      {{"search", "--db", db, "q.jpg", "--backend", "tpu"}, "backend must be auto, cpu or cuda"},
      {{"search", "--db", db, "q.jpg", "-k", "0"}, "k (-k) must be in"},
      {{"search", "--db", db, "q.jpg", "-k", "many"}, "-k"},
      {{"index", tmp / "photos", "--db", db, "--bogus"}, "bogus"},
      {{"search", "--db", db, "q.jpg", "--bogus", "1"}, "bogus"},
      {{"index", tmp / "photos", "--db", db, "--clusters", "0"}, "clusters must be in"},
      {{"index", tmp / "photos", "--db", db, "--threads", "-3"}, "threads"},
      {{"index", tmp / "photos", "--db", db, "--intra-norm", "maybe"}, "--intra-norm"},
      {{"index", tmp / "photos", "--db", db, "--power", "0"}, "power"},
      {{"index", tmp / "photos", "--db", db, "--max-side", "5"}, "max side"},
      {{"index", tmp / "photos", "--db", db, "--descriptor", "orb"}, "descriptor type"},
  };
  for (const Case& c : cases) {
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    const CliRun r = RunLookalike(c.args);
    EXPECT_EQ(r.code, kExitFatal) << joined << "\n" << r.err;
    EXPECT_TRUE(Contains(r.err, c.needle)) << joined << "\nstderr: " << r.err;
    EXPECT_TRUE(r.out.empty()) << joined << "\nstdout: " << r.out;
  }
  EXPECT_FALSE(fs::exists(db)) << "a usage error created the database";
  EXPECT_EQ(RunLookalike({}).code, kExitFatal);
}

TEST(CliTest, HelpOnEverySubcommandShowsDefaults) {
  const CliRun global = RunLookalike({"--help"});
  EXPECT_EQ(global.code, kExitOk);
  for (const char* cmd : {"index", "search", "info"}) EXPECT_TRUE(Contains(global.out, cmd));

  const IndexOptions d;
  const CliRun index = RunLookalike({"index", "--help"});
  EXPECT_EQ(index.code, kExitOk);
  EXPECT_TRUE(index.err.empty());
  EXPECT_TRUE(Contains(index.out, "usage: lookalike index"));
  EXPECT_TRUE(Contains(index.out,
                       "--clusters arg (=" + std::to_string(d.model.codebook.num_clusters) + ")"))
      << index.out;
  EXPECT_TRUE(
      Contains(index.out, "--max-side arg (=" + std::to_string(d.model.encoding.max_side) + ")"))
      << index.out;
  EXPECT_TRUE(Contains(index.out, "--descriptor arg (=" + d.model.encoding.extractor.type + ")"));
  EXPECT_TRUE(Contains(index.out, "--threads arg (=" + std::to_string(d.threads) + ")"));
  EXPECT_TRUE(Contains(index.out, "--seed arg (=" + std::to_string(d.model.codebook.seed) + ")"));
  EXPECT_TRUE(Contains(index.out, "--backend arg (=auto)"));
  EXPECT_TRUE(Contains(index.out, "--intra-norm arg (=on)"));

  const CliRun search = RunLookalike({"search", "--help"});
  EXPECT_EQ(search.code, kExitOk);
  EXPECT_TRUE(Contains(search.out, "usage: lookalike search"));
  EXPECT_TRUE(Contains(search.out, "-k arg (=" + std::to_string(SearchOptions().k) + ")"))
      << search.out;
  EXPECT_TRUE(Contains(search.out, "--format arg (=table)"));

  const CliRun info = RunLookalike({"info", "--help"});
  EXPECT_EQ(info.code, kExitOk);
  EXPECT_TRUE(Contains(info.out, "usage: lookalike info"));
  EXPECT_TRUE(Contains(info.out, "--format arg (=table)"));

  // -h works too, and --help wins over missing arguments.
  EXPECT_EQ(RunLookalike({"search", "-h"}).code, kExitOk);
  EXPECT_EQ(RunLookalike({"index", "--help", "--clusters", "0"}).code, kExitOk);
}

class CliIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    paths_ = testing::WriteSyntheticSet(tmp_ / "photos", kImages, 1, 320, 240);
  }
  CliRun Index(std::vector<std::string> extra = {}, const std::string& clusters = "16",
               const std::string& backend = "cpu") {
    std::vector<std::string> args = {"index",  tmp_ / "photos", "--db", db(),        "--clusters",
                                     clusters, "--threads",     "2",    "--backend", backend};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunLookalike(args);
  }
  std::string db() const { return tmp_ / "db"; }
  static constexpr int kImages = 10;
  TempDir tmp_;
  std::vector<std::string> paths_;
};

TEST_F(CliIndexTest, IndexThenSearchTsvJsonAndInfo) {
  const CliRun index = Index();
  ASSERT_EQ(index.code, kExitOk) << index.err;
  EXPECT_TRUE(Contains(index.out, "indexed    " + std::to_string(kImages))) << index.out;
  EXPECT_EQ(index.err.find('\r'), std::string::npos) << "control characters outside a terminal";
  EXPECT_EQ(index.err.find('\x1b'), std::string::npos);

  // TSV: exactly one line per hit, no header.
  const int k = 4;
  const CliRun tsv =
      RunLookalike({"search", "--db", db(), paths_[0], paths_[5], tmp_ / "photos/img_007.png", "-k",
                    std::to_string(k), "--format", "tsv", "--backend", "cpu"});
  ASSERT_EQ(tsv.code, kExitOk) << tsv.err;
  const auto lines = Lines(tsv.out);
  ASSERT_EQ(lines.size(), 3u * k) << tsv.out;
  const std::vector<std::string> queries = {paths_[0], paths_[5], tmp_ / "photos/img_007.png"};
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto f = Split(lines[i], '\t');
    ASSERT_EQ(f.size(), 5u) << lines[i];
    EXPECT_EQ(f[0], queries[i / k]);
    EXPECT_EQ(f[1], std::to_string(i % k + 1)) << "ranks start at 1";
    EXPECT_EQ(f[2].front(), '/') << "paths are absolute";
    EXPECT_TRUE(fs::exists(f[2])) << f[2];
    // In [-1, 1]: cosine, raised by spatial evidence when verified.
    const double score = std::stod(f[3]);
    EXPECT_GE(score, -1.0001);
    EXPECT_LE(score, 1.0001);
    if (i % k == 0) {
      EXPECT_EQ(f[2], AbsolutePath(queries[i / k])) << "an indexed image finds itself first";
      EXPECT_GT(score, 0.999) << "an image is its own best match";
    }
  }

  // JSON: one object per query, one line each.
  const CliRun json = RunLookalike({"search", "--db", db(), paths_[1], paths_[2], "-k", "3",
                                    "--format", "json", "--backend", "cpu"});
  ASSERT_EQ(json.code, kExitOk) << json.err;
  const auto json_lines = Lines(json.out);
  ASSERT_EQ(json_lines.size(), 2u) << json.out;
  for (size_t q = 0; q < 2; ++q) {
    const std::string& l = json_lines[q];
    EXPECT_EQ(l.rfind("{\"query\":\"" + paths_[1 + q] + "\"", 0), 0u) << l;
    EXPECT_TRUE(Contains(l, "\"seconds\":")) << "each query says how long it took: " << l;
    EXPECT_EQ(l.back(), '}');
    EXPECT_TRUE(Contains(l, "\"results\":[")) << l;
    EXPECT_EQ(Count(l, "\"rank\":"), 3u) << l;
    EXPECT_TRUE(Contains(l, "{\"rank\":1,\"path\":\"" + AbsolutePath(paths_[1 + q]) + "\"")) << l;
    EXPECT_EQ(Count(l, "\"similarity\":"), 3u) << "every hit carries its VLAD similarity: " << l;
    EXPECT_TRUE(Contains(l, "\"inliers\":")) << "the top results were verified: " << l;
    EXPECT_EQ(Count(l, "\"colour\":"), 3u) << "every hit carries its colour similarity: " << l;
    EXPECT_EQ(Count(l, "{"), Count(l, "}"));
    EXPECT_EQ(Count(l, "["), Count(l, "]"));
  }

  // --colour-weight 0: no colour compared, none reported; out of range: a usage error.
  const CliRun no_colour = RunLookalike(
      {"search", "--db", db(), paths_[1], "-k", "3", "--format", "json", "--colour-weight", "0"});
  ASSERT_EQ(no_colour.code, kExitOk) << no_colour.err;
  EXPECT_FALSE(Contains(no_colour.out, "\"colour\":")) << no_colour.out;
  const CliRun bad_colour =
      RunLookalike({"search", "--db", db(), paths_[1], "--colour-weight", "-1"});
  EXPECT_EQ(bad_colour.code, kExitFatal);
  EXPECT_TRUE(Contains(bad_colour.err, "--colour-weight")) << bad_colour.err;

  // A folder as query expands to its images; k larger than the index is capped.
  const CliRun folder =
      RunLookalike({"search", "--db", db(), tmp_ / "photos", "-k", "50", "--format", "tsv"});
  ASSERT_EQ(folder.code, kExitOk) << folder.err;
  EXPECT_EQ(Lines(folder.out).size(), static_cast<size_t>(kImages * kImages));

  // Table output is for people, but carries the results too.
  const CliRun table = RunLookalike({"search", "--db", db(), paths_[3], "-k", "2"});
  ASSERT_EQ(table.code, kExitOk);
  EXPECT_TRUE(Contains(table.out, AbsolutePath(paths_[3])));

  const CliRun info = RunLookalike({"info", "--db", db(), "--format", "json"});
  ASSERT_EQ(info.code, kExitOk) << info.err;
  EXPECT_EQ(Lines(info.out).size(), 1u);
  EXPECT_TRUE(Contains(info.out, "\"images\":" + std::to_string(kImages))) << info.out;
  EXPECT_TRUE(Contains(info.out, "\"schema_version\":" + std::to_string(kSchemaVersion)))
      << info.out;
  EXPECT_TRUE(Contains(info.out, "\"image_hash\":\"xxh3-64\"")) << info.out;
  EXPECT_TRUE(Contains(info.out, "\"clusters\":16")) << info.out;
  const CliRun info_table = RunLookalike({"info", "--db", db()});
  ASSERT_EQ(info_table.code, kExitOk);
  EXPECT_TRUE(Contains(info_table.out, "images        " + std::to_string(kImages)));

  // Re-running index reports everything unchanged.
  const CliRun again = Index({"--format", "json"});
  ASSERT_EQ(again.code, kExitOk) << again.err;
  EXPECT_TRUE(Contains(again.out, "\"indexed\":0")) << again.out;
  EXPECT_TRUE(Contains(again.out, "\"unchanged\":" + std::to_string(kImages))) << again.out;
  // A model flag on an existing database is noted, not silently ignored.
  const CliRun noted = Index({}, "32");
  EXPECT_EQ(noted.code, kExitOk);
  EXPECT_TRUE(Contains(noted.err, "--clusters ignored")) << noted.err;
}

TEST_F(CliIndexTest, SkippedFileGivesExitOneAndBadQueryIsReported) {
  const std::string bad = tmp_ / "photos/corrupt.jpg";
  { std::ofstream(bad, std::ios::binary) << "\xFF\xD8\xFF garbage"; }
  const std::string errors_file = tmp_ / "errors.jsonl";
  const CliRun r = Index({"--errors", errors_file});
  EXPECT_EQ(r.code, kExitPartial) << r.err;
  EXPECT_TRUE(Contains(r.err, AbsolutePath(bad))) << r.err;
  EXPECT_TRUE(Contains(r.err, "skipped")) << r.err;
  std::ifstream in(errors_file);
  const std::string jsonl((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(Lines(jsonl).size(), 1u) << jsonl;
  EXPECT_TRUE(Contains(jsonl, "\"path\":\"" + AbsolutePath(bad) + "\"")) << jsonl;

  // Searching with one bad and one good query: results for the good one,
  // the bad one reported, exit code 1.
  const CliRun s =
      RunLookalike({"search", "--db", db(), bad, paths_[0], "--format", "tsv", "-k", "2"});
  EXPECT_EQ(s.code, kExitPartial);
  EXPECT_EQ(Lines(s.out).size(), 2u) << s.out;
  EXPECT_TRUE(Contains(s.err, bad)) << s.err;
  const CliRun missing =
      RunLookalike({"search", "--db", db(), tmp_ / "nope.png", "--format", "tsv"});
  EXPECT_EQ(missing.code, kExitPartial);
  EXPECT_TRUE(missing.out.empty());
}

TEST(CliTest, FatalErrorsExitTwo) {
  TempDir tmp;
  const CliRun missing_db = RunLookalike({"search", "--db", tmp / "nodb", "q.jpg"});
  EXPECT_EQ(missing_db.code, kExitFatal);
  EXPECT_TRUE(Contains(missing_db.err, "does not exist")) << missing_db.err;
  EXPECT_FALSE(fs::exists(tmp / "nodb"));
  const CliRun info = RunLookalike({"info", "--db", tmp / "nodb"});
  EXPECT_EQ(info.code, kExitFatal);
  const CliRun missing_dir = RunLookalike({"index", tmp / "nodir", "--db", tmp / "db"});
  EXPECT_EQ(missing_dir.code, kExitFatal);
  EXPECT_TRUE(Contains(missing_dir.err, "not a directory")) << missing_dir.err;
  EXPECT_FALSE(fs::exists(tmp / "db"));
}

TEST_F(CliIndexTest, CudaBackendWithoutDeviceIsAClearError) {
  if (ProbeBackends().cuda_usable) GTEST_SKIP() << "a CUDA device is usable here";
  const CliRun index = Index({}, "16", "cuda");
  EXPECT_EQ(index.code, kExitFatal);
  EXPECT_TRUE(Contains(index.err, "--backend cuda requested but")) << index.err;
  EXPECT_TRUE(Contains(index.err, "--backend cpu")) << index.err;
  EXPECT_FALSE(fs::exists(db())) << "a refused backend created the database";

  ASSERT_EQ(Index().code, kExitOk);
  const CliRun search = RunLookalike({"search", "--db", db(), paths_[0], "--backend", "cuda"});
  EXPECT_EQ(search.code, kExitFatal);
  EXPECT_TRUE(Contains(search.err, "--backend cuda requested but")) << search.err;
  EXPECT_TRUE(search.out.empty());
}

TEST(EscapeTest, EscapeField) {
  EXPECT_EQ(EscapeField("plain/path.jpg"), "plain/path.jpg");
  EXPECT_EQ(EscapeField("a\tb\nc\rd\\e"), "a\\tb\\nc\\rd\\\\e");
  EXPECT_EQ(EscapeField(std::string("x\x01y\x1fz\x7f", 6)), "x\\x01y\\x1fz\\x7f");
  EXPECT_EQ(EscapeField(std::string("nul\0byte", 8)), "nul\\x00byte");
  EXPECT_EQ(EscapeField("caf\xc3\xa9 \xff\xfe"), "caf\xc3\xa9 \xff\xfe") << "other bytes pass";
  // No escaped field contains a byte that could break a TSV line.
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  const std::string escaped = EscapeField(all);
  for (char c : escaped) {
    EXPECT_NE(c, '\t');
    EXPECT_NE(c, '\n');
    EXPECT_NE(c, '\r');
  }
}

// Strict UTF-8 check (RFC 3629: no overlongs, no surrogates, <= U+10FFFF).
bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    int len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c >> 5) == 0x6) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c >> 4) == 0xE) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c >> 3) == 0x1E) {
      len = 4;
      cp = c & 0x07;
    } else
      return false;
    if (i + len > s.size()) return false;
    for (int j = 1; j < len; ++j) {
      const unsigned char cc = s[i + j];
      if ((cc >> 6) != 0x2) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000))
      return false;
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return false;
    i += len;
  }
  return true;
}

TEST(EscapeTest, Utf8ForJson) {
  bool lossy = true;
  EXPECT_EQ(Utf8ForJson("a.jpg", &lossy), "a.jpg");
  EXPECT_FALSE(lossy);
  EXPECT_EQ(Utf8ForJson("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", &lossy),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80")
      << "valid UTF-8 passes";
  EXPECT_FALSE(lossy);
  // Every byte that starts no valid sequence becomes U+0080..U+00FF.
  EXPECT_EQ(Utf8ForJson("bad\xff", &lossy), "bad\xc3\xbf");
  EXPECT_TRUE(lossy);
  EXPECT_EQ(Utf8ForJson("cut\xc3"), "cut\xc3\x83") << "truncated sequence at the end";
  EXPECT_EQ(Utf8ForJson("\xc3(x"), "\xc3\x83(x") << "lead byte without continuation";
  // Not UTF-8 either, though shaped like it: overlong forms, surrogates,
  // code points above U+10FFFF. Each byte is mapped on its own.
  EXPECT_EQ(Utf8ForJson("\xc0\x80"), "\xc3\x80\xc2\x80") << "overlong NUL";
  EXPECT_EQ(Utf8ForJson("\xed\xa0\x80"), "\xc3\xad\xc2\xa0\xc2\x80") << "surrogate U+D800";
  EXPECT_EQ(Utf8ForJson("\xf4\x90\x80\x80"), "\xc3\xb4\xc2\x90\xc2\x80\xc2\x80") << "> U+10FFFF";

  // Whatever the bytes, nlohmann-json accepts the result and PutPath keeps
  // the exact bytes in <key>_bytes exactly when the text lost some.
  std::mt19937_64 rng(31);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string s(1 + rng() % 12, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 3 == 0 ? 0x80 + rng() % 0x80 : rng());
    Json j;
    PutPath(&j, "path", s);
    const std::string line = j.dump();  // throws on invalid UTF-8
    ASSERT_TRUE(IsValidUtf8(line)) << "input bytes produced invalid UTF-8 JSON";
    for (unsigned char c : line) ASSERT_GE(c, 0x20) << "raw control byte in JSON";
    const Json back = Json::parse(line);
    ASSERT_EQ(back.contains("path_bytes"), !IsValidUtf8(s));
    if (back.contains("path_bytes")) {
      std::string bytes;
      const std::string hex = back["path_bytes"];
      for (size_t i = 0; i < hex.size(); i += 2)
        bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
      ASSERT_EQ(bytes, s);
    } else {
      ASSERT_EQ(back["path"].get<std::string>(), s);
    }
  }
}

TEST(OutputTest, FormatsNamedInErrors) {
  EXPECT_EQ(ParseFormat("tsv", {OutputFormat::kTable, OutputFormat::kTsv}), OutputFormat::kTsv);
  try {
    ParseFormat("xml", {OutputFormat::kTable, OutputFormat::kTsv, OutputFormat::kJson});
    FAIL() << "xml accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "--format must be table, tsv or json, got 'xml'");
  }
}

TEST(OutputTest, RoundedNumbersPrintAsTheirDecimals) {
  Json j;
  j["a"] = Rounded(0.8935901f, 6);
  j["b"] = Rounded(0.12345, 4);
  j["c"] = Rounded(1.0, 4);
  EXPECT_EQ(j.dump(), "{\"a\":0.89359,\"b\":0.1235,\"c\":1.0}");
}

// ---- databases of every schema through the command line ---------------------

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void SetMtime(const std::string& path, int64_t seconds) {
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = seconds;
  times[0].tv_nsec = times[1].tv_nsec = 0;
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

// Flips one byte in the middle of the value of `key` (RocksDB opened directly).
void FlipValueByte(const std::string& db, const std::string& key) {
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), db, &raw).ok());
  std::unique_ptr<rocksdb::DB> owned(raw);
  std::string value;
  ASSERT_TRUE(raw->Get(rocksdb::ReadOptions(), key, &value).ok()) << key;
  value[value.size() / 2] ^= 0x01;
  ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), key, value).ok());
}

// A database's life through the CLI in one schema: it holds the content hash
// of that schema for every file, re-indexes nothing when nothing changed
// (also when every mtime changed but no byte did), takes more images without
// changing schema, finds an image first for itself, verifies clean, and a
// flipped byte in a vector or in local features makes verify fail.
class CliSchemaTest : public CliIndexTest, public ::testing::WithParamInterface<uint32_t> {
 protected:
  void ExpectContentHashes(uint32_t schema) {
    auto store = Store::Open(db(), Store::Mode::kReadOnly);
    EXPECT_EQ(store->schema_version(), schema);
    size_t n = 0;
    store->ForEachImage([&](const ImageRecord& r) {
      const std::string bytes = FileBytes(r.path);
      EXPECT_EQ(r.content_hash, schema >= 2 ? XXH3_64bits(bytes.data(), bytes.size())
                                            : encoding::Fnv1a64(bytes.data(), bytes.size()))
          << r.path << ": content hash not of schema " << schema;
      ++n;
    });
    EXPECT_EQ(n, store->num_images());
  }
};

TEST_P(CliSchemaTest, IndexSearchVerifyAndNothingReindexed) {
  const uint32_t schema = GetParam();
  // Schema 2: the older layout on request. Schema 3 with a projection, so
  // that it stores (search) vectors, as large collections do.
  const std::vector<std::string> layout =
      schema == 2 ? std::vector<std::string>{"--descriptor-bytes", "0"}
                  : std::vector<std::string>{"--pca-min-images", "0", "--pca-dim", "8"};
  auto Index = [&](std::vector<std::string> args) {
    args.insert(args.end(), layout.begin(), layout.end());
    return CliIndexTest::Index(args);
  };
  if (schema == 1) {
    // Schema 1 as older builds wrote it: the model (and PCA) of a database
    // built here, in a database created in schema 1; `index` fills it.
    const std::string donor = tmp_ / "donor";
    ASSERT_EQ(RunLookalike({"index", tmp_ / "photos", "--db", donor, "--clusters", "16",
                            "--threads", "2", "--backend", "cpu"})
                  .code,
              kExitOk);
    auto model_source = Store::Open(donor, Store::Mode::kReadOnly);
    const auto projection = model_source->GetProjection();
    Store::Create(db(), model_source->model(), projection ? &*projection : nullptr, 1);
  }
  CliRun r = Index({"--format", "json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(Contains(r.out, "\"indexed\":" + std::to_string(kImages))) << r.out;
  ExpectContentHashes(schema);

  // Nothing changed: nothing read.
  r = Index({"--format", "json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(Contains(r.out, "\"indexed\":0,\"unchanged\":" + std::to_string(kImages))) << r.out;
  // Every mtime changed, no byte did: each file is read and hashed, and its
  // content hash matches the stored one, so nothing is re-indexed.
  for (const std::string& p : paths_) SetMtime(p, 1'800'000'000);
  r = Index({"--format", "json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(Contains(r.out, "\"indexed\":0,")) << r.out;
  EXPECT_TRUE(Contains(r.out, "\"touched\":" + std::to_string(kImages))) << r.out;

  // More images: same schema, same hash.
  testing::WriteImage(tmp_ / "photos/more_a.png", testing::MakeSyntheticImage(700, 320, 240));
  testing::WriteImage(tmp_ / "photos/more_b.jpg", testing::MakeSyntheticImage(701, 320, 240));
  r = Index({"--format", "json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(Contains(r.out, "\"indexed\":2,\"unchanged\":" + std::to_string(kImages))) << r.out;
  ExpectContentHashes(schema);

  const CliRun info = RunLookalike({"info", "--db", db(), "--format", "json"});
  ASSERT_EQ(info.code, kExitOk) << info.err;
  EXPECT_TRUE(Contains(info.out, "\"schema_version\":" + std::to_string(schema))) << info.out;
  EXPECT_TRUE(Contains(
      info.out, std::string("\"image_hash\":\"") + (schema >= 2 ? "xxh3-64" : "fnv1a-64") + "\""))
      << info.out;
  // What each image stores: quantised descriptors and an 8-d float16 search
  // vector in schema 3, bytes and the full float32 VLAD before.
  EXPECT_TRUE(Contains(info.out, schema >= 3
                                     ? "\"descriptor_bytes\":16,\"descriptor_quantized\":true,"
                                       "\"vector_dim\":8,\"vector_precision\":\"float16\""
                                     : "\"descriptor_bytes\":128,\"descriptor_quantized\":"
                                       "false,\"vector_dim\":2048,\"vector_precision\":"
                                       "\"float32\""))
      << info.out;
  const CliRun table = RunLookalike({"info", "--db", db()});
  EXPECT_TRUE(Contains(table.out, "schema        " + std::to_string(schema) + " (")) << table.out;

  for (const std::string& q : {paths_[2], tmp_ / "photos/more_b.jpg"}) {
    const CliRun hit =
        RunLookalike({"search", "--db", db(), q, "-k", "1", "--format", "tsv", "--backend", "cpu"});
    ASSERT_EQ(hit.code, kExitOk) << hit.err;
    const auto f = Split(Lines(hit.out).at(0), '\t');
    ASSERT_EQ(f.size(), 5u) << hit.out;
    EXPECT_EQ(f[2], AbsolutePath(q)) << "an indexed image finds itself first";
  }
  const CliRun clean = RunLookalike({"verify", "--db", db()});
  EXPECT_EQ(clean.code, kExitOk) << clean.err;

  // One flipped byte in a vector, one in another image's local features.
  uint64_t vector_id = 0, features_id = 0;
  {
    auto store = Store::Open(db(), Store::Mode::kReadOnly);
    vector_id = store->FindByPath(AbsolutePath(paths_[4]))->id;
    features_id = store->FindByPath(AbsolutePath(tmp_ / "photos/more_a.png"))->id;
    ASSERT_TRUE(store->GetFeatures(features_id).has_value());
  }
  FlipValueByte(db(), "v:" + encoding::BigEndian64(vector_id));
  FlipValueByte(db(), "f:" + encoding::BigEndian64(features_id));
  const CliRun dirty = RunLookalike({"verify", "--db", db(), "--format", "json"});
  EXPECT_EQ(dirty.code, kExitFatal) << dirty.out;
  EXPECT_TRUE(Contains(dirty.out, "vector: checksum mismatch")) << dirty.out;
  EXPECT_TRUE(Contains(dirty.out, "local features: checksum mismatch")) << dirty.out;
  EXPECT_TRUE(Contains(dirty.out, AbsolutePath(paths_[4]))) << dirty.out;
  {
    auto store = Store::Open(db(), Store::Mode::kReadOnly);
    EXPECT_EQ(store->schema_version(), schema);
  }
}

INSTANTIATE_TEST_SUITE_P(Schemas, CliSchemaTest, ::testing::Values(1u, 2u, 3u),
                         [](const ::testing::TestParamInfo<uint32_t>& info) {
                           return "schema" + std::to_string(info.param);
                         });

int ShellExitCode(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(BinaryTest, HelpAndErrorExitCodes) {
  const std::string bin = LOOKALIKE_BIN;
  ASSERT_TRUE(fs::exists(bin)) << bin;
  FILE* pipe = ::popen((bin + " --help 2>&1").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int status = ::pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(Contains(out, "usage: lookalike")) << out;
  EXPECT_EQ(ShellExitCode(bin + " index --help > /dev/null 2>&1"), 0);
  EXPECT_EQ(ShellExitCode(bin + " frobnicate > /dev/null 2>&1"), 2);
  EXPECT_EQ(ShellExitCode(bin + " search -k 0 --db /nonexistent x.jpg > /dev/null 2>&1"), 2);
  EXPECT_EQ(ShellExitCode(bin + " > /dev/null 2>&1"), 2);
}

// What the dynamic loader maps for one run of the real binary (LD_DEBUG=files
// prints every object it loads, at start-up and by dlopen, on stderr).
std::string LoadedObjects(const std::string& args) {
  const std::string command =
      "LD_DEBUG=files " + std::string(LOOKALIKE_BIN) + " " + args + " 2>&1 >/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return "";
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  ::pclose(pipe);
  return out;
}

// OpenCV's codecs (with GDAL and a hundred more libraries) and the CUDA
// runtime and cuBLAS are modules loaded on first use: commands that neither
// decode nor encode on the GPU start without them.
TEST_F(CliIndexTest, CommandsMapOnlyTheModulesTheyUse) {
  ASSERT_EQ(Index().code, kExitOk);
  for (const std::string& args : {std::string("--help"), "info --db " + db()}) {
    const std::string loaded = LoadedObjects(args);
    ASSERT_TRUE(Contains(loaded, "file=libc.so.6")) << "LD_DEBUG gave nothing for " << args;
    for (const char* library : {"libopencv_imgcodecs", "libgdal", "liblookalike_codecs",
                                "libcudart", "libcublas", "liblookalike_cuda_vlad"})
      EXPECT_FALSE(Contains(loaded, library)) << args << " loaded " << library;
  }
  // A search decodes its query: the codec module comes in then, CUDA does not
  // (a query is encoded on the CPU unless --backend cuda asks otherwise).
  const std::string loaded = LoadedObjects("search --db " + db() + " " + paths_[0]);
  EXPECT_TRUE(Contains(loaded, "liblookalike_codecs.so")) << loaded.substr(0, 2000);
  EXPECT_TRUE(Contains(loaded, "libopencv_imgcodecs"));
  EXPECT_FALSE(Contains(loaded, "libcudart"));
  EXPECT_FALSE(Contains(loaded, "libcublas"));
}

}  // namespace
}  // namespace lookalike
