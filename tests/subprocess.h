// Running the real `lookalike` binary from tests: argv passed as is (no
// shell, so any byte of a file name survives), stdout and stderr captured,
// a wall-clock limit enforced with SIGKILL, an optional address-space limit
// (RLIMIT_AS, set in the child before exec), optionally as an unprivileged
// user, and the child's peak RSS from wait4(2).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lookalike {
namespace testing {

// The limit of every child process the tests run and of every wait for a
// state: it only ends a hung run, never a slow one. With the machine's load
// at 16-28 on its 2 cores (four busy loops and other builds) the slowest
// test took 11 minutes in all (the kill test, dozens of runs) and no single
// run more than a few; an hour is far beyond anything a slow machine
// finishes.
constexpr double kHangGuardSeconds = 60 * 60;

struct ProcessOptions {
  std::vector<std::string> argv;               // argv[0] is the program path
  double timeout_seconds = kHangGuardSeconds;  // SIGKILL after this long (Wait)
  uint64_t address_space_bytes = 0;            // RLIMIT_AS of the child; 0 = inherit
  bool unprivileged = false;                   // run as kUnprivilegedUid (see below)
};

struct ProcessResult {
  int exit_code = -1;            // -1 when killed by a signal
  int term_signal = 0;           // the signal that ended it, 0 if it exited
  bool timed_out = false;        // killed by us at the time limit
  double seconds = 0;            // wall time from start to exit
  int64_t max_rss_kb = 0;        // peak resident set size (ru_maxrss)
  std::string out, err;          // everything written to stdout / stderr
  std::string Describe() const;  // "exit 2 after 0.31 s" + stderr, for messages
};

// A started child process; the destructor kills and reaps it if still running.
// Not thread-safe.
class ChildProcess {
 public:
  // Throws std::runtime_error if the process cannot be started.
  explicit ChildProcess(const ProcessOptions& options);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // True while the child has not exited (reaps it if it has).
  bool Running();
  // Waits for the exit (SIGKILL at the time limit, counted from the start).
  ProcessResult Wait();
  // Reads what the child wrote to stdout so far.
  std::string OutputSoFar() const;

 private:
  bool Reap(bool block);
  ProcessOptions options_;
  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;  // memfds the child writes to
  double start_ = 0;
  bool reaped_ = false;
  ProcessResult result_;
};

// Runs to completion.
ProcessResult RunProcess(const ProcessOptions& options);

// Starts `options` with LOOKALIKE_TEST_STOP_AT=`stop` (the binary stops
// itself with SIGSTOP on reaching that state), waits for that with waitpid
// (no timing involved) and SIGKILLs it there. True if it stopped there;
// false if it exited first, with its wait status in *status if not null.
bool KillAtStopPoint(const ProcessOptions& options, const std::string& stop, int* status = nullptr);

// `lookalike` with arguments (LOOKALIKE_BIN must be defined by the test).
std::vector<std::string> LookalikeArgs(const std::string& bin, std::vector<std::string> args);

// nobody:nogroup, the user unprivileged runs switch to when we are root.
constexpr uid_t kUnprivilegedUid = 65534;
constexpr gid_t kUnprivilegedGid = 65534;

// Whether file permissions can be tested: "" when they can (we are not root,
// or we are root and can drop to nobody in a child), else the reason they
// cannot (also when that user cannot run `binary`, if given: a build under
// /root). Only when running as root does ProcessOptions::unprivileged change
// the user.
std::string UnprivilegedUnavailableReason(const std::string& binary = "");

// Makes `path` and everything under it owned by nobody (root only; no-op
// otherwise). Throws on failure.
void GiveToUnprivilegedUser(const std::string& path);

// Reads a whole file; throws if it cannot be opened.
std::string ReadFileBytes(const std::string& path);
// Splits on '\n'; a trailing newline does not add an empty last element.
std::vector<std::string> SplitLines(const std::string& text);
std::vector<std::string> SplitOn(const std::string& s, char sep);
// Inverse of the CLI's EscapeField (\\ \t \n \r \xHH), for reading paths
// back from tsv output.
std::string UnescapeField(const std::string& s);

}  // namespace testing
}  // namespace lookalike
