#include "tools/serve/review.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "tools/output.h"
#include "util/test_hooks.h"

namespace lookalike {
namespace {

namespace fs = std::filesystem;

constexpr char kFormat[] = "lookalike review";
constexpr int kVersion = 1;
// Temporary files are "review.json.tmp-<pid>".
constexpr char kTempInfix[] = ".tmp-";

std::string Hex16(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string SystemError(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

// Writes `bytes` to `path` and fsyncs it; throws std::runtime_error.
void WriteSynced(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(SystemError("cannot create", path));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string message = SystemError("cannot write", path);
      ::close(fd);
      throw std::runtime_error(message);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const std::string message = SystemError("cannot sync", path);
    ::close(fd);
    throw std::runtime_error(message);
  }
  if (::close(fd) != 0) throw std::runtime_error(SystemError("cannot close", path));
}

void SyncFolderEntry(const std::string& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(SystemError("cannot open the folder", folder));
  const int r = ::fsync(fd);
  ::close(fd);
  if (r != 0) throw std::runtime_error(SystemError("cannot sync the folder", folder));
}

bool SameMember(const ReviewMember& a, const ReviewMember& b) {
  return a.id == b.id && a.content_hash == b.content_hash;
}

}  // namespace

ReviewStore::ReviewStore(const std::string& db_folder)
    : folder_(db_folder), path_((fs::path(db_folder) / kFileName).string()) {
  // Temporary files of writers that were killed (their pid is gone).
  const std::string prefix = std::string(kFileName) + kTempInfix;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      fs::remove(entry.path(), ec);
  }
  error_ = Read(&decisions_);
}

std::string ReviewStore::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

std::string ReviewStore::Read(std::vector<Decision>* out) const {
  out->clear();
  std::error_code ec;
  if (!fs::exists(path_, ec) && !ec) return "";
  std::ifstream in(path_, std::ios::binary);
  if (!in) return "cannot read " + path_ + ": " + std::strerror(errno);
  std::stringstream text;
  text << in.rdbuf();
  try {
    const Json j = Json::parse(text.str());
    if (!j.is_object() || j.value("format", "") != kFormat)
      return path_ + " is not a review file of lookalike (no \"format\": \"" + kFormat + "\")";
    if (j.value("version", 0) != kVersion)
      return path_ + " has review format version " + j.value("version", Json()).dump() +
             ", this build reads " + std::to_string(kVersion) + "; upgrade lookalike";
    for (const Json& d : j.at("not_duplicates")) {
      Decision decision;
      for (const Json& m : d) {
        ReviewMember member;
        member.id = m.at("id").get<uint64_t>();
        const std::string hash = m.at("content_hash").get<std::string>();
        if (hash.size() != 16 || hash.find_first_not_of("0123456789abcdef") != std::string::npos)
          return path_ + ": content_hash '" + hash + "' is not 16 hex digits";
        member.content_hash = std::stoull(hash, nullptr, 16);
        member.path = m.value("path", "");
        decision.push_back(std::move(member));
      }
      out->push_back(std::move(decision));
    }
  } catch (const std::exception& e) {
    out->clear();
    return path_ + " is damaged (" + e.what() + "); move it away to start the review afresh";
  }
  return "";
}

void ReviewStore::Write(const std::vector<Decision>& decisions) const {
  Json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["not_duplicates"] = Json::array();
  for (const Decision& d : decisions) {
    Json set = Json::array();
    for (const ReviewMember& m : d) {
      Json member;
      member["id"] = m.id;
      member["content_hash"] = Hex16(m.content_hash);
      PutPath(&member, "path", m.path);
      set.push_back(std::move(member));
    }
    j["not_duplicates"].push_back(std::move(set));
  }
  const std::string temp = path_ + kTempInfix + std::to_string(::getpid());
  try {
    WriteSynced(temp, j.dump(1, ' ', false, Json::error_handler_t::replace) + "\n");
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
  TestStopPoint("review-before-rename");
  if (::rename(temp.c_str(), path_.c_str()) != 0) {
    const std::string message = SystemError("cannot rename " + temp + " to", path_);
    ::unlink(temp.c_str());
    throw std::runtime_error(message);
  }
  TestStopPoint("review-before-folder-sync");
  SyncFolderEntry(folder_);
}

bool ReviewStore::NotDuplicates(const std::vector<ReviewMember>& members) const {
  if (members.size() < 2) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  auto holds = [](const Decision& d, const ReviewMember& m) {
    for (const ReviewMember& x : d)
      if (SameMember(x, m)) return true;
    return false;
  };
  for (size_t a = 0; a < members.size(); ++a)
    for (size_t b = a + 1; b < members.size(); ++b) {
      bool together = false;
      for (const Decision& d : decisions_)
        if (holds(d, members[a]) && holds(d, members[b])) {
          together = true;
          break;
        }
      if (!together) return false;
    }
  return true;
}

void ReviewStore::SetNotDuplicates(const std::vector<ReviewMember>& members, bool value) {
  if (members.size() < 2)
    throw std::invalid_argument("a review decision needs 2 or more images, got " +
                                std::to_string(members.size()));
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Decision> decisions;
  const std::string error = Read(&decisions);
  if (!error.empty()) {
    error_ = error;
    throw std::runtime_error(error);
  }
  // Marking drops the decisions the new one holds; unmarking, every
  // decision holding two of the members.
  std::vector<Decision> kept;
  for (Decision& d : decisions) {
    size_t shared = 0;
    for (const ReviewMember& x : d)
      for (const ReviewMember& m : members) shared += value ? SameMember(x, m) : x.id == m.id;
    if (value ? shared < d.size() : shared < 2) kept.push_back(std::move(d));
  }
  decisions = std::move(kept);
  if (value) decisions.push_back(members);
  Write(decisions);
  decisions_ = std::move(decisions);
  error_.clear();
}

}  // namespace lookalike
