// `lookalike verify`: a full consistency check that changes nothing.
#include <ostream>

#include "storage/store.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/db_command_flags.h"
#include "tools/output.h"

namespace lookalike {
namespace {

constexpr char kUsage[] =
    "usage: lookalike verify --db DB [--format table|json]\n\n"
    "Checks a database without changing it: RocksDB block checksums, the model's\n"
    "codebook checksum, and that every image has its record, vector (right size,\n"
    "checksum, finite, unit norm or zero) and path entry, with no orphans and\n"
    "matching counts. Exit 0 when consistent, 2 on corruption.\n\n";

}  // namespace

int RunVerifyCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  DbCommandOptions c;
  if (!ParseDbCommand(args, kUsage, "verify", out, &c)) return kExitOk;
  auto store = Store::Open(c.db, Store::Mode::kReadOnly);
  const std::vector<std::string> problems = store->Verify();
  WriteVerify(out, err, c.db, store->num_images(), problems, c.format);
  return problems.empty() ? kExitOk : kExitFatal;
}

}  // namespace lookalike
