// Named points where a crash test can freeze a running command: when the
// environment variable LOOKALIKE_TEST_STOP_AT equals the point's name, the
// process stops itself (SIGSTOP) there, and the test, which waits for the stop
// (waitpid WUNTRACED) instead of guessing a delay, then kills it. NAME@N stops
// only the Nth time the process passes NAME (from 1), for points passed once
// per file. A no-op otherwise (one getenv).
#pragma once

#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace lookalike {

inline void TestStopPoint(const char* name) {
  const char* at = std::getenv("LOOKALIKE_TEST_STOP_AT");
  if (!at) return;
  const char* nth = std::strchr(at, '@');
  const size_t length = nth ? static_cast<size_t>(nth - at) : std::strlen(at);
  if (std::strlen(name) != length || std::strncmp(at, name, length) != 0) return;
  if (nth) {
    static std::atomic<long> passed{0};
    if (++passed != std::strtol(nth + 1, nullptr, 10)) return;
  }
  ::raise(SIGSTOP);
}

}  // namespace lookalike
