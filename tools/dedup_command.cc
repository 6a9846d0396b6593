// `lookalike dedup`: duplicate groups of a database.
#include <cstdio>
#include <ostream>
#include <stdexcept>
#include <string>

#include "indexer/file_walker.h"
#include "search/dedup.h"
#include "storage/store.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/html_report.h"
#include "tools/output.h"
#include "tools/verify_flags.h"

namespace lookalike {
namespace {

constexpr char kUsage[] =
    "usage: lookalike dedup --db DB [--level copy] [--keep original] [--keep-in DIR]...\n"
    "                           [--format table|tsv|json|pairs|html]\n\n"
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
    "(keep, reference, duplicate), its level with the keeper and why it is not kept.\n\n";

struct DedupCommandOptions {
  DedupOptions dedup;
  std::string db;
  OutputFormat format = OutputFormat::kTable;
  bool verbose = false;
};

void DeclareFlags(FlagGroup* g, DedupCommandOptions* c) {
  const DedupOptions d;
  DedupOptions* o = &c->dedup;
  g->Help();
  g->Path("db", &c->db, "database folder built by 'lookalike index'");
  g->Text("level", MatchLevelName(d.level),
          "weakest match level of a group's pairs: identical (the same bytes) | copy (the same "
          "picture edited) | part (one shows a part of the other) | view (another shot of the "
          "same scene: similar shots, not duplicates)",
          [o](const std::string& v) {
            try {
              o->level = ParseMatchLevel(v);
            } catch (const std::invalid_argument& e) {
              throw std::invalid_argument(std::string("--level: ") + e.what());
            }
          });
  g->Text("keep", KeepRuleName(d.keep),
          "which member of a group to keep: original (the one the others are edits of: "
          "the most picture, then resolution, colour, tones, EXIF, the least lossy encoding; "
          "then pixels, the oldest, the shortest path) | newest | oldest (modification time) | "
          "largest (pixels, then file size) | path (the shortest path)",
          [o](const std::string& v) {
            try {
              o->keep = ParseKeepRule(v);
            } catch (const std::invalid_argument& e) {
              throw std::invalid_argument(std::string("--keep: ") + e.what());
            }
          });
  g->Paths("keep-in", &o->keep_in,
           "reference folder (repeatable): its images are always kept, keep their group, and are "
           "never offered for removal or moved");
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
          "b) | html (one self-contained page of "
          "thumbnails, the keeper marked)",
          [c](const std::string& v) {
            c->format =
                ParseFormat(v, {OutputFormat::kTable, OutputFormat::kTsv, OutputFormat::kJson,
                                OutputFormat::kPairs, OutputFormat::kHtml});
          });
  g->Switch("verbose,v", &c->verbose, "print counts and timings on stderr");
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
  if (c.db.empty()) throw UsageError("missing --db DB: the database to deduplicate");
  for (std::string& dir : c.dedup.keep_in) dir = AbsolutePath(dir);
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
  if (r.num_unverified > 0)
    err << "lookalike: warning: " << r.num_unverified
        << " candidate pairs could not be verified (images indexed without stored keypoints); "
           "index the folder into a new --db to check them\n";
  if (r.num_unread > 0)
    err << "lookalike: note: " << r.num_unread
        << " grouped images could not be read or changed since they were indexed; their keeper "
           "was chosen from the database's records (pixels, time, path)\n";
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
        << " without features), " << r.candidates.size() << " candidate pairs, " << r.groups.size()
        << " groups holding " << grouped << " images; neighbours from " << r.index_description
        << " (" << index_mib << "); " << timing << "\n";
  }
  return kExitOk;
}

}  // namespace lookalike
