// `lookalike migrate`: the indexer's MigrateDatabase, with the persisted
// search index of the copy written by search/ before the copy replaces the
// database (composed here, one floor above both).
#include <ostream>

#include "indexer/migration.h"
#include "indexer/search_vectors.h"
#include "search/search_index.h"
#include "storage/store.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/output.h"
#include "tools/progress.h"
#include "util/threads.h"

namespace lookalike {
namespace {

constexpr char kUsage[] =
    "usage: lookalike migrate --db DB [options]\n\n"
    "Converts a database of schema 1 or 2 to schema 3, the compact layout (about 10x\n"
    "smaller), in place: same images, ids, records, codebook and PCA. The copy is built\n"
    "beside it in DB.migrating (needs about a tenth of DB's size free) and replaces DB\n"
    "atomically once complete and verified. Interrupted or killed, DB stays as it was;\n"
    "re-running finishes the job. DB is locked against 'index' meanwhile.\n"
    "A database whose model has no word vocabulary (created before the model carried\n"
    "one) gets one: its word index's own (so the index stays valid), else one learned\n"
    "from its stored features. Shards made with --model-from DB afterwards share it.\n\n";

struct MigrateCommandOptions {
  MigrationOptions migration;
  VectorIndexOptions search_index;
  OutputFormat format = OutputFormat::kTable;
  bool verbose = false, quiet = false;
};

void DeclareFlags(FlagGroup* g, MigrateCommandOptions* c) {
  const MigrationOptions d;
  const VectorIndexOptions ds;
  g->Help();
  g->Path("db", &c->migration.db_path, "database folder to convert");
  g->Value("train-images", &c->migration.train_images, d.train_images,
           "stored images whose descriptors (seeded sample) the descriptor quantizer learns from");
  g->Value("descriptor-bytes", &c->migration.quantizer.bytes, d.quantizer.bytes,
           "bytes kept per local descriptor (product quantisation; must divide 128)");
  g->Text("index-kind", VectorIndexKindName(ds.kind),
          "search index kept with the database: auto | flat | ivfsq (as for 'index')",
          [c](const std::string& v) { c->search_index.kind = ParseVectorIndexKind(v); });
  g->Value("index-threshold", &c->search_index.auto_threshold, ds.auto_threshold,
           "images from which --index-kind auto switches to ivfsq");
  g->Value("nprobe", &c->search_index.nprobe, ds.nprobe,
           "ivfsq lists visited per query (0 = automatic)");
  g->Text("format", "table", "summary format: table | json", [c](const std::string& v) {
    c->format = ParseFormat(v, {OutputFormat::kTable, OutputFormat::kJson});
  });
  g->Switch("verbose,v", &c->verbose, "print phases");
  g->Switch("quiet,q", &c->quiet, "no progress bar");
}

}  // namespace

int RunMigrateCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                      bool tty, const std::atomic<bool>* cancel) {
  MigrateCommandOptions c;
  FlagGroup flags("options");
  DeclareFlags(&flags, &c);
  const ParsedArgs parsed = ParseArgs(args, {&flags}, {}, {});
  if (parsed.help) {
    PrintHelp(out, kUsage, {&flags});
    return kExitOk;
  }
  if (c.migration.db_path.empty()) throw UsageError("missing --db DB: the database to convert");
  try {
    // The search index options are used by the copy's finisher: checked first.
    c.search_index.Validate();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  ProgressObserver observer(err, tty, c.verbose, c.quiet, nullptr, nullptr);
  std::string vocabulary_step;
  const auto add_vocabulary = [&](Store* store) {
    observer.OnPhase("giving the model the word index's vocabulary");
    SetLibraryThreads(ResolveThreads(0));
    const ModelVocabularyStep step = AddWordVocabularyToModel(store);
    SetLibraryThreads(1);
    vocabulary_step = step == ModelVocabularyStep::kAdopted   ? "adopted"
                      : step == ModelVocabularyStep::kLearned ? "learned"
                      : step == ModelVocabularyStep::kNone    ? "none"
                                                              : "";
  };
  const FinishCopy write_search_index = [&](Store* copy) {
    add_vocabulary(copy);
    observer.OnPhase("building the search index of the copy");
    SetLibraryThreads(ResolveThreads(0));
    const SearchVectors vectors(*copy);
    const SearchIndexSync sync = UpdateSearchIndex(copy, vectors, c.search_index);
    SetLibraryThreads(1);
    observer.OnPhase("search index: " + sync.Summary());
  };
  MigrationSummary s;
  try {
    // MigrateDatabase validates the options, once (MigrationOptions::Validate):
    // a bad value is a usage error.
    try {
      s = MigrateDatabase(c.migration, &observer, write_search_index, cancel);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
    // A database of the current schema: its model gains the vocabulary in
    // place (one write).
    if (!s.migrated && !s.cancelled) {
      auto store = Store::Open(c.migration.db_path, Store::Mode::kReadWrite);
      add_vocabulary(store.get());
    }
    s.word_vocabulary = vocabulary_step;
  } catch (...) {
    observer.Finish();
    throw;
  }
  observer.Finish();
  WriteMigrateSummary(out, s, c.migration.db_path, c.format);
  return s.cancelled ? kExitPartial : kExitOk;
}

}  // namespace lookalike
