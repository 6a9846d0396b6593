// Named points where a crash test can freeze a running command: when the
// environment variable LOOKALIKE_TEST_STOP_AT equals the point's name, the
// process stops itself (SIGSTOP) there, and the test, which waits for the stop
// (waitpid WUNTRACED) instead of guessing a delay, then kills it. A no-op
// otherwise (one getenv).
#pragma once

#include <signal.h>

#include <cstdlib>
#include <cstring>

namespace lookalike {

inline void TestStopPoint(const char* name) {
  const char* at = std::getenv("LOOKALIKE_TEST_STOP_AT");
  if (at && std::strcmp(at, name) == 0) ::raise(SIGSTOP);
}

}  // namespace lookalike
