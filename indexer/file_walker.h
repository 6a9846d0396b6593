// Lists the candidate image files under a folder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "indexer/image_file.h"

namespace lookalike {

struct WalkResult {
  std::vector<std::string> files;  // absolute paths, sorted bytewise
  std::vector<FileError> errors;   // unreadable folders and special files
  int64_t ignored = 0;             // files that are not images (by extension and content)
};

// Walks `root` recursively. Directory symlinks are not followed (so cycles
// cannot loop); file symlinks are listed and checked when read. A file is a
// candidate if its extension is an image extension or its first bytes are an
// image signature, of a format lookalike decodes or of one it does not
// (UnsupportedImageFormat: reading it then reports UNSUPPORTED_FORMAT naming
// the file); other files are counted in `ignored`. Paths under
// any of `exclude` (e.g. the database folder) are skipped. Throws
// std::runtime_error if root is not a readable directory.
WalkResult ListImageFiles(const std::string& root, const std::vector<std::string>& exclude);

// The shard of a file: FNV-1a 64 (offset basis 0xcbf29ce484222325, prime
// 0x100000001b3) of its path relative to the indexed folder
// (the bytes after "<root>/", no leading slash) modulo num_shards (>= 1).
// Stable across machines, runs and listing order, as long as every machine
// sees the folder's files under the same relative paths.
uint32_t ShardOf(const std::string& relative_path, uint32_t num_shards);

// The files of `files` (absolute, under `root`) whose ShardOf is `shard`.
std::vector<std::string> FilesOfShard(const std::vector<std::string>& files,
                                      const std::string& root, uint32_t shard, uint32_t num_shards);

// True for .jpg .jpeg .jpe .png .webp .tif .tiff .bmp .dib .pbm .pgm .ppm .pnm
// (case-insensitive).
bool HasImageExtension(const std::string& path);

// True if `path` is `dir` or lies inside it (both absolute and normalised,
// compared as strings, so "/a/bc" is not under "/a/b").
bool IsUnder(const std::string& path, const std::string& dir);

// Absolute, lexically normalised form of a path (symlinks kept as named).
std::string AbsolutePath(const std::string& path);

}  // namespace lookalike
