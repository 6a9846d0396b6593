// A generator of hostile inputs for the indexer: truncated and
// corrupt files, decompression bombs, wrong extensions, odd file names,
// special files and symlink loops, mixed with good generated images. Every
// entry says which outcome `lookalike index` must give it and why, so the
// end-to-end test can check file by file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lookalike {
namespace testing {

// Outcomes besides the FileErrorCode names ("TRUNCATED", "NOT_REGULAR", …).
inline constexpr const char kIndexed[] = "INDEXED";  // committed, no error, finds itself
inline constexpr const char kIgnored[] = "IGNORED";  // neither indexed nor reported

struct HostileEntry {
  std::string path;                   // absolute, raw bytes as created
  std::vector<std::string> expected;  // accepted outcomes (usually one)
  std::string why;                    // what the file is and why that outcome
};

struct HostileCorpusOptions {
  uint64_t seed = 4;
  int good_side = 320;                    // longest side of the good images
  bool include_permission_cases = false;  // only meaningful when run unprivileged
  // The test must run the indexer with --max-file-mb 1: `big.jpg` has 2 MiB.
  uint64_t oversize_bytes = 2u << 20;
  bool include_large_png = true;  // a 6000x6000 PNG that compresses to < 1 MiB
};

// Creates the corpus under `root` (which must exist and be empty).
std::vector<HostileEntry> MakeHostileCorpus(const std::string& root,
                                            const HostileCorpusOptions& options);

// Writes only the permission cases (a mode-000 file, an unreadable folder
// holding an image, a readable image beside them); see the .cc.
std::vector<HostileEntry> MakePermissionCorpus(const std::string& root, uint64_t seed);

// Byte-level helpers, exposed for unit checks.
uint32_t Crc32(const unsigned char* data, size_t size);  // zlib/PNG CRC-32
// Sets the dimensions in a JPEG's first SOF segment; false if none is found.
bool PatchJpegSof(std::string* jpeg, uint16_t width, uint16_t height);
// Sets the IHDR dimensions of a PNG and recomputes the chunk's CRC.
bool PatchPngIhdr(std::string* png, uint32_t width, uint32_t height);
// Sets ImageWidth/ImageLength of a TIFF's first IFD.
bool PatchTiffSize(std::string* tiff, uint32_t width, uint32_t height);
// Offset just after the first SOS segment header of a JPEG (start of the
// entropy-coded data), or 0.
size_t JpegScanStart(const std::string& jpeg);

}  // namespace testing
}  // namespace lookalike
