// `lookalike search`: encode each query with the database's model and rank.
#include <malloc.h>

#include <ostream>

#include "search/searcher.h"
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
    "usage: lookalike search --db DB QUERY... [options]\n\n"
    "Ranks the indexed images by similarity to each QUERY (an image file or a\n"
    "folder of images). Queries are encoded with the database's own settings.\n\n";

struct SearchCommandOptions {
  SearchOptions search;
  std::string db;
  std::vector<std::string> queries;
  OutputFormat format = OutputFormat::kTable;
  bool verbose = false;
};

void DeclareFlags(FlagGroup* g, SearchCommandOptions* c) {
  const SearchOptions d;
  SearchOptions* o = &c->search;
  g->Help();
  g->Path("db", &c->db, "database folder built by 'lookalike index'");
  g->Value(",k", &o->k, d.k, "results per query");
  g->Text("format", "table",
          "table | tsv (query<TAB>rank<TAB>path<TAB>score<TAB>level, one line per hit) | json "
          "(one object "
          "per query per line) | html (one self-contained page with thumbnails)",
          [c](const std::string& v) {
            c->format = ParseFormat(v, {OutputFormat::kTable, OutputFormat::kTsv,
                                        OutputFormat::kJson, OutputFormat::kHtml});
          });
  g->Text("backend", BackendName(d.backend), "VLAD encoder: auto | cpu | cuda",
          [o](const std::string& v) { o->backend = ParseBackend(v); });
  g->Text("min-level", MatchLevelName(d.min_level),
          "keep only hits at or above this match level: none (all) | view | part | copy | "
          "identical (README, \"Match levels\")",
          [o](const std::string& v) { o->min_level = ParseMatchLevel(v); });
  g->Value("rerank", &o->rerank.depth, d.rerank.depth,
           "spatially verify the top N results against the query (0 = off; -1 = 50, or 20 when "
           "a visual-word index's head is verified too)");
  g->Value("rerank-vlad", &o->rerank.vlad_depth, d.rerank.vlad_depth,
           "also verify the top N results by VLAD similarity alone, wherever colour put them "
           "(0 = off; -1 = 25 when no visual-word index's head is verified, else 0)");
  g->Value("rerank-words", &o->rerank.word_depth, d.rerank.word_depth,
           "also verify the top N results of the visual-word index (shared local features), "
           "wherever the global order put them (0 = off)");
  g->Value("word-postings", &o->rerank.word_postings, d.rerank.word_postings,
           "read at most N postings of the visual-word index per query: its most selective "
           "words first, the commonest skipped (0 = all)");
  g->Value("min-inliers", &o->rerank.min_inliers, d.rerank.min_inliers,
           "RANSAC inliers a result needs to count as verified");
  g->Value("min-consistent", &o->rerank.min_consistent, d.rerank.min_consistent,
           "of a verified result's inliers, how many must agree on one change of orientation "
           "and size (0 = any)");
  g->Value("weak-inliers", &o->rerank.weak_inliers, d.rerank.weak_inliers,
           "a result that is not verified but has this many inliers or more counts (scored by "
           "its inliers, without a level) when --weak-consistent of them turn and scale alike "
           "(0 = off)");
  g->Value("weak-consistent", &o->rerank.weak_consistent, d.rerank.weak_consistent,
           "inliers of a --weak-inliers result that must agree on one change of orientation "
           "and size");
  g->Value("verify-keypoints", &o->rerank.verify_keypoints, d.rerank.verify_keypoints,
           "match at most the query's N strongest local features in verification (0 = all)");
  DeclareVerifyFlags(g, &o->rerank.verify, d.rerank.verify);
  g->Number("thumbnail-weight", &o->thumbnail.weight, d.thumbnail.weight,
            "weight, in [0, 1], of the evidence of an unverified result whose thumbnail "
            "correlates with the query's above 0.86, the query placed as a crop (0 = off)");
  g->Value("thumbnail-depth", &o->thumbnail.depth, d.thumbnail.depth,
           "results whose thumbnails are correlated with the query's, besides the colour "
           "candidates");
  g->Value("thumbnail-candidates", &o->thumbnail.candidates, d.thumbnail.candidates,
           "also correlate the thumbnails of the N images of the whole collection whose "
           "8 x 8 tiny image is most like the query's, wherever VLAD ranked them (0 = off)");
  g->Value("pasted-views", &o->pasted_views, d.pasted_views,
           "search a query that is a picture pasted onto a uniform border (rotated, in "
           "perspective) and verifies nothing as it is again with the picture rectified, adding "
           "the results that have evidence of their own (0 = off)");
  g->Value("mirrored", &o->mirrored, d.mirrored,
           "also search the query's mirror image (its features mirrored, not extracted "
           "again), adding the verified results: finds mirrored copies (0 = off)");
  g->Value("expansion", &o->expansion.results, d.expansion.results,
           "query expansion from up to N verified results (0 = off)");
  g->Value("hubs", &o->expansion.hubs, d.expansion.hubs,
           "also verify unverified results against the first N verified as another view or "
           "a part (the mirror image's included); a result verified through one gains the "
           "weaker link's evidence, ranks below it and gets no level (0 = off)");
  g->Value("hub-depth", &o->expansion.hub_depth, d.expansion.hub_depth,
           "unverified results verified through the --hubs");
  g->Value(
      "hub-inliers", &o->expansion.hub_inliers, d.expansion.hub_inliers,
      "the least inliers a hub is verified with that turn and scale alike (0 = --min-inliers)");
  g->Value("hub-neighbours", &o->expansion.hub_neighbours, d.expansion.hub_neighbours,
           "also verify each hub's N nearest images in the vector index against it, wherever "
           "the query's list ranks them (0 = off)");
  g->Value("hub-steps", &o->expansion.hub_steps, d.expansion.hub_steps,
           "how far verification through hubs chains: 2 = a result raised through a hub with "
           "--hub-inliers inliers that turn and scale alike is a hub too, 1 = only verified "
           "results are hubs");
  g->Number("colour-weight", &o->fusion.colour_weight, d.fusion.colour_weight,
            "weight of the colour similarity added to the VLAD similarity, in units of the "
            "robust spread (1.4826 x median absolute deviation) of the VLAD similarities over "
            "the candidates (0 = off)");
  g->Value("colour-depth", &o->fusion.colour_depth, d.fusion.colour_depth,
           "VLAD results whose colour is compared with the query's");
  g->Value("colour-candidates", &o->fusion.colour_candidates, d.fusion.colour_candidates,
           "also compare the N images of the whole collection whose colour is most like the "
           "query's, wherever VLAD ranked them (0 = off)");
  g->Number("word-weight", &o->fusion.word_weight, d.fusion.word_weight,
            "weight of the visual-word similarity (over the query's best) added to the VLAD "
            "similarity, in the colour weight's units (0 = off)");
  g->Value("word-fusion-min-images", &o->fusion.word_min_images, d.fusion.word_min_images,
           "fuse the visual-word similarity only in collections of N images or more; below, "
           "the word list's head is verified only (0 = at any size)");
  g->Value("word-assignments", &o->fusion.word_assignments, d.fusion.word_assignments,
           "assign each query feature to up to N of the nearest visual words (within 1.2 times "
           "the nearest's distance) when searching the visual-word index (1 = the nearest only)");
  g->Value("nprobe", &o->index.nprobe, d.index.nprobe,
           "lists an approximate (ivfsq) index visits per query (0 = as stored with the index; "
           "more is slower and more exact)");
  g->Switch("verbose,v", &c->verbose, "print the backend and the number of indexed images");
}

}  // namespace

int RunSearchCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  SearchCommandOptions c;
  FlagGroup opts("options");
  DeclareFlags(&opts, &c);
  boost::program_options::options_description hidden;
  hidden.add_options()("query", boost::program_options::value(&c.queries)->composing());
  const ParsedArgs parsed = ParseArgs(args, {&opts}, hidden, {{"query", -1}});
  if (parsed.help) {
    PrintHelp(out, kUsage, {&opts});
    return kExitOk;
  }
  if (c.db.empty()) throw UsageError("missing --db DB: the database to search");
  if (c.queries.empty()) throw UsageError("missing QUERY: one or more image files or folders");
  std::vector<FileError> errors;
  const std::vector<std::string> paths = ExpandQueryPaths(c.queries, &errors);
  // One image is searched once: its colour and tiny-image candidates are
  // read from the persisted index rather than held (at 1,000,000 images
  // 208 MB less; search/search_index.md, "The in-memory tables").
  c.search.tables_in_memory = paths.size() > 1;
#ifdef __GLIBC__
  // And in one malloc arena: the threads' own arenas keep what they freed,
  // 25-35 MB of a one-shot search's peak at 1,000,000 images; its CPU time
  // did not change (bench/results/2026-11-29-search-one-shot-memory.md).
  if (!c.search.tables_in_memory) mallopt(M_ARENA_MAX, 1);
#endif
  std::unique_ptr<Searcher> searcher;
  try {
    searcher = Searcher::Open(c.db, c.search);  // validates the options, once
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (c.verbose)
    err << "lookalike: backend " << BackendName(searcher->backend()) << " ("
        << ProbeBackends().detail << "); " << searcher->num_indexed() << " images searchable\n";
  const std::vector<QueryResult> results = searcher->SearchFiles(paths);
  int failed = static_cast<int>(errors.size());
  for (const FileError& e : errors)
    err << "lookalike: query skipped: " << EscapeField(e.path) << ": " << FileErrorCodeName(e.code)
        << ": " << e.message << "\n";
  for (const QueryResult& r : results) {
    if (r.error && r.error->code != FileErrorCode::kNoFeatures) {
      ++failed;
      err << "lookalike: query skipped: " << EscapeField(r.query) << ": "
          << FileErrorCodeName(r.error->code) << ": " << r.error->message << "\n";
      if (c.format != OutputFormat::kHtml) WriteQueryError(out, r, c.format);
      continue;
    }
    if (r.error)
      err << "lookalike: warning: " << EscapeField(r.query)
          << ": no keypoints found, so nothing can match it\n";
    if (c.format != OutputFormat::kHtml) WriteQueryResult(out, r, c.format);
  }
  if (c.format == OutputFormat::kHtml)
    WriteSearchHtml(out, results, *Store::Open(c.db, Store::Mode::kReadOnly), c.search.limits);
  out.flush();
  return failed > 0 ? kExitPartial : kExitOk;
}

}  // namespace lookalike
