#include "tests/subprocess.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace lookalike {
namespace testing {
namespace {

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::string ReadFd(int fd) {
  std::string s;
  char buf[65536];
  for (off_t pos = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, pos);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    s.append(buf, static_cast<size_t>(n));
    pos += n;
  }
  return s;
}

// In the forked child: only async-signal-safe calls until exec.
bool DropToUnprivileged() {
  return ::setgroups(0, nullptr) == 0 &&
         ::setresgid(kUnprivilegedGid, kUnprivilegedGid, kUnprivilegedGid) == 0 &&
         ::setresuid(kUnprivilegedUid, kUnprivilegedUid, kUnprivilegedUid) == 0;
}

void ChildFail(const char* what) {
  const char* msg = std::strerror(errno);
  (void)!::write(2, what, std::strlen(what));
  (void)!::write(2, ": ", 2);
  (void)!::write(2, msg, std::strlen(msg));
  (void)!::write(2, "\n", 1);
  ::_exit(127);
}

}  // namespace

std::string ProcessResult::Describe() const {
  std::ostringstream s;
  if (timed_out)
    s << "killed at the time limit";
  else if (term_signal)
    s << "killed by signal " << term_signal << " (" << strsignal(term_signal) << ")";
  else
    s << "exit " << exit_code;
  s << " after " << seconds << " s; stderr:\n"
    << err.substr(0, 4000) << "\nstdout:\n"
    << out.substr(0, 2000);
  return s.str();
}

ChildProcess::ChildProcess(const ProcessOptions& options) : options_(options) {
  if (options_.argv.empty()) throw std::runtime_error("ChildProcess: empty argv");
  out_fd_ = ::memfd_create("child-stdout", MFD_CLOEXEC);
  err_fd_ = ::memfd_create("child-stderr", MFD_CLOEXEC);
  if (out_fd_ < 0 || err_fd_ < 0) throw std::runtime_error("memfd_create failed");
  std::vector<char*> argv;
  for (const std::string& a : options_.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const bool drop = options_.unprivileged && ::geteuid() == 0;
  start_ = Now();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid_ == 0) {
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull < 0 || ::dup2(devnull, 0) < 0 || ::dup2(out_fd_, 1) < 0 || ::dup2(err_fd_, 2) < 0)
      ChildFail("redirect");
    ::setpgid(0, 0);  // own process group: a kill reaches its helpers too
    if (options_.address_space_bytes > 0) {
      const rlimit lim{options_.address_space_bytes, options_.address_space_bytes};
      if (::setrlimit(RLIMIT_AS, &lim) != 0) ChildFail("setrlimit");
    }
    if (drop && !DropToUnprivileged()) ChildFail("dropping privileges");
    ::execv(argv[0], argv.data());
    ChildFail(argv[0]);
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    Reap(true);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
}

bool ChildProcess::Reap(bool block) {
  if (reaped_) return true;
  int status = 0;
  rusage ru{};
  pid_t r;
  do {
    r = ::wait4(pid_, &status, block ? 0 : WNOHANG, &ru);
  } while (r < 0 && errno == EINTR);
  if (r != pid_) return false;
  reaped_ = true;
  result_.seconds = Now() - start_;
  result_.max_rss_kb = ru.ru_maxrss;
  if (WIFEXITED(status)) result_.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result_.term_signal = WTERMSIG(status);
  result_.out = ReadFd(out_fd_);
  result_.err = ReadFd(err_fd_);
  return true;
}

bool ChildProcess::Running() { return !Reap(false); }

ProcessResult ChildProcess::Wait() {
  while (!Reap(false)) {
    if (Now() - start_ > options_.timeout_seconds) {
      ::kill(pid_, SIGKILL);
      Reap(true);
      result_.timed_out = true;
      break;
    }
    ::usleep(2000);
  }
  return result_;
}

std::string ChildProcess::OutputSoFar() const { return ReadFd(out_fd_); }

ProcessResult RunProcess(const ProcessOptions& options) {
  ChildProcess child(options);
  return child.Wait();
}

bool KillAtStopPoint(const ProcessOptions& options, const std::string& stop, int* status) {
  ::setenv("LOOKALIKE_TEST_STOP_AT", stop.c_str(), 1);
  ChildProcess child(options);
  ::unsetenv("LOOKALIKE_TEST_STOP_AT");
  int wait_status = 0;
  pid_t r;
  do {
    r = ::waitpid(child.pid(), &wait_status, WUNTRACED);
  } while (r < 0 && errno == EINTR);
  const bool stopped = r == child.pid() && WIFSTOPPED(wait_status);
  if (stopped) ::kill(child.pid(), SIGKILL);
  if (status) *status = wait_status;
  return stopped;
}

std::vector<std::string> LookalikeArgs(const std::string& bin, std::vector<std::string> args) {
  args.insert(args.begin(), bin);
  return args;
}

std::string UnprivilegedUnavailableReason(const std::string& binary) {
  if (::geteuid() != 0) return "";
  const pid_t pid = ::fork();
  if (pid < 0) return std::string("fork failed: ") + std::strerror(errno);
  if (pid == 0) {
    if (!DropToUnprivileged()) ::_exit(1);
    ::_exit(binary.empty() || ::access(binary.c_str(), X_OK) == 0 ? 0 : 2);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
    return "uid 65534 cannot run " + binary +
           " (a folder above it, e.g. /root, is not searchable by others), so "
           "permissions cannot be tested as that user: build in a folder others "
           "can reach, or chmod o+x the folders above it";
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return "running as root and cannot switch to uid/gid 65534 "
           "(setresuid/setgroups refused, "
           "e.g. no CAP_SETUID or no mapping in this user namespace), so "
           "permissions "
           "cannot be tested: root bypasses them";
  return "";
}

void GiveToUnprivilegedUser(const std::string& path) {
  if (::geteuid() != 0) return;
  namespace fs = std::filesystem;
  auto own = [](const fs::path& p) {
    if (::lchown(p.c_str(), kUnprivilegedUid, kUnprivilegedGid) != 0)
      throw std::runtime_error("lchown " + p.string() + ": " + std::strerror(errno));
  };
  own(path);
  if (fs::is_directory(fs::symlink_status(path)))
    for (const auto& e : fs::recursive_directory_iterator(path)) own(e.path());
}

std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> SplitOn(const std::string& s, char sep) {
  std::vector<std::string> parts(1);
  for (char c : s) {
    if (c == sep)
      parts.emplace_back();
    else
      parts.back() += c;
  }
  return parts;
}

std::string UnescapeField(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    if (c == 't')
      out += '\t';
    else if (c == 'n')
      out += '\n';
    else if (c == 'r')
      out += '\r';
    else if (c == 'x' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines = SplitOn(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

}  // namespace testing
}  // namespace lookalike
