// `lookalike train DIR --db BASE`: learns the model from a seeded sample of
// DIR and writes a database holding it and no image, for `index --model-from`
// (one model shared by the shards that `merge` joins).
#include <ostream>

#include "indexer/pipeline.h"
#include "search/model_quantizer.h"
#include "storage/store.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/model_flags.h"
#include "tools/output.h"
#include "tools/progress.h"

namespace lookalike {
namespace {

constexpr char kUsage[] =
    "usage: lookalike train DIR --db BASE [model options]\n\n"
    "Learns the model (codebook, PCA, descriptor quantizer) from a seeded sample of\n"
    "the images under DIR, exactly as 'index' does for a new database, and creates\n"
    "BASE holding the model and no image. Index shards with\n"
    "'lookalike index DIR --db SHARD --model-from BASE --shard I/N' and join them\n"
    "with 'lookalike merge'. With --search-lists-for N, BASE also holds the search\n"
    "index's inverted lists (learned from the training images' search vectors):\n"
    "every shard fills them, and 'merge' joins the shards' lists instead of building\n"
    "the merged search index from every stored vector. An existing BASE is kept as\n"
    "it is.\n\n";

}  // namespace

int RunTrainCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                    bool tty, const std::atomic<bool>* cancel) {
  IndexOptions o;
  bool verbose = false, quiet = false;
  int64_t lists_for = 0;
  FlagGroup run("run"), model("model (stored in BASE)");
  run.Help();
  run.Path("db", &o.db_path, "database folder to create with the model");
  run.Value("threads", &o.threads, IndexOptions().threads,
            "decode/extract threads (0 = all cores)");
  run.Switch("verbose,v", &verbose, "print phases and timings");
  run.Switch("quiet,q", &quiet, "no progress bar");
  DeclareModelFlags(&model, &o.model);
  model.Value("search-lists-for", &lists_for, int64_t{0},
              "also learn the search index's inverted lists for a merged collection of about "
              "this many images, so 'merge' joins the shards' lists (0 = no; each database "
              "learns its own)");
  boost::program_options::options_description hidden;
  hidden.add_options()("dir", boost::program_options::value(&o.image_dir));
  const ParsedArgs parsed = ParseArgs(args, {&run, &model}, hidden, {{"dir", 1}});
  if (parsed.help) {
    PrintHelp(out, kUsage, {&run, &model});
    return kExitOk;
  }
  if (o.image_dir.empty()) throw UsageError("missing DIR: the folder of images to learn from");
  if (o.db_path.empty()) throw UsageError("missing --db BASE: the database folder to create");
  ProgressObserver observer(err, tty, verbose, quiet, nullptr, nullptr);
  IndexSummary s;
  try {
    try {
      if (lists_for < 0) throw UsageError("--search-lists-for must be >= 0");
      SearchQuantizerTrainer lists;
      if (lists_for > 0)
        lists = [&](const float* vectors, int64_t n, int64_t dim) {
          return TrainModelQuantizer(vectors, n, dim, lists_for, o.model.codebook.seed);
        };
      s = TrainModel(o, &observer, cancel, lists);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  } catch (...) {
    observer.Finish();
    throw;
  }
  observer.Finish();
  if (s.cancelled) {
    err << "lookalike train: cancelled; nothing was created\n";
    return kExitPartial;
  }
  if (!s.created) {
    err << "lookalike train: note: " << o.db_path
        << " already exists and keeps its model (see 'lookalike info'); train into a new --db "
           "to change it\n";
    if (lists_for > 0 && !Store::Open(o.db_path, Store::Mode::kReadOnly)->GetModelSearchQuantizer())
      err << "lookalike train: note: its model has no search quantizer, so --search-lists-for "
             "is ignored and merge will build the merged search index from the stored vectors\n";
    return kExitOk;
  }
  if (lists_for > 0 && !Store::Open(o.db_path, Store::Mode::kReadOnly)->GetModelSearchQuantizer())
    err << "lookalike train: note: no search quantizer was learned: the sample had too few "
           "images with features for a PCA (--pca-min-images), and search vectors need one\n";
  WriteTrainSummary(out, s, o.db_path);
  return kExitOk;
}

}  // namespace lookalike
