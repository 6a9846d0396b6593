// How the store's values are coded (little-endian; keys.h says which key
// holds which). Decoders are bounds-checked and throw encoding::CorruptValue
// naming the value; checksums are verified where the value has one. Never
// included outside storage/.
#pragma once

#include <rocksdb/write_batch.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "storage/encoding.h"
#include "storage/model_record.h"
#include "storage/records.h"
#include "storage/schema.h"

namespace lookalike {
namespace store_detail {

// "<what>: checksum mismatch (stored …, computed …)": the words the CLI and
// the tests look for, with both hashes so a report says which side changed.
encoding::CorruptValue ChecksumMismatch(const std::string& what, uint64_t stored,
                                        uint64_t computed);

// m:xindex decoded: the blob's size, chunk count and checksum.
struct SearchIndexMeta {
  uint64_t size = 0;
  uint32_t chunks = 0;
  HashKind checksum_kind = HashKind::kXxh3_64;  // format 2; format 1: FNV-1a
  uint64_t checksum = 0;
};
SearchIndexMeta DecodeSearchIndexMeta(const std::string& value);

// f:<id> and t:<id> = blob, u64 hash (of the schema's kind) of the blob.
// The blob goes into the batch straight from the caller's string (no
// intermediate copy).
void PutImageBlob(rocksdb::WriteBatch* batch, const std::string& key, const std::string& blob,
                  HashKind kind);
// Checks that an f: or t: value (data, size) ends with the hash of its blob;
// returns the blob's size. Throws CorruptValue "<what>: ...".
size_t CheckImageBlob(const char* data, size_t size, HashKind kind, const char* what);
// The names CheckImageBlob's messages give the two.
inline constexpr char kFeaturesWhat[] = "local features";
inline constexpr char kThumbnailWhat[] = "thumbnail";

// v:<id> = u32 dim, dim x f32 (schemas 1-2) or f16 (`half`, schema 3)
// little-endian, u64 hash of the float bytes. On a little-endian host f32
// floats go into the batch straight from `v`.
void PutVector(rocksdb::WriteBatch* batch, const std::string& key, const float* v, uint64_t dim,
               bool half, HashKind kind);
// Checks a v: value (dimension, size, hash) and decodes its dim floats into
// `out`; throws CorruptValue.
void ReadVector(const char* data, size_t size, uint64_t dim, bool half, HashKind kind, float* out);

// A meta blob followed by the u64 FNV-1a of it (m:dq): the blob, checked.
std::string WithChecksum(const std::string& blob);
std::string CheckedBlob(const std::string& value, const char* what);

// A blob followed by its XXH3-64 (the word index's w: values, read in bulk
// by every query: XXH3 is ten times faster than FNV-1a): the blob, checked.
std::string WithXxh3(const std::string& blob);
std::string CheckedXxh3(const std::string& value, const char* what);
// The size of the blob of a value (data, size) ending with its XXH3-64;
// throws CorruptValue if the hash does not match.
size_t CheckXxh3(const char* data, size_t size, const char* what);

std::string EncodeU64(uint64_t v);

// m:totals: u64 descriptors, u64 images without features, u64 generation.
std::string EncodeTotals(const ImageTotals& t);
ImageTotals DecodeTotals(const std::string& value);

// m:model. The value ends with an FNV-1a of itself (models written before
// min_keypoints existed end without both, and still decode).
std::string EncodeModel(const ModelRecord& m);
ModelRecord DecodeModel(const std::string& value);

// m:pca: u32 format, u32 in_dim, u32 out_dim, u32 num_samples, u32 flags
// (1 whiten, 2 half precision), f32 eigen regularisation, f32 power alpha,
// in_dim f32 mean, out_dim f32 eigenvalues, out_dim x in_dim components (f16
// or f32), u64 FNV-1a of everything before it. Decoding checks it maps
// `vlad_dim` dimensions.
std::string EncodeProjection(const ProjectionRecord& p);
ProjectionRecord DecodeProjection(const std::string& value, uint64_t vlad_dim);

// i:<id>: u64 id, bytes path, u64 size, u64 mtime, u64 content hash, u32
// width, u32 height, u32 descriptors, u32 status, then (schema 2) bytes colour.
std::string EncodeRecord(const ImageRecord& r, bool with_colour);
ImageRecord DecodeRecord(const char* data, size_t size);

}  // namespace store_detail
}  // namespace lookalike
