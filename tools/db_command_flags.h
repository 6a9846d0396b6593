// The flags of the read-only commands that take just a database and a
// table|json format (info, verify).
#pragma once

#include <string>
#include <vector>

#include "tools/flags.h"
#include "tools/output.h"

namespace lookalike {

struct DbCommandOptions {
  std::string db;
  OutputFormat format = OutputFormat::kTable;
};

// Parses `args`; returns false after printing `usage` and the flags when
// --help was asked for. Throws UsageError (naming `what_db_is_for` when
// --db is missing).
bool ParseDbCommand(const std::vector<std::string>& args, const char* usage,
                    const char* what_db_is_for, std::ostream& out, DbCommandOptions* options);

}  // namespace lookalike
