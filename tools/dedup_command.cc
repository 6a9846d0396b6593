// `lookalike dedup`: near-duplicate groups of a database.
#include <cstdio>
#include <ostream>
#include <stdexcept>
#include <string>

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
    "usage: lookalike dedup --db DB [--threshold T] [--neighbours K]\n"
    "                           [--format tsv|json|pairs|html]\n\n"
    "Finds groups of near-duplicate images in a database: the same picture re-encoded,\n"
    "resized, cropped, rotated, recoloured or with an overlay (not other photos of the\n"
    "same scene). Each image's nearest neighbours by search vector are its\n"
    "candidates, each candidate pair is verified with a RANSAC homography over the\n"
    "stored keypoints, and verified pairs are joined into groups. Byte-identical\n"
    "files always group.\n"
    "Only groups of two or more images are printed; groups are ordered by their\n"
    "smallest path, members by pixels, then file size (largest first: the first\n"
    "member is the one to keep), then path. A member's score is the best score of a\n"
    "duplicate pair joining it to its group (1 = byte-identical).\n\n";

struct DedupCommandOptions {
  DedupOptions dedup;
  std::string db;
  OutputFormat format = OutputFormat::kTsv;
  bool verbose = false;
};

void DeclareFlags(FlagGroup* g, DedupCommandOptions* c) {
  const DedupOptions d;
  DedupOptions* o = &c->dedup;
  g->Help();
  g->Path("db", &c->db, "database folder built by 'lookalike index'");
  g->Number("threshold", &o->threshold, d.threshold,
            "pair score (share of the poorer image's keypoints that are homography inliers) a "
            "verified pair needs to count as a duplicate, (0, 1]");
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
  g->Value("min-inliers", &o->min_inliers, d.min_inliers, "RANSAC inliers a duplicate pair needs");
  DeclareVerifyFlags(g, &o->verify, d.verify);
  g->Number("min-spread", &o->min_spread, d.min_spread,
            "share of one image's area the inliers' convex hull must cover (a shared logo or "
            "caption covers little)");
  g->Text("format", "tsv",
          "tsv (group<TAB>path<TAB>score, one line per member) | json (one object per group per "
          "line) | pairs (one line per candidate pair, tab-separated: path a, path b, "
          "similarity, matches, inliers, score, spread, duplicate 0/1) | html (one self-contained "
          "page of thumbnails, the member to keep marked)",
          [c](const std::string& v) {
            c->format = ParseFormat(v, {OutputFormat::kTsv, OutputFormat::kJson,
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
  if (c.verbose) {
    size_t grouped = 0;
    for (const DedupGroup& group : r.groups) grouped += group.members.size();
    char timing[96];
    std::snprintf(timing, sizeof timing, "search %.4f s, verification %.4f s", r.search_seconds,
                  r.verify_seconds);
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
