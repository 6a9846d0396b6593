// Duplicate groups across a whole collection: every image is a query
// against an index of the search vectors (exact by default, or the
// database's persisted approximate index), its k nearest neighbours are its
// candidate pairs, each candidate pair is spatially verified with the stored
// local features (PreparedQuery, the verifier search re-ranks with) and
// given a match level from its evidence (ClassifyMatch, as search levels its
// hits: search/match_level.h). Byte-identical files (same content hash) are
// `identical`, with or without features.
//
// A group is a star: a keeper, chosen by the keep rule (search/keep_rule.h),
// and images each directly at the requested level with it
// (search/dedup_groups.h), never a chain of pairs in which two members need
// not be the same picture. At the default level, `copy`, a group holds the
// same picture re-encoded, resized, cropped a little, rotated, mirrored or
// recoloured; other shots of one scene (a stereo pair, a burst, consecutive
// video frames) are `view` pairs, grouped only when `view` is asked for
// ("similar shots"). Defaults measured by tools/eval_dedup.sh and
// bench/dedup_scale.sh (search/dedup.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "search/keep_rule.h"
#include "search/match_level.h"
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
  // needs; search/dedup.md); auto = the database's
  // search index as `search` uses it (ivfsq from 20,000 images, `index
  // --index-threshold`); ivfsq = approximate (built in memory if the
  // database keeps a flat index).
  VectorIndexKind index_kind = VectorIndexKind::kFlat;
  // Lists an ivfsq index visits per query, 0..65536; 0 = as stored with the
  // index (the searcher's default, about 30 % of the lists). Ignored by flat.
  int64_t nprobe = 0;
  // The weakest level a pair needs to join a group: identical (the same
  // bytes), copy (the same picture edited; the default), part (one shows a
  // part of the other) or view (another shot of the same scene: "similar
  // shots"). Not none.
  MatchLevel level = MatchLevel::kCopy;
  // How a verified pair is levelled (ClassifyMatch's thresholds).
  MatchLevelOptions levels;
  // A pair is verified (a level above none) with at least min_inliers
  // inliers, a score (see DedupPair::score) of at least threshold, in
  // (0, 1] ...
  float threshold = 0.10f;
  int min_inliers = 12;
  // ... and its inliers spread over at least this share of one image's area
  // (DedupPair::spread), in [0, 1]: a shared logo, watermark or caption
  // verifies with dozens of inliers packed into a corner.
  float min_spread = 0.20f;
  // Mirrored copies: each image's mirror image (its stored features
  // mirrored, indexer/mirror_features.h; nothing is extracted again) is
  // searched too, its `neighbours` nearest images are candidate pairs as
  // well, and those pairs (and the pairs completing a small group) are
  // verified with the first image's mirrored features too. The mirrored
  // verification counts as search counts its mirror's hits: with a level,
  // the higher level (then score) winning; it is marked
  // MatchEvidence::mirrored. Off: left-right flipped copies are not found,
  // and about half the candidate pairs are not verified.
  bool mirrored = true;
  // Which member of a group to keep (search/keep_rule.h).
  KeepRule keep = KeepRule::kOriginal;
  // Reference folders (absolute, normalised, no trailing '/'): their images
  // are always kept, never offered for removal, and keep a group before any
  // other member.
  std::vector<std::string> keep_in;
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
  // Not a neighbour found by the search: verified to complete a small group
  // (every pair inside a component of up to 48 images at the level is).
  bool completing = false;
  int matches = 0;  // one-to-one ratio-test matches
  int inliers = 0;  // RANSAC homography inliers; -1 = not verified
  // Coverage: inliers / (keypoints of the image with fewer keypoints), in
  // [0, 1]: the share of the poorer image that the other explains. 1 for
  // byte-identical files.
  float score = 0;
  // Area of the convex hull of the inliers over the area of the image, for
  // the image where it is larger, in [0, 1]; 0 when not verified.
  float spread = 0;
  bool identical = false;  // same content hash: a copy of the same bytes
  // What verification measured (overlaps, scale, rotation, aligned pixels:
  // search/match_level.h), a = the pair's first image; evidence.mirrored
  // when the pair was verified between a's mirror image and b.
  MatchEvidence evidence;
  // The homography (a's feature frame to b's, a flip included for a
  // mirrored pair) and feature frames, for the keep rule (valid when
  // verification fitted one).
  PairGeometry geometry;
  // ClassifyMatch of the evidence: identical for the same bytes; none when
  // not verified (too few inliers, score under threshold, spread under
  // min_spread).
  MatchLevel level = MatchLevel::kNone;
  // level >= the requested level: the pair may join a group.
  bool duplicate = false;
};

// What a member is in its group.
enum class MemberRole {
  kKeep,       // the keeper: the one to keep
  kReference,  // in a reference folder (--keep-in): kept, never offered for removal
  kDuplicate,  // a duplicate of the keeper: may be removed
};
// "keep", "reference", "duplicate".
const char* MemberRoleName(MemberRole role);

struct DedupMember {
  uint64_t id = 0;
  std::string path;  // absolute path as indexed
  uint32_t width = 0, height = 0;
  uint64_t size_bytes = 0;
  int64_t mtime_ns = 0;  // modification time when indexed
  MemberRole role = MemberRole::kDuplicate;
  // The level and score (DedupPair::score) of its pair with the keeper; the
  // keeper's own are kNone and 1.
  MatchLevel level = MatchLevel::kNone;
  float score = 0;
  // The keeper: why it is kept (DedupGroup::keep_reason); the others: why
  // not, compared with the keeper ("a crop of the keeper (shows 60 % of its
  // picture)", "JPEG quality 50, the keeper's 90", "modified later than the
  // keeper").
  std::string reason;
};

// A star of 2 or more images: the keeper (members[0]) and images each at the
// requested level with it (search/dedup_groups.h). The others follow the
// keeper in the keep rule's order.
struct DedupGroup {
  std::vector<DedupMember> members;
  // Every pair at the level inside the group (not only the keeper's), by
  // (a, b).
  std::vector<DedupPair> pairs;
  // The weakest level of a member's pair with the keeper.
  MatchLevel level = MatchLevel::kNone;
  // What the keeper won by, "; "-joined in the keep rule's order ("shows the
  // most of the picture (the others are crops of it); the highest JPEG
  // quality"), or "in a reference folder (--keep-in)".
  std::string keep_reason;
};

struct DedupResult {
  // Ordered by the smallest path among their members (byte order), so the
  // output does not depend on ids or threads.
  std::vector<DedupGroup> groups;
  MatchLevel level = MatchLevel::kCopy;  // the level asked for
  KeepRule keep = KeepRule::kOriginal;   // the keep rule used
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
  // Candidate pairs the mirror images found (DedupOptions::mirrored), and
  // the pairs at a level above none that are mirrored.
  int64_t num_mirror_candidates = 0;
  int64_t num_mirrored = 0;
  // Candidate pairs left unverified because an image has no stored local
  // features (a database indexed before they were kept): never duplicates.
  int64_t num_unverified = 0;
  // Grouped images whose file could not be read for the keep rule, or no
  // longer holds the bytes that were indexed: compared by their records
  // only (pixels, modification time, path).
  int64_t num_unread = 0;
  double keep_seconds = 0;  // reading files for the keep rule and forming groups
};

// Finds the duplicate groups of a database. Reads only (works on a
// read-only store; a stale persisted index is reconciled in memory, as search
// does); the `original` keep rule also reads the grouped images' files. Validates `options` here,
// once (std::invalid_argument naming the flag); nothing behind checks them again. Memory: the
// search index (flat 4·d + 8, ivfsq d + ~10 bytes per image: 456 or ~122 at the default 112-d PCA;
// without a PCA projection, which only small collections lack, the derived full VLAD vectors, 256
// KiB each), each image's record, one query batch per thread, and the candidate pairs with their
// paths (about `neighbours` per image). Throws StoreError (corrupt vector or features) or
// std::invalid_argument (options).
DedupResult FindDuplicates(const Store& store, const DedupOptions& options);

}  // namespace lookalike
