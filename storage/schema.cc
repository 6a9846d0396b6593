#include "storage/schema.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <xxhash.h>

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <system_error>

#include "storage/encoding.h"
#include "storage/keys.h"

namespace lookalike {

SchemaLayout LayoutOf(uint32_t schema_version) {
  switch (schema_version) {
    case 1:
      return {1, HashKind::kFnv1a64, /*colour=*/false, /*compact=*/false};
    case 2:
      return {2, HashKind::kXxh3_64, /*colour=*/true, /*compact=*/false};
    case 3:
      return {3, HashKind::kXxh3_64, /*colour=*/true, /*compact=*/true};
  }
  throw std::invalid_argument("schema " + std::to_string(schema_version) + " is not one of " +
                              std::to_string(kOldestSchemaVersion) + ".." +
                              std::to_string(kSchemaVersion));
}

const char* HashKindName(HashKind kind) {
  return kind == HashKind::kXxh3_64 ? "xxh3-64" : "fnv1a-64";
}

uint64_t Hash64(HashKind kind, const void* data, size_t size) {
  if (kind == HashKind::kXxh3_64) return XXH3_64bits(data, size);
  return encoding::Fnv1a64(data, size);
}

std::optional<uint32_t> StoredSchema(const std::string& db_path) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::path(db_path) / "CURRENT", ec)) return std::nullopt;
  rocksdb::Options options;
  options.create_if_missing = false;
  options.paranoid_checks = true;
  options.max_open_files = -1;  // as Store::Open: a missing table file fails the open
  rocksdb::DB* raw = nullptr;
  if (!rocksdb::DB::OpenForReadOnly(options, db_path, &raw).ok()) return std::nullopt;
  const std::unique_ptr<rocksdb::DB> db(raw);
  std::string value;
  if (!db->Get(rocksdb::ReadOptions(), store_detail::kSchemaKey, &value).ok()) return std::nullopt;
  try {
    const uint32_t version = encoding::Reader(value, "schema").Fixed32();
    if (version < kOldestSchemaVersion || version > kSchemaVersion) return std::nullopt;
    return version;
  } catch (const encoding::CorruptValue&) {
    return std::nullopt;
  }
}

}  // namespace lookalike
