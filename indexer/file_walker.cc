#include "indexer/file_walker.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "storage/encoding.h"

namespace lookalike {
namespace fs = std::filesystem;

bool HasImageExtension(const std::string& path) {
  const auto dot = path.find_last_of('.');
  if (dot == std::string::npos || path.find('/', dot) != std::string::npos) return false;
  std::string ext = path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  static const char* const kExtensions[] = {"jpg", "jpeg", "jpe", "png", "webp", "tif", "tiff",
                                            "bmp", "dib",  "pbm", "pgm", "ppm",  "pnm"};
  for (const char* e : kExtensions)
    if (ext == e) return true;
  return false;
}

std::string AbsolutePath(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(path), ec);
  if (ec) p = fs::path(path);
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

namespace {

// An image by its first bytes: one lookalike decodes, or one of a format it
// does not, which is listed too so that reading it reports
// UNSUPPORTED_FORMAT with the file's name rather than counting it ignored.
bool HasImageSignature(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  unsigned char head[kImageHeadBytes];
  const ssize_t n = ::read(fd, head, sizeof head);
  ::close(fd);
  if (n <= 0) return false;
  const auto size = static_cast<size_t>(n);
  return DetectImageFormat(head, size) != ImageFormat::kUnknown ||
         UnsupportedImageFormat(head, size) != nullptr;
}

}  // namespace

uint32_t ShardOf(const std::string& relative_path, uint32_t num_shards) {
  // The standard FNV-1a 64 offset basis, so any FNV-1a implementation gives
  // the same shard (encoding::Fnv1a64's default basis, kept for the stored
  // checksums, is another constant).
  constexpr uint64_t kFnvOffsetBasis = 14695981039346656037ull;
  return static_cast<uint32_t>(
      encoding::Fnv1a64(relative_path.data(), relative_path.size(), kFnvOffsetBasis) % num_shards);
}

std::vector<std::string> FilesOfShard(const std::vector<std::string>& files,
                                      const std::string& root, uint32_t shard,
                                      uint32_t num_shards) {
  // "/" as root leaves paths one slash longer than root; others one more.
  const size_t skip = root.size() + (root.size() > 0 && root.back() == '/' ? 0 : 1);
  std::vector<std::string> mine;
  for (const std::string& f : files) {
    const std::string relative = f.size() > skip ? f.substr(skip) : f;
    if (ShardOf(relative, num_shards) == shard) mine.push_back(f);
  }
  return mine;
}

bool IsUnder(const std::string& path, const std::string& dir) {
  return path.size() >= dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         (path.size() == dir.size() || path[dir.size()] == '/');
}

WalkResult ListImageFiles(const std::string& root_arg,
                          const std::vector<std::string>& exclude_args) {
  const std::string root = AbsolutePath(root_arg);
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw std::runtime_error(root_arg + " is not a directory; pass the folder of images to index");
  std::vector<std::string> exclude;
  for (const auto& e : exclude_args) exclude.push_back(AbsolutePath(e));

  WalkResult result;
  // An explicit stack of folders instead of recursive_directory_iterator: that
  // iterator ends the whole walk when one subfolder cannot be opened, which
  // would silently skip (and, on re-runs, remove) everything after it.
  std::vector<std::string> folders = {root};
  while (!folders.empty()) {
    const std::string folder = folders.back();
    folders.pop_back();
    DIR* dir = ::opendir(folder.c_str());
    if (!dir) {
      const int err = errno;
      result.errors.push_back(FileError{err == EACCES || err == EPERM
                                            ? FileErrorCode::kPermissionDenied
                                            : FileErrorCode::kReadFailed,
                                        folder,
                                        std::string("cannot list folder: ") + std::strerror(err) +
                                            "; its images are skipped and their records kept"});
      continue;
    }
    while (const dirent* entry = ::readdir(dir)) {
      const std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      const std::string path = folder == "/" ? "/" + name : folder + "/" + name;
      bool excluded = false;
      for (const auto& e : exclude) excluded = excluded || IsUnder(path, e);
      if (excluded) continue;
      struct stat link_st;
      if (::lstat(path.c_str(), &link_st) != 0) {
        if (errno != ENOENT && HasImageExtension(path))
          result.errors.push_back(FileError{FileErrorCode::kPermissionDenied, path,
                                            std::string("cannot stat: ") + std::strerror(errno)});
        continue;  // ENOENT: vanished while listing
      }
      if (S_ISDIR(link_st.st_mode)) {
        folders.push_back(path);
        continue;
      }
      struct stat st = link_st;
      if (S_ISLNK(link_st.st_mode)) {
        // Directory symlinks are not followed (no cycles); dangling or looping
        // links are reported only if they look like images.
        if (::stat(path.c_str(), &st) != 0) {
          const int err = errno;
          if (HasImageExtension(path))
            result.errors.push_back(FileError{
                err == EACCES ? FileErrorCode::kPermissionDenied : FileErrorCode::kNotRegular, path,
                err == EACCES ? "permission denied" : "dangling or looping symbolic link"});
          else
            ++result.ignored;
          continue;
        }
        if (S_ISDIR(st.st_mode)) continue;
      }
      if (!S_ISREG(st.st_mode)) {
        // FIFOs, sockets, devices: never opened by content sniffing.
        if (HasImageExtension(path))
          result.errors.push_back(FileError{FileErrorCode::kNotRegular, path,
                                            "not a regular file (FIFO, device or socket)"});
        else
          ++result.ignored;
        continue;
      }
      if (HasImageExtension(path) || HasImageSignature(path))
        result.files.push_back(path);
      else
        ++result.ignored;
    }
    ::closedir(dir);
  }
  std::sort(result.files.begin(), result.files.end());
  return result;
}

}  // namespace lookalike
