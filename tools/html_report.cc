#include "tools/html_report.h"

#include <cstdio>
#include <ostream>

#include "tools/output.h"
#include "tools/thumbnail.h"

namespace lookalike {
namespace {

constexpr char kStyle[] =
    "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;background:#fafaf8}"
    "h1{font-size:1.4em}h2{font-size:1.05em;margin-top:1.6em;word-break:break-all}"
    ".row{display:flex;flex-wrap:wrap;gap:10px}"
    ".card{background:#fff;border:1px solid #ddd;border-radius:5px;padding:5px;width:170px;"
    "font-size:12px}.card.verified{border-color:#26a69a}.card.keep{border-color:#2e7d32}"
    ".pic{height:160px;display:flex;align-items:center;justify-content:center;background:#eceff1}"
    ".pic img{max-width:160px;max-height:160px}.path{word-break:break-all;color:#444}"
    ".badge{background:#2e7d32;color:#fff;border-radius:3px;padding:0 4px;font-weight:bold}"
    ".note{color:#b71c1c}"
    ".level{border-radius:3px;padding:0 4px;font-weight:bold;color:#fff;background:#9e9e9e}"
    ".level.identical,.level.copy{background:#2e7d32}.level.part{background:#1565c0}"
    ".level.view{background:#ef6c00}";

std::string Base64(const std::string& bytes) {
  static const char kTable[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v =
        (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    out += kTable[v >> 18];
    out += kTable[(v >> 12) & 63];
    out += kTable[(v >> 6) & 63];
    out += kTable[v & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = uint8_t(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= uint8_t(bytes[i + 1]) << 8;
    out += kTable[v >> 18];
    out += kTable[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kTable[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// The picture of a thumbnail, or why there is none.
std::string Picture(const Thumbnail& t) {
  if (t.jpeg.empty()) return "<span class=\"note\">" + EscapeHtml(t.error) + "</span>";
  return "<img alt=\"\" src=\"data:image/jpeg;base64," + Base64(t.jpeg) + "\">";
}

std::string Number(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

void Begin(std::ostream& out, const std::string& title) {
  out << "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>"
      << EscapeHtml(title) << "</title>\n<style>" << kStyle << "</style></head><body>\n<h1>"
      << EscapeHtml(title) << "</h1>\n";
}

// A card: picture, lines of text (already escaped), the path.
void Card(std::ostream& out, const std::string& cls, const std::string& picture,
          const std::vector<std::string>& lines, const std::string& path) {
  out << "<div class=\"card " << cls << "\"><div class=\"pic\">" << picture << "</div>";
  for (const std::string& l : lines) out << "<div>" << l << "</div>";
  out << "<div class=\"path\">" << EscapeHtml(path) << "</div></div>\n";
}

// A level's coloured badge, its meaning in the tooltip.
std::string LevelBadge(MatchLevel level) {
  static const char* const kMeaning[] = {
      "not a match: only looks alike", "the same scene or object in another shot",
      "one shows a part of the other",
      "the same picture, edited (re-encoded, resized, recoloured, cropped a little, rotated or "
      "mirrored)",
      "the same pixels"};
  const std::string name = MatchLevelName(level);
  return "<span class=\"level " + name + "\" title=\"" + kMeaning[static_cast<int>(level)] + "\">" +
         (level == MatchLevel::kNone ? std::string("no match") : name) + "</span>";
}

Thumbnail OfRecord(const Store& store, uint64_t id, const ImageFileLimits& limits) {
  const std::optional<ImageRecord> record = store.FindById(id);
  if (!record) return Thumbnail{"", "no longer in the database"};
  return ThumbnailOfRecord(store, *record, kReportThumbnailSide, limits);
}

}  // namespace

std::string EscapeHtml(const std::string& text) {
  const std::string utf8 = Utf8ForJson(text);
  std::string out;
  out.reserve(utf8.size());
  for (char c : utf8) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

void WriteSearchHtml(std::ostream& out, const std::vector<QueryResult>& results, const Store& store,
                     const ImageFileLimits& limits) {
  Begin(out, "lookalike search: " + std::to_string(results.size()) + " queries");
  for (const QueryResult& r : results) {
    out << "<h2>query " << EscapeHtml(r.query) << "</h2>\n<div class=\"row\">\n";
    const ReadResult read = ReadImageBytes(r.query, limits);
    const Thumbnail query =
        read.error ? Thumbnail{"", read.error->message}
                   : ThumbnailOfBytes(r.query, read.bytes, kReportThumbnailSide, limits);
    Card(out, "query", Picture(query), {"<b>query</b>"}, r.query);
    out << "</div>\n";
    if (r.error && r.error->code != FileErrorCode::kNoFeatures) {
      out << "<p class=\"note\">" << FileErrorCodeName(r.error->code) << ": "
          << EscapeHtml(r.error->message) << "</p>\n";
      continue;
    }
    if (r.hits.empty()) {
      out << "<p>no results</p>\n";
      continue;
    }
    // The matches (a level above none), then the nearest images that are
    // not a match, each hit with its rank among all of them.
    size_t matches = 0;
    for (const Hit& h : r.hits) matches += h.level > MatchLevel::kNone;
    for (const bool matched : {true, false}) {
      const size_t n = matched ? matches : r.hits.size() - matches;
      if (!matched && n == 0) continue;
      out << "<h3>" << (matched ? "matches" : "nearest, not a match") << " (" << n << ")</h3>\n";
      if (n == 0) {
        out << "<p>no match: nothing found shows the same picture</p>\n";
        continue;
      }
      out << "<div class=\"row\">\n";
      for (size_t i = 0; i < r.hits.size(); ++i) {
        const Hit& h = r.hits[i];
        if ((h.level > MatchLevel::kNone) != matched) continue;
        std::vector<std::string> lines = {"<b>#" + std::to_string(i + 1) + "</b> " +
                                          LevelBadge(h.level) + " score " + Number(h.score, 4)};
        lines.push_back("VLAD " + Number(h.similarity, 3) +
                        (h.colour >= 0 ? " &middot; colour " + Number(h.colour, 3) : "") +
                        (h.inliers >= 0 ? " &middot; inliers " + std::to_string(h.inliers) : "") +
                        (h.thumbnail > -1 ? " &middot; thumbnail " + Number(h.thumbnail, 3) : ""));
        Card(out, matched ? "verified" : "", Picture(OfRecord(store, h.id, limits)), lines, h.path);
      }
      out << "</div>\n";
    }
  }
  out << "</body></html>\n";
}

void WriteDedupHtml(std::ostream& out, const DedupResult& r, const Store& store,
                    const ImageFileLimits& limits) {
  Begin(out, "lookalike dedup: " + std::to_string(r.groups.size()) + " groups of " +
                 DedupModeName(r.level) + " among " + std::to_string(r.num_images) + " images");
  out << "<p>Groups of images at level <b>" << MatchLevelName(r.level) << "</b> or above"
      << (r.level == MatchLevel::kView
              ? " (similar shots: other photos of the same scene, not only copies)"
              : "")
      << ", each around its keeper (marked <span class=\"badge\">keep</span>, chosen by the "
      << KeepRuleName(r.keep)
      << " rule). Every other member shows its level with the keeper and why it is not kept; "
         "<span class=\"badge\">reference</span> members are in a reference folder and kept "
         "too.</p>\n";
  for (size_t g = 0; g < r.groups.size(); ++g) {
    const DedupGroup& group = r.groups[g];
    out << "<h2>group " << g + 1 << " &middot; " << LevelBadge(group.level) << " &middot; "
        << group.members.size() << " images &middot; kept: " << EscapeHtml(group.keep_reason)
        << "</h2>\n<div class=\"row\">\n";
    for (const DedupMember& m : group.members) {
      std::vector<std::string> lines;
      if (m.role != MemberRole::kDuplicate)
        lines.push_back("<span class=\"badge\">" + std::string(MemberRoleName(m.role)) + "</span>");
      else
        lines.push_back(LevelBadge(m.level) + " &middot; score " + Number(m.score, 3));
      lines.push_back(std::to_string(m.width) + "&times;" + std::to_string(m.height) +
                      " px &middot; " + EscapeHtml(FormatBytes(m.size_bytes)));
      if (m.role != MemberRole::kKeep) lines.push_back(EscapeHtml(m.reason));
      Card(out, m.role == MemberRole::kKeep ? "keep" : "", Picture(OfRecord(store, m.id, limits)),
           lines, m.path);
    }
    out << "</div>\n";
  }
  out << "</body></html>\n";
}

}  // namespace lookalike
