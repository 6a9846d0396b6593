#include "tools/dedup_export.h"

#include <ostream>

namespace lookalike {

std::vector<std::string> WriteRemoveList(std::ostream& out, const DedupResult& r, bool nul) {
  std::vector<std::string> left_out;
  for (const DedupGroup& g : r.groups)
    for (const DedupMember& m : g.members) {
      if (m.role != MemberRole::kDuplicate) continue;
      if (!nul && m.path.find('\n') != std::string::npos) {
        left_out.push_back(m.path);
        continue;
      }
      out << m.path << (nul ? '\0' : '\n');
    }
  return left_out;
}

std::vector<Removal> DuplicateRemovals(const DedupResult& r) {
  std::vector<Removal> removals;
  for (size_t g = 0; g < r.groups.size(); ++g) {
    const DedupGroup& group = r.groups[g];
    for (const DedupMember& m : group.members) {
      if (m.role != MemberRole::kDuplicate) continue;
      Removal removal;
      removal.group = g + 1;
      removal.path = m.path;
      removal.keeper = group.members.front().path;
      removal.level = MatchLevelName(m.level);
      removal.reason = group.keep_reason;
      removal.note = m.reason;
      removals.push_back(std::move(removal));
    }
  }
  return removals;
}

}  // namespace lookalike
