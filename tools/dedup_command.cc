// `lookalike dedup`: duplicate groups of a database, and acting on them
// (lists and a script of what to remove, moving duplicates away, undoing it).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>

#include "indexer/file_walker.h"
#include "search/dedup.h"
#include "storage/store.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/dedup_export.h"
#include "tools/dedup_flags.h"
#include "tools/dedup_move.h"
#include "tools/flags.h"
#include "tools/html_report.h"
#include "tools/output.h"
#include "tools/verify_flags.h"

namespace lookalike {
namespace {

constexpr char kUsage[] =
    "usage: lookalike dedup --db DB [--level copy] [--keep original] [--keep-in DIR]...\n"
    "                           [--format table|tsv|json|pairs|html]\n"
    "                           [--remove-list FILE] [--remove-script FILE] [--move-to DIR]\n"
    "       lookalike dedup --undo MANIFEST|DIR\n\n"
    "Finds groups of duplicate images in a database. Each image's nearest neighbours\n"
    "by search vector are its candidates; each candidate pair is verified with a\n"
    "RANSAC homography over the stored keypoints and given a match level: identical\n"
    "(the same bytes), copy (the same picture edited: re-encoded, resized, cropped a\n"
    "little, rotated, mirrored, recoloured), part (one shows a part of the other) or\n"
    "view (another shot of the same scene). A group is a keeper and the images each\n"
    "directly at --level or above with it, never a chain of pairs. --level view\n"
    "finds similar shots (bursts, stereo pairs, video frames), not duplicates.\n"
    "The keeper is chosen by --keep (original: the image the others are edits of;\n"
    "files under --keep-in folders are always kept); every member shows its role\n"
    "(keep, reference, duplicate), its level with the keeper and why it is not kept.\n\n"
    "Acting on it: --remove-list and --remove-script write what could be removed\n"
    "(the script has every rm commented out, for review); --move-to DIR moves the\n"
    "duplicates into DIR under their paths relative to the groups' common folder,\n"
    "logging each move in DIR/lookalike-moves.tsv first, and --undo DIR puts them\n"
    "back. A killed move or undo is finished by running the same command again.\n"
    "After moving, 'lookalike index' removes the moved files' records.\n\n";

struct DedupCommandOptions {
  DedupOptions dedup;
  std::string db;
  OutputFormat format = OutputFormat::kTable;
  std::string remove_list, remove_list0, remove_script, move_to, undo;
  bool verbose = false;
};

void DeclareFlags(FlagGroup* g, DedupCommandOptions* c) {
  const DedupOptions d;
  DedupOptions* o = &c->dedup;
  g->Help();
  g->Path("db", &c->db, "database folder built by 'lookalike index'");
  DeclareDedupGroupFlags(g, o);
  g->Number("threshold", &o->threshold, d.threshold,
            "pair score (share of the poorer image's keypoints that are homography inliers) a "
            "pair needs to be verified, (0, 1]");
  g->Value("neighbours", &o->neighbours, d.neighbours,
           "candidates of each image: its N nearest neighbours by search vector, 1..1000 "
           "(more finds copies ranked behind look-alikes, costs more verifications)");
  g->Number("min-similarity", &o->min_similarity, d.min_similarity,
            "search-vector cosine similarity a neighbour needs to be verified at all");
  g->Text("index-kind", VectorIndexKindName(d.index_kind),
          "index the neighbours come from: flat (exact over the stored search vectors, "
          "n^2 x d) | auto (the database's search index, as search uses it: ivfsq from 20,000 "
          "images, see index --index-threshold) | ivfsq (approximate; built in memory if the "
          "database keeps a flat index)",
          [o](const std::string& v) {
            try {
              o->index_kind = ParseVectorIndexKind(v);
            } catch (const std::invalid_argument& e) {
              throw std::invalid_argument(std::string("--index-kind: ") + e.what());
            }
          });
  g->Value("nprobe", &o->nprobe, d.nprobe,
           "lists an ivfsq index visits per image (0 = as stored with the index; fewer is "
           "faster and may miss copies)");
  g->Value("mirrored", &o->mirrored, d.mirrored,
           "also search each image's mirror image (its stored features mirrored, not extracted "
           "again) and verify those pairs mirrored: finds mirrored copies (0 = off)");
  g->Value("min-inliers", &o->min_inliers, d.min_inliers, "RANSAC inliers a verified pair needs");
  DeclareVerifyFlags(g, &o->verify, d.verify);
  g->Number("min-spread", &o->min_spread, d.min_spread,
            "share of one image's area the inliers' convex hull must cover (a shared logo or "
            "caption covers little)");
  g->Text("format", "table",
          "table (one block per group) | tsv (group<TAB>path<TAB>score<TAB>role<TAB>level<TAB>"
          "reason, one line per member) | json (one object per group per line) | pairs (one "
          "line per candidate pair, tab-separated: path a, path b, similarity, matches, "
          "inliers, score, spread, duplicate 0/1, level, aligned correlation, overlap a, overlap "
          "b, mirrored 0/1) | html (one self-contained page of "
          "thumbnails, the keeper marked)",
          [c](const std::string& v) {
            c->format =
                ParseFormat(v, {OutputFormat::kTable, OutputFormat::kTsv, OutputFormat::kJson,
                                OutputFormat::kPairs, OutputFormat::kHtml});
          });
  g->Path("remove-list", &c->remove_list,
          "also write the paths offered for removal (role duplicate) to FILE, one per line");
  g->Path("remove-list0", &c->remove_list0,
          "the same, each path followed by a NUL byte (for xargs -0; any file name)");
  g->Path("remove-script", &c->remove_script,
          "also write a shell script to review: every duplicate as a commented-out rm line "
          "with its keeper, level and reason");
  g->Path("move-to", &c->move_to,
          "move the duplicates into DIR (created if missing) under their paths relative to the "
          "groups' common folder, each logged first in DIR/lookalike-moves.tsv");
  g->Path("undo", &c->undo,
          "put back every file a --move-to moved (its DIR, or the manifest file); no --db");
  g->Switch("verbose,v", &c->verbose, "print counts and timings on stderr");
}

// The deepest folder holding every member of every group.
std::string CommonFolder(const DedupResult& r) {
  std::string common;
  bool first = true;
  for (const DedupGroup& g : r.groups)
    for (const DedupMember& m : g.members) {
      const std::string dir = m.path.substr(0, m.path.rfind('/'));
      if (first) {
        common = dir;
        first = false;
        continue;
      }
      while (!common.empty() && !IsUnder(dir, common)) common.erase(common.rfind('/'));
    }
  return common.empty() ? "/" : common;
}

void WriteFile(const std::string& path, const std::function<void(std::ostream&)>& write) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  write(file);
  file.flush();
  if (!file) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
}

int ReportMoves(const MoveReport& m, const char* what, std::ostream& err) {
  for (const std::string& p : m.problems)
    err << "lookalike: not " << what << ": " << EscapeField(p) << "\n";
  err << "lookalike: " << m.moved << " files " << what << ", " << m.already
      << " found done by an earlier run, " << m.problems.size() << " left where they were ("
      << EscapeField(m.manifest) << ")\n";
  return m.problems.empty() ? kExitOk : kExitPartial;
}

}  // namespace

int RunDedupCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  DedupCommandOptions c;
  FlagGroup opts("options");
  DeclareFlags(&opts, &c);
  const ParsedArgs parsed = ParseArgs(args, {&opts}, {}, {});
  if (parsed.help) {
    PrintHelp(out, kUsage, {&opts});
    return kExitOk;
  }
  if (!c.undo.empty()) {
    if (!c.db.empty() || !c.move_to.empty() || !c.remove_list.empty() || !c.remove_list0.empty() ||
        !c.remove_script.empty())
      throw UsageError(
          "--undo takes no --db, --move-to or export flags: it only replays a "
          "manifest");
    MoveReport m;
    try {
      m = UndoMoves(AbsolutePath(c.undo));
    } catch (const std::runtime_error& e) {
      err << "lookalike: " << e.what() << "\n";
      return kExitFatal;
    }
    return ReportMoves(m, "put back", err);
  }
  if (c.db.empty()) throw UsageError("missing --db DB: the database to deduplicate");
  for (std::string& dir : c.dedup.keep_in) dir = AbsolutePath(dir);
  const std::string move_to = c.move_to.empty() ? "" : AbsolutePath(c.move_to);
  for (const std::string& dir : c.dedup.keep_in)
    if (!move_to.empty() && IsUnder(move_to, dir))
      throw UsageError("--move-to " + move_to + " is inside the reference folder " + dir);
  auto store =
      Store::Open(c.db, Store::Mode::kReadOnly);  // read-only: a usage error changes nothing
  DedupResult r;
  try {
    r = FindDuplicates(*store, c.dedup);  // validates the options, once
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (c.format == OutputFormat::kHtml)
    WriteDedupHtml(out, r, *store, ImageFileLimits());
  else
    WriteDedup(out, r, c.format);
  out.flush();
  int status = kExitOk;
  if (r.num_unverified > 0)
    err << "lookalike: warning: " << r.num_unverified
        << " candidate pairs could not be verified (images indexed without stored keypoints); "
           "index the folder into a new --db to check them\n";
  if (r.num_unread > 0)
    err << "lookalike: note: " << r.num_unread
        << " grouped images could not be read or changed since they were indexed; their keeper "
           "was chosen from the database's records (pixels, time, path)\n";
  try {
    if (!c.remove_list.empty())
      WriteFile(c.remove_list, [&](std::ostream& f) {
        for (const std::string& p : WriteRemoveList(f, r, false)) {
          err << "lookalike: left out of " << c.remove_list << " (its name holds a newline; use "
              << "--remove-list0): " << EscapeField(p) << "\n";
          status = kExitPartial;
        }
      });
    if (!c.remove_list0.empty())
      WriteFile(c.remove_list0, [&](std::ostream& f) { WriteRemoveList(f, r, true); });
    if (!c.remove_script.empty())
      WriteFile(c.remove_script, [&](std::ostream& f) {
        WriteRemovalScript(f, DuplicateRemovals(r),
                           "lookalike dedup of " + AbsolutePath(c.db) + ", " +
                               DedupModeName(r.level) + " at level " + MatchLevelName(r.level) +
                               " or above, keep rule " + KeepRuleName(r.keep));
      });
    if (!move_to.empty()) {
      MoveRequest request;
      request.to_dir = move_to;
      request.root = CommonFolder(r);
      request.keep_in = c.dedup.keep_in;
      for (const DedupGroup& g : r.groups)
        for (const DedupMember& m : g.members) {
          if (m.role == MemberRole::kDuplicate)
            request.items.push_back(MoveItem{m.path, m.size_bytes, m.mtime_ns});
          else
            request.keepers.push_back(m.path);
        }
      if (IsUnder(move_to, request.root))
        err << "lookalike: note: " << move_to << " is inside " << request.root
            << ": the next 'index' of that folder indexes the moved files again there\n";
      const int moved = ReportMoves(MoveFiles(request), "moved", err);
      if (moved != kExitOk) status = moved;
    }
  } catch (const std::runtime_error& e) {
    err << "lookalike: " << e.what() << "\n";
    return kExitFatal;
  }
  if (c.verbose) {
    size_t grouped = 0;
    for (const DedupGroup& group : r.groups) grouped += group.members.size();
    char timing[128];
    std::snprintf(timing, sizeof timing, "search %.4f s, verification %.4f s, keepers %.4f s",
                  r.search_seconds, r.verify_seconds, r.keep_seconds);
    char index_mib[32];
    std::snprintf(index_mib, sizeof index_mib, "%.1f MiB",
                  static_cast<double>(r.index_bytes) / (1 << 20));
    err << "lookalike: " << r.num_images << " images (" << r.num_without_features
        << " without features), " << r.candidates.size() << " candidate pairs ("
        << r.num_mirror_candidates << " found by mirror images, " << r.num_mirrored
        << " mirrored at a level), " << r.groups.size() << " groups holding " << grouped
        << " images; neighbours from " << r.index_description << " (" << index_mib << "); "
        << timing << "\n";
  }
  return status;
}

}  // namespace lookalike
