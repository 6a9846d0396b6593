#include "indexer/file_walker.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace lookalike {
namespace fs = std::filesystem;

bool HasImageExtension(const std::string& path) {
  const auto dot = path.find_last_of('.');
  if (dot == std::string::npos || path.find('/', dot) != std::string::npos) return false;
  std::string ext = path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  static const char* const kExtensions[] = {"jpg", "jpeg", "jpe", "png", "webp", "tif", "tiff",
                                            "bmp", "dib", "pbm", "pgm", "ppm", "pnm"};
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

bool HasImageSignature(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  unsigned char head[16];
  const ssize_t n = ::read(fd, head, sizeof head);
  ::close(fd);
  return n > 0 && DetectImageFormat(head, static_cast<size_t>(n)) != ImageFormat::kUnknown;
}

bool IsUnder(const std::string& path, const std::string& dir) {
  return path.size() >= dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         (path.size() == dir.size() || path[dir.size()] == '/');
}

}  // namespace

WalkResult ListImageFiles(const std::string& root_arg,
                          const std::vector<std::string>& exclude_args) {
  const std::string root = AbsolutePath(root_arg);
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw std::runtime_error(root_arg + " is not a directory; pass the folder of images to index");
  std::vector<std::string> exclude;
  for (const auto& e : exclude_args) exclude.push_back(AbsolutePath(e));

  WalkResult result;
  fs::recursive_directory_iterator it(root, fs::directory_options::none, ec);
  if (ec) throw std::runtime_error("cannot read folder " + root + ": " + ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) {
      result.errors.push_back(FileError{FileErrorCode::kPermissionDenied,
                                        it->path().string(), "cannot list folder: " + ec.message()});
      ec.clear();
      continue;
    }
    const std::string path = it->path().lexically_normal().string();
    bool excluded = false;
    for (const auto& e : exclude) excluded = excluded || IsUnder(path, e);
    if (excluded) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    const fs::file_status link_status = it->symlink_status(ec);
    if (fs::is_directory(link_status)) continue;
    if (fs::is_symlink(link_status)) {
      // Directory symlinks are not followed; dangling links are reported
      // only if they look like images.
      const fs::file_status target = fs::status(it->path(), ec);
      if (fs::is_directory(target)) continue;
      if (!fs::exists(target) ) {
        if (HasImageExtension(path))
          result.errors.push_back(FileError{FileErrorCode::kNotRegular, path,
                                            "dangling or looping symbolic link"});
        else
          ++result.ignored;
        continue;
      }
    }
    const fs::file_status status = fs::status(it->path(), ec);
    if (!fs::is_regular_file(status)) {
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
  std::sort(result.files.begin(), result.files.end());
  return result;
}

}  // namespace lookalike
