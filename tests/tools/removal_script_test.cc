// The removal list and script of the duplicate review: every name, however
// hostile, read back exactly by /bin/sh once the reviewer uncomments its
// line, and nothing in the script runs before that.
#include "tools/removal_script.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/subprocess.h"
#include "tests/test_images.h"

namespace lookalike {
namespace {

using testing::ProcessOptions;
using testing::ProcessResult;
using testing::RunProcess;
using testing::TempDir;

// Names a shell or a line-based reader could trip on.
const std::vector<std::string>& HostileNames() {
  static const std::vector<std::string> names = {
      "/photos/plain.jpg",
      "/photos/it's mine.jpg",
      "/photos/''''.jpg",
      "/photos/$(touch pwned) `touch pwned` ; rm -rf ~ & | > < *.jpg",
      "/photos/back\\slash \\' \\n.jpg",
      "/photos/tab\there.jpg",
      "/photos/-rf",
      "/photos/\xff\xfe not utf-8 \xc3.jpg",
      "/photos/# not a comment.jpg",
      "/photos/caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac.jpg"};
  return names;
}

std::string RunScript(const std::string& script, const TempDir& tmp) {
  const std::string file = tmp / "remove.sh";
  std::ofstream(file, std::ios::binary) << script;
  ProcessOptions o;
  o.argv = {"/bin/sh", file};
  const ProcessResult r = RunProcess(o);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  return r.out;
}

TEST(RemovalScriptTest, ShellQuoteIsReadBackExactly) {
  TempDir tmp;
  std::string script, expected;
  for (const std::string& name : HostileNames()) {
    script += "printf '%s\\0' " + ShellQuote(name) + "\n";
    expected += name + '\0';
  }
  EXPECT_EQ(RunScript(script, tmp), expected);
  EXPECT_EQ(ShellQuote("a'b"), "'a'\\''b'");
  EXPECT_EQ(ShellQuote(""), "''");
}

TEST(RemovalScriptTest, NothingRunsUntilALineIsUncommented) {
  TempDir tmp;
  std::vector<Removal> removals;
  for (const std::string& name : HostileNames())
    removals.push_back(
        {2, name, "/photos/keep 'me'.jpg", "copy", "the original; no border", "a crop"});
  removals.push_back({2, "/photos/keep 'me'.jpg", "/photos/keep 'me'.jpg", "", "the original", ""});
  removals.push_back({5, "/photos/line\nbreak.jpg", "/photos/k\neeper.jpg", "identical",
                      "reason with a\nline break", "note with a\nline break"});
  std::ostringstream out;
  WriteRemovalScript(out, removals, "a test\nwith a line break");
  const std::string script = out.str();
  // As written, only `set -eu` runs: every other line is a comment.
  std::istringstream lines(script);
  int rm_lines = 0, groups = 0;
  for (std::string line; std::getline(lines, line);) {
    EXPECT_TRUE(line.empty() || line[0] == '#' || line == "set -eu") << line;
    rm_lines += line.rfind("#rm -- ", 0) == 0;
    groups += line.rfind("# group ", 0) == 0;
  }
  EXPECT_EQ(rm_lines, static_cast<int>(HostileNames().size()) + 1);
  EXPECT_EQ(groups, 2);
  EXPECT_NE(script.find("# group 2: keep /photos/keep 'me'.jpg (the original; no border)"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("# level copy with the keeper: a crop\n"), std::string::npos);
  EXPECT_NE(script.find("with the keeper: note with a\\nline break\n"), std::string::npos);
  EXPECT_NE(script.find("# this is the group's keeper"), std::string::npos);
  // The name with a line break could not be commented out: no rm line.
  EXPECT_NE(script.find("remove it by hand: /photos/line\\nbreak.jpg"), std::string::npos);
  EXPECT_EQ(RunScript(script, tmp), "");

  // Every rm line uncommented (with rm made a printer): each name exactly.
  std::string reviewed = script;
  const std::string rm = "\n#rm -- ";
  for (size_t at = 0; (at = reviewed.find(rm, at)) != std::string::npos;)
    reviewed.replace(at, rm.size(), "\nprintf '%s\\0' ");
  std::string expected;
  for (const std::string& name : HostileNames()) expected += name + '\0';
  expected += std::string("/photos/keep 'me'.jpg") + '\0';
  EXPECT_EQ(RunScript(reviewed, tmp), expected);
}

TEST(RemovalScriptTest, ListHasOneEscapedPathPerLine) {
  std::ostringstream out;
  WriteRemovalList(out, {{1, "/a/b c.jpg", "/a/k.jpg", "", "", ""},
                         {1, "/a/line\nbreak\\.jpg", "/a/k.jpg", "", "", ""}});
  EXPECT_EQ(out.str(), "/a/b c.jpg\n/a/line\\nbreak\\\\.jpg\n");
  std::ostringstream none;
  WriteRemovalScript(none, {}, "nothing");
  EXPECT_NE(none.str().find("no files were chosen"), std::string::npos);
}

}  // namespace
}  // namespace lookalike
