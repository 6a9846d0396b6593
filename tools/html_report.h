// The self-contained HTML reports of `search --format html` and `dedup
// --format html`: one file, no scripts, no external resources, every
// thumbnail embedded as a data: URI, so it can be mailed or archived.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "indexer/image_file.h"
#include "search/dedup.h"
#include "search/searcher.h"
#include "storage/store.h"

namespace lookalike {

// Longest side of the thumbnails in the reports, pixels.
inline constexpr int kReportThumbnailSide = 160;

// `text` with &, <, >, " and ' escaped, and bytes that are not UTF-8 shown
// as U+0080..U+00FF (as in the JSON output).
std::string EscapeHtml(const std::string& text);

// Each query (its own thumbnail from its file) and its ranked hits (thumbnails
// of the indexed files, with level badge, score, VLAD similarity, colour and
// inliers), the matches (a level above none) apart from the nearest that are
// not a match; queries that failed are listed with their error. Reads the files with
// `limits`; an unreadable or changed file is shown as a note, not a picture.
void WriteSearchHtml(std::ostream& out, const std::vector<QueryResult>& results, const Store& store,
                     const ImageFileLimits& limits);

// Every group as a row of thumbnails under its level's badge, the member to
// keep first and marked, each other member with its level's badge (with the
// keeper), score, pixel size, file size and why it is not kept.
void WriteDedupHtml(std::ostream& out, const DedupResult& r, const Store& store,
                    const ImageFileLimits& limits);

}  // namespace lookalike
