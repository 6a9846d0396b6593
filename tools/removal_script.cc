#include "tools/removal_script.h"

#include <ostream>

#include "tools/output.h"

namespace lookalike {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

void WriteRemovalList(std::ostream& out, const std::vector<Removal>& removals) {
  for (const Removal& r : removals) out << EscapeField(r.path) << '\n';
}

void WriteRemovalScript(std::ostream& out, const std::vector<Removal>& removals,
                        const std::string& source) {
  out << "#!/bin/sh\n"
      << "# Files offered for removal: " << EscapeField(source) << ".\n"
      << "# Nothing here runs by itself: every rm line is commented out. Read each\n"
      << "# group, delete the '#' in front of the lines you agree with, then run\n"
      << "# this file with sh.\n"
      << "set -eu\n";
  size_t group = 0;
  bool first = true;
  for (const Removal& r : removals) {
    if (first || r.group != group) {
      out << "\n# group " << r.group << ": keep " << EscapeField(r.keeper);
      if (!r.reason.empty()) out << " (" << EscapeField(r.reason) << ")";
      out << '\n';
      group = r.group;
      first = false;
    }
    if (r.path == r.keeper)
      out << "# this is the group's keeper\n";
    else
      out << "# level " << (r.level.empty() ? "unknown" : EscapeField(r.level))
          << " with the keeper" << (r.note.empty() ? "" : ": " + EscapeField(r.note)) << "\n";
    if (r.path.find_first_of("\n\r") != std::string::npos)
      out << "# not listed: its name holds a line break; remove it by hand: " << EscapeField(r.path)
          << '\n';
    else
      out << "#rm -- " << ShellQuote(r.path) << '\n';
  }
  if (removals.empty()) out << "\n# (no files were chosen)\n";
}

}  // namespace lookalike
