// End-to-end: a real `lookalike serve` on a generated, indexed image set,
// asked through a real HTTP client (cpp-httplib's) and raw sockets: every
// API route, search equal to `lookalike search --format json`, the page,
// hostile requests (path traversal in every form on every route, NUL bytes,
// unknown ids, bad k, malformed multipart, oversize uploads, a decompression
// bomb, a client trickling one byte per second) answered 4xx or cut off
// while other clients are served, new images picked up without a restart,
// and a clean stop on SIGTERM.
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/serve_support.h"
#include "tests/hostile_corpus.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace lookalike::testing;

constexpr int kImages = 14;
// The byte-identical copy of the first image; its name needs HTML escaping.
constexpr char kCopyName[] = "img_000 <copy> & 'x'.png";

// Percent-escapes what a query string cannot hold as is.
std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ' ' || c == '+' || c == '%' || c == '&') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

class ServeApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir;
    const std::string root = fs::canonical(tmp_->path()).string();
    photos_ =
        new std::vector<std::string>(WriteSyntheticSet(root + "/photos", kImages, 700, 480, 360));
    // A byte-identical copy (a certain duplicate group) and, outside the
    // folder, a rotated JPEG copy of another image to search with.
    fs::copy_file(photos_->at(0), root + "/photos/" + kCopyName);
    query_ = new std::string(root + "/query.jpg");
    WriteImage(*query_,
               ApplyTransform(cv::imread(photos_->at(5), cv::IMREAD_COLOR), Transform::kRotate));
    db_ = new std::string(root + "/db");
    const ProcessResult index =
        RunLookalike({"index", root + "/photos", "--db", *db_, "--clusters", "32", "--quiet"});
    ASSERT_EQ(index.exit_code, 0) << index.Describe();
    server_ = new ServeProcess(*db_, {"--threads", "4", "--max-file-mb", "1", "--request-timeout",
                                      "3", "--idle-timeout", "3"});
    ASSERT_GT(server_->port(), 0) << "serve did not print its address";
  }
  static void TearDownTestSuite() {
    delete server_;
    delete photos_;
    delete query_;
    delete db_;
    delete tmp_;
  }
  void SetUp() override { ASSERT_GT(server_->port(), 0); }
  void TearDown() override { EXPECT_TRUE(server_->child().Running()) << "the server died"; }

  static httplib::Client Client() {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(300, 0);
    c.set_connection_timeout(30, 0);
    return c;
  }
  static json GetJson(const std::string& path, int expected_status = 200) {
    auto res = Client().Get(path.c_str());
    EXPECT_TRUE(res) << path;
    if (!res) return json();
    EXPECT_EQ(res->status, expected_status) << path << ": " << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json") << path;
    return json::parse(res->body);
  }
  static httplib::Result Upload(const std::string& path, const std::string& bytes,
                                const std::string& k = "") {
    httplib::MultipartFormDataItems items = {{"image", bytes, "query.jpg", "image/jpeg"}};
    if (!k.empty()) items.push_back({"k", k, "", ""});
    return Client().Post(path.c_str(), items);
  }
  // `lookalike search --format json` of one file.
  static json CliSearch(const std::string& file, int k) {
    const ProcessResult run =
        RunLookalike({"search", "--db", *db_, file, "-k", std::to_string(k), "--format", "json"});
    EXPECT_EQ(run.exit_code, 0) << run.Describe();
    return json::parse(run.out);
  }
  static uint64_t IdOf(const std::string& path) {
    const json page = GetJson("/api/images?limit=1000");
    for (const json& m : page["images"])
      if (m["path"] == path) return m["id"];
    ADD_FAILURE() << "no id for " << path;
    return 0;
  }
  static json WithoutIds(json results) {
    for (json& h : results) h.erase("id");
    return results;
  }

  static TempDir* tmp_;
  static std::vector<std::string>* photos_;
  static std::string* query_;
  static std::string* db_;
  static ServeProcess* server_;
};

TempDir* ServeApiTest::tmp_ = nullptr;
std::vector<std::string>* ServeApiTest::photos_ = nullptr;
std::string* ServeApiTest::query_ = nullptr;
std::string* ServeApiTest::db_ = nullptr;
ServeProcess* ServeApiTest::server_ = nullptr;

TEST_F(ServeApiTest, InfoAndPagedImageList) {
  const json info = GetJson("/api/info");
  EXPECT_EQ(info["images"], kImages + 1);
  EXPECT_EQ(info["searchable"], kImages + 1);
  EXPECT_EQ(info["path"], *db_);
  EXPECT_EQ(info["model"]["clusters"], 32);

  std::set<std::string> seen;
  std::set<uint64_t> ids;
  for (int offset = 0; offset < kImages + 1; offset += 4) {
    const json page = GetJson("/api/images?offset=" + std::to_string(offset) + "&limit=4");
    EXPECT_EQ(page["total"], kImages + 1);
    EXPECT_EQ(page["images"].size(), std::min(4, kImages + 1 - offset));
    for (const json& m : page["images"]) {
      seen.insert(m["path"].get<std::string>());
      ids.insert(m["id"].get<uint64_t>());
      EXPECT_EQ(m["width"], 480);
      EXPECT_EQ(m["height"], 360);
      EXPECT_EQ(m["bytes"], fs::file_size(m["path"].get<std::string>()));
    }
  }
  EXPECT_EQ(seen.size(), size_t{kImages + 1});
  for (const std::string& p : *photos_) EXPECT_EQ(seen.count(p), 1u) << p;
  EXPECT_EQ(GetJson("/api/images?offset=1000")["images"].size(), 0u);
  const uint64_t id = *ids.begin();
  EXPECT_EQ(GetJson("/api/images/" + std::to_string(id))["id"], id);
}

TEST_F(ServeApiTest, ThumbnailsAreScaledJpegsOfTheIndexedImages) {
  const uint64_t id = IdOf(photos_->at(3));
  for (int size : {256, 64, 1024}) {
    auto res = Client().Get(("/api/images/" + std::to_string(id) + "/thumbnail" +
                             (size == 256 ? std::string() : "?size=" + std::to_string(size)))
                                .c_str());
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "image/jpeg");
    const cv::Mat thumb = cv::imdecode(
        cv::Mat(1, static_cast<int>(res->body.size()), CV_8U, res->body.data()), cv::IMREAD_COLOR);
    ASSERT_FALSE(thumb.empty());
    // Scaled down to `size` on the longest side, never enlarged (480 x 360).
    EXPECT_EQ(thumb.cols, std::min(size, 480));
    EXPECT_EQ(thumb.rows, std::min(size, 480) * 3 / 4);
    // It shows the image: compare with the original scaled the same way.
    cv::Mat original = cv::imread(photos_->at(3), cv::IMREAD_COLOR), scaled;
    cv::resize(original, scaled, thumb.size(), 0, 0, cv::INTER_AREA);
    EXPECT_LT(cv::norm(scaled, thumb, cv::NORM_L1) / thumb.total() / 3, 12.0);
  }
}

TEST_F(ServeApiTest, UploadSearchEqualsCliJsonAndFindsTheOriginalFirst) {
  const std::string bytes = ReadFileBytes(*query_);
  for (int k : {1, 5, 12}) {
    auto res = Upload("/api/search", bytes, std::to_string(k));
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const json api = json::parse(res->body);
    const json cli = CliSearch(*query_, k);
    ASSERT_EQ(api["results"].size(), static_cast<size_t>(k));
    EXPECT_EQ(api["results"][0]["path"], photos_->at(5));
    EXPECT_EQ(api["results"][0]["id"], IdOf(photos_->at(5)));
    EXPECT_EQ(api["query"], "query.jpg");
    // Same ranking, same scores, same evidence, to the printed digit.
    EXPECT_EQ(WithoutIds(api["results"]), cli["results"])
        << "API " << api.dump() << "\nCLI " << cli.dump();
  }
  // Without k: the default, 12.
  auto res = Upload("/api/search", bytes);
  ASSERT_TRUE(res);
  EXPECT_EQ(json::parse(res->body)["results"].size(), 12u);
}

TEST_F(ServeApiTest, SimilarEqualsCliJsonOfTheIndexedFileWithoutItself) {
  for (size_t i : {size_t{0}, size_t{2}, size_t{9}}) {
    const uint64_t id = IdOf(photos_->at(i));
    const json api = GetJson("/api/images/" + std::to_string(id) + "/similar?k=6");
    // The CLI's ranking one deeper, the query itself left out, ranks from 1.
    json cli = CliSearch(photos_->at(i), 7)["results"];
    size_t self_rank = 0;
    for (size_t r = 0; r < cli.size(); ++r)
      if (cli[r]["path"] == photos_->at(i)) self_rank = r + 1;
    ASSERT_GT(self_rank, 0u) << "the CLI does not find the image itself: " << cli.dump();
    cli.erase(self_rank - 1);
    for (size_t r = 0; r < cli.size(); ++r) cli[r]["rank"] = r + 1;
    if (cli.size() > 6) cli.erase(6);
    EXPECT_EQ(api["query"], photos_->at(i));
    EXPECT_EQ(api["query_id"], id);
    EXPECT_EQ(api["self_rank"], self_rank);
    ASSERT_EQ(api["results"].size(), 6u);
    for (const json& h : api["results"]) EXPECT_NE(h["id"], id);
    EXPECT_EQ(WithoutIds(api["results"]), cli);
  }
  // The first image's byte-identical copy is its best result.
  const json first =
      GetJson("/api/images/" + std::to_string(IdOf(photos_->at(0))) + "/similar?k=1");
  EXPECT_EQ(first["results"][0]["path"],
            (fs::path(photos_->at(0)).parent_path() / kCopyName).string());
  // k = 100, the most a request may ask: one more is ranked and left out.
  const json all =
      GetJson("/api/images/" + std::to_string(IdOf(photos_->at(3))) + "/similar?k=100");
  EXPECT_EQ(all["results"].size(), size_t{kImages});
  EXPECT_EQ(all["self_rank"], 1);
}

TEST_F(ServeApiTest, MatchesDrawTheVerifiedInliers) {
  const uint64_t a = IdOf(photos_->at(0));
  const uint64_t copy = IdOf(fs::path(photos_->at(0)).parent_path() / kCopyName);
  const uint64_t other = IdOf(photos_->at(7));
  auto check_lines = [](const json& m) {
    EXPECT_EQ(m["lines"].size(), m["inliers"].get<size_t>());
    for (const json& l : m["lines"]) {
      ASSERT_EQ(l.size(), 4u);
      for (const json& v : l) {
        EXPECT_GE(v.get<double>(), 0.0);
        EXPECT_LE(v.get<double>(), 1.0);
      }
    }
  };
  const json same =
      GetJson("/api/images/" + std::to_string(a) + "/matches/" + std::to_string(copy));
  EXPECT_TRUE(same["verified"]);
  EXPECT_GE(same["inliers"].get<int>(), 50);
  // Identical images: each inlier joins a point to the same point.
  for (const json& l : same["lines"]) {
    EXPECT_NEAR(l[0].get<double>(), l[2].get<double>(), 0.01);
    EXPECT_NEAR(l[1].get<double>(), l[3].get<double>(), 0.01);
  }
  check_lines(same);
  EXPECT_EQ(same["a"]["id"], a);
  EXPECT_EQ(same["b"]["id"], copy);

  const json unrelated =
      GetJson("/api/images/" + std::to_string(a) + "/matches/" + std::to_string(other));
  EXPECT_FALSE(unrelated["verified"]);
  check_lines(unrelated);

  // The uploaded rotated copy against its original.
  auto res = Upload("/api/matches/" + std::to_string(IdOf(photos_->at(5))), ReadFileBytes(*query_));
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json up = json::parse(res->body);
  EXPECT_TRUE(up["verified"]);
  EXPECT_GE(up["inliers"].get<int>(), 8);
  EXPECT_EQ(up["a"]["query"], "query.jpg");
  check_lines(up);
}

TEST_F(ServeApiTest, DedupGroupsTheByteIdenticalCopyWithTheKeeperFirst) {
  const json d = GetJson("/api/dedup");
  EXPECT_EQ(d["images"], kImages + 1);
  const std::string copy = (fs::path(photos_->at(0)).parent_path() / kCopyName).string();
  bool found = false;
  for (const json& g : d["groups"]) {
    std::set<std::string> paths;
    for (const json& m : g["members"]) paths.insert(m["path"].get<std::string>());
    EXPECT_EQ(g["keep"], g["members"][0]["id"]);
    if (paths == std::set<std::string>{photos_->at(0), copy}) {
      found = true;
      EXPECT_TRUE(g["pairs"][0]["identical"]);
      EXPECT_EQ(g["level"], "identical");
      // The same bytes: the older file (the copy was made after it) keeps
      // the group; its copy is the duplicate, with the reason.
      EXPECT_EQ(g["members"][0]["path"], photos_->at(0));
      EXPECT_EQ(g["keeper"], photos_->at(0));
      EXPECT_EQ(g["members"][0]["role"], "keep");
      EXPECT_EQ(g["members"][1]["role"], "duplicate");
      EXPECT_EQ(g["members"][1]["level"], "identical");
      EXPECT_NE(g["members"][1]["reason"].get<std::string>().find("the same bytes"),
                std::string::npos);
    }
  }
  EXPECT_TRUE(found) << d.dump();
}

// POST of a JSON body, as the page sends it.
httplib::Result PostJson(httplib::Client& client, const std::string& path, const json& body,
                         const httplib::Headers& headers = {}) {
  return client.Post(path.c_str(), headers, body.dump(), "application/json");
}

// The group of /api/dedup holding exactly `paths`; null if none.
json GroupOf(const json& dedup, const std::set<std::string>& paths) {
  for (const json& g : dedup["groups"]) {
    std::set<std::string> members;
    for (const json& m : g["members"]) members.insert(m["path"].get<std::string>());
    if (members == paths) return g;
  }
  return json();
}

std::vector<uint64_t> MemberIds(const json& group) {
  std::vector<uint64_t> ids;
  for (const json& m : group["members"]) ids.push_back(m["id"]);
  return ids;
}

TEST_F(ServeApiTest, ExportsTheChosenMembersAsAListAndAScriptThatQuotesEveryName) {
  const std::string copy = (fs::path(photos_->at(0)).parent_path() / kCopyName).string();
  const json group = GroupOf(GetJson("/api/dedup"), {photos_->at(0), copy});
  ASSERT_FALSE(group.is_null());
  const uint64_t keeper = group["keep"], other = group["members"][1]["id"];
  const std::string keeper_path = group["members"][0]["path"];
  const std::string other_path = group["members"][1]["path"];
  EXPECT_FALSE(group["keep_reason"].get<std::string>().empty());
  httplib::Client client = Client();

  auto list = PostJson(client, "/api/dedup/export", {{"ids", {other}}, {"format", "list"}});
  ASSERT_TRUE(list);
  ASSERT_EQ(list->status, 200) << list->body;
  EXPECT_EQ(list->get_header_value("Content-Type").rfind("text/plain", 0), 0u);
  EXPECT_EQ(list->body, other_path + "\n");

  // The script, keeper chosen too: every rm commented out, the keeper named.
  auto script =
      PostJson(client, "/api/dedup/export", {{"ids", {other, keeper}}, {"format", "script"}});
  ASSERT_TRUE(script);
  ASSERT_EQ(script->status, 200) << script->body;
  const std::string& text = script->body;
  EXPECT_EQ(text.rfind("#!/bin/sh\n", 0), 0u) << text;
  EXPECT_NE(text.find("keep " + keeper_path), std::string::npos) << text;
  EXPECT_NE(text.find("level identical"), std::string::npos) << text;
  EXPECT_NE(text.find("this is the group's keeper"), std::string::npos) << text;
  std::istringstream lines(text);
  int rm_lines = 0;
  for (std::string line; std::getline(lines, line);) {
    EXPECT_TRUE(line.empty() || line[0] == '#' || line == "set -eu") << line;
    rm_lines += line.rfind("#rm -- ", 0) == 0;
  }
  EXPECT_EQ(rm_lines, 2);
  // Run as it would be once reviewed (the rm lines uncommented), with rm
  // replaced by a printer: the shell reads back each exact name (this one
  // holds a quote, spaces, < > and &), the keeper's first (group order).
  std::string reviewed = text;
  const std::string rm = "\n#rm -- ";
  for (size_t at = 0; (at = reviewed.find(rm, at)) != std::string::npos;)
    reviewed.replace(at, rm.size(), "\nprintf '%s|' ");
  const std::string script_file = tmp_->path() + "/remove.sh";
  std::ofstream(script_file) << reviewed;
  ProcessOptions sh;
  sh.argv = {"/bin/sh", script_file};
  const ProcessResult ran = RunProcess(sh);
  EXPECT_EQ(ran.exit_code, 0) << ran.Describe();
  EXPECT_EQ(ran.out, keeper_path + "|" + other_path + "|");

  // Refused: a bad format, an id in no group, unknown ids, not JSON.
  auto bad = PostJson(client, "/api/dedup/export", {{"ids", {other}}, {"format", "zip"}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  const uint64_t alone = IdOf(photos_->at(11));
  auto lonely = PostJson(client, "/api/dedup/export", {{"ids", {alone}}, {"format", "list"}});
  ASSERT_TRUE(lonely);
  EXPECT_EQ(lonely->status, 409) << lonely->body;
  auto unknown = PostJson(client, "/api/dedup/export", {{"ids", {999999}}, {"format", "list"}});
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404) << unknown->body;
  auto form =
      client.Post("/api/dedup/export", "ids=1&format=list", "application/x-www-form-urlencoded");
  ASSERT_TRUE(form);
  EXPECT_EQ(form->status, 415) << form->body;
}

TEST_F(ServeApiTest, NotDuplicatesMarksAreRememberedAndGuarded) {
  const std::string copy = (fs::path(photos_->at(0)).parent_path() / kCopyName).string();
  const json group = GroupOf(GetJson("/api/dedup"), {photos_->at(0), copy});
  ASSERT_FALSE(group.is_null());
  EXPECT_FALSE(group["not_duplicates"]);
  const std::vector<uint64_t> ids = MemberIds(group);
  httplib::Client client = Client();
  auto mark = [&](bool value, const httplib::Headers& headers = {}) {
    return PostJson(client, "/api/dedup/not-duplicates", {{"ids", ids}, {"not_duplicates", value}},
                    headers);
  };
  auto res = mark(true);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_TRUE(GroupOf(GetJson("/api/dedup"), {photos_->at(0), copy})["not_duplicates"]);
  // In review.json inside the database folder, with both content hashes.
  std::ifstream in(*db_ + "/review.json");
  ASSERT_TRUE(in.good());
  const json file = json::parse(in);
  ASSERT_EQ(file["not_duplicates"].size(), 1u);
  EXPECT_EQ(file["not_duplicates"][0].size(), 2u);
  EXPECT_EQ(file["not_duplicates"][0][0]["content_hash"].get<std::string>().size(), 16u);
  // Marking twice keeps one decision; unmarking forgets it.
  ASSERT_EQ(mark(true)->status, 200);
  EXPECT_EQ(json::parse(std::ifstream(*db_ + "/review.json"))["not_duplicates"].size(), 1u);
  ASSERT_EQ(mark(false)->status, 200);
  EXPECT_FALSE(GroupOf(GetJson("/api/dedup"), {photos_->at(0), copy})["not_duplicates"]);
  EXPECT_EQ(json::parse(std::ifstream(*db_ + "/review.json"))["not_duplicates"].size(), 0u);

  // Another site's page, a form post, and malformed requests change nothing.
  auto foreign = mark(true, {{"Origin", "http://evil.example"}});
  ASSERT_TRUE(foreign);
  EXPECT_EQ(foreign->status, 403) << foreign->body;
  const std::string form_body = "{\"ids\":[" + std::to_string(ids[0]) + "," +
                                std::to_string(ids[1]) + "],\"not_duplicates\":true}";
  for (const char* type : {"text/plain", "application/x-www-form-urlencoded"}) {
    auto r = client.Post("/api/dedup/not-duplicates", form_body, type);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 415) << type << ": " << r->body;
  }
  for (const json& body : {json{{"ids", {ids[0]}}, {"not_duplicates", true}},
                           json{{"ids", {ids[0], ids[0]}}, {"not_duplicates", true}},
                           json{{"ids", ids}, {"not_duplicates", "yes"}}, json{{"ids", ids}},
                           json{{"ids", "1,2"}, {"not_duplicates", true}},
                           json{{"ids", {-1, 2}}, {"not_duplicates", true}}, json::array()}) {
    auto r = PostJson(client, "/api/dedup/not-duplicates", body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body.dump() << ": " << r->body;
  }
  auto garbage = client.Post("/api/dedup/not-duplicates", "{not json", "application/json");
  ASSERT_TRUE(garbage);
  EXPECT_EQ(garbage->status, 400) << garbage->body;
  auto unknown = PostJson(client, "/api/dedup/not-duplicates",
                          {{"ids", {ids[0], 999999}}, {"not_duplicates", true}});
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404) << unknown->body;
  EXPECT_FALSE(GroupOf(GetJson("/api/dedup"), {photos_->at(0), copy})["not_duplicates"]);
  // The database is as consistent as before.
  const ProcessResult verify = RunLookalike({"verify", "--db", *db_});
  EXPECT_EQ(verify.exit_code, 0) << verify.Describe();
}

TEST_F(ServeApiTest, PageIsServedFromTheBinary) {
  for (const auto& [path, type] :
       std::vector<std::pair<std::string, std::string>>{{"/", "text/html"},
                                                        {"/index.html", "text/html"},
                                                        {"/app.js", "text/javascript"},
                                                        {"/style.css", "text/css"},
                                                        {"/favicon.svg", "image/svg+xml"},
                                                        {"/favicon.ico", "image/svg+xml"}}) {
    auto res = Client().Get(path.c_str());
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << path;
    EXPECT_EQ(res->get_header_value("Content-Type").rfind(type, 0), 0u) << path;
    EXPECT_FALSE(res->body.empty());
    // Nothing is fetched from elsewhere (an SVG names its XML namespace).
    if (type != "image/svg+xml") {
      EXPECT_EQ(res->body.find("http://"), std::string::npos) << path;
    }
    EXPECT_EQ(res->body.find("https://"), std::string::npos) << path;
  }
  EXPECT_NE(Client().Get("/")->body.find("/app.js"), std::string::npos);
}

TEST_F(ServeApiTest, PathTraversalInEveryFormOnEveryRouteIsRefused) {
  const std::string id = std::to_string(IdOf(photos_->at(1)));
  const std::vector<std::string> evil = {"..",
                                         "../../../../etc/passwd",
                                         "%2e%2e",
                                         "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
                                         "..%2f..%2fetc%2fpasswd",
                                         "%2E%2E%2F",
                                         "..%5c..%5cetc%5cpasswd",
                                         "%252e%252e%252f",
                                         "/etc/passwd",
                                         "%2fetc%2fpasswd",
                                         "%00",
                                         "1%00",
                                         "..%00",
                                         "1%00../../etc/passwd",
                                         "....//....//etc/passwd",
                                         ".%2e/.%2e/etc/passwd",
                                         "%c0%ae%c0%ae%c0%af"};
  const std::vector<std::string> templates = {"/{}",
                                              "/{}/index.html",
                                              "/api/{}",
                                              "/api/images/{}",
                                              "/api/images/{}/thumbnail",
                                              "/api/images/{}/similar",
                                              "/api/images/{}/matches/" + id,
                                              "/api/images/" + id + "/matches/{}",
                                              "/api/images?offset={}",
                                              "/api/images?limit={}",
                                              "/api/images/" + id + "/similar?k={}",
                                              "/api/images/" + id + "/thumbnail?size={}",
                                              "/api/dedup/{}",
                                              "/api/info/{}"};
  int checked = 0;
  for (const std::string& t : templates) {
    for (const std::string& e : evil) {
      std::string target = t;
      target.replace(target.find("{}"), 2, e);
      const std::string response =
          RawRequest(server_->port(), "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
      const int status = StatusOf(response);
      EXPECT_GE(status, 400) << target << "\n" << response.substr(0, 300);
      EXPECT_LT(status, 500) << target << "\n" << response.substr(0, 300);
      EXPECT_EQ(response.find("root:"), std::string::npos) << target;
      EXPECT_NO_THROW(json::parse(BodyOf(response))["error"]["message"].get<std::string>())
          << target << "\n"
          << response.substr(0, 300);
      ++checked;
    }
  }
  // Raw NUL bytes and backslashes in the request line itself.
  for (const std::string& target :
       {std::string("/api/images/1\0/thumbnail", 24), std::string("/\0../../etc/passwd", 18),
        std::string("/..\\..\\etc\\passwd"), std::string("/api/images/../../etc/passwd")}) {
    const std::string response =
        RawRequest(server_->port(), "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    const int status = StatusOf(response);
    EXPECT_TRUE(status == 0 || (status >= 400 && status < 500)) << response.substr(0, 300);
    EXPECT_EQ(response.find("root:"), std::string::npos);
  }
  // An upload named like a path is only a name.
  httplib::MultipartFormDataItems items = {
      {"image", ReadFileBytes(*query_), "../../../../etc/passwd", "image/jpeg"}};
  auto res = Client().Post("/api/search", items);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body.find("root:"), std::string::npos);
  EXPECT_GT(checked, 200);
  // Still serving.
  EXPECT_EQ(GetJson("/api/info")["images"], kImages + 1);
}

TEST_F(ServeApiTest, RequestsNamingAnotherHostAreRefused) {
  // A page whose DNS name rebinds to 127.0.0.1 sends its own name as Host.
  const std::string port = std::to_string(server_->port());
  for (const std::string& host : std::vector<std::string>{
           "evil.example", "evil.example:" + port, "127.0.0.1.evil.example", "", "localhost:1"}) {
    const std::string response =
        RawRequest(server_->port(), "GET /api/info HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
    EXPECT_EQ(StatusOf(response), 403) << host << "\n" << response.substr(0, 300);
    EXPECT_EQ(BodyOf(response).find("\"images\""), std::string::npos) << host;
  }
  EXPECT_EQ(StatusOf(RawRequest(server_->port(), "GET /api/info HTTP/1.1\r\n\r\n")), 403);
  for (const std::string& host :
       std::vector<std::string>{"localhost:" + port, "127.0.0.1:" + port, "localhost", "[::1]"})
    EXPECT_EQ(StatusOf(RawRequest(server_->port(),
                                  "GET /api/info HTTP/1.1\r\nHost: " + host + "\r\n\r\n")),
              200)
        << host;
}

TEST_F(ServeApiTest, UnknownIdsAndBadParametersGet4xxJson) {
  const std::string id = std::to_string(IdOf(photos_->at(1)));
  for (const std::string& path : std::vector<std::string>{
           "/api/images/999999", "/api/images/999999/thumbnail", "/api/images/999999/similar",
           "/api/images/999999/matches/" + id, "/api/images/" + id + "/matches/999999",
           "/api/images/0", "/api/images/99999999999999999999999/thumbnail",
           "/api/images/18446744073709551616", "/api/nothing", "/nothing.html"})
    EXPECT_EQ(GetJson(path, 404)["error"]["status"], 404) << path;
  for (const std::string& k : std::vector<std::string>{"-1", "0", "101", "99999999999999999999",
                                                       "abc", "1e3", "", "+5", " 5", "5.0", "0x10"})
    EXPECT_EQ(GetJson("/api/images/" + id + "/similar?k=" + Escape(k), 400)["error"]["status"], 400)
        << "k=" << k;
  for (const std::string& q :
       std::vector<std::string>{"offset=-1", "limit=0", "limit=1001", "limit=x", "offset=1e9"})
    EXPECT_EQ(GetJson("/api/images?" + q, 400)["error"]["status"], 400) << q;
  for (const std::string& q :
       std::vector<std::string>{"size=0", "size=15", "size=1025", "size=-256"})
    EXPECT_EQ(GetJson("/api/images/" + id + "/thumbnail?" + q, 400)["error"]["status"], 400) << q;
  // k as a multipart field is checked the same way.
  auto res = Upload("/api/search", ReadFileBytes(*query_), "-3");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
}

TEST_F(ServeApiTest, BadUploadsGet4xxJson) {
  auto expect_status = [](const httplib::Result& res, int status, const std::string& what) {
    ASSERT_TRUE(res) << what;
    EXPECT_EQ(res->status, status) << what << ": " << res->body;
    EXPECT_NO_THROW(json::parse(res->body)["error"]["message"].get<std::string>())
        << what << ": " << res->body;
  };
  // Not an image, an empty file, a truncated JPEG.
  expect_status(Upload("/api/search", "hello, not an image"), 422, "text");
  expect_status(Upload("/api/search", ""), 422, "empty");
  const std::string jpeg = ReadFileBytes(*query_);
  expect_status(Upload("/api/search", jpeg.substr(0, jpeg.size() / 2)), 422, "truncated JPEG");
  // A decompression bomb: a small PNG whose header claims 60000 x 60000.
  std::vector<uchar> png;
  cv::imencode(".png", cv::Mat(64, 64, CV_8UC3, cv::Scalar(1, 2, 3)), png);
  std::string bomb(png.begin(), png.end());
  ASSERT_TRUE(PatchPngIhdr(&bomb, 60000, 60000));
  expect_status(Upload("/api/search", bomb), 413, "bomb");
  expect_status(Upload("/api/matches/1", bomb), 413, "bomb to matches");
  // Over the 1 MiB cap (--max-file-mb 1): inside the multipart envelope,
  // then a body over the envelope too.
  expect_status(Upload("/api/search", std::string(1536 * 1024, 'x')), 413, "1.5 MiB file");
  expect_status(Upload("/api/search", std::string(3 << 20, 'x')), 413, "3 MiB body");
  // No image field; not multipart; malformed multipart bodies.
  expect_status(Client().Post("/api/search", httplib::MultipartFormDataItems{{"k", "3", "", ""}}),
                400, "no image field");
  expect_status(Client().Post("/api/search", jpeg, "image/jpeg"), 400, "raw body");
  const std::string head =
      "POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; "
      "boundary=XyZ\r\n";
  for (const std::string& body :
       {std::string("--XyZ\r\nContent-Disposition: form-data; name=\"image\"; "
                    "filename=\"a.jpg\"\r\n\r\nabc"),  // never closed
        std::string("--Other\r\nContent-Disposition: form-data; name=\"image\"\r\n\r\nabc\r\n"
                    "--Other--\r\n"),  // wrong boundary
        std::string("--XyZ\r\nno header end\r\n--XyZ--\r\n"), std::string("garbage"),
        std::string("--XyZ--\r\n")}) {
    const std::string response =
        RawRequest(server_->port(),
                   head + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    const int status = StatusOf(response);
    EXPECT_GE(status, 400) << body << "\n" << response.substr(0, 300);
    EXPECT_LT(status, 500) << body << "\n" << response.substr(0, 300);
  }
  const std::string no_boundary =
      "POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data\r\n"
      "Content-Length: 5\r\n\r\nhello";
  const int status = StatusOf(RawRequest(server_->port(), no_boundary));
  EXPECT_GE(status, 400);
  EXPECT_LT(status, 500);
  // A Content-Length that lies (more than is sent): cut off, not hung.
  EXPECT_EQ(StatusOf(RawRequest(server_->port(), head + "Content-Length: 100000\r\n\r\nshort")),
            400);
  EXPECT_EQ(GetJson("/api/info")["images"], kImages + 1);
}

TEST_F(ServeApiTest, SlowClientIsCutOffWhileOthersAreServed) {
  // A request that would take 200 s at one byte per second; the server gives
  // a request 3 s (--request-timeout 3).
  const std::string request =
      "GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + std::string(200, 'a') + "\r\n\r\n";
  const int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  std::atomic<bool> closed{false};
  std::atomic<size_t> sent{0};
  std::thread slow([&] {
    for (size_t i = 0; i < request.size() && !closed; ++i) {
      if (::send(fd, request.data() + i, 1, MSG_NOSIGNAL) != 1) break;
      sent = i + 1;
      // One byte per second: the pause is the scenario, and it is spent
      // waiting for the server to end the connection (anything readable:
      // the close, or an error response before it).
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 1000) > 0) {
        closed = true;
        break;
      }
    }
  });
  // Meanwhile other clients are answered.
  int served = 0;
  while (!closed && sent < request.size()) {
    auto res = Client().Get("/api/images?limit=2");
    if (res && res->status == 200) ++served;
    if (served >= 3) break;
  }
  EXPECT_GE(served, 3);
  ASSERT_TRUE(WaitFor([&] { return closed.load(); })) << "the slow client was never cut off";
  slow.join();
  EXPECT_LT(sent.load(), request.size()) << "the server waited for the whole slow request";
  // Whatever the server sent the slow client, it was not the answer.
  const std::string rest = ReadAll(fd, 30);
  EXPECT_EQ(rest.find("\"images\""), std::string::npos) << rest;
  ::close(fd);
  EXPECT_EQ(GetJson("/api/info")["images"], kImages + 1);
}

// The embedded thumbnails of an HTML report, decoded.
std::vector<cv::Mat> EmbeddedImages(const std::string& html) {
  static const std::string kPrefix = "src=\"data:image/jpeg;base64,";
  std::vector<cv::Mat> out;
  for (size_t at = html.find(kPrefix); at != std::string::npos; at = html.find(kPrefix, at + 1)) {
    const size_t begin = at + kPrefix.size(), end = html.find('"', begin);
    std::string bytes;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = begin; i < end && html[i] != '='; ++i) {
      const char c = html[i];
      const int v = c >= 'A' && c <= 'Z'   ? c - 'A'
                    : c >= 'a' && c <= 'z' ? c - 'a' + 26
                    : c >= '0' && c <= '9' ? c - '0' + 52
                    : c == '+'             ? 62
                                           : 63;
      acc = (acc << 6) | v;
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        bytes += static_cast<char>((acc >> bits) & 0xff);
      }
    }
    out.push_back(cv::imdecode(cv::Mat(1, static_cast<int>(bytes.size()), CV_8U, bytes.data()),
                               cv::IMREAD_COLOR));
  }
  return out;
}

// The section headings and level badges of an HTML report, in order.
std::string HeadingsAndBadges(const std::string& html) {
  std::string out;
  static const std::string kHeading = "<h3>", kBadge = "<span class=\"level ";
  for (size_t at = html.find('<'); at != std::string::npos; at = html.find('<', at + 1)) {
    if (html.compare(at, kHeading.size(), kHeading) == 0)
      out += html.substr(at, html.find("</h3>", at) - at) + "\n";
    else if (html.compare(at, kBadge.size(), kBadge) == 0)
      out += html.substr(at, html.find("</span>", at) - at) + "\n";
  }
  return out;
}

// What a self-contained report must not hold: references to other files.
void ExpectSelfContained(const std::string& html) {
  EXPECT_EQ(html.rfind("<!doctype html>", 0), 0u);
  for (const char* outside : {"http://", "https://", "src=\"/", "src=\"file", "href=", "<script"})
    EXPECT_EQ(html.find(outside), std::string::npos) << outside;
}

TEST_F(ServeApiTest, HtmlReportsAreSelfContainedWithEmbeddedThumbnails) {
  const ProcessResult search =
      RunLookalike({"search", "--db", *db_, *query_, "-k", "4", "--format", "html"});
  ASSERT_EQ(search.exit_code, 0) << search.Describe();
  ExpectSelfContained(search.out);
  const std::vector<cv::Mat> pictures = EmbeddedImages(search.out);
  ASSERT_EQ(pictures.size(), 5u);  // the query and 4 hits
  for (const cv::Mat& p : pictures) {
    ASSERT_FALSE(p.empty());
    EXPECT_EQ(std::max(p.cols, p.rows), 160);
  }
  // The original is the first hit: the first path after "#1".
  const size_t first_hit = search.out.find("<b>#1</b>");
  ASSERT_NE(first_hit, std::string::npos);
  EXPECT_EQ(search.out.find("class=\"path\">", first_hit),
            search.out.find("class=\"path\">" + photos_->at(5), first_hit));
  // Each hit says what ranked it, its thumbnail correlation included.
  const size_t evidence = search.out.find("&middot; thumbnail ", first_hit);
  EXPECT_LT(evidence, search.out.find("<b>#2</b>")) << "the first hit's thumbnail correlation";
  // Every hit has its level's badge; the rotated copy's original is a
  // match at level copy, first among the matches; the nearest that are not
  // a match come after them.
  EXPECT_EQ(search.out.find("<b>#1</b> <span class=\"level copy\""), first_hit);
  size_t badges = 0;
  for (size_t at = search.out.find("class=\"level "); at != std::string::npos;
       at = search.out.find("class=\"level ", at + 1))
    ++badges;
  EXPECT_EQ(badges, 4u);
  const size_t matches = search.out.find("<h3>matches (");
  const size_t nearest = search.out.find("<h3>nearest, not a match (");
  EXPECT_LT(matches, first_hit);
  ASSERT_NE(nearest, std::string::npos) << HeadingsAndBadges(search.out);
  EXPECT_LT(first_hit, nearest);
  for (const char* level : {"identical", "copy", "part", "view"})
    EXPECT_EQ(search.out.find(std::string("class=\"level ") + level, nearest), std::string::npos)
        << level << " among the nearest";

  const ProcessResult dedup = RunLookalike({"dedup", "--db", *db_, "--format", "html"});
  ASSERT_EQ(dedup.exit_code, 0) << dedup.Describe();
  ExpectSelfContained(dedup.out);
  EXPECT_NE(dedup.out.find("img_000 &lt;copy&gt; &amp; &#39;x&#39;.png"), std::string::npos);
  EXPECT_EQ(dedup.out.find("<copy>"), std::string::npos);
  EXPECT_NE(dedup.out.find(">keep<"), std::string::npos);
  // The copy's level, and its group's, as badges.
  EXPECT_NE(dedup.out.find("&middot; <span class=\"level identical\""), std::string::npos);
  EXPECT_NE(dedup.out.find("<span class=\"level identical\" title=\"the same pixels\">identical"
                           "</span> &middot; score "),
            std::string::npos);
  const std::vector<cv::Mat> members = EmbeddedImages(dedup.out);
  EXPECT_GE(members.size(), 2u);
  for (const cv::Mat& m : members) EXPECT_FALSE(m.empty());
}

// A server of its own: new images are picked up without a restart, and
// SIGTERM stops it cleanly.
TEST(ServeLifecycleTest, PicksUpNewImagesAndStopsOnSigterm) {
  TempDir tmp;
  const std::string root = fs::canonical(tmp.path()).string();
  WriteSyntheticSet(root + "/photos", 6, 900, 320, 240);
  ProcessResult index = RunLookalike(
      {"index", root + "/photos", "--db", root + "/db", "--clusters", "16", "--quiet"});
  ASSERT_EQ(index.exit_code, 0) << index.Describe();
  ServeProcess server(root + "/db", {"--reload-seconds", "0.2"});
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(300, 0);
  auto images = [&]() -> int {
    auto res = client.Get("/api/info");
    return res && res->status == 200 ? json::parse(res->body)["images"].get<int>() : -1;
  };
  EXPECT_EQ(images(), 6);
  // `index` runs beside the server (which holds the database read-only).
  WriteSyntheticSet(root + "/photos/more", 2, 950, 320, 240);
  index = RunLookalike({"index", root + "/photos", "--db", root + "/db", "--quiet"});
  ASSERT_EQ(index.exit_code, 0) << index.Describe();
  EXPECT_TRUE(WaitFor([&] { return images() == 8; })) << "still " << images() << " images";
  // The new images are searchable and have thumbnails.
  const json page = json::parse(client.Get("/api/images?limit=100")->body);
  const uint64_t newest = page["images"].back()["id"];
  const json similar = json::parse(
      client.Get(("/api/images/" + std::to_string(newest) + "/similar?k=2").c_str())->body);
  // Found itself first (left out of its results, which hold the others).
  EXPECT_EQ(similar["self_rank"], 1) << similar.dump();
  EXPECT_EQ(similar["results"].size(), 2u);
  EXPECT_EQ(client.Get(("/api/images/" + std::to_string(newest) + "/thumbnail").c_str())->status,
            200);

  // An indexed file replaced by a link to a file outside the collection,
  // and one rewritten with other bytes: neither is shown or searched.
  const json first = page["images"][0];
  const json second = page["images"][1];
  fs::remove(first["path"].get<std::string>());
  fs::create_symlink("/etc/passwd", first["path"].get<std::string>());
  WriteImage(second["path"].get<std::string>(), MakeSyntheticImage(4242, 320, 240));
  for (const json& m : {first, second}) {
    const std::string id = std::to_string(m["id"].get<uint64_t>());
    for (const std::string& route :
         {"/api/images/" + id + "/thumbnail", "/api/images/" + id + "/similar"}) {
      auto res = client.Get(route.c_str());
      ASSERT_TRUE(res) << route;
      EXPECT_TRUE(res->status == 409 || res->status == 410) << route << ": " << res->status;
      EXPECT_EQ(res->body.find("root:"), std::string::npos) << route;
      EXPECT_EQ(res->get_header_value("Content-Type"), "application/json") << route;
    }
  }

  ::kill(server.child().pid(), SIGTERM);
  const ProcessResult stopped = server.child().Wait();
  EXPECT_EQ(stopped.exit_code, 0) << stopped.Describe();
  EXPECT_NE(stopped.err.find("stopped"), std::string::npos) << stopped.Describe();
}

// A database with one duplicate group (an image and its byte-identical
// copy) for the review tests, each with its own servers.
class ServeReviewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::canonical(tmp_.path()).string();
    const std::vector<std::string> photos = WriteSyntheticSet(root_ + "/photos", 4, 1300, 320, 240);
    fs::copy_file(photos[1], root_ + "/photos/copy.png");
    group_ = {photos[1], root_ + "/photos/copy.png"};
    db_ = root_ + "/db";
    const ProcessResult index =
        RunLookalike({"index", root_ + "/photos", "--db", db_, "--clusters", "16", "--quiet"});
    ASSERT_EQ(index.exit_code, 0) << index.Describe();
  }
  // The group's state through a server's API; its ids in *ids.
  static json Group(httplib::Client& client, const std::set<std::string>& paths,
                    std::vector<uint64_t>* ids = nullptr) {
    auto res = client.Get("/api/dedup");
    if (!res || res->status != 200) return json();
    const json d = json::parse(res->body);
    const json g = GroupOf(d, paths);
    if (ids && !g.is_null()) *ids = MemberIds(g);
    if (d.contains("review_error")) return json{{"review_error", d["review_error"]}};
    return g;
  }
  static httplib::Client ClientOf(const ServeProcess& server) {
    httplib::Client c("127.0.0.1", server.port());
    c.set_read_timeout(300, 0);
    c.set_connection_timeout(30, 0);
    return c;
  }
  // Marks the group (or unmarks it) through a server started with
  // LOOKALIKE_TEST_STOP_AT=stop, which freezes itself in that state of
  // the write; then kills it there. True if it stopped there.
  bool MarkAndKillAt(const std::vector<uint64_t>& ids, bool value, const std::string& stop) {
    ::setenv("LOOKALIKE_TEST_STOP_AT", stop.c_str(), 1);
    ServeProcess server(db_);
    ::unsetenv("LOOKALIKE_TEST_STOP_AT");
    if (server.port() <= 0) return false;
    std::thread post([&] {
      httplib::Client client = ClientOf(server);
      PostJson(client, "/api/dedup/not-duplicates", {{"ids", ids}, {"not_duplicates", value}});
    });
    int status = 0;
    pid_t r;
    do {
      r = ::waitpid(server.child().pid(), &status, WUNTRACED);
    } while (r < 0 && errno == EINTR);
    const bool stopped = r == server.child().pid() && WIFSTOPPED(status);
    ::kill(server.child().pid(), SIGKILL);
    post.join();
    return stopped;
  }
  std::vector<std::string> TempFiles() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(db_))
      if (e.path().filename().string().rfind("review.json.tmp-", 0) == 0) out.push_back(e.path());
    return out;
  }

  TempDir tmp_;
  std::string root_, db_;
  std::set<std::string> group_;
};

TEST_F(ServeReviewTest, MarksSurviveARestartAndAKillAtEveryStepOfTheirWrite) {
  std::vector<uint64_t> ids;
  {
    ServeProcess server(db_);
    ASSERT_GT(server.port(), 0);
    httplib::Client client = ClientOf(server);
    ASSERT_FALSE(Group(client, group_, &ids).is_null());
    auto res =
        PostJson(client, "/api/dedup/not-duplicates", {{"ids", ids}, {"not_duplicates", true}});
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
  }
  auto marked = [&]() -> json {
    ServeProcess server(db_);
    httplib::Client client = ClientOf(server);
    return Group(client, group_).value("not_duplicates", json());
  };
  EXPECT_EQ(marked(), true) << "not remembered after a restart";

  // Killed with the new file written but not renamed: the old decision
  // stands, and the next server removes the killed one's temporary file.
  ASSERT_TRUE(MarkAndKillAt(ids, false, "review-before-rename"));
  EXPECT_EQ(TempFiles().size(), 1u);
  EXPECT_EQ(marked(), true);
  EXPECT_TRUE(TempFiles().empty());
  // Killed after the rename, before the folder's sync: the new decision.
  ASSERT_TRUE(MarkAndKillAt(ids, false, "review-before-folder-sync"));
  EXPECT_EQ(marked(), false);
  EXPECT_TRUE(TempFiles().empty());
  const ProcessResult verify = RunLookalike({"verify", "--db", db_});
  EXPECT_EQ(verify.exit_code, 0) << verify.Describe();
}

TEST_F(ServeReviewTest, ADamagedReviewFileIsReportedAndNeverOverwritten) {
  const std::string damaged = "{\"format\": \"lookalike review\", \"version\": 1, \"not_dup";
  std::ofstream(db_ + "/review.json") << damaged;
  ServeProcess server(db_);
  ASSERT_GT(server.port(), 0);
  httplib::Client client = ClientOf(server);
  const json state = Group(client, group_);
  ASSERT_TRUE(state.contains("review_error")) << state.dump();
  EXPECT_NE(state["review_error"].get<std::string>().find("review.json"), std::string::npos);
  // The groups are still served; a mark is refused, the file left as it was.
  auto res = client.Get("/api/dedup");
  ASSERT_TRUE(res);
  const json g = GroupOf(json::parse(res->body), group_);
  ASSERT_FALSE(g.is_null());
  auto post = PostJson(client, "/api/dedup/not-duplicates",
                       {{"ids", MemberIds(g)}, {"not_duplicates", true}});
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 503) << post->body;
  EXPECT_NE(post->body.find("move it away"), std::string::npos) << post->body;
  EXPECT_EQ(ReadFileBytes(db_ + "/review.json"), damaged);
  // Moved away: marks work again.
  fs::rename(db_ + "/review.json", root_ + "/review.json.bad");
  post = PostJson(client, "/api/dedup/not-duplicates",
                  {{"ids", MemberIds(g)}, {"not_duplicates", true}});
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 200) << post->body;
  EXPECT_EQ(Group(client, group_)["not_duplicates"], true);
}

TEST_F(ServeReviewTest, ReferenceFoldersAreKeptAndNeverExported) {
  // Every image in a reference folder: the group's second member is a
  // reference, never offered for removal.
  ServeProcess server(db_, {"--keep-in", root_ + "/photos", "--level", "identical"});
  ASSERT_GT(server.port(), 0);
  httplib::Client client = ClientOf(server);
  auto res = client.Get("/api/dedup");
  ASSERT_TRUE(res);
  const json d = json::parse(res->body);
  EXPECT_EQ(d["level"], "identical");
  const json g = GroupOf(d, group_);
  ASSERT_FALSE(g.is_null()) << d.dump();
  EXPECT_NE(g["keep_reason"].get<std::string>().find("reference folder"), std::string::npos)
      << g.dump();
  ASSERT_EQ(g["members"][1]["role"], "reference") << g.dump();
  const uint64_t reference = g["members"][1]["id"];
  for (const char* format : {"list", "script"}) {
    auto r = PostJson(client, "/api/dedup/export", {{"ids", {reference}}, {"format", format}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 409) << r->body;
    EXPECT_NE(r->body.find("reference folder"), std::string::npos) << r->body;
  }
}

TEST(ServeLifecycleTest, BadFlagsAreUsageErrors) {
  TempDir tmp;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"serve"},
        {"serve", "--db", tmp / "missing"},
        {"serve", "--db", tmp / "db", "--port", "70000"},
        {"serve", "--db", tmp / "db", "--threads", "-1"},
        {"serve", "--db", tmp / "db", "--request-timeout", "0"},
        {"serve", "--db", tmp / "db", "--level", "similar"},
        {"serve", "--db", tmp / "db", "--keep", "best"}}) {
    const ProcessResult r = RunLookalike(args);
    EXPECT_EQ(r.exit_code, 2) << r.Describe();
    EXPECT_FALSE(r.err.empty());
  }
}

}  // namespace
}  // namespace lookalike
