// What to remove after reviewing duplicate groups, as a plain list or as a
// shell script that a person reads before running: nothing in it runs by
// itself (every `rm` is commented out, with the group's keeper, the match
// level and the reason the keeper is kept above it). The web page's export
// writes these; `ShellQuote` is the one shell quoting of the code base.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

namespace lookalike {

struct Removal {
  size_t group = 0;    // the duplicate group's number, from 1
  std::string path;    // the file offered for removal
  std::string keeper;  // its group's keeper (the path itself if the keeper was chosen)
  std::string level;   // match level with the keeper ("identical", "copy", ...); "" = unknown
  std::string reason;  // why the keeper is kept; "" = not given
  std::string note;    // why this file is not the keeper; "" = not given
};

// `s` as one POSIX shell word: in single quotes, each ' written as '\''.
// Any byte but NUL survives.
std::string ShellQuote(const std::string& s);

// One path per line, escaped as the TSV outputs are (tools/output.h,
// EscapeField: backslash, tab and line breaks as \\, \t, \n), in the order
// given.
void WriteRemovalList(std::ostream& out, const std::vector<Removal>& removals);

// A /bin/sh script: a header saying what it is (`source`: where the list
// came from), then per group a comment naming the keeper and its reason,
// and per file a comment with its level (and note) and a commented-out
// `#rm -- 'path'`. Comments hold escaped text only, so no name can end a
// comment line; a path with a line break gets no rm line (it could not be
// commented out), only a note to remove it by hand.
void WriteRemovalScript(std::ostream& out, const std::vector<Removal>& removals,
                        const std::string& source);

}  // namespace lookalike
