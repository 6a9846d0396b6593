// `lookalike index`: the indexer's BuildIndex, then the search-index update.
// The two are composed here, one floor above both (the indexer never
// includes search/).
#include <malloc.h>

#include <chrono>
#include <fstream>
#include <ostream>
#include <set>

#include "indexer/pipeline.h"
#include "indexer/projection.h"
#include "indexer/search_vectors.h"
#include "search/search_index.h"
#include "storage/store.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/model_flags.h"
#include "tools/output.h"
#include "tools/progress.h"
#include "util/threads.h"

namespace lookalike {
namespace {

constexpr char kUsage[] =
    "usage: lookalike index DIR --db DB [options]\n\n"
    "Indexes every image under DIR (recursively; JPEG, PNG, WebP, TIFF, BMP, PNM,\n"
    "recognised by content). Re-running updates the index: unchanged files are\n"
    "skipped without decoding, changed and new files are encoded with the stored\n"
    "codebook, records of deleted files are removed. With --model-from BASE the\n"
    "model is copied from BASE instead of learned; with --shard I/N only the files\n"
    "whose relative path hashes to shard I are indexed (see 'lookalike merge').\n\n";

// Everything `index` takes: the indexer's options, the search index kept
// with the database, and what the command itself prints or writes.
struct IndexCommandOptions {
  IndexOptions index;
  VectorIndexOptions search_index;
  OutputFormat format = OutputFormat::kTable;
  std::string errors_path, committed_path;
  double max_file_mb = 0;
  bool verbose = false, quiet = false;
  std::string backend_name;
};

void DeclareRunFlags(FlagGroup* g, IndexCommandOptions* c) {
  const IndexOptions d;
  const VectorIndexOptions ds;
  IndexOptions* o = &c->index;
  g->Help();
  g->Path("db", &o->db_path, "database folder (created if missing)");
  g->Path("model-from", &o->model_from,
          "create the database with the model of BASE (from 'lookalike train') instead of "
          "training one; an existing database must have that model");
  g->Text("shard", "",
          "index only shard I of N (I/N, 0 <= I < N) of DIR's files; needs "
          "--model-from",
          [o](const std::string& v) { ParseShard(v, &o->shard_index, &o->num_shards); });
  g->Value("threads", &o->threads, d.threads, "decode/extract threads (0 = all cores)");
  g->Value("batch", &o->batch_images, d.batch_images, "images per encoder batch");
  g->Text("backend", BackendName(d.backend), "VLAD encoder: auto | cpu | cuda",
          [c](const std::string& v) {
            c->backend_name = v;
            c->index.backend = ParseBackend(v);
          });
  g->Number("max-file-mb", &c->max_file_mb,
            static_cast<double>(d.limits.max_file_bytes) / (1 << 20),
            "skip files larger than this (FILE_TOO_LARGE)");
  g->Value("max-pixels", &o->limits.max_pixels, d.limits.max_pixels,
           "skip images whose header claims more pixels (TOO_MANY_PIXELS)");
  g->Switch("allow-truncated", &o->limits.allow_truncated,
            "decode truncated or corrupt JPEG/PNG files instead of skipping them");
  g->Number("max-seconds-per-file", &o->limits.max_seconds, d.limits.max_seconds,
            "skip a file whose reading, decoding and extraction take longer (TIMEOUT)");
  g->Path("errors", &c->errors_path, "also write per-file errors as JSON lines to FILE");
  g->Path("committed", &c->committed_path,
          "append each image's path to FILE once it is committed (crash-safe from then on)");
  g->Text("format", "table", "summary format: table | json", [c](const std::string& v) {
    c->format = ParseFormat(v, {OutputFormat::kTable, OutputFormat::kJson});
  });
  g->Text("index-kind", VectorIndexKindName(ds.kind),
          "search index kept with the database: auto (exact below --index-threshold images, "
          "ivfsq from there on) | flat (exact inner product) | ivfsq (inverted file with "
          "8-bit residual codes: approximate, ~d + 10 bytes per image)",
          [c](const std::string& v) { c->search_index.kind = ParseVectorIndexKind(v); });
  g->Value("index-threshold", &c->search_index.auto_threshold, ds.auto_threshold,
           "images from which --index-kind auto switches to ivfsq");
  g->Value("nprobe", &c->search_index.nprobe, ds.nprobe,
           "ivfsq lists visited per query (0 = enough for about 8,000 vectors, at least 16)");
  g->OnOff("word-index", &c->search_index.words, ds.words,
           "keep the visual-word index of the local features beside the search index (search "
           "verifies its best images too; ~8 KiB per photo, its vocabulary in the model)");
  g->Value("word-index-min-images", &c->search_index.min_word_images, ds.min_word_images,
           "keep the word index only from this many images on (smaller collections gain "
           "nothing from it)");
  g->Switch("verbose,v", &c->verbose, "print phases, backend and stage timings");
  g->Switch("quiet,q", &c->quiet, "no progress bar");
}

// The persisted search index follows what this run added, changed or
// removed (reconciled against its (id, content hash) manifest). A cancelled
// or killed run leaves it stale; the next run or search reconciles it.
void UpdatePersistedSearchIndex(const IndexCommandOptions& c, IndexObserver* observer) {
  observer->OnPhase("updating the search index");
  auto store = Store::Open(c.index.db_path, Store::Mode::kReadWrite);
  SetLibraryThreads(ResolveThreads(c.index.threads));
  const SearchVectors vectors(*store);
  const SearchIndexSync sync = UpdateSearchIndex(store.get(), vectors, c.search_index);
  SetLibraryThreads(1);
  observer->OnPhase("search index: " + sync.Summary());
}

}  // namespace

int RunIndexCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                    bool tty, const std::atomic<bool>* cancel) {
  IndexCommandOptions c;
  c.backend_name = BackendName(c.index.backend);
  FlagGroup run("run"), model("model (used when the database is created; stored in it)");
  DeclareRunFlags(&run, &c);
  DeclareModelFlags(&model, &c.index.model);
  boost::program_options::options_description hidden;
  hidden.add_options()("dir", boost::program_options::value(&c.index.image_dir));
  const ParsedArgs parsed = ParseArgs(args, {&run, &model}, hidden, {{"dir", 1}});
  if (parsed.help) {
    PrintHelp(out, kUsage, {&run, &model});
    return kExitOk;
  }
  IndexOptions& o = c.index;
  if (o.image_dir.empty()) throw UsageError("missing DIR: the folder of images to index");
  if (o.db_path.empty()) throw UsageError("missing --db DB: the database folder");
  if (!(c.max_file_mb > 0)) throw UsageError("--max-file-mb must be > 0");
  o.limits.max_file_bytes = static_cast<uint64_t>(c.max_file_mb * (1 << 20));
  try {
    // The search index options are used after BuildIndex: checked before it.
    c.search_index.Validate();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (Store::IsDatabase(o.db_path)) {
    // An older layout is updated as it is; converting it is a separate,
    // explicit step (it needs room for a copy).
    // A compact database without a projection learns one once it has grown
    // enough (indexer/projection_growth.h): the PCA flags still apply to it.
    // One with an automatic 1- or 2-bit matrix may learn it again with more
    // bits and its stored settings: --pca-bits (which says whether),
    // --pca-min-images and --train-images apply to that.
    bool may_learn_projection = false, may_relearn = false;
    try {
      const auto store = Store::Open(o.db_path, Store::Mode::kReadOnly);
      const uint32_t schema = store->schema_version();
      if (!store->layout().current())
        err << "lookalike: note: " << o.db_path << " is schema " << schema
            << " (the older layout) and is updated as such; 'lookalike migrate --db " << o.db_path
            << "' converts it in place to schema " << kSchemaVersion << ", about 10x smaller\n";
      may_learn_projection = store->compact() && store->vector_dim() == 0;
      if (store->compact() && store->vector_dim() != 0) {
        const auto projection = store->GetProjection();
        may_relearn =
            projection && (projection->component_bits == 1 || projection->component_bits == 2);
      }
    } catch (const StoreError&) {
      // BuildIndex reports what is wrong with the database.
    }
    const std::set<std::string> projection_flags = {
        "pca-dim",   "pca-min-images", "whiten", "pca-bits", "pca-regularization",
        "pca-power", "train-images"};
    const std::set<std::string> relearning_flags = {"pca-bits", "pca-min-images", "train-images"};
    // The model is fixed at creation; explicit model flags cannot change it.
    for (const std::string& flag : model.names())
      if (parsed.Given(flag) && !(may_learn_projection && projection_flags.count(flag)) &&
          !(may_relearn && relearning_flags.count(flag)))
        err << "lookalike: note: --" << flag << " ignored: " << o.db_path
            << " keeps the model it was created with (see 'lookalike info'); index into a "
               "new --db to change it\n";
  } else if (!o.model_from.empty()) {
    for (const std::string& flag : model.names())
      if (parsed.Given(flag))
        err << "lookalike: note: --" << flag << " ignored: the model comes from --model-from "
            << o.model_from << "\n";
  }
  if (c.verbose)
    err << "lookalike: backend: requested " << c.backend_name << ", using "
        << BackendName(ResolveBackend(o.backend)) << " (" << ProbeBackends().detail << ")\n";
  std::ofstream errors_file, committed_file;
  if (!c.errors_path.empty()) {
    errors_file.open(c.errors_path, std::ios::out | std::ios::trunc);
    if (!errors_file) throw UsageError("cannot write --errors file " + c.errors_path);
  }
  if (!c.committed_path.empty()) {
    // Unbuffered: each acknowledged line (written whole by ProgressObserver)
    // is one write(2) on the O_APPEND file, which a kill cannot tear.
    committed_file.rdbuf()->pubsetbuf(nullptr, 0);
    committed_file.open(c.committed_path, std::ios::out | std::ios::app);
    if (!committed_file) throw UsageError("cannot write --committed file " + c.committed_path);
  }
  ProgressObserver observer(err, tty, c.verbose, c.quiet,
                            errors_file.is_open() ? &errors_file : nullptr,
                            committed_file.is_open() ? &committed_file : nullptr);
#ifdef __GLIBC__
  // Memory freed stays with the process up to 128 MB, and blocks up to 32 MB
  // come from the heap: each image's decode and SIFT buffers (a few MB) were
  // otherwise mapped, zeroed and unmapped again per image. 438 photos of
  // about 1024 px, new database, 2 threads: system time 4.2-4.5 -> 0.9 s of
  // 45 CPU-s, peak RSS 890 -> 964 MB (indexer/README.md, "Current figures").
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
#endif
  IndexSummary s;
  try {
    // BuildIndex validates the options, once (IndexOptions::Validate): a bad
    // value is a usage error.
    try {
      s = BuildIndex(o, &observer, cancel);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
    if (!s.cancelled) {
      // The summary's time covers the whole command, the update included.
      const auto start = std::chrono::steady_clock::now();
      UpdatePersistedSearchIndex(c, &observer);
      s.stages.search_index =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      s.seconds += s.stages.search_index;
    }
  } catch (...) {
    observer.Finish();
    throw;
  }
  observer.Finish();
  WriteIndexSummary(out, s, o.db_path, c.format, c.verbose);
  return (s.total_skipped() > 0 || s.no_features > 0 || s.cancelled) ? kExitPartial : kExitOk;
}

}  // namespace lookalike
