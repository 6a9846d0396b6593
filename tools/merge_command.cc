// `lookalike merge --db OUT SHARD...`: adds shard databases (indexed with
// `index --model-from BASE [--shard I/N]`) to OUT, then brings OUT's
// persisted search index up to date exactly as `index` does at its end.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <ostream>
#include <set>

#include "indexer/file_walker.h"
#include "indexer/search_vectors.h"
#include "search/search_index.h"
#include "storage/store.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/output.h"
#include "util/test_hooks.h"
#include "util/threads.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;

constexpr char kUsage[] =
    "usage: lookalike merge --db OUT SHARD... [options]\n\n"
    "Adds the images of each SHARD database to OUT (created if missing). Every\n"
    "SHARD, and OUT if it exists, must have the same model and schema (index them\n"
    "with --model-from the same BASE) and no image path may be in two of them:\n"
    "otherwise exit 2, naming both, and nothing changes. A kill at any moment\n"
    "leaves OUT as it was or fully merged; re-running finishes the job, and shards\n"
    "merged already are skipped. OUT's search index is updated at the end.\n\n";

struct MergeCommandOptions {
  std::string db;
  std::vector<std::string> shards;
  VectorIndexOptions search_index;
  int threads = 0;  // threads of the search index update; 0 = all cores
  OutputFormat format = OutputFormat::kTable;

  // Throws UsageError naming the problem.
  void Validate() const {
    if (db.empty()) throw UsageError("missing --db OUT: the database to merge into");
    if (shards.empty()) throw UsageError("missing SHARD: the databases to merge into " + db);
    if (threads < 0 || threads > 1024)
      throw UsageError("--threads must be in 0..1024 (0 = all cores)");
    std::set<std::string> seen{AbsolutePath(db)};
    for (const std::string& s : shards)
      if (!seen.insert(AbsolutePath(s)).second)
        throw UsageError(s + " is given twice (or is --db itself); name each shard once");
    try {
      search_index.Validate();
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
};

// "<parent>/<name><suffix>" beside the database folder.
fs::path Beside(const std::string& db, const std::string& suffix) {
  const fs::path target = fs::absolute(db).lexically_normal();
  return target.parent_path() / (target.filename().string() + suffix);
}

// Removes "<prefix><pid>" folders beside `db` whose process is gone (left
// by a merge that was killed).
void RemoveLeftovers(const std::string& db, const std::string& suffix) {
  const fs::path stem = Beside(db, suffix);
  const std::string prefix = stem.filename().string();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(stem.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      fs::remove_all(entry.path(), ec);
  }
}

// CPU time the calling thread has used.
double ThreadCpuSeconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

std::string WithPid(const fs::path& stem) { return stem.string() + std::to_string(::getpid()); }

// Merges into `store`, then updates its search index; fills `report`.
void MergeInto(Store* store, const std::vector<const Store*>& shards, const MergeCommandOptions& c,
               MergeReport* report) {
  RemoveLeftovers(c.db, ".merge-tables-");
  const auto start = std::chrono::steady_clock::now();
  report->merge = store->MergeShards(shards, WithPid(Beside(c.db, ".merge-tables-")));
  const auto merged = std::chrono::steady_clock::now();
  report->merge_seconds = std::chrono::duration<double>(merged - start).count();
  const std::clock_t cpu = std::clock();
  const double thread_cpu = ThreadCpuSeconds();
  SetLibraryThreads(ResolveThreads(c.threads));
  const SearchVectors vectors(*store);
  VectorIndexOptions index = c.search_index;
  // The model's vocabulary (shared by the shards) encodes the merged images;
  // a database whose model has none learns the vocabulary of the whole, as
  // one run would.
  index.relearn_words = true;
  // Shards whose word index matches their records have it joined.
  std::vector<MergedShard> joinable;
  for (size_t s = 0; s < shards.size(); ++s)
    if (!report->merge.shards[s].already_merged)
      joinable.push_back(MergedShard{shards[s], report->merge.shards[s].id_offset});
  const SearchIndexSync sync = UpdateSearchIndex(store, vectors, index, joinable);
  SetLibraryThreads(1);
  report->search_index = sync.Summary();
  report->index_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - merged).count();
  report->index_cpu_seconds = static_cast<double>(std::clock() - cpu) / CLOCKS_PER_SEC;
  report->index_thread_cpu_seconds = ThreadCpuSeconds() - thread_cpu;
  report->images = store->num_images();
}

}  // namespace

int RunMergeCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const auto start = std::chrono::steady_clock::now();
  MergeCommandOptions c;
  const MergeCommandOptions d;
  FlagGroup flags("merge");
  flags.Help();
  flags.Path("db", &c.db, "database to merge into (created if missing)");
  flags.Value("threads", &c.threads, d.threads, "threads of the search index update (0 = all)");
  flags.Text("index-kind", VectorIndexKindName(d.search_index.kind),
             "search index kept with OUT, as for 'index': auto | flat | ivfsq",
             [&c](const std::string& v) { c.search_index.kind = ParseVectorIndexKind(v); });
  flags.Value("index-threshold", &c.search_index.auto_threshold, d.search_index.auto_threshold,
              "images from which --index-kind auto switches to ivfsq");
  flags.Value("nprobe", &c.search_index.nprobe, d.search_index.nprobe,
              "ivfsq lists visited per query (0 = automatic)");
  flags.Value("word-index-min-images", &c.search_index.min_word_images,
              d.search_index.min_word_images,
              "keep the word index only from this many images on, as for 'index'");
  flags.Value("join-lists", &c.search_index.join_lists, d.search_index.join_lists,
              "join the shards' inverted lists when they all fill the model's search quantizer "
              "(train --search-lists-for); off: fill the merged index from every stored vector");
  flags.Text("format", "table", "summary format: table | json", [&c](const std::string& v) {
    c.format = ParseFormat(v, {OutputFormat::kTable, OutputFormat::kJson});
  });
  boost::program_options::options_description hidden;
  hidden.add_options()("shard", boost::program_options::value<std::vector<std::string>>(&c.shards));
  const ParsedArgs parsed = ParseArgs(args, {&flags}, hidden, {{"shard", -1}});
  if (parsed.help) {
    PrintHelp(out, kUsage, {&flags});
    return kExitOk;
  }
  c.Validate();

  // Each shard is locked against writers before it is read and until the
  // merge is done: a shard still being indexed is refused rather than merged
  // half-built, and no `index` can change one while it is copied.
  std::vector<std::unique_ptr<ShardReadLock>> shard_locks;
  for (const std::string& path : c.shards)
    shard_locks.push_back(std::make_unique<ShardReadLock>(path));
  std::vector<std::unique_ptr<Store>> opened;
  std::vector<const Store*> shards;
  for (const std::string& path : c.shards) {
    opened.push_back(Store::Open(path, Store::Mode::kReadOnly));
    shards.push_back(opened.back().get());
  }
  MergeReport report;
  report.db = c.db;
  if (!Store::IsDatabase(c.db)) {
    // Checked before anything is created, naming two shards.
    Store::CheckSameModel(shards);
    Store::CheckCanCreate(c.db);
    CreationLock lock(c.db);
    if (!Store::IsDatabase(c.db)) {
      // Built beside OUT and renamed into place once merged and indexed, so a
      // kill leaves no OUT at all, as before.
      RemoveLeftovers(c.db, ".merging-");
      const std::string temp = WithPid(Beside(c.db, ".merging-"));
      std::error_code ec;
      fs::remove_all(temp, ec);
      struct RemoveUnlessMoved {  // a refused or failed merge leaves nothing behind
        std::string path;
        bool moved = false;
        ~RemoveUnlessMoved() {
          std::error_code ignored;
          if (!moved) fs::remove_all(path, ignored);
        }
      } guard{temp};
      {
        const Store& first = *shards[0];
        const auto projection = first.GetProjection();
        const auto quantizer = first.GetDescriptorQuantizer();
        const auto words = first.GetModelWordVocabulary();
        const auto lists = first.GetModelSearchQuantizer();
        auto store = Store::Create(temp, first.model(), projection ? &*projection : nullptr,
                                   first.schema_version(), quantizer ? *quantizer : std::string(),
                                   words ? *words : std::string(), lists ? *lists : std::string());
        TestStopPoint("merge-created");
        MergeInto(store.get(), shards, c, &report);
        store->Flush();
      }
      TestStopPoint("merge-before-rename");
      fs::rename(temp, c.db, ec);  // replaces an empty folder atomically
      if (ec)
        throw StoreError(StoreError::Kind::kIo, "cannot move the merged database " + temp + " to " +
                                                    c.db + ": " + ec.message());
      guard.moved = true;
      report.created = true;
    }
  }
  if (!report.created) {
    // Refusals first, on a read-only open: a refused merge leaves OUT byte
    // for byte as it was (a read-write open rewrites RocksDB's own files).
    Store::Open(c.db, Store::Mode::kReadOnly)->CheckMerge(shards);
    auto store = Store::Open(c.db, Store::Mode::kReadWrite);
    MergeInto(store.get(), shards, c, &report);
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const ShardMerge& s : report.merge.shards)
    if (s.already_merged)
      err << "lookalike merge: note: every image of " << s.path << " is in " << c.db
          << " already; skipped\n";
  WriteMergeSummary(out, report, c.format);
  return kExitOk;
}

}  // namespace lookalike
