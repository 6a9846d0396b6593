// Wall-clock intervals for stage timings, measured one way everywhere.
#pragma once

#include <chrono>

namespace lookalike {

using SteadyClock = std::chrono::steady_clock;

// Seconds from `a` to `b` (negative if b is earlier).
inline double SecondsBetween(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace lookalike
