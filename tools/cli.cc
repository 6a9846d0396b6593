#include "tools/cli.h"

#include <ostream>
#include <stdexcept>

#include "tools/commands.h"
#include "tools/flags.h"

namespace lookalike {
namespace {

constexpr const char kVersion[] = "lookalike 0.1.0";

void PrintGlobalHelp(std::ostream& out) {
  out << "usage: lookalike <command> [options]\n\n"
         "Find similar images: index a folder once, then search it with query images.\n\n"
         "commands:\n"
         "  index DIR --db DB     index (or update the index of) a folder of images\n"
         "  train DIR --db BASE   learn a model into BASE, for index --model-from BASE\n"
         "  merge --db OUT SHARD  add shard databases (same model) to OUT\n"
         "  search --db DB QUERY  rank indexed images by similarity to query images\n"
         "  info --db DB          describe a database\n"
         "  verify --db DB        check a database for corruption (exit 2 if corrupt)\n"
         "  dedup --db DB         list groups of near-duplicate images\n"
         "  serve --db DB         web UI and JSON API: search, match view, duplicates\n"
         "  migrate --db DB       convert an older database to the compact layout, in place\n\n"
         "Run 'lookalike <command> --help' for the options of a command.\n"
         "Exit codes: 0 success, 1 finished but some inputs were skipped, 2 usage or fatal "
         "error.\n";
}

int Dispatch(const std::string& command, const std::vector<std::string>& rest, std::ostream& out,
             std::ostream& err, bool tty, const std::atomic<bool>* cancel) {
  if (command == "index") return RunIndexCommand(rest, out, err, tty, cancel);
  if (command == "train") return RunTrainCommand(rest, out, err, tty, cancel);
  if (command == "merge") return RunMergeCommand(rest, out, err);
  if (command == "search") return RunSearchCommand(rest, out, err);
  if (command == "info") return RunInfoCommand(rest, out, err);
  if (command == "verify") return RunVerifyCommand(rest, out, err);
  if (command == "dedup") return RunDedupCommand(rest, out, err);
  if (command == "serve") return RunServeCommand(rest, out, err, cancel);
  if (command == "migrate") return RunMigrateCommand(rest, out, err, tty, cancel);
  err << "lookalike: unknown command '" << command << "'\n";
  PrintGlobalHelp(err);
  return kExitFatal;
}

}  // namespace

int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
           bool stderr_is_tty, const std::atomic<bool>* cancel) {
  if (args.empty()) {
    PrintGlobalHelp(err);
    return kExitFatal;
  }
  const std::string& command = args[0];
  if (command == "--help" || command == "-h" || command == "help") {
    PrintGlobalHelp(out);
    return kExitOk;
  }
  if (command == "--version") {
    out << kVersion << "\n";
    return kExitOk;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    return Dispatch(command, rest, out, err, stderr_is_tty, cancel);
  } catch (const UsageError& e) {
    err << "lookalike " << command << ": " << e.what() << "\n"
        << "Run 'lookalike " << command << " --help' for usage.\n";
    return kExitFatal;
  } catch (const std::exception& e) {
    err << "lookalike " << command << ": error: " << e.what() << "\n";
    return kExitFatal;
  }
}

}  // namespace lookalike
