// The database schema, and the one place its history is decided: which
// versions this build reads and writes, and what each version stores
// differently (SchemaLayout). Everything above storage asks the Store these
// questions (stores_colour(), compact(), ...) instead of comparing version
// numbers. The key layout: storage/keys.h; the history as a table:
// storage/README.md, "Format history".
//
//   schema 1  per-image hashes FNV-1a 64; records without colour; v: the
//             full VLAD as f32; f: format-1 local features (f32 geometry,
//             u8 descriptors).
//   schema 2  per-image hashes XXH3-64; records append the colour
//             histogram. Still created by `index --descriptor-bytes 0`, and
//             for a training sample too small to learn the quantizer.
//   schema 3  compact: v: the search vector (PCA out_dim) as f16, none
//             without a PCA (derived from f: and the codebook); f: format-2
//             features (compact geometry, product-quantised descriptors,
//             quantizer in m:dq); m:vdim; m:totals (absent in databases
//             written before the counters existed); images get a thumbnail.
//
// Every version is read and written as it is (an older build keeps reading
// what it wrote); `lookalike migrate` converts 1 and 2 to 3
// (indexer/migration.h).
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
// The newest layout that is not compact: what `index --descriptor-bytes 0`
// creates, and a new database whose sample has too few descriptors to learn
// the descriptor quantizer from.
inline constexpr uint32_t kFullFeaturesSchemaVersion = 2;

// The 64-bit hash of a database's per-image values (vector, local features,
// thumbnail) and of the file contents in its records, fixed by its schema.
enum class HashKind : uint8_t {
  kFnv1a64,  // schema 1: FNV-1a 64, byte at a time
  kXxh3_64,  // schema 2: XXH3-64 (libxxhash)
};
const char* HashKindName(HashKind kind);  // "fnv1a-64" | "xxh3-64"
uint64_t Hash64(HashKind kind, const void* data, size_t size);

// What a schema version stores (the list above).
struct SchemaLayout {
  uint32_t version = kSchemaVersion;
  HashKind image_hash = HashKind::kXxh3_64;  // of per-image values and file contents
  bool colour = true;                        // records hold the colour histogram
  // The compact layout: v: holds f16 search vectors (or none), f: compact
  // features with the quantizer in m:dq, m:vdim and m:totals are kept, and
  // the indexer gives each image a thumbnail.
  bool compact = true;
  // The layout this build creates (`migrate` converts the others to it).
  bool current() const { return version == kSchemaVersion; }
};

// The layout of `schema_version`, kOldestSchemaVersion..kSchemaVersion;
// throws std::invalid_argument for another.
SchemaLayout LayoutOf(uint32_t schema_version);

// The hash of a database of `schema_version` (LayoutOf(v).image_hash).
inline HashKind HashKindForSchema(uint32_t schema_version) {
  return LayoutOf(schema_version).image_hash;
}

// The schema of the lookalike database at `db_path`, read through a
// read-only RocksDB open of its own (nothing is written); nullopt when there
// is none there, it cannot be read, or it is outside
// kOldestSchemaVersion..kSchemaVersion.
std::optional<uint32_t> StoredSchema(const std::string& db_path);

}  // namespace lookalike
