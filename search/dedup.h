// Near-duplicate groups across a whole collection: every image is a query
// against an index of the search vectors (exact by default, or the
// database's persisted approximate index), its k nearest neighbours are its
// candidate pairs, each candidate pair is spatially verified with the stored
// local features (PreparedQuery, the verifier search re-ranks with), and
// verified pairs are joined into groups by connected components
// (union-find). Byte-identical files (same content hash) are always grouped,
// with or without features.
//
// "Near-duplicate" means the same picture after re-encoding, resizing,
// cropping, rotation, a perspective warp, colour changes or an overlay: one
// image maps onto the other by a homography that explains a large share of
// its features, spread over the picture. Two photos of the same scene from
// different viewpoints are not near-duplicates: the coverage score below
// separates most of them, but photos taken from nearly the same place
// (consecutive video frames, a stereo pair) verify like copies and are
// grouped. Defaults measured by tools/eval_dedup.sh and bench/dedup_scale.sh
// (search/README.md, "dedup").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "search/vector_index.h"
#include "search/verifier.h"
#include "storage/store.h"

namespace lookalike {

struct DedupOptions {
  // Candidate pairs: each image's `neighbours` nearest images in the search
  // index (cosine similarity of the search vectors: PCA-whitened VLAD, or
  // full VLAD in a database without a PCA projection), 1..1000. More finds
  // copies ranked behind look-alikes and costs more verifications; groups
  // also connect through their members' own neighbours (a burst of 500
  // frames needs no k of 500).
  int neighbours = 5;
  // ... of which those with similarity < min_similarity are dropped, in
  // [-1, 1] (estimated from the codes by an ivfsq index).
  float min_similarity = 0.02f;
  // The index the neighbours come from: flat = exact, over the stored search
  // vectors (n^2 x d multiply-adds through BLAS: 22 CPU-seconds for 100,000
  // images at 112-d, faster than the approximate index at the recall it
  // needs; search/README.md, "dedup"); auto = the database's
  // search index as `search` uses it (ivfsq from 20,000 images, `index
  // --index-threshold`); ivfsq = approximate (built in memory if the
  // database keeps a flat index).
  VectorIndexKind index_kind = VectorIndexKind::kFlat;
  // Lists an ivfsq index visits per query, 0..65536; 0 = as stored with the
  // index (the searcher's default, about 30 % of the lists). Ignored by flat.
  int64_t nprobe = 0;
  // A verified pair is a duplicate when its score (see DedupPair::score)
  // reaches threshold, in (0, 1], it has at least min_inliers inliers ...
  float threshold = 0.10f;
  int min_inliers = 12;
  // ... and its inliers spread over at least this share of one image's area
  // (DedupPair::spread), in [0, 1]: a shared logo, watermark or caption
  // verifies with dozens of inliers packed into a corner.
  float min_spread = 0.20f;
  // How a pair is verified: each image's features prepared once for all its
  // pairs (PreparedQuery), matched in 32 principal components and fitted by
  // LO-RANSAC; `--match-dims 0 --ransac classic` is the exact matching and
  // classic RANSAC the thresholds above were first calibrated with.
  VerifyOptions verify = CheaperVerifyOptions();
  // Threads for the neighbour search and verification; 0 = all hardware threads.
  int threads = 0;
  // Throws std::invalid_argument naming the offending field (as a CLI flag).
  void Validate() const;
};

// One candidate pair with its evidence. a < b (image ids).
struct DedupPair {
  uint64_t a = 0, b = 0;
  std::string path_a, path_b;  // their absolute paths as indexed
  float similarity = 0;        // search-vector cosine similarity, [-1, 1]
  int matches = 0;             // one-to-one ratio-test matches
  int inliers = 0;             // RANSAC homography inliers; -1 = not verified
  // Coverage: inliers / (keypoints of the image with fewer keypoints), in
  // [0, 1]: the share of the poorer image that the other explains. 1 for
  // byte-identical files.
  float score = 0;
  // Area of the convex hull of the inliers over the area of the image, for
  // the image where it is larger, in [0, 1]; 0 when not verified.
  float spread = 0;
  bool identical = false;  // same content hash: a copy of the same bytes
  // identical, or score >= threshold, inliers >= min_inliers and
  // spread >= min_spread
  bool duplicate = false;
};

struct DedupMember {
  uint64_t id = 0;
  std::string path;  // absolute path as indexed
  uint32_t width = 0, height = 0;
  uint64_t size_bytes = 0;
  // Best score of a duplicate pair joining this image to its group.
  float score = 0;
};

// A connected component of duplicate pairs (2 or more images). Members are
// ordered by pixel count, then file size (both descending), then path: the
// first member is the natural one to keep.
struct DedupGroup {
  std::vector<DedupMember> members;
  std::vector<DedupPair> pairs;  // the duplicate pairs inside the group, by (a, b)
};

struct DedupResult {
  // Ordered by the smallest path among their members (byte order), so the
  // output does not depend on ids or threads.
  std::vector<DedupGroup> groups;
  // Every candidate pair considered, by (a, b): the duplicates and the pairs
  // that failed verification (for calibration and explaining results).
  std::vector<DedupPair> candidates;
  int64_t num_images = 0;            // images in the database
  int64_t num_without_features = 0;  // zero vectors: only grouped when byte-identical
  double search_seconds = 0;         // loading the index and the neighbour search
  // The index the neighbours came from, e.g. "ivfsq (nlist 256, nprobe 77,
  // 8-bit)", and its heap bytes.
  std::string index_description;
  int64_t index_bytes = 0;
  double verify_seconds = 0;  // decoding and verifying features
  // Candidate pairs left unverified because an image has no stored local
  // features (a database indexed before they were kept): never duplicates.
  int64_t num_unverified = 0;
};

// Finds the near-duplicate groups of a database. Reads only (works on a
// read-only store; a stale persisted index is reconciled in memory, as search
// does). Validates `options` here, once (std::invalid_argument naming the
// flag); nothing behind checks them again. Memory: the search index (flat
// 4·d + 8, ivfsq d + ~10 bytes per image: 456 or ~122 at the default 112-d
// PCA; without a PCA projection, which only small collections lack, the
// derived full VLAD vectors, 256 KiB each), each image's record, one query
// batch per thread, and the candidate pairs with their paths (about
// `neighbours` per image). Throws StoreError (corrupt vector or features) or
// std::invalid_argument (options).
DedupResult FindDuplicates(const Store& store, const DedupOptions& options);

}  // namespace lookalike
