// The key layout of a lookalike database. The store (store.cc, creation.cc,
// verify.cc) is the only reader of these keys.
//
// Key layout (schema 3):
//   m:schema            u32 schema version
//   m:model             the encoding model (values.h, EncodeModel)
//   m:next_id, m:count  u64 id allocator and image count
//   m:pca               the PCA projection, u64 FNV-1a of the value; optional
//                       (absent = search full VLAD); written at creation or
//                       once the collection has grown to --pca-min-images,
//                       and replaced (with every v:) when it grows enough for
//                       a matrix with more bits (Store::ReplaceProjection)
//   m:vdim              u32 floats of each v: value (schema 3; 0 = none stored)
//   m:dq                the descriptor quantizer (an opaque blob the indexer
//                       encodes), u64 FNV-1a of the blob (schema 3)
//   m:wv                the word index's vocabulary, part of the model (an
//                       opaque blob the indexer encodes: WordVocabulary::
//                       Serialize), u64 FNV-1a of the blob; written at
//                       creation with the model (any schema), copied with it
//                       by `index --model-from` and `merge`, added once by
//                       `migrate` to a database created without one
//   m:ivq               optional: the search vectors' trained, empty
//                       inverted-file index, part of the model (an opaque
//                       blob search encodes: VectorIndex::Serialize), u64
//                       FNV-1a of the blob; written at creation by `train
//                       --search-lists-for`, copied with the model by
//                       `index --model-from` and `merge`
//   m:totals            u64 descriptors, u64 images without features: the
//                       sums over the records, and u64 generation, bumped by
//                       every write that changes which images there are or
//                       their content; kept with every write (schema 3), so
//                       `info` and an unchanged search index read no record
//   m:xindex            u32 format, u64 size, u32 chunks, u64 FNV-1a of the
//                       search index blob; optional (search/search_index.h)
//   x:<chunk BE32>      the search index blob in 4 MiB chunks
//   w:t                 the word index's table (search/stored_word_index.h
//                       encodes it: its images, word counts and segments),
//                       u64 XXH3-64 of the value; optional, written in the
//                       batch that writes m:xindex
//   w:v                 the word index's vocabulary of a database whose
//                       model has none (m:wv), learned with its first word
//                       index, u64 XXH3-64; never written when m:wv exists
//   w:s<seg BE32><word BE32>  the postings of one fine word among the images
//                       a segment added (search/stored_word_index.h), u64
//                       XXH3-64; a segment the table does not list is
//                       uncommitted (a killed run) and never read
//   i:<id BE64>         ImageRecord (values.h, EncodeRecord)
//   v:<id BE64>         u32 dim, dim x f32 (schema 3: f16), u64 hash of the
//                       float bytes; schema 3: the search vector, absent
//                       when m:vdim is 0
//   p:<path bytes>      u64 id
//   f:<id BE64>         local features for spatial verification (an opaque
//                       blob the indexer encodes), u64 hash of the blob;
//                       optional per image
//   t:<id BE64>         thumbnail (a small grey image, an opaque blob the
//                       indexer encodes, ~2 KiB), u64 hash of the blob;
//                       optional per image: written by builds from
//                       2026-11-27 on; an image indexed earlier has none
//                       until an `index` run adds it from its file
// Big-endian ids make byte order equal numeric order, so i:, v:, f: and t:
// scan in id order.
//
// What each schema version stores differently: storage/schema.h (the one
// place it is decided), as a table in storage/README.md ("Format history").
// Values with a format number of their own (m:pca, the search index blob,
// the word index's) say there which formats are read.
// The model, PCA and search index values are checked with FNV-1a, the word
// index's w: values with XXH3-64. The model value gained min_keypoints and a
// trailing FNV-1a of the whole value after schema 1 shipped; models without
// them still decode.
// Every image's record, vector, path entry and counters are written in one
// atomic WriteBatch (WAL on), so an image is either wholly present or absent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "storage/encoding.h"

namespace lookalike {
namespace store_detail {

inline constexpr char kSchemaKey[] = "m:schema";
inline constexpr char kModelKey[] = "m:model";
inline constexpr char kNextIdKey[] = "m:next_id";
inline constexpr char kCountKey[] = "m:count";
inline constexpr char kProjectionKey[] = "m:pca";
inline constexpr char kSearchIndexKey[] = "m:xindex";
inline constexpr char kVectorDimKey[] = "m:vdim";
inline constexpr char kDescriptorQuantizerKey[] = "m:dq";
inline constexpr char kTotalsKey[] = "m:totals";
inline constexpr char kModelWordVocabularyKey[] = "m:wv";
// m:xindex's format: 2 = its checksum is XXH3-64 of the blob (written
// since 2026-11-29); 1 = FNV-1a 64 (still read).
inline constexpr uint32_t kSearchIndexFormat = 2;
inline constexpr uint32_t kSearchIndexFnvFormat = 1;
inline constexpr char kModelSearchQuantizerKey[] = "m:ivq";
inline constexpr size_t kSearchIndexChunk = size_t{4} << 20;

inline std::string SearchIndexChunkKey(uint32_t chunk) {
  std::string k = "x:";
  for (int i = 3; i >= 0; --i) k.push_back(static_cast<char>((chunk >> (8 * i)) & 0xff));
  return k;
}

inline constexpr char kWordTableKey[] = "w:t";
inline constexpr char kWordVocabularyKey[] = "w:v";
inline constexpr char kWordListPrefix[] = "w:s";
inline std::string WordSegmentKey(uint32_t segment) {
  std::string k = kWordListPrefix;
  for (int i = 3; i >= 0; --i) k.push_back(static_cast<char>((segment >> (8 * i)) & 0xff));
  return k;
}
inline std::string WordListKey(uint32_t segment, uint32_t word) {
  std::string k = WordSegmentKey(segment);
  for (int i = 3; i >= 0; --i) k.push_back(static_cast<char>((word >> (8 * i)) & 0xff));
  return k;
}

// m:pca formats: 1 (float32 or float16 components), 2 (+ a u32 of component
// bits after the flags; 4: out_dim f32 steps, then 4-bit codes), 3 (the
// same with 2- or 1-bit codes), 4 (any grid, and out_dim f32 of the mean
// projected on the stored rows in place of the in_dim mean). A build writes
// the lowest format that holds its record, so older builds still read what
// they can: 4-bit matrices keep their mean and format 2; this build writes
// 1- and 2-bit ones (small collections) as format 4.
inline constexpr uint32_t kProjectionFormat = 4;

inline std::string ImageKey(uint64_t id) { return "i:" + encoding::BigEndian64(id); }
inline std::string VectorKey(uint64_t id) { return "v:" + encoding::BigEndian64(id); }
inline std::string PathKey(const std::string& path) { return "p:" + path; }
inline std::string FeaturesKey(uint64_t id) { return "f:" + encoding::BigEndian64(id); }
inline constexpr char kThumbnailPrefix[] = "t:";
inline std::string ThumbnailKey(uint64_t id) {
  return kThumbnailPrefix + encoding::BigEndian64(id);
}

// Every key space above, as `merge` (merge.cc) must treat it. Each key is
// "<letter>:..."; a space this table does not name makes merge fail rather
// than drop it, so a new key space must be added here with its rule.
enum class KeySpace {
  kModel,        // m:schema, m:model, m:pca, m:vdim, m:dq, m:wv, m:ivq: equal in every input
  kCounter,      // m:next_id, m:count, m:totals: recomputed for the result
  kDerived,      // m:xindex, x:<chunk>, w:...: rebuilt afterwards (w: lists may be joined)
  kImageRecord,  // i:<id BE64>: copied with the id re-mapped in key and value
  kImageValue,   // v:, f:, t: <id BE64>: copied with the id re-mapped in the key
  kPath,         // p:<path>: copied with the id in its value re-mapped
};

// The space of `key` (a whole key: m: keys are told apart one by one), or
// false in *known for a key this build does not know.
inline KeySpace KeySpaceOf(const std::string& key, bool* known) {
  *known = true;
  if (key.size() >= 2 && key[1] == ':') {
    switch (key[0]) {
      case 'i':
        return KeySpace::kImageRecord;
      case 'v':
      case 'f':
      case 't':
        return KeySpace::kImageValue;
      case 'p':
        return KeySpace::kPath;
      case 'x':
      case 'w':
        return KeySpace::kDerived;
      default:
        break;
    }
  }
  for (const char* k : {kSchemaKey, kModelKey, kProjectionKey, kVectorDimKey,
                        kDescriptorQuantizerKey, kModelWordVocabularyKey, kModelSearchQuantizerKey})
    if (key == k) return KeySpace::kModel;
  for (const char* k : {kNextIdKey, kCountKey, kTotalsKey})
    if (key == k) return KeySpace::kCounter;
  if (key == kSearchIndexKey) return KeySpace::kDerived;
  *known = false;
  return KeySpace::kModel;
}

}  // namespace store_detail
}  // namespace lookalike
