// `lookalike verify`: a full consistency check that changes nothing.
#include <ostream>

#include "indexer/local_features.h"
#include "search/search_index.h"
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
    "codebook checksum, the PCA and descriptor quantizer, and that every image has\n"
    "its record, vector (right size, checksum, finite, unit norm or zero), path\n"
    "entry and local features (checksum, format, keypoint count), with no orphans\n"
    "and matching counts, the word index (every list decodes, its images are\n"
    "those of the search index) and the search index's colour table (each row is\n"
    "its image's colour). Exit 0 when consistent, 2 on corruption.\n\n";

}  // namespace

int RunVerifyCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  DbCommandOptions c;
  if (!ParseDbCommand(args, kUsage, "verify", out, &c)) return kExitOk;
  auto store = Store::Open(c.db, Store::Mode::kReadOnly);
  std::vector<std::string> problems;
  const FeaturesCheck check_features = LocalFeaturesCheck(*store, &problems);
  for (std::string& p : store->Verify(100, check_features)) problems.push_back(std::move(p));
  for (std::string& p : VerifyWordIndex(*store)) problems.push_back(std::move(p));
  for (std::string& p : VerifyColourTable(*store)) problems.push_back(std::move(p));
  WriteVerify(out, err, c.db, store->num_images(), problems, c.format);
  return problems.empty() ? kExitOk : kExitFatal;
}

}  // namespace lookalike
