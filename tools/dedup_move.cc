#include "tools/dedup_move.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <utility>

#include "indexer/file_walker.h"
#include "tools/output.h"
#include "util/test_hooks.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;

constexpr char kPartialSuffix[] = ".lookalike-partial";
constexpr char kHeader[] = "lookalike-moves\t1\troot\t";

std::string Errno(int err) { return std::strerror(err); }

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// fsync of a folder, so that the names created or removed in it last.
bool SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

struct FileState {
  bool exists = false;
  bool regular = false;
  dev_t dev = 0;
  ino_t ino = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

FileState StatPath(const std::string& path) {
  FileState s;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return s;
  s.exists = true;
  s.regular = S_ISREG(st.st_mode);
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  s.size = static_cast<uint64_t>(st.st_size);
  s.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  return s;
}

// Whether two regular files hold the same bytes.
bool SameBytes(const std::string& a, const std::string& b) {
  std::ifstream x(a, std::ios::binary), y(b, std::ios::binary);
  if (!x || !y) return false;
  char bx[1 << 16], by[1 << 16];
  for (;;) {
    x.read(bx, sizeof bx);
    y.read(by, sizeof by);
    if (x.gcount() != y.gcount()) return false;
    if (x.gcount() == 0) return x.eof() && y.eof();
    if (std::memcmp(bx, by, static_cast<size_t>(x.gcount())) != 0) return false;
  }
}

// Creates `dir` and its missing parents, each made durable in its parent.
bool MakeDirs(const std::string& dir, std::string* error) {
  if (StatPath(dir).exists) return true;
  if (!MakeDirs(Parent(dir), error)) return false;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    *error = "cannot create folder " + dir + ": " + Errno(errno);
    return false;
  }
  SyncDir(Parent(dir));
  return true;
}

// Copies `from` to a new file `to` (O_EXCL), its permission bits and
// modification time included, and fsyncs it.
bool CopyFile(const std::string& from, const std::string& to, std::string* error) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    *error = "cannot read " + from + ": " + Errno(errno);
    return false;
  }
  struct stat st;
  ::fstat(in, &st);
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st.st_mode & 07777);
  if (out < 0) {
    *error = "cannot create " + to + ": " + Errno(errno);
    ::close(in);
    return false;
  }
  char buffer[1 << 16];
  bool ok = true;
  for (;;) {
    const ssize_t n = ::read(in, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = "cannot read " + from + ": " + Errno(errno);
      ok = false;
      break;
    }
    if (n == 0) break;
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(out, buffer + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        *error = "cannot write " + to + ": " + Errno(errno);
        ok = false;
        break;
      }
      done += w;
    }
    if (!ok) break;
  }
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  if (ok && ::futimens(out, times) != 0) ok = false;
  if (ok && ::fsync(out) != 0) {
    *error = "cannot sync " + to + ": " + Errno(errno);
    ok = false;
  }
  ::close(in);
  if (::close(out) != 0 && ok) {
    *error = "cannot write " + to + ": " + Errno(errno);
    ok = false;
  }
  if (!ok) ::unlink(to.c_str());
  return ok;
}

// Moves `from` to `to`, which must not exist, never replacing anything.
// `stage` names the test stop points ("dedup-move" or "dedup-undo").
bool MoveOne(const std::string& from, const std::string& to, const std::string& stage,
             std::string* error) {
  const std::string from_dir = Parent(from), to_dir = Parent(to);
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) {
    SyncDir(to_dir);
    SyncDir(from_dir);
    return true;
  }
  const int err = errno;
  if (err == EEXIST) {
    *error = to + " exists already (never overwritten)";
    return false;
  }
  if (err == EINVAL || err == ENOSYS) {
    // No RENAME_NOREPLACE here: a second name, then the first one removed
    // (for a moment the file has both names, one inode).
    if (::link(from.c_str(), to.c_str()) != 0) {
      *error = errno == EEXIST ? to + " exists already (never overwritten)"
                               : "cannot link " + from + " to " + to + ": " + Errno(errno);
      return false;
    }
    SyncDir(to_dir);
    TestStopPoint((stage + "-linked").c_str());
    ::unlink(from.c_str());
    SyncDir(from_dir);
    return true;
  }
  if (err != EXDEV) {
    *error = "cannot move " + from + " to " + to + ": " + Errno(err);
    return false;
  }
  // Another file system: a whole, synced copy under a temporary name, put in
  // place without replacing, and only then the original removed.
  const std::string partial = to + kPartialSuffix;
  ::unlink(partial.c_str());  // a copy a killed run left: ours, incomplete
  if (!CopyFile(from, partial, error)) return false;
  SyncDir(to_dir);
  TestStopPoint((stage + "-copied").c_str());
  if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) != 0 &&
      !((errno == EINVAL || errno == ENOSYS) && ::link(partial.c_str(), to.c_str()) == 0 &&
        ::unlink(partial.c_str()) == 0)) {
    *error = errno == EEXIST ? to + " exists already (never overwritten)"
                             : "cannot move " + partial + " to " + to + ": " + Errno(errno);
    ::unlink(partial.c_str());
    return false;
  }
  SyncDir(to_dir);
  TestStopPoint((stage + "-placed").c_str());
  if (::unlink(from.c_str()) != 0) {
    *error = "copied to " + to + " but cannot remove " + from + ": " + Errno(errno);
    return false;
  }
  SyncDir(from_dir);
  return true;
}

// What to do with one move whose origin and destination are in these
// states: finish it (the destination holds the file and the origin is the
// same file or an identical copy left by a killed run).
enum class Found { kToMove, kDone, kFinishByRemovingOrigin, kConflict, kVanished };

Found Inspect(const std::string& origin, const std::string& destination, bool logged) {
  const FileState o = StatPath(origin), d = StatPath(destination);
  if (o.exists && !d.exists) return Found::kToMove;
  if (!o.exists && d.exists) return Found::kDone;
  if (!o.exists && !d.exists) return Found::kVanished;
  if (o.dev == d.dev && o.ino == d.ino) return Found::kFinishByRemovingOrigin;
  if (logged && o.regular && d.regular && o.size == d.size && SameBytes(origin, destination))
    return Found::kFinishByRemovingOrigin;
  return Found::kConflict;
}

struct Manifest {
  std::string root;
  std::vector<std::pair<std::string, std::string>> moves;  // origin, destination
  std::set<std::pair<std::string, std::string>> logged;
  size_t whole_bytes = 0;  // length up to the last complete line
};

std::vector<std::string> Split(const std::string& line) {
  std::vector<std::string> fields;
  size_t start = 0;
  for (;;) {
    const size_t tab = line.find('\t', start);
    fields.push_back(
        line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) return fields;
    start = tab + 1;
  }
}

Manifest ReadManifest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read the move manifest " + path + ": " + Errno(errno));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Manifest m;
  size_t start = 0, number = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = text.substr(start, end - start);
    m.whole_bytes = end + 1;
    ++number;
    const std::vector<std::string> f = Split(line);
    auto bad = [&](const std::string& why) {
      return std::runtime_error("move manifest " + path + ", line " + std::to_string(number) +
                                ": " + why + "; it was not written by lookalike dedup --move-to");
    };
    try {
      if (number == 1) {
        if (line.rfind(kHeader, 0) != 0) throw bad("no lookalike-moves header");
        m.root = UnescapeField(line.substr(std::strlen(kHeader)));
      } else if (f.size() == 5 && f[0] == "move") {
        m.moves.emplace_back(UnescapeField(f[1]), UnescapeField(f[2]));
        m.logged.insert(m.moves.back());
      } else {
        throw bad("not a move record");
      }
    } catch (const std::invalid_argument& e) {
      throw bad(e.what());
    }
  }
  if (number == 0) throw std::runtime_error("move manifest " + path + " is empty");
  return m;
}

// Appends lines to the manifest, each synced before it returns.
class ManifestWriter {
 public:
  // Opens (creating it with its header if missing, dropping a torn last
  // line) the manifest `path`.
  ManifestWriter(const std::string& path, const std::string& root) : path_(path) {
    const bool exists = StatPath(path).exists;
    size_t keep = 0;
    if (exists) {
      const Manifest m = ReadManifest(path);
      if (m.root != root)
        throw std::runtime_error("the move manifest " + path + " moved files from under " + m.root +
                                 ", not " + root +
                                 ": choose another --move-to folder, or --undo this one first");
      keep = m.whole_bytes;
    }
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw std::runtime_error("cannot write the move manifest " + path + ": " + Errno(errno));
    if (::ftruncate(fd_, static_cast<off_t>(keep)) != 0 || ::lseek(fd_, 0, SEEK_END) < 0) Fail();
    if (!exists) {
      Append(kHeader + EscapeField(root) + "\n");
      SyncDir(Parent(path));
    }
  }
  ~ManifestWriter() {
    if (fd_ >= 0) ::close(fd_);
  }
  ManifestWriter(const ManifestWriter&) = delete;
  ManifestWriter& operator=(const ManifestWriter&) = delete;

  void Append(const std::string& line) {
    for (size_t done = 0; done < line.size();) {
      const ssize_t w = ::write(fd_, line.data() + done, line.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) Fail();
      done += static_cast<size_t>(w);
    }
    if (::fsync(fd_) != 0) Fail();
  }

 private:
  [[noreturn]] void Fail() {
    throw std::runtime_error("cannot write the move manifest " + path_ + ": " + Errno(errno) +
                             "; nothing more was moved");
  }
  std::string path_;
  int fd_ = -1;
};

bool UnderAny(const std::string& path, const std::vector<std::string>& folders) {
  for (const std::string& dir : folders)
    if (IsUnder(path, dir)) return true;
  return false;
}

std::string ManifestPath(const std::string& manifest_or_dir) {
  struct stat st;
  if (::stat(manifest_or_dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return manifest_or_dir + "/" + kMoveManifestName;
  return manifest_or_dir;
}

// Removes the empty folders under `top` (not `top` itself), deepest first.
void RemoveEmptyFolders(const std::string& top) {
  std::error_code ec;
  std::vector<std::string> dirs;
  for (auto it = fs::recursive_directory_iterator(top, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_directory(ec) && !it->is_symlink(ec)) dirs.push_back(it->path().string());
  std::sort(dirs.rbegin(), dirs.rend());
  for (const std::string& d : dirs)
    if (::rmdir(d.c_str()) == 0) SyncDir(Parent(d));
}

}  // namespace

MoveReport MoveFiles(const MoveRequest& request) {
  MoveReport report;
  std::string error;
  if (!MakeDirs(request.to_dir, &error)) throw std::runtime_error(error);
  report.manifest = request.to_dir + "/" + kMoveManifestName;
  ManifestWriter manifest(report.manifest, request.root);
  const Manifest logged = ReadManifest(report.manifest);
  const std::set<std::string> keepers(request.keepers.begin(), request.keepers.end());
  TestStopPoint("dedup-moves-begin");
  for (const MoveItem& item : request.items) {
    const std::string& origin = item.path;
    if (keepers.count(origin) || UnderAny(origin, request.keep_in)) {
      report.problems.push_back(origin + ": a keeper or in a reference folder: never moved");
      continue;
    }
    const bool under_root =
        request.root == "/" ? origin.size() > 1 && origin[0] == '/'
                            : origin.size() > request.root.size() && IsUnder(origin, request.root);
    if (!under_root) {
      report.problems.push_back(origin + ": not under " + request.root + ": not moved");
      continue;
    }
    // Its path below the root, from its '/'.
    const std::string destination =
        request.to_dir + (request.root == "/" ? origin : origin.substr(request.root.size()));
    if (destination == report.manifest) {
      report.problems.push_back(origin + ": its place in " + request.to_dir +
                                " is the manifest's: not moved");
      continue;
    }
    const bool was_logged = logged.logged.count({origin, destination}) > 0;
    switch (Inspect(origin, destination, was_logged)) {
      case Found::kDone:
        if (was_logged) {
          ++report.already;
        } else {
          report.problems.push_back(origin + ": gone, and " + destination +
                                    " exists already: left as they are");
        }
        continue;
      case Found::kVanished:
        report.problems.push_back(origin +
                                  ": no longer exists (re-run index to update the "
                                  "database)");
        continue;
      case Found::kConflict:
        report.problems.push_back(origin + ": " + destination +
                                  " exists already and holds another file: not moved");
        continue;
      case Found::kFinishByRemovingOrigin:
        // A move a killed run left half done: the file is whole in place.
        if (::unlink(origin.c_str()) != 0) {
          report.problems.push_back(origin + ": cannot remove it after its copy: " + Errno(errno));
        } else {
          SyncDir(Parent(origin));
          ++report.already;
        }
        continue;
      case Found::kToMove:
        break;
    }
    const FileState now = StatPath(origin);
    if (!now.regular || now.size != item.size_bytes || now.mtime_ns != item.mtime_ns) {
      report.problems.push_back(origin +
                                ": changed since it was indexed (size or modification time): "
                                "not moved; re-run index and dedup");
      continue;
    }
    if (!MakeDirs(Parent(destination), &error)) {
      report.problems.push_back(origin + ": " + error);
      continue;
    }
    ::unlink((destination + kPartialSuffix).c_str());  // a killed run's incomplete copy
    if (!was_logged)
      manifest.Append("move\t" + EscapeField(origin) + "\t" + EscapeField(destination) + "\t" +
                      std::to_string(item.size_bytes) + "\t" + std::to_string(item.mtime_ns) +
                      "\n");
    TestStopPoint("dedup-move-logged");
    if (MoveOne(origin, destination, "dedup-move", &error)) {
      ++report.moved;
      TestStopPoint("dedup-move-done");
    } else {
      report.problems.push_back(origin + ": " + error);
    }
  }
  return report;
}

MoveReport UndoMoves(const std::string& manifest_or_dir) {
  MoveReport report;
  report.manifest = ManifestPath(manifest_or_dir);
  const Manifest m = ReadManifest(report.manifest);
  TestStopPoint("dedup-undo-begin");
  for (auto it = m.moves.rbegin(); it != m.moves.rend(); ++it) {
    const auto& [origin, destination] = *it;
    ::unlink((destination + kPartialSuffix).c_str());  // incomplete copies of a killed run
    ::unlink((origin + kPartialSuffix).c_str());
    std::string error;
    switch (Inspect(destination, origin, /*logged=*/true)) {
      case Found::kDone:
        ++report.already;
        continue;
      case Found::kVanished:
        report.problems.push_back(origin + ": neither there nor at " + destination +
                                  " (removed since it was moved?)");
        continue;
      case Found::kConflict:
        report.problems.push_back(origin + ": holds another file now; the moved one stays at " +
                                  destination);
        continue;
      case Found::kFinishByRemovingOrigin:
        // Put back already (a killed undo, or a killed move's copy): the
        // second name goes.
        if (::unlink(destination.c_str()) != 0) {
          report.problems.push_back(destination + ": cannot remove it: " + Errno(errno));
        } else {
          SyncDir(Parent(destination));
          ++report.already;
        }
        continue;
      case Found::kToMove:
        break;
    }
    if (!MakeDirs(Parent(origin), &error) || !MoveOne(destination, origin, "dedup-undo", &error)) {
      report.problems.push_back(origin + ": " + error);
      continue;
    }
    ++report.moved;
    TestStopPoint("dedup-undo-done");
  }
  RemoveEmptyFolders(Parent(report.manifest));
  return report;
}

}  // namespace lookalike
