// Helpers of the `lookalike serve` end-to-end tests: a generated, indexed
// image set; a real `serve` process on a free port (its port read from the
// line it prints, waited for, never guessed); raw-socket requests for what a
// well-behaved HTTP client would refuse to send. Header-only.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/subprocess.h"
#include "tests/test_images.h"

namespace lookalike {
namespace testing {

// Runs `lookalike ARGS` to completion (killed only if hung: kHangGuardSeconds).
inline ProcessResult RunLookalike(std::vector<std::string> args) {
  ProcessOptions o;
  o.argv = LookalikeArgs(LOOKALIKE_BIN, std::move(args));
  return RunProcess(o);
}

// Polls `done` until it returns true or `seconds` pass (a deadline that
// only ends a hung run, never a timing assertion).
template <typename Fn>
bool WaitFor(Fn done, double seconds = kHangGuardSeconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

// A running `lookalike serve --db DB --port 0 EXTRA...`.
class ServeProcess {
 public:
  ServeProcess(const std::string& db, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"serve", "--db", db, "--port", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    ProcessOptions o;
    o.argv = LookalikeArgs(LOOKALIKE_BIN, args);
    o.timeout_seconds = 2 * kHangGuardSeconds;  // it serves a whole fixture's tests
    child_ = std::make_unique<ChildProcess>(o);
    const std::string marker = "http://127.0.0.1:";
    WaitFor([&] {
      return child_->OutputSoFar().find(marker) != std::string::npos || !child_->Running();
    });
    const std::string out = child_->OutputSoFar();
    const size_t at = out.find(marker);
    if (at != std::string::npos) port_ = std::stoi(out.substr(at + marker.size()));
  }
  int port() const { return port_; }
  ChildProcess& child() { return *child_; }

 private:
  std::unique_ptr<ChildProcess> child_;
  int port_ = 0;
};

// A TCP connection to 127.0.0.1:port; -1 on failure.
inline int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads until the peer closes (or `seconds` pass); everything read.
inline std::string ReadAll(int fd, double seconds = kHangGuardSeconds) {
  std::string out;
  char buf[65536];
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Sends `request` exactly as given and returns the whole response ("" when
// the server closed without one).
inline std::string RawRequest(int port, const std::string& request) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string response = ReadAll(fd);
  ::close(fd);
  return response;
}

// The status code of a raw HTTP response; 0 when there is none.
inline int StatusOf(const std::string& response) {
  if (response.compare(0, 9, "HTTP/1.1 ") != 0 || response.size() < 12) return 0;
  return std::stoi(response.substr(9, 3));
}

// The body of a raw HTTP response.
inline std::string BodyOf(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

}  // namespace testing
}  // namespace lookalike
