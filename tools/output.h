// Everything the CLI prints: the table, TSV and JSON forms of each command's
// result, in one place. A new output format (say HTML) is one more case in
// the writers below and one more name in ParseFormat.
//
// Escaping rules, the same in every writer:
//  - table and TSV: EscapeField (backslash, tab, newline, carriage return and
//    other control bytes escaped, so no file name can break a line);
//  - JSON (nlohmann-json, one object per line): strings are UTF-8; a path that
//    is not valid UTF-8 is written with each invalid byte as U+0080..U+00FF
//    and also exactly, as hex, in a "<key>_bytes" field.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "indexer/image_file.h"
#include "indexer/migration.h"
#include "indexer/pipeline.h"
#include "search/dedup.h"
#include "search/searcher.h"

namespace lookalike {

using Json = nlohmann::ordered_json;

// kHtml: the self-contained reports of tools/html_report.h, whole documents
// written by their own functions, not by the per-record writers below.
enum class OutputFormat { kTable, kTsv, kJson, kPairs, kHtml };
const char* OutputFormatName(OutputFormat format);
// Parses --format; throws std::invalid_argument listing `allowed` if `text`
// is not one of them ("--format must be table, tsv or json, got 'x'").
OutputFormat ParseFormat(const std::string& text, const std::vector<OutputFormat>& allowed);

// Escapes a path for one TSV field or table cell: backslash, tab, newline,
// carriage return and other control bytes become \\, \t, \n, \r, \xHH. Other
// bytes (UTF-8 or not) pass as they are.
std::string EscapeField(const std::string& s);
// The inverse of EscapeField. Throws std::invalid_argument naming the
// position of a malformed escape.
std::string UnescapeField(const std::string& s);

// `bytes` as a valid UTF-8 string for JSON: valid UTF-8 sequences (RFC 3629:
// no overlong forms, surrogates or code points above U+10FFFF) are kept, every
// other byte b becomes U+00bb. *lossy (if given) is set when that happened.
std::string Utf8ForJson(const std::string& bytes, bool* lossy = nullptr);
// Sets obj[key] to the path (Utf8ForJson) and, when that lost bytes,
// obj[key + "_bytes"] to the path's bytes in lower-case hex.
void PutPath(Json* obj, const std::string& key, const std::string& path);
// `v` rounded to `decimals` decimal places, so JSON shows that many at most.
double Rounded(double v, int decimals);
// Writes `j` on one line, then a newline.
void WriteJsonLine(std::ostream& out, const Json& j);

std::string FormatSeconds(double s);  // "m:ss" or "h:mm:ss"; "?" if unknown
std::string FormatBytes(uint64_t b);  // "12.3 MiB"

// A per-file error as JSON: {"code", "path"[, "path_bytes"], "message"}.
Json FileErrorJson(const FileError& e);
// The stderr line of a skipped (or, for NO_FEATURES, warned-about) file.
std::string FileErrorLine(const FileError& e);

// `index`'s summary (table or JSON); the table's stage line when verbose.
void WriteIndexSummary(std::ostream& out, const IndexSummary& s, const std::string& db,
                       OutputFormat format, bool verbose);

// `train`: what was created (one line).
void WriteTrainSummary(std::ostream& out, const IndexSummary& s, const std::string& db);

// `merge`: each shard merged or found merged already, the images the
// database holds now and its search index; `format` table or json.
struct MergeReport {
  MergeSummary merge;
  std::string db;
  bool created = false;      // the database did not exist before
  uint64_t images = 0;       // images it holds now
  std::string search_index;  // SearchIndexSync::Summary()
  double merge_seconds = 0;  // checks, table files and ingestion
  double index_seconds = 0;  // the search index update
  // CPU time of the process (every thread, RocksDB's background work
  // included) during the search index update.
  double index_cpu_seconds = 0;
  // CPU time of the thread that ran the update: with --threads 1 all of the
  // update's own work (FAISS and OpenMP run on it), RocksDB's excluded.
  double index_thread_cpu_seconds = 0;
  double seconds = 0;  // the whole command
};
void WriteMergeSummary(std::ostream& out, const MergeReport& r, OutputFormat format);
// `migrate`'s summary (table or JSON).
void WriteMigrateSummary(std::ostream& out, const MigrationSummary& s, const std::string& db,
                         OutputFormat format);

// One query's ranked hits (table, TSV or JSON). A query that failed is written
// by WriteQueryError (JSON only; table and TSV print nothing for it).
void WriteQueryResult(std::ostream& out, const QueryResult& r, OutputFormat format);
// The JSON object of one query's hits that --format json writes; with_ids
// adds each hit's image id (the web API's address of an image).
Json QueryResultJson(const QueryResult& r, bool with_ids = false);
void WriteQueryError(std::ostream& out, const QueryResult& r, OutputFormat format);
// A hit's match evidence as JSON (the `evidence` of each search hit): what
// its level was decided from (search/match_level.h); `hull` and `overlap`
// are [query, hit].
Json MatchEvidenceJson(const MatchEvidence& e);

// `dedup`'s groups (table, TSV, JSON) or every candidate pair (pairs). TSV:
// group, path, score, role, level, reason (one line per member); pairs: path
// a, path b, similarity, matches, inliers, score, spread, duplicate 0/1,
// level, aligned correlation ("-" when not measured), overlap a, overlap b.
void WriteDedup(std::ostream& out, const DedupResult& r, OutputFormat format);
// The JSON object of group `number` (from 1) that --format json writes (its
// fields: README, "dedup"); with_ids adds the image ids of the keeper,
// members and pairs.
Json DedupGroupJson(size_t number, const DedupGroup& group, bool with_ids);
// "similar shots" for level view, "duplicates" otherwise: how the output
// names what its groups are.
std::string DedupModeName(MatchLevel level);

// What `info` reports about a database.
struct InfoReport {
  std::string path;  // absolute database path
  uint32_t schema_version = 0;
  std::string image_hash;  // name of the per-image hash
  uint64_t images = 0, images_without_features = 0, descriptors = 0, size_bytes = 0;
  std::string descriptor;
  uint32_t dim = 0, clusters = 0, max_side = 0, max_features = 0, min_keypoints = 0;
  uint64_t vlad_dim = 0, seed = 0, codebook_hash = 0;
  float contrast_threshold = 0, power = 1;
  bool intra_norm = true, residual_norm = false;
  bool has_pca = false;
  uint32_t pca_out_dim = 0, pca_samples = 0;
  bool pca_whiten = false;
  uint32_t pca_bits = 0;  // bits per stored matrix value: 4, 16 or 32
  // Visual words of the word vocabulary stored with the model; 0 = none (a
  // database created before the model carried it learns its own).
  uint32_t word_vocabulary_words = 0;
  // Inverted lists of the search quantizer stored with the model (`train
  // --search-lists-for`); 0 = none (each database learns its own).
  uint32_t search_lists = 0;
  float pca_regularization = 0, pca_power = 1;
  // What each image stores: bytes of a keypoint's descriptor (its product-
  // quantiser code; 0 = one byte per component, the older layout) and the
  // stored vector (0 = none: derived from the features), float16 or float32.
  uint32_t descriptor_code_bytes = 0;
  uint64_t stored_vector_dim = 0;
  bool stored_vector_half = false;
  std::string backend_auto, backend_detail;
  bool cuda_compiled = false;
};
// What `info` says about an open database (`db`: the path as given).
// Implemented with the command, in info_command.cc.
InfoReport MakeInfoReport(const Store& store, const std::string& db);
void WriteInfo(std::ostream& out, const InfoReport& info, OutputFormat format);
// The JSON object `info --format json` writes.
Json InfoJson(const InfoReport& info);

// `verify`'s verdict: the table form goes to `out` when consistent, the
// problems to `err` otherwise; JSON always to `out`.
void WriteVerify(std::ostream& out, std::ostream& err, const std::string& db, uint64_t images,
                 const std::vector<std::string>& problems, OutputFormat format);

}  // namespace lookalike
