// The database schema: which version this build writes and reads, and what
// each version fixes (the hash of per-image values). The format history is
// in storage/README.md ("On-disk format").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace lookalike {

// Schema version this build writes for new databases; it reads and writes
// kOldestSchemaVersion..kSchemaVersion.
inline constexpr uint32_t kSchemaVersion = 3;
inline constexpr uint32_t kOldestSchemaVersion = 1;

// The 64-bit hash of a database's per-image values (vector, local features,
// thumbnail) and of the file contents in its records, fixed by its schema.
enum class HashKind : uint8_t {
  kFnv1a64,  // schema 1: FNV-1a 64, byte at a time
  kXxh3_64,  // schema 2: XXH3-64 (libxxhash)
};
HashKind HashKindForSchema(uint32_t schema_version);
const char* HashKindName(HashKind kind);  // "fnv1a-64" | "xxh3-64"
uint64_t Hash64(HashKind kind, const void* data, size_t size);

// The schema of the lookalike database at `db_path`, read through a
// read-only RocksDB open of its own (nothing is written); nullopt when there
// is none there, it cannot be read, or it is outside
// kOldestSchemaVersion..kSchemaVersion.
std::optional<uint32_t> StoredSchema(const std::string& db_path);

}  // namespace lookalike
