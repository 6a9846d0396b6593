#include "tools/db_command_flags.h"

namespace lookalike {

bool ParseDbCommand(const std::vector<std::string>& args, const char* usage,
                    const char* what_db_is_for, std::ostream& out, DbCommandOptions* options) {
  FlagGroup opts("options");
  opts.Help();
  opts.Path("db", &options->db, "database folder");
  opts.Text("format", "table", "table | json", [options](const std::string& v) {
    options->format = ParseFormat(v, {OutputFormat::kTable, OutputFormat::kJson});
  });
  const ParsedArgs parsed = ParseArgs(args, {&opts}, {}, {});
  if (parsed.help) {
    PrintHelp(out, usage, {&opts});
    return false;
  }
  if (options->db.empty())
    throw UsageError(std::string("missing --db DB: the database to ") + what_db_is_for);
  return true;
}

}  // namespace lookalike
