#include "tools/output.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "tools/flags.h"

namespace lookalike {

const char* OutputFormatName(OutputFormat format) {
  switch (format) {
    case OutputFormat::kTable:
      return "table";
    case OutputFormat::kTsv:
      return "tsv";
    case OutputFormat::kJson:
      return "json";
    case OutputFormat::kPairs:
      return "pairs";
    case OutputFormat::kHtml:
      return "html";
  }
  return "?";
}

OutputFormat ParseFormat(const std::string& text, const std::vector<OutputFormat>& allowed) {
  std::string names;
  for (size_t i = 0; i < allowed.size(); ++i) {
    if (text == OutputFormatName(allowed[i])) return allowed[i];
    names += i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ";
    names += OutputFormatName(allowed[i]);
  }
  throw std::invalid_argument("--format must be " + names + ", got '" + text + "'");
}

std::string EscapeField(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

std::string UnescapeField(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    const char c = i + 1 < s.size() ? s[i + 1] : '\0';
    auto hex = [](char h) {
      if (h >= '0' && h <= '9') return h - '0';
      if (h >= 'a' && h <= 'f') return h - 'a' + 10;
      return -1;
    };
    if (c == '\\' || c == 't' || c == 'n' || c == 'r') {
      out += c == 't' ? '\t' : c == 'n' ? '\n' : c == 'r' ? '\r' : '\\';
      ++i;
    } else if (c == 'x' && i + 3 < s.size() && hex(s[i + 2]) >= 0 && hex(s[i + 3]) >= 0) {
      out += static_cast<char>(hex(s[i + 2]) * 16 + hex(s[i + 3]));
      i += 3;
    } else {
      throw std::invalid_argument("malformed escape at byte " + std::to_string(i));
    }
  }
  return out;
}

namespace {

// Length of the valid UTF-8 sequence at s[i], 0 if the byte there starts none.
size_t Utf8SequenceLength(const std::string& s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t len = 0;
  if (c < 0x80) return 1;
  if ((c >> 5) == 0x6)
    len = 2;
  else if ((c >> 4) == 0xE)
    len = 3;
  else if ((c >> 3) == 0x1E)
    len = 4;
  if (len == 0 || i + len > s.size()) return 0;
  uint32_t cp = c & (0x7F >> len);
  for (size_t j = 1; j < len; ++j) {
    const unsigned char cc = static_cast<unsigned char>(s[i + j]);
    if ((cc >> 6) != 0x2) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  // Overlong forms, UTF-16 surrogates and code points above U+10FFFF are not
  // UTF-8 either (RFC 3629); a JSON writer would refuse them.
  static const uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMinForLength[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return 0;
  return len;
}

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// The float as the shortest decimal that reads back as it (0.04, not
// 0.03999999910593033 as its double would print).
double Decimal(float v) { return std::strtod(Shortest(v).c_str(), nullptr); }

}  // namespace

std::string Utf8ForJson(const std::string& bytes, bool* lossy) {
  std::string out;
  out.reserve(bytes.size());
  bool lost = false;
  for (size_t i = 0; i < bytes.size();) {
    const size_t len = Utf8SequenceLength(bytes, i);
    if (len > 0) {
      out.append(bytes, i, len);
      i += len;
      continue;
    }
    const unsigned char b = static_cast<unsigned char>(bytes[i++]);  // always >= 0x80
    out += static_cast<char>(0xC0 | (b >> 6));
    out += static_cast<char>(0x80 | (b & 0x3F));
    lost = true;
  }
  if (lossy) *lossy = lost;
  return out;
}

void PutPath(Json* obj, const std::string& key, const std::string& path) {
  bool lossy = false;
  (*obj)[key] = Utf8ForJson(path, &lossy);
  if (!lossy) return;
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * path.size());
  for (unsigned char c : path) {
    hex += kHex[c >> 4];
    hex += kHex[c & 15];
  }
  (*obj)[key + "_bytes"] = hex;
}

double Rounded(double v, int decimals) {
  // Through the decimal text, so the JSON number is exactly the rounded
  // decimal (0.1235, never 0.12350000000000001).
  return std::strtod(Fixed(v, decimals).c_str(), nullptr);
}

void WriteJsonLine(std::ostream& out, const Json& j) { out << j.dump() << "\n"; }

std::string FormatSeconds(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t t = static_cast<int64_t>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(t / 3600),
                  static_cast<long long>(t / 60 % 60), static_cast<long long>(t % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(t / 60),
                  static_cast<long long>(t % 60));
  return buf;
}

std::string FormatBytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1ull << 30));
  else if (b >= (1ull << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1ull << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

Json FileErrorJson(const FileError& e) {
  Json j;
  j["code"] = FileErrorCodeName(e.code);
  PutPath(&j, "path", e.path);
  j["message"] = Utf8ForJson(e.message);
  return j;
}

std::string FileErrorLine(const FileError& e) {
  return std::string(e.code == FileErrorCode::kNoFeatures ? "warning" : "skipped") + ": " +
         EscapeField(e.path) + ": " + FileErrorCodeName(e.code) + ": " + e.message;
}

// --------------------------------------------------------------------- index

namespace {

void WriteIndexJson(std::ostream& out, const IndexSummary& s) {
  const double rate = s.seconds > 0 ? s.indexed / s.seconds : 0;
  Json j;
  j["created"] = s.created;
  j["listed"] = s.listed;
  j["indexed"] = s.indexed;
  j["unchanged"] = s.unchanged;
  j["touched"] = s.touched;
  j["thumbnails_added"] = s.thumbnails_added;
  j["removed"] = s.removed;
  j["no_features"] = s.no_features;
  j["ignored"] = s.ignored;
  j["skipped"] = Json::object();
  for (const auto& [code, count] : s.skipped) j["skipped"][code] = count;
  j["cancelled"] = s.cancelled;
  j["projection_learned"] = s.projection_learned;
  j["projection_bits"] = s.projection_bits;
  j["projection_replaced_bits"] = s.projection_replaced_bits;
  j["seconds"] = s.seconds;
  j["images_per_second"] = rate;
  j["threads"] = s.threads;
  j["backend"] = s.backend;
  const StageTimes& t = s.stages;
  j["stage_seconds"] = {{"read_decode", t.read_decode},
                        {"read", t.read},
                        {"decode", t.decode},
                        {"resize", t.resize},
                        {"extract", t.extract},
                        {"train", t.train},
                        {"quantizer", t.quantizer},
                        {"words", t.words},
                        {"pca", t.pca},
                        {"encode", t.encode},
                        {"assign", t.assign},
                        {"aggregate", t.aggregate},
                        {"compact", t.compact},
                        {"project", t.project},
                        {"store", t.store},
                        {"search_index", t.search_index}};
  WriteJsonLine(out, j);
}

void WriteIndexTable(std::ostream& out, const IndexSummary& s, const std::string& db,
                     bool verbose) {
  const double rate = s.seconds > 0 ? s.indexed / s.seconds : 0;
  out << (s.cancelled ? "interrupted: committed work is kept; re-run to finish\n" : "")
      << (s.created ? "created " : "updated ") << db << "\n"
      << "  indexed    " << s.indexed
      << (s.no_features ? " (" + std::to_string(s.no_features) + " without features)" : "")
      << "\n  unchanged  " << s.unchanged + s.touched << "\n  removed    " << s.removed
      << "\n  skipped    " << s.total_skipped();
  if (s.total_skipped()) {
    out << " (";
    bool first = true;
    for (const auto& [code, count] : s.skipped) {
      out << (first ? "" : ", ") << code << " " << count;
      first = false;
    }
    out << ")";
  }
  if (s.ignored) out << "\n  ignored    " << s.ignored << " non-image files";
  if (s.thumbnails_added)
    out << "\n  thumbnails " << s.thumbnails_added
        << " added to images indexed before they were kept (decoded, not re-extracted)";
  if (s.projection_learned && s.projection_replaced_bits)
    out << "\n  PCA        learned again at " << s.projection_bits << " bits (was "
        << s.projection_replaced_bits << "): the collection affords a finer matrix";
  else if (s.projection_learned)
    out << "\n  PCA        learned now (" << s.projection_learned << "-d, " << s.projection_bits
        << "-bit): the collection reached --pca-min-images";
  std::ostringstream line;
  line << std::fixed << std::setprecision(1) << "\n  time       " << s.seconds << " s, " << rate
       << " images/s (" << s.threads << " threads, " << s.backend << " encoder)\n";
  if (verbose) {
    const StageTimes& t = s.stages;
    line << std::setprecision(2) << "  stages     read " << t.read << " s, decode " << t.decode
         << " s, resize " << t.resize << " s, extract " << t.extract << " s, compact " << t.compact
         << " s (thread-seconds); train " << t.train << " s, quantizer " << t.quantizer
         << " s, words " << t.words << " s, pca " << t.pca << " s, assign " << t.assign
         << " s, aggregate " << t.aggregate << " s, project " << t.project << " s, store "
         << t.store << " s, search index " << t.search_index << " s\n";
  }
  out << line.str();
}

}  // namespace

void WriteIndexSummary(std::ostream& out, const IndexSummary& s, const std::string& db,
                       OutputFormat format, bool verbose) {
  if (format == OutputFormat::kJson)
    WriteIndexJson(out, s);
  else
    WriteIndexTable(out, s, db, verbose);
}

void WriteTrainSummary(std::ostream& out, const IndexSummary& s, const std::string& db) {
  std::ostringstream line;
  line << std::fixed << std::setprecision(1) << "trained " << db << " from " << s.listed
       << " listed images in " << s.seconds << " s (k-means " << s.stages.train
       << " s, word vocabulary " << s.stages.words << " s, PCA " << s.stages.pca << " s)\n";
  out << line.str();
}

// --------------------------------------------------------------------- merge

void WriteMergeSummary(std::ostream& out, const MergeReport& r, OutputFormat format) {
  if (format == OutputFormat::kJson) {
    Json j;
    PutPath(&j, "db", r.db);
    j["created"] = r.created;
    j["added"] = r.merge.added;
    j["images"] = r.images;
    j["table_bytes"] = r.merge.sst_bytes;
    j["shards"] = Json::array();
    for (const ShardMerge& s : r.merge.shards) {
      Json shard;
      PutPath(&shard, "path", s.path);
      shard["images"] = s.images;
      shard["already_merged"] = s.already_merged;
      j["shards"].push_back(std::move(shard));
    }
    j["search_index"] = r.search_index;
    j["merge_seconds"] = r.merge_seconds;
    j["index_seconds"] = r.index_seconds;
    j["index_cpu_seconds"] = r.index_cpu_seconds;
    j["index_thread_cpu_seconds"] = r.index_thread_cpu_seconds;
    j["seconds"] = r.seconds;
    WriteJsonLine(out, j);
    return;
  }
  std::ostringstream text;
  text << (r.created ? "created " : "updated ") << EscapeField(r.db) << "\n";
  for (const ShardMerge& s : r.merge.shards)
    text << "  " << (s.already_merged ? "already merged " : "merged         ")
         << EscapeField(s.path) << " (" << s.images << " images)\n";
  text << std::fixed << std::setprecision(1) << "  added        " << r.merge.added << " images, "
       << r.images << " in all\n  search index " << r.search_index << "\n  time         "
       << r.seconds << " s (merge " << r.merge_seconds << " s, search index " << r.index_seconds
       << " s)\n";
  out << text.str();
}

// ------------------------------------------------------------------- migrate

void WriteMigrateSummary(std::ostream& out, const MigrationSummary& s, const std::string& db,
                         OutputFormat format) {
  if (format == OutputFormat::kJson) {
    Json j;
    PutPath(&j, "db", db);
    j["from_schema"] = s.from_schema;
    j["schema"] = s.schema;
    j["migrated"] = s.migrated;
    j["resumed"] = s.resumed;
    j["cancelled"] = s.cancelled;
    j["leftover_removed"] = s.leftover_removed;
    j["images"] = s.images;
    j["converted"] = s.converted;
    j["reused"] = s.reused;
    j["dropped"] = s.dropped;
    j["bytes_before"] = s.bytes_before;
    j["bytes_after"] = s.bytes_after;
    j["word_vocabulary"] = s.word_vocabulary;
    j["seconds"] = Rounded(s.seconds, 3);
    WriteJsonLine(out, j);
    return;
  }
  const std::string vocabulary =
      s.word_vocabulary == "adopted"   ? "the model gained its word index's vocabulary"
      : s.word_vocabulary == "learned" ? "the model gained a word vocabulary learned from its "
                                         "stored features"
      : s.word_vocabulary == "none"    ? "no image has stored features to learn the model's word "
                                         "vocabulary from; migrate again once some have"
                                       : "";
  if (s.cancelled) {
    out << "interrupted: " << EscapeField(db) << " is unchanged (schema " << s.from_schema
        << "); the copy made so far is kept, re-run to finish\n";
    return;
  }
  if (!s.migrated) {
    out << EscapeField(db) << " is already schema " << s.from_schema << "; nothing to convert"
        << (s.leftover_removed ? " (removed the original an interrupted migration left)" : "")
        << "\n";
    if (!vocabulary.empty()) out << "  " << vocabulary << "\n";
    return;
  }
  std::ostringstream line;
  line << std::fixed << std::setprecision(1) << "migrated " << EscapeField(db) << " from schema "
       << s.from_schema << " to " << kSchemaVersion << "\n  images     " << s.images << " ("
       << s.converted << " converted now"
       << (s.resumed ? ", " + std::to_string(s.reused) + " by an interrupted run" : "")
       << ")\n  size       " << FormatBytes(s.bytes_before) << " -> " << FormatBytes(s.bytes_after)
       << "\n  time       " << s.seconds << " s\n";
  if (!vocabulary.empty()) line << "  " << vocabulary << "\n";
  out << line.str();
}

// -------------------------------------------------------------------- search

Json MatchEvidenceJson(const MatchEvidence& e) {
  Json j;
  if (e.identical) j["identical"] = true;
  j["verified"] = e.verified;
  if (!e.verified) return j;
  j["matches"] = e.matches;
  j["inliers"] = e.inliers;
  j["consistent"] = e.consistent;
  j["coverage"] = Rounded(e.coverage, 4);
  j["hull"] = Json::array({Rounded(e.hull_a, 4), Rounded(e.hull_b, 4)});
  if (e.homography) {
    j["overlap"] = Json::array({Rounded(e.overlap_a, 4), Rounded(e.overlap_b, 4)});
    j["content"] = Json::array({Rounded(e.content_a, 4), Rounded(e.content_b, 4)});
    j["residual"] = Rounded(e.residual, 3);
    j["structured_residual"] = Rounded(e.structured_residual, 3);
    j["scale"] = Rounded(e.scale, 4);
    j["rotation"] = Rounded(e.rotation, 2);
    j["mirrored"] = e.mirrored;
    j["anisotropy"] = Rounded(e.anisotropy, 4);
    j["perspective"] = Rounded(e.perspective, 4);
  }
  if (e.aligned_correlation) j["aligned"] = Rounded(*e.aligned_correlation, 4);
  return j;
}

Json QueryResultJson(const QueryResult& r, bool with_ids) {
  Json j;
  PutPath(&j, "query", r.query);
  j["seconds"] = Rounded(r.seconds, 4);
  j["results"] = Json::array();
  for (size_t i = 0; i < r.hits.size(); ++i) {
    const Hit& h = r.hits[i];
    Json hit;
    hit["rank"] = i + 1;
    if (with_ids) hit["id"] = h.id;
    PutPath(&hit, "path", h.path);
    hit["score"] = Rounded(h.score, 6);
    hit["similarity"] = Rounded(h.similarity, 6);
    if (h.inliers >= 0) hit["inliers"] = h.inliers;
    if (h.colour >= 0) hit["colour"] = Rounded(h.colour, 4);
    if (h.words >= 0) hit["words"] = Rounded(h.words, 4);
    if (h.thumbnail > -1) hit["thumbnail"] = Rounded(h.thumbnail, 4);
    hit["level"] = MatchLevelName(h.level);
    hit["evidence"] = MatchEvidenceJson(h.evidence);
    j["results"].push_back(std::move(hit));
  }
  return j;
}

void WriteQueryError(std::ostream& out, const QueryResult& r, OutputFormat format) {
  if (format != OutputFormat::kJson || !r.error) return;
  Json j;
  PutPath(&j, "query", r.query);
  j["error"] = FileErrorJson(*r.error);
  j["results"] = Json::array();
  WriteJsonLine(out, j);
}

void WriteQueryResult(std::ostream& out, const QueryResult& r, OutputFormat format) {
  if (format == OutputFormat::kTsv) {
    for (size_t i = 0; i < r.hits.size(); ++i)
      out << EscapeField(r.query) << '\t' << i + 1 << '\t' << EscapeField(r.hits[i].path) << '\t'
          << Fixed(r.hits[i].score, 6) << '\t' << MatchLevelName(r.hits[i].level) << '\n';
  } else if (format == OutputFormat::kJson) {
    WriteJsonLine(out, QueryResultJson(r));
  } else {
    out << "query " << EscapeField(r.query) << "\n";
    if (r.hits.empty()) out << "  (no results)\n";
    out << "  rank  score   inliers  level      path\n";
    for (size_t i = 0; i < r.hits.size(); ++i) {
      char line[80], inl[16] = "      -";
      if (r.hits[i].inliers >= 0) std::snprintf(inl, sizeof inl, "%7d", r.hits[i].inliers);
      std::snprintf(line, sizeof line, "  %4zu  %.4f %s  %-9s  ", i + 1, r.hits[i].score, inl,
                    MatchLevelName(r.hits[i].level));
      out << line << EscapeField(r.hits[i].path) << "\n";
    }
  }
}

// --------------------------------------------------------------------- dedup

Json DedupGroupJson(size_t number, const DedupGroup& group, bool with_ids) {
  Json j;
  j["group"] = number;
  j["level"] = MatchLevelName(group.level);
  PutPath(&j, "keeper", group.members.front().path);
  if (with_ids) j["keeper_id"] = group.members.front().id;
  j["keep_reason"] = Utf8ForJson(group.keep_reason);
  j["members"] = Json::array();
  for (const DedupMember& m : group.members) {
    Json member;
    if (with_ids) member["id"] = m.id;
    PutPath(&member, "path", m.path);
    member["role"] = MemberRoleName(m.role);
    member["level"] = m.role == MemberRole::kKeep ? Json(nullptr) : Json(MatchLevelName(m.level));
    member["score"] = Rounded(m.score, 4);
    member["reason"] = Utf8ForJson(m.reason);
    member["width"] = m.width;
    member["height"] = m.height;
    member["bytes"] = m.size_bytes;
    member["mtime"] = m.mtime_ns / 1000000000;
    j["members"].push_back(std::move(member));
  }
  j["pairs"] = Json::array();
  for (const DedupPair& p : group.pairs) {
    Json pair;
    if (with_ids) {
      pair["id_a"] = p.a;
      pair["id_b"] = p.b;
    }
    PutPath(&pair, "a", p.path_a);
    PutPath(&pair, "b", p.path_b);
    pair["level"] = MatchLevelName(p.level);
    pair["similarity"] = Rounded(p.similarity, 4);
    pair["inliers"] = p.inliers;
    pair["score"] = Rounded(p.score, 4);
    pair["spread"] = Rounded(p.spread, 4);
    pair["identical"] = p.identical;
    pair["mirrored"] = p.evidence.mirrored;
    j["pairs"].push_back(std::move(pair));
  }
  return j;
}

std::string DedupModeName(MatchLevel level) {
  return level == MatchLevel::kView ? "similar shots" : "duplicates";
}

namespace {

void WriteDedupTable(std::ostream& out, const DedupResult& r) {
  out << DedupModeName(r.level) << " at level " << MatchLevelName(r.level) << " or above"
      << (r.level == MatchLevel::kView ? " (other shots of the same scene too, not only copies)"
                                       : "")
      << ": " << r.groups.size() << " groups among " << r.num_images << " images; keep rule "
      << KeepRuleName(r.keep) << "\n";
  for (size_t g = 0; g < r.groups.size(); ++g) {
    const DedupGroup& group = r.groups[g];
    out << "\ngroup " << g + 1 << ": " << MatchLevelName(group.level) << ", "
        << group.members.size() << " images; keep: " << EscapeField(group.keep_reason) << "\n";
    for (const DedupMember& m : group.members) {
      char line[96];
      std::snprintf(line, sizeof line, "  %-9s  %-9s  %.3f  %11s  ", MemberRoleName(m.role),
                    m.role == MemberRole::kKeep ? "" : MatchLevelName(m.level), m.score,
                    (std::to_string(m.width) + "x" + std::to_string(m.height)).c_str());
      out << line << EscapeField(m.path);
      if (m.role != MemberRole::kKeep) out << "  (" << EscapeField(m.reason) << ")";
      out << "\n";
    }
  }
}

}  // namespace

void WriteDedup(std::ostream& out, const DedupResult& r, OutputFormat format) {
  if (format == OutputFormat::kPairs) {
    for (const DedupPair& p : r.candidates)
      out << EscapeField(p.path_a) << '\t' << EscapeField(p.path_b) << '\t'
          << Fixed(p.similarity, 4) << '\t' << p.matches << '\t' << p.inliers << '\t'
          << Fixed(p.score, 4) << '\t' << Fixed(p.spread, 4) << '\t' << (p.duplicate ? 1 : 0)
          << '\t' << MatchLevelName(p.level) << '\t'
          << (p.evidence.aligned_correlation ? Fixed(*p.evidence.aligned_correlation, 4) : "-")
          << '\t' << Fixed(p.evidence.overlap_a, 4) << '\t' << Fixed(p.evidence.overlap_b, 4)
          << '\t' << (p.evidence.mirrored ? 1 : 0) << '\n';
    return;
  }
  if (format == OutputFormat::kTable) {
    WriteDedupTable(out, r);
    return;
  }
  for (size_t g = 0; g < r.groups.size(); ++g) {
    if (format == OutputFormat::kJson) {
      WriteJsonLine(out, DedupGroupJson(g + 1, r.groups[g], false));
      continue;
    }
    for (const DedupMember& m : r.groups[g].members)
      out << g + 1 << '\t' << EscapeField(m.path) << '\t' << Fixed(m.score, 4) << '\t'
          << MemberRoleName(m.role) << '\t'
          << (m.role == MemberRole::kKeep ? "-" : MatchLevelName(m.level)) << '\t'
          << EscapeField(m.reason) << '\n';
  }
}

// ---------------------------------------------------------------------- info

namespace {

std::string Hex16(uint64_t v) {
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(v));
  return hash;
}

}  // namespace

Json InfoJson(const InfoReport& i) {
  Json j;
  PutPath(&j, "path", i.path);
  j["schema_version"] = i.schema_version;
  j["image_hash"] = i.image_hash;
  j["images"] = i.images;
  j["images_without_features"] = i.images_without_features;
  j["descriptors"] = i.descriptors;
  j["size_bytes"] = i.size_bytes;
  j["model"] = {{"descriptor", i.descriptor},
                {"dim", i.dim},
                {"clusters", i.clusters},
                {"vlad_dim", i.vlad_dim},
                {"max_side", i.max_side},
                {"contrast_threshold", Decimal(i.contrast_threshold)},
                {"max_features", i.max_features},
                {"min_keypoints", i.min_keypoints},
                {"power", Decimal(i.power)},
                {"intra_norm", i.intra_norm},
                {"residual_norm", i.residual_norm},
                {"seed", i.seed},
                {"codebook_hash", Hex16(i.codebook_hash)},
                {"word_vocabulary_words",
                 i.word_vocabulary_words ? Json(i.word_vocabulary_words) : Json(nullptr)},
                {"search_lists", i.search_lists ? Json(i.search_lists) : Json(nullptr)}};
  if (i.has_pca)
    j["pca"] = {{"out_dim", i.pca_out_dim},
                {"whiten", i.pca_whiten},
                {"regularization", Decimal(i.pca_regularization)},
                {"power", Decimal(i.pca_power)},
                {"samples", i.pca_samples},
                {"half_precision", i.pca_bits == 16},
                {"component_bits", i.pca_bits}};
  else
    j["pca"] = nullptr;
  j["stored"] = {{"descriptor_bytes", i.descriptor_code_bytes ? i.descriptor_code_bytes : i.dim},
                 {"descriptor_quantized", i.descriptor_code_bytes > 0},
                 {"vector_dim", i.stored_vector_dim},
                 {"vector_precision", i.stored_vector_dim == 0 ? Json(nullptr)
                                      : i.stored_vector_half   ? Json("float16")
                                                               : Json("float32")}};
  j["backend"] = {{"auto", i.backend_auto},
                  {"cuda_compiled", i.cuda_compiled},
                  {"detail", Utf8ForJson(i.backend_detail)}};
  return j;
}

namespace {

void WriteInfoTable(std::ostream& out, const InfoReport& i) {
  const std::string pca =
      i.has_pca ? std::to_string(i.pca_out_dim) + "-d" + (i.pca_whiten ? ", whitened" : "") +
                      ", learned from " + std::to_string(i.pca_samples) + " images" +
                      (i.pca_bits == 16   ? ", float16"
                       : i.pca_bits == 32 ? ", float32"
                                          : ", " + std::to_string(i.pca_bits) + "-bit")
                : std::string("none (search uses the full VLAD vectors)");
  out << "database      " << EscapeField(i.path) << "\n"
      << "schema        " << i.schema_version << " (" << i.image_hash
      << " checksums of vectors and features, and file content hashes)\n"
      << "images        " << i.images
      << (i.images_without_features
              ? " (" + std::to_string(i.images_without_features) + " without features)"
              : "")
      << "\n"
      << "descriptors   " << i.descriptors << "\n"
      << "size on disk  " << FormatBytes(i.size_bytes) << "\n"
      << "model         " << i.descriptor << " d=" << i.dim << ", K=" << i.clusters << " (VLAD "
      << i.vlad_dim << "-d), max side " << i.max_side << " px\n"
      << "              SIFT contrast threshold " << i.contrast_threshold << ", max features "
      << i.max_features << ", min keypoints " << i.min_keypoints << "\n"
      << "              power " << i.power << ", intra-norm " << (i.intra_norm ? "on" : "off")
      << ", residual-norm " << (i.residual_norm ? "on" : "off") << ", seed " << i.seed << "\n"
      << "codebook      " << Hex16(i.codebook_hash) << "\n"
      << "PCA           " << pca << "\n"
      << "visual words  "
      << (i.word_vocabulary_words
              ? std::to_string(i.word_vocabulary_words) + " (" + std::to_string(i.clusters) +
                    " x " + std::to_string(i.word_vocabulary_words / std::max(1u, i.clusters)) +
                    "), the model's vocabulary"
              : std::string("no vocabulary in the model: its word index learns its own "
                            "('lookalike migrate' adds one)"))
      << "\n"
      << "search lists  "
      << (i.search_lists ? std::to_string(i.search_lists) +
                               " inverted lists in the model: its ivfsq index fills them, and "
                               "merge joins its shards' lists"
                         : std::string("none in the model: its ivfsq index learns its own"))
      << "\n"
      << "per image     "
      << (i.descriptor_code_bytes
              ? std::to_string(i.descriptor_code_bytes) + "-byte descriptor codes"
              : std::to_string(i.dim) + "-byte descriptors")
      << ", "
      << (i.stored_vector_dim == 0 ? std::string("no stored vector (derived from the features)")
                                   : std::to_string(i.stored_vector_dim) + "-d " +
                                         (i.stored_vector_half ? "float16" : "float32") + " vector")
      << "\n"
      << "backend       auto -> " << i.backend_auto << " (" << i.backend_detail << ")\n";
}

}  // namespace

void WriteInfo(std::ostream& out, const InfoReport& info, OutputFormat format) {
  if (format == OutputFormat::kJson)
    WriteJsonLine(out, InfoJson(info));
  else
    WriteInfoTable(out, info);
}

// -------------------------------------------------------------------- verify

void WriteVerify(std::ostream& out, std::ostream& err, const std::string& db, uint64_t images,
                 const std::vector<std::string>& problems, OutputFormat format) {
  if (format == OutputFormat::kJson) {
    Json j;
    j["ok"] = problems.empty();
    j["images"] = images;
    j["problems"] = Json::array();
    for (const std::string& p : problems) j["problems"].push_back(Utf8ForJson(p));
    WriteJsonLine(out, j);
  } else if (problems.empty()) {
    out << "ok: " << images << " images, database consistent\n";
  } else {
    for (const std::string& p : problems)
      err << "lookalike verify: corrupt: " << EscapeField(p) << "\n";
    err << "lookalike verify: " << db << " is corrupt (" << problems.size()
        << (problems.size() >= 100 ? "+" : "")
        << " problems); re-index the folder into a new --db\n";
  }
}

}  // namespace lookalike
