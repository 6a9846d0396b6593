// The subcommands of `lookalike`, one file each. Every one parses its own
// flags (tools/flags.h), validates the option structs once, calls the
// library, prints through tools/output.h and returns an exit code; usage
// errors are thrown as UsageError and turned into exit 2 by RunCli.
#pragma once

#include <atomic>
#include <iosfwd>
#include <string>
#include <vector>

namespace lookalike {

// `lookalike index DIR --db DB`: build or update a database, then bring its
// persisted search index up to date. `tty` enables the progress bar;
// `cancel` (may be null) stops cleanly after the current batch.
int RunIndexCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                    bool tty, const std::atomic<bool>* cancel);
// `lookalike train DIR --db BASE`: a database holding a learned model and no
// image, for `index --model-from BASE`.
int RunTrainCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                    bool tty, const std::atomic<bool>* cancel);
// `lookalike merge --db OUT SHARD...`: adds shard databases to OUT.
int RunMergeCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `lookalike migrate --db DB`: convert a schema-1 or -2 database to schema 3
// in place, crash-safely; `cancel` (may be null) stops after the current
// image, keeping the copy made so far for the next run.
int RunMigrateCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                      bool tty, const std::atomic<bool>* cancel);
// `lookalike search --db DB QUERY...`: ranked hits per query.
int RunSearchCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `lookalike dedup --db DB`: near-duplicate groups.
int RunDedupCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `lookalike info --db DB`: what a database holds and how it was built.
int RunInfoCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `lookalike serve --db DB`: the web UI and JSON API until `cancel` is set
// (SIGINT, SIGTERM).
int RunServeCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                    const std::atomic<bool>* cancel);
// `lookalike verify --db DB`: full consistency check (exit 2 when corrupt).
int RunVerifyCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace lookalike
