// The values the store keeps and returns per image, and what its bulk
// operations report: plain structs, shared by the store and its callers.
// How they are coded on disk: storage/values.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lookalike {

// How each image ended up in the index.
enum class ImageStatus : uint8_t {
  kOk = 0,          // encoded from >= 1 descriptor
  kNoFeatures = 1,  // decoded but no keypoints: stored as the zero vector
};

// Sums over a database's records, kept up to date by every write (schema 3).
struct ImageTotals {
  uint64_t descriptors = 0;
  uint64_t without_features = 0;  // records of status kNoFeatures
  // Bumped by every write that adds or removes an image or changes its
  // content hash or status: a reader that saw generation g and sees g again
  // knows which images there are without reading a record.
  uint64_t generation = 0;
  bool operator==(const ImageTotals& o) const {
    return descriptors == o.descriptors && without_features == o.without_features &&
           generation == o.generation;
  }
};

struct ImageRecord {
  uint64_t id = 0;            // assigned by the store; 0 = not yet stored
  std::string path;           // absolute path, raw bytes as the file system gave them
  uint64_t size_bytes = 0;    // file size when indexed
  int64_t mtime_ns = 0;       // modification time when indexed (ns since epoch)
  uint64_t content_hash = 0;  // Store::ContentHash of the file bytes that were decoded
  uint32_t width = 0;         // decoded size before downscaling, pixels
  uint32_t height = 0;
  uint32_t num_descriptors = 0;
  ImageStatus status = ImageStatus::kOk;
  // Colour histogram (indexer/colour.h, 288 bytes); empty when unknown
  // (schema-1 databases, which do not store it).
  std::vector<uint8_t> colour;
};

// What Store::MergeShards did with each shard.
struct ShardMerge {
  std::string path;             // the shard's folder
  uint64_t images = 0;          // images it holds
  uint64_t id_offset = 0;       // its image x is image id_offset + x of the database (merged now)
  bool already_merged = false;  // every one of its images was in the database already
};
struct MergeSummary {
  std::vector<ShardMerge> shards;  // in the order given
  uint64_t added = 0;              // images added
  uint64_t sst_bytes = 0;          // bytes of the ingested table files
};
// What Store::PutSearchIndex writes of the word index (search/
// stored_word_index.h encodes the values; the store adds a checksum to each).
struct WordIndexCommit {
  std::string table;       // w:t
  std::string vocabulary;  // w:v; empty = keep the stored one
  // The segments `table` lists: every w:s key of another segment is deleted.
  std::vector<uint32_t> segments;
};

}  // namespace lookalike
